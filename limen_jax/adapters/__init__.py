"""Adapters that turn whole families of external JAX environments into tasks.

``--task playground:<EnvName>`` wraps any MuJoCo Playground environment
(:mod:`limen_jax.adapters.playground_env`), ``--task brax:<env>`` any Brax environment
(:mod:`limen_jax.adapters.brax_env`). Both register through the entry-point group
``limen_jax.task_families``; :mod:`limen_jax.adapters.env_task` holds what they share
(the episode bookkeeping, the default success rule, the LLM context and offline catalog
generated from the state pytree).
"""
