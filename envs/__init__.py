"""limen_envs: the bundled task suite, built only on limen_jax's public task protocol."""
