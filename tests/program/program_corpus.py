"""A corpus of bad interface programs for xland_easy, each with the stage that must reject it.

Every program is otherwise valid (both functions defined, a varying float32 reward), so
the one defect under test is what the checker has to find. ``BAD`` entries are
``(id, expected_stage, source)``.
"""

from __future__ import annotations

HEAD = "import jax\nimport jax.numpy as jnp\n\n"
OBS = "def get_observation(state):\n    return state.agent.position.astype(jnp.float32)\n\n"
REW = (
    "def compute_reward(state, action, next_state):\n"
    "    moved = jnp.abs(next_state.agent.position - state.agent.position).sum()\n"
    "    return (0.1 * action + moved).astype(jnp.float32)\n\n"
)
GOOD = HEAD + OBS + REW


def obs(body: str, head: str = HEAD) -> str:
    """A program whose get_observation has ``body`` (indented lines) and a good reward."""
    return head + "def get_observation(state):\n" + body + "\n" + REW


def rew(body: str, head: str = HEAD) -> str:
    """A program whose compute_reward has ``body`` and a good observation."""
    return head + OBS + "def compute_reward(state, action, next_state):\n" + body + "\n"


def module(prefix: str) -> str:
    """A good program with ``prefix`` at module level after the imports."""
    return HEAD + prefix + "\n" + OBS + REW


ZEROS = "    return jnp.zeros(3)"

BAD: list[tuple[str, str, str]] = [
    # --- extraction and syntax -------------------------------------------------------
    ("prose_only", "extract", "I would observe the agent's position and reward moving closer to the pyramid."),
    ("missing_colon", "syntax", HEAD + "def get_observation(state)\n    return state.grid\n" + REW),
    ("unbalanced_paren", "syntax", obs("    return jnp.zeros((3,)")),
    ("bad_indent", "syntax", obs("  x = 1\n    return jnp.zeros(3)")),
    ("nested_too_deep", "syntax", module("X = " + "1 + " * 3000 + "1")),
    ("too_long", "policy", module("# " + "x" * 70_000)),
    # --- imports ---------------------------------------------------------------------
    ("import_os", "policy", obs(ZEROS, HEAD + "import os\n")),
    ("import_sys", "policy", obs(ZEROS, HEAD + "import sys\n")),
    ("import_subprocess", "policy", obs("    import subprocess\n" + ZEROS)),
    ("import_importlib", "policy", obs(ZEROS, HEAD + "import importlib\n")),
    ("import_numpy", "policy", obs("    return np.zeros(3, np.float32)", HEAD + "import numpy as np\n")),
    ("from_os_import", "policy", obs(ZEROS, HEAD + "from os import path\n")),
    ("import_builtins", "policy", obs(ZEROS, HEAD + "import builtins\n")),
    ("import_jax_debug", "policy", obs(ZEROS, HEAD + "from jax import debug\n")),
    ("import_jax_experimental", "policy", obs(ZEROS, HEAD + "import jax.experimental\n")),
    ("import_jnp_load", "policy", obs(ZEROS, HEAD + "from jax.numpy import load\n")),
    ("relative_import", "policy", obs(ZEROS, HEAD + "from . import helpers\n")),
    ("star_import", "policy", obs(ZEROS, HEAD + "from jax.numpy import *\n")),
    # --- forbidden builtins ----------------------------------------------------------
    ("open_file", "policy", obs("    open('/etc/passwd').read()\n" + ZEROS)),
    ("exec_call", "policy", obs("    exec('x = 1')\n" + ZEROS)),
    ("eval_call", "policy", obs("    return eval('jnp.zeros(3)')")),
    ("compile_call", "policy", obs("    compile('1', 'f', 'eval')\n" + ZEROS)),
    ("dunder_import", "policy", obs("    __import__('os').system('true')\n" + ZEROS)),
    ("getattr_call", "policy", obs("    return getattr(state, 'grid').reshape(-1)[:3].astype(jnp.float32)")),
    ("globals_call", "policy", obs("    g = globals()\n" + ZEROS)),
    ("vars_call", "policy", obs("    v = vars(state)\n" + ZEROS)),
    ("type_call", "policy", obs("    t = type(state)\n" + ZEROS)),
    ("dunder_builtins", "policy", obs("    b = __builtins__\n" + ZEROS)),
    # --- sandbox escapes through attributes -----------------------------------------
    ("subclasses", "policy", obs("    s = ().__class__.__bases__[0].__subclasses__()\n" + ZEROS)),
    ("func_globals", "policy", obs("    g = get_observation.__globals__\n" + ZEROS)),
    ("lambda_code", "policy", obs("    c = (lambda: 0).__code__\n" + ZEROS)),
    ("gen_frame", "policy", obs("    g = (i for i in range(3))\n    f = g.gi_frame.f_back.f_globals\n" + ZEROS)),
    ("format_attr", "policy", obs("    s = '{0.__class__}'.format(state)\n" + ZEROS)),
    ("format_attr_variable", "policy", obs("    t = '{0.__init__.__globals__}'\n    s = t.format(state)\n" + ZEROS)),
    ("format_map", "policy", obs("    s = '{x}'.format_map({'x': 1})\n" + ZEROS)),
    ("fstring", "policy", obs("    s = f'{state}'\n" + ZEROS)),
    ("percent_format", "policy", obs("    s = '%s' % (state,)\n" + ZEROS)),
    ("private_attr", "policy", obs("    t = state.grid._trace\n" + ZEROS)),
    ("tracer_aval", "policy", obs("    a = state.grid.aval\n" + ZEROS)),
    ("jax_debug_print", "policy", obs("    jax.debug.print('{x}', x=state.step_num)\n" + ZEROS)),
    ("debug_alias", "policy", obs("    d = jax.debug\n" + ZEROS)),
    ("pure_callback", "policy", obs("    return jax.pure_callback(lambda: 0, jnp.zeros(3))")),
    ("jnp_save", "policy", obs("    jnp.save('/tmp/x.npy', state.grid)\n" + ZEROS)),
    ("jax_config", "policy", obs("    jax.config.update('jax_enable_x64', True)\n" + ZEROS)),
    ("set_module_attr", "policy", obs("    jnp.pi = 3.0\n" + ZEROS)),
    ("mutate_state", "policy", obs("    state.grid[0] = 1\n" + ZEROS)),
    ("while_loop", "policy", obs("    x = jax.lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0)\n" + ZEROS)),
    # --- constructs ------------------------------------------------------------------
    ("try_except", "policy", obs("    try:\n        x = 1\n    except Exception:\n        x = 2\n" + ZEROS)),
    ("class_def", "policy", module("class Helper:\n    pass\n")),
    ("global_stmt", "policy", obs("    global COUNTER\n" + ZEROS)),
    ("decorator", "policy", HEAD + "@jax.vmap\n" + OBS[:-1] + "\n" + REW),
    ("yield", "policy", obs("    yield jnp.zeros(3)")),
    ("match_stmt", "policy", obs("    match state:\n        case _:\n            pass\n" + ZEROS)),
    ("module_level_zeros", "policy", module("BIG = jnp.zeros((100000, 100000))")),
    ("module_level_helper_call", "policy", module("def make():\n    return jnp.ones(3)\n\nTABLE = make()")),
    # --- module body -----------------------------------------------------------------
    ("module_raises", "exec", module("X = 1 / 0")),
    ("module_name_error", "exec", module("X = UNDEFINED + 1")),
    ("module_import_blocked_at_runtime", "exec", module("from jax import errors")),
    # --- endless loops and bombs -----------------------------------------------------
    ("module_while_true", "timeout", module("while True:\n    pass")),
    ("trace_while_true", "timeout", obs("    while True:\n        pass\n" + ZEROS)),
    (
        "trace_busy_loop",
        "timeout",
        obs("    for i in range(10**6):\n        for j in range(10**6):\n            pass\n" + ZEROS),
    ),
    ("module_list_bomb", "allocation", module("X = [0] * (10**10)")),
    ("module_int_bomb", "allocation", module("X = 10 ** 10 ** 10")),
    ("trace_shift_bomb", "allocation", obs("    x = 1 << (10**10)\n" + ZEROS)),
    ("trace_str_bomb", "allocation", obs("    s = 'x' * (10**11)\n" + ZEROS)),
    ("huge_range", "allocation", obs("    r = range(10**9)\n" + ZEROS)),
    ("module_broadcast_bomb", "allocation", module("A = jnp.arange(60000)[:, None] + jnp.arange(60000)")),
    ("module_compare_bomb", "allocation", module("A = jnp.arange(60000)[:, None] == jnp.arange(60000)")),
    (
        "nested_list_bomb",
        "allocation",
        obs("    x = [[[0] * 1000] * 1000 for _ in range(100)]\n    return jnp.array(x)[0, 0, :3]"),
    ),
    ("math_prod_bomb", "allocation", obs("    p = math.prod(range(1, 10**5))\n" + ZEROS, HEAD + "import math\n")),
    ("sum_of_lists", "policy", obs("    rows = sum([[1.0], [2.0]] * 1000, [])\n" + ZEROS)),
    ("string_padding", "policy", obs("    s = 'x'.ljust(10**10)\n" + ZEROS)),
    # --- signatures ------------------------------------------------------------------
    ("missing_reward", "signature", HEAD + OBS),
    ("missing_observation", "signature", HEAD + REW),
    ("obs_two_args", "signature", HEAD + OBS.replace("(state)", "(state, extra)") + REW),
    ("reward_two_args", "signature", HEAD + OBS + REW.replace("(state, action, next_state)", "(state, action)")),
    ("obs_not_a_function", "signature", HEAD + "get_observation = jnp.ravel\n\n" + REW),
    # --- tracing ---------------------------------------------------------------------
    ("python_if_on_tracer", "trace", obs("    if state.step_num > 3:\n        return jnp.ones(3)\n" + ZEROS)),
    ("int_of_tracer", "trace", obs("    n = int(state.agent.direction)\n    return jnp.zeros(3) + n")),
    ("raises_at_trace", "trace", obs("    raise ValueError('not implemented yet')")),
    ("assert_at_trace", "trace", obs("    assert False, 'todo'\n" + ZEROS)),
    ("wrong_field", "trace", obs("    return state.position.astype(jnp.float32)")),
    ("numpy_name", "trace", obs("    return np.zeros(3)")),
    ("concat_mismatch", "trace", obs("    return jnp.concatenate([jnp.zeros(3), jnp.zeros((2, 2))])")),
    ("recursion", "trace", obs("    return get_observation(state)")),
    # --- shapes and dtypes -----------------------------------------------------------
    ("obs_2d", "shape", obs("    return state.grid.astype(jnp.float32)")),
    ("obs_scalar", "shape", obs("    return state.step_num.astype(jnp.float32)")),
    ("obs_10000_features", "shape", obs("    return jnp.zeros(10000, jnp.float32)")),
    ("obs_tuple", "shape", obs("    return jnp.zeros(2), jnp.zeros(2)")),
    ("obs_none", "shape", obs("    x = jnp.zeros(3)")),
    ("reward_vector", "shape", rew("    return jnp.zeros(2) + action")),
    ("reward_shape_1", "shape", rew("    return jnp.array([0.1]) * action")),
    ("obs_int32", "dtype", obs("    return state.agent.position")),
    ("obs_bool", "dtype", obs("    return state.agent.position > 3")),
    ("reward_int", "dtype", rew("    return action * 2")),
    # --- values ----------------------------------------------------------------------
    ("obs_nan", "nonfinite", obs("    return jnp.log(-1.0 - state.agent.position.astype(jnp.float32))")),
    ("obs_inf", "nonfinite", obs("    return jnp.ones(3) / (state.step_num * 0.0)")),
    ("reward_nan", "nonfinite", rew("    return jnp.sqrt(-1.0 - action.astype(jnp.float32))")),
    ("reward_inf", "nonfinite", rew("    return (action + 1) / jnp.float32(0.0)")),
    ("reward_constant", "constant", rew("    return jnp.float32(0.0)")),
    ("reward_constant_expr", "constant", rew("    return jnp.float32(1.0) * 2 + state.step_num * 0.0")),
    # --- allocation and work ---------------------------------------------------------
    ("huge_zeros", "allocation", obs("    big = jnp.zeros((100000, 100000))\n    return big[0, :3]")),
    (
        "huge_outer",
        "allocation",
        obs("    m = jnp.outer(jnp.arange(100000.0), jnp.arange(100000.0))\n    return m[0, :3]"),
    ),
    ("huge_matmul", "allocation", obs("    a = jnp.ones((4096, 4096))\n    return (a @ a)[0, :3]")),
    (
        "huge_scan",
        "allocation",
        obs("    x = jax.lax.fori_loop(0, 10**9, lambda i, c: c + 1.0, 0.0)\n    return jnp.stack([x])"),
    ),
    (
        "while_via_fori",
        "policy",
        obs("    x = jax.lax.fori_loop(0, state.step_num, lambda i, c: c + 1.0, 0.0)\n    return jnp.stack([x])"),
    ),
]
