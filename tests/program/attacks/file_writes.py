"""Writing files: numpy's pickle ``.dump`` reached through objects JAX returns, called from
JAX's own frames (which have real builtins), at trace time, at import time and during training."""

from attacks import at_module_level, in_observation

EPS = "e = jnp.finfo(jnp.float32).eps"
ATTACKS = {
    "dump_via_tree_map": in_observation(EPS + "\njax.tree.map(e.dump, ['@@TARGET@@'])"),
    "dump_via_partial": in_observation(EPS + "\njax.tree_util.Partial(e.dump, '@@TARGET@@')()"),
    "dump_via_named_call": in_observation(EPS + "\njax.named_call(e.dump)('@@TARGET@@')"),
    "dump_via_tree_reduce": in_observation(EPS + "\njax.tree.reduce(lambda a, b: a, [1, 2], e.dump('@@TARGET@@'))"),
    "dump_via_is_leaf": in_observation(
        EPS + "\njax.tree.map(lambda x: x, ['@@TARGET@@'], is_leaf=lambda p: e.dump(p))"
    ),
    "dump_bfloat16_scalar": in_observation("jax.dtypes.bfloat16(1.0).dump('@@TARGET@@')"),
    "dump_dtype_type": in_observation("jnp.dtype(jnp.float32).type(1.0).dump('@@TARGET@@')"),
    "dump_via_jit_static_arg": in_observation(
        EPS + "\njax.jit(lambda p: p, static_argnums=0)('@@TARGET@@')\njax.tree.map(e.dump, ['@@TARGET@@'])"
    ),
    "dump_at_import_time": at_module_level(
        "def _w():\n"
        "    jax.tree.map(jnp.finfo(jnp.float32).eps.dump, ['@@TARGET@@'])\n"
        "    return 1\n"
        "X = jax.tree.map(lambda q: _w(), [0])"
    ),
    "dump_in_reward_only": (
        "import jax\nimport jax.numpy as jnp\n\ndef get_observation(state):\n"
        "    return state.agent.position.astype(jnp.float32)\n\n"
        "def compute_reward(state, action, next_state):\n"
        "    jax.tree.map(jnp.finfo(jnp.float32).eps.dump, ['@@TARGET@@'])\n"
        "    return (next_state.agent.position[0] - state.agent.position[0]).astype(jnp.float32)\n"
    ),
    "open_builtin": in_observation("open('@@TARGET@@', 'w').write('x')"),
    "jnp_save": in_observation("jnp.save('@@TARGET@@', jnp.zeros(3))"),
}
