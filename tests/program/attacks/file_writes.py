"""Writing files: numpy's pickle ``.dump`` reached through objects JAX returns, called from
JAX's own frames (which have real builtins), at trace time, at import time and during training;
new files, and overwrites of what the engine keeps (an XLA cache entry, a run's log,
checkpoint and programs), by exact path and by guessing."""

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
    # Existing files the engine reads back: a poisoned compiled executable, a forged log
    # line or checkpoint, a swapped program. The paths are the real ones (an attacker who
    # guessed them right); each write opens the file for writing, which truncates it.
    "overwrite_xla_cache_entry": in_observation(EPS + "\njax.tree.map(e.dump, ['@@XLA_ENTRY@@'])"),
    "overwrite_run_events": in_observation(EPS + "\njax.tree_util.tree_map(e.dump, ['@@RUN_DIR@@/events.jsonl'])"),
    "overwrite_run_state": in_observation(EPS + "\njax.named_call(e.dump)('@@RUN_DIR@@/state.json')"),
    "overwrite_run_program_in_reward": (
        "import jax\nimport jax.numpy as jnp\n\ndef get_observation(state):\n"
        "    return state.agent.position.astype(jnp.float32)\n\n"
        "def compute_reward(state, action, next_state):\n"
        "    jax.tree.map(jnp.finfo(jnp.float32).eps.dump, ['@@RUN_DIR@@/programs/c0.py'])\n"
        "    return (next_state.agent.position[0] - state.agent.position[0]).astype(jnp.float32)\n"
    ),
    # The obvious program: guess where the cache and the runs are (the home directory, the
    # variables of the engine's environment and its working directory, read from /proc),
    # then append, overwrite and create. It only damages what the test planted (names
    # holding limen_attack_decoy), so that a sandbox that ever lets it through costs no
    # real cache entry or run.
    "guess_cache_and_runs_and_tamper": in_observation(
        "import glob\n"
        "import os\n"
        "home = os.path.expanduser('~')\n"
        "caches = [os.environ.get('LIMEN_JAX_XLA_CACHE', ''), home + '/.cache/limen_jax/xla']\n"
        "places = [os.getcwd(), '@@RUN_DIR@@/../..']\n"
        "pid = os.getppid()\n"
        "for i in range(6):\n"
        "    env = open('/proc/%d/environ' % pid, 'rb').read().split(bytes(1))\n"
        "    caches += [v[20:].decode() for v in env if v.startswith(b'LIMEN_JAX_XLA_CACHE=')]\n"
        "    caches += [v[5:].decode() + '/.cache/limen_jax/xla' for v in env if v.startswith(b'HOME=')]\n"
        "    places.append(os.readlink('/proc/%d/cwd' % pid))\n"
        "    pid = int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])\n"
        "for c in caches:\n"
        "    for p in glob.glob(c + '/*-cache'):\n"
        "        if 'limen_attack_decoy' in p:\n"
        "            open(p, 'r+b').write(b'poisoned')\n"
        "for d in places:\n"
        "    for p in glob.glob(d + '/runs/*/events.jsonl'):\n"
        "        if 'limen_attack_decoy' in p:\n"
        "            open(p, 'a').write('{\"event\": \"forged\"}\\n')\n"
        "            open(os.path.dirname(p) + '/programs/c0.py', 'a').write('# swapped\\n')\n"
        "os.makedirs('@@TARGET@@/deep/under/here', exist_ok=True)"
    ),
}
