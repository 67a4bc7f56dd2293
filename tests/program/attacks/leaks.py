"""Introspection and leaks: tracer types, host paths and environment values in the error
messages that are fed back to the LLM."""

from attacks import in_observation

ATTACKS = {
    "typeof_tracer": in_observation("t = jax.typeof(state.agent.position)\nx = 1 if 'Tracer' in repr(t) else 2"),
    "module_file_in_error": in_observation("raise ValueError(jnp.__file__)"),
    "path_from_jax_error": in_observation("x = jnp.reshape(state.grid, (7, 7, 7, 7))"),
    "dunder_globals": in_observation("g = get_observation.__globals__['__builtins__']"),
    "environ_via_error": in_observation("import os\nraise ValueError(str(os.environ))"),
    "frame_walk": in_observation("f = jax.tree.map(lambda x: x, [1]).gi_frame"),
}
