"""Running forever or far too long: Python loops, unbounded and huge XLA loops, and a
convolution whose cost the element-count estimate misses."""

from attacks import at_module_level, in_observation

ATTACKS = {
    "while_true_at_import": at_module_level("i = 0\nwhile True:\n    i = i + 1"),
    "python_loop_in_trace": in_observation("s = 0\nfor i in range(10 ** 9):\n    s = s + i"),
    "fori_loop_2_31": in_observation("x = jax.lax.fori_loop(0, 2 ** 31 - 1, lambda i, c: c * 1.0000001 + 1.0, 0.0)"),
    "while_loop": in_observation("x = jax.lax.while_loop(lambda c: c >= 0, lambda c: c + 1, 0)"),
    "huge_convolution": (
        "import jax\nimport jax.numpy as jnp\n\n"
        "def get_observation(state):\n"
        "    img = jnp.ones((1, 64, 256, 256), jnp.float32) * state.agent.position[0]\n"
        "    k = jnp.ones((64, 64, 63, 63), jnp.float32)\n"
        "    y = jax.lax.conv_general_dilated(img, k, (1, 1), 'SAME')\n"
        "    return jnp.stack([y.mean(), state.agent.position[1].astype(jnp.float32)])\n\n"
        "def compute_reward(state, action, next_state):\n"
        "    return (next_state.agent.position[0] - state.agent.position[0]).astype(jnp.float32)\n"
    ),
    "spin_in_tree_map_callback": in_observation(
        "def spin(x):\n    i = 0\n    while i >= 0:\n        i = i + 1\n    return x\njax.tree.map(spin, [1])"
    ),
}
