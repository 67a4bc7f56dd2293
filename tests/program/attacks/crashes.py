"""Killing the checker: freed buffers still read through views, deep recursion, huge
allocations in one C call, stack exhaustion."""

from attacks import at_module_level, in_observation

ATTACKS = {
    "resize_refcheck_false": in_observation(
        "a = jnp.finfo(jnp.float32).eps.reshape(1)\n"
        "v = a[:]\n"
        "a.resize((1 << 26,), refcheck=False)\n"
        "a.resize((1,), refcheck=False)\n"
        "b = [v.sum() for i in range(100)]"
    ),
    "resize_via_tree_map": in_observation(
        "a = jnp.finfo(jnp.float32).eps.reshape(1)\n"
        "v = a[:]\n"
        "jax.tree.map(lambda n: a.resize((n,), refcheck=False), [1 << 27])\n"
        "jax.tree.map(lambda n: a.resize((n,), refcheck=False), [1])\n"
        "b = [float(v.sum()) for i in range(100)]"
    ),
    "deep_recursion": at_module_level("def f(n):\n    return f(n + 1)\nX = f(0)"),
    "list_bomb": in_observation("x = [0] * (10 ** 11)"),
    "power_bomb": at_module_level("X = 10 ** 10 ** 10"),
    "zeros_bomb_in_function": in_observation("z = jnp.zeros((1 << 20, 1 << 20))\nq = z.sum()"),
}
