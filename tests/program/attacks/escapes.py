"""Reaching the operating system: imports of os, subprocess and sockets, directly or
through objects and modules JAX exposes."""

from attacks import in_observation

ATTACKS = {
    "import_os": in_observation("import os\nos.system('touch @@TARGET@@')"),
    "import_socket": in_observation("import socket\nsocket.create_connection(('127.0.0.1', @@PORT@@))"),
    "socket_via_partial_import": in_observation(
        "s = jax.tree_util.Partial(__import__, 'socket')()\ns.create_connection(('127.0.0.1', @@PORT@@))"
    ),
    "builtins_import_via_tree_map": in_observation(
        "m = jax.tree.map(lambda n: n, ['os'])\nx = jax.tree_util.Partial(__import__, 'os')()"
    ),
    "pickle_load_via_numpy": in_observation("e = jnp.finfo(jnp.float32).eps\nx = jax.tree.map(e.__reduce__, [1])"),
    "experimental_io_callback": in_observation("from jax.experimental import io_callback\nio_callback(print, None, 1)"),
    "pure_callback": in_observation("y = jax.pure_callback(lambda: 1.0, jax.ShapeDtypeStruct((), jnp.float32))"),
}
