"""An interface I = (φ, R): what the agent observes and how it is rewarded.

``observe(sim) -> float32[obs_dim]`` and ``reward(sim, action, next_sim) -> float32[]``
are pure JAX functions of the task's raw simulator state. A program whose
``compute_reward`` returns a dict of named scalar terms also has
``terms(sim, action, next_sim) -> float32[len(reward_terms)]`` (the terms in
``reward_terms`` order, names sorted) and its ``reward`` is their sum. Interfaces built from
untrusted source come from :func:`limen_jax.program.compile_interface`, which validates
them; :func:`default_interface` gives the task's own baseline (raw observation, sparse
reward), and :func:`mix` builds the obs-only / reward-only ablations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
    from limen_jax.program.fingerprint import Fingerprint
    from limen_jax.task import Task

ObserveFn = Callable[[Any], jax.Array]
RewardFn = Callable[[Any, jax.Array, Any], jax.Array]

# The most named terms a reward may return. Fixed, not per batch: the trainer logs terms
# in this many slots, so every batch of term programs shares one compiled trainer.
MAX_REWARD_TERMS = 8


@dataclasses.dataclass(frozen=True, eq=False)
class Interface:
    """A compiled interface.

    observe: sim -> float32[obs_dim].
    reward: (sim, action, next_sim) -> float32[].
    obs_dim: observation length (1..512 for programs; the task default may be larger).
    reward_ast_size: AST node count of ``compute_reward`` (0 for the task default).
    source: the program text ("" for task defaults).
    name: a short label for logs.
    obs_artifact / reward_artifact: the serialised ``jax.export`` StableHLO that
        ``observe`` / ``reward`` call, for interfaces checked from untrusted source
        (b"" otherwise); what a run directory stores and a cluster worker receives
        (:func:`limen_jax.program.interface_from_artifacts` rebuilds the Interface).
        A term program's reward artifact returns its terms, float32[b, M].
    reward_terms: the names of the reward's terms, sorted (at most
        :data:`MAX_REWARD_TERMS`); () for a scalar reward.
    terms: (sim, action, next_sim) -> float32[len(reward_terms)], the terms in that
        order (``reward`` is their sum); None for a scalar reward.
    fingerprint: the program's behaviour on the check sample
        (:mod:`limen_jax.program.fingerprint`), for interfaces checked from source;
        None otherwise.
    """

    observe: ObserveFn
    reward: RewardFn
    obs_dim: int
    reward_ast_size: int = 0
    source: str = ""
    name: str = "interface"
    obs_artifact: bytes = dataclasses.field(default=b"", repr=False)
    reward_artifact: bytes = dataclasses.field(default=b"", repr=False)
    reward_terms: tuple[str, ...] = ()
    terms: RewardFn | None = dataclasses.field(default=None, repr=False)
    fingerprint: Fingerprint | None = dataclasses.field(default=None, repr=False)

    @property
    def descriptors(self) -> tuple[int, int]:
        """MAP-Elites descriptors: (observation dimension, reward AST node count)."""
        return self.obs_dim, self.reward_ast_size


def observation_dim(task: Task, observe: ObserveFn) -> int:
    """Length of ``observe``'s output on the task's initial state (shape-only trace)."""
    sim = jax.eval_shape(task.reset, jax.random.key(0)).sim
    out = jax.eval_shape(observe, sim)
    return int(jnp.size(jnp.zeros(out.shape)))


def default_interface(task: Task) -> Interface:
    """The paper's "Sparse" baseline: the task's raw observation and sparse reward."""

    def observe(sim: Any) -> jax.Array:
        return jnp.asarray(task.default_observation(sim), jnp.float32).reshape(-1)

    def reward(sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return jnp.asarray(task.sparse_reward(sim, action, next_sim), jnp.float32)

    return Interface(observe, reward, observation_dim(task, observe), 0, "", f"{task.name}:default")


def placeholder_interface(obs_dim: int = 1) -> Interface:
    """A trusted stand-in with a program's shapes and no content (φ zeros[obs_dim], R 0):
    what a search compiles its first batch's trainer ahead with, before any program exists."""

    def observe(sim: Any) -> jax.Array:
        return jnp.zeros((obs_dim,), jnp.float32)

    def reward(sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        return jnp.zeros((), jnp.float32)

    return Interface(observe, reward, obs_dim, 0, "", "placeholder")


def mix(task: Task, candidate: Interface, mode: str) -> Interface:
    """The ablations: keep φ or R of ``candidate`` and take the other from the task default.

    An ablation drops the candidate's fingerprint (it describes the whole program); the
    checker fingerprints a program checked in an ablation mode itself.

    mode: "full" (candidate as is), "obs_only" (candidate φ, sparse R),
    "reward_only" (default φ, candidate R), "sparse" (the task default).
    """
    if mode == "full":
        return candidate
    base = default_interface(task)
    if mode == "sparse":
        return base
    if mode == "obs_only":
        return dataclasses.replace(
            candidate, reward=base.reward, reward_ast_size=0, reward_artifact=b"", reward_terms=(), terms=None,
            fingerprint=None,
        )
    if mode == "reward_only":
        return dataclasses.replace(
            candidate, observe=base.observe, obs_dim=base.obs_dim, obs_artifact=b"", fingerprint=None
        )
    raise ValueError(f"unknown mode {mode!r}; expected full, obs_only, reward_only or sparse")
