"""The attack corpus (tests/program/attacks/, one class per module) against the sandboxed checker.

All attacks run in one parallel batch (compile_many). Each is rejected, or accepted and
then harmless in the engine: no file written outside the worker's scratch (a canary name
searched for recursively under HOME, the temp dir, the working directory, the XLA cache and
a run directory; and the quiet trees, the sources, site-packages and HOME's own files,
snapshotted recursively before and after), no connection to a socket listening on the
host, no engine configuration changed, no crash or hang of this process, no host path or
environment value in what the LLM would read.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import socket
import sys
import tempfile
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from limen_jax.interface import Interface
from limen_jax.program import Limits, ProgramError, compile_many
from limen_jax.task import Task, Transition

CLASSES = ("file_writes", "global_state", "crashes", "hangs", "check_vs_train", "leaks", "escapes")
ATTACKS: dict[str, str] = {
    f"{cls}.{name}": source
    for cls in CLASSES
    for name, source in importlib.import_module(f"attacks.{cls}").ATTACKS.items()
}
# Short limits: a hang costs seconds, not minutes.
LIMITS = Limits(exec_seconds=2.0, trace_seconds=5.0, compile_seconds=20.0, run_seconds=10.0, startup_seconds=60.0)
SECRET = "limen-canary-secret-5f1e"
MARK = "limen_pwned_"


def _xla_cache() -> pathlib.Path:
    return pathlib.Path(os.environ.get("LIMEN_JAX_XLA_CACHE", os.path.expanduser("~/.cache/limen_jax/xla")))


def _targets(run_dir: pathlib.Path) -> list[pathlib.Path]:
    """Places outside any worker scratch where an attack tries to write."""
    site = pathlib.Path(np.__file__).parents[1]
    return [pathlib.Path.cwd(), site, pathlib.Path(tempfile.gettempdir()), pathlib.Path.home(), _xla_cache(),
            run_dir]


def _canaries(roots: list[pathlib.Path]) -> list[str]:
    """Every path whose name holds the canary mark, anywhere under ``roots``."""
    found = []
    for root in roots:
        for parent, dirs, files in os.walk(root):
            found += [os.path.join(parent, n) for n in dirs + files if MARK in n]
    return found


def _quiet_trees() -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file in trees nothing else writes while the suite runs: the
    package sources, site-packages, and the files at the top of HOME (.bashrc, .profile, ...).
    Byte-code caches are left out (a sibling test process may import a module first)."""
    roots = [pathlib.Path(__file__).parents[2] / d for d in ("limen_jax", "envs", "tests")]
    roots.append(pathlib.Path(np.__file__).parents[1])
    seen = {}
    for root in roots:
        for parent, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for n in files:
                if not n.endswith(".pyc"):
                    st = os.stat(os.path.join(parent, n))
                    seen[os.path.join(parent, n)] = (st.st_size, st.st_mtime_ns)
    for entry in os.scandir(pathlib.Path.home()):
        if entry.is_file(follow_symlinks=False):
            st = entry.stat()
            seen[entry.path] = (st.st_size, st.st_mtime_ns)
    return seen


def _engine_state() -> dict[str, Any]:
    cfg = jax.config
    return {
        "x64": cfg.jax_enable_x64,  # type: ignore[attr-defined]
        "transfer_guard": cfg.jax_transfer_guard,  # type: ignore[attr-defined]
        "prng": cfg.jax_default_prng_impl,  # type: ignore[attr-defined]
        "rank_promotion": cfg.jax_numpy_rank_promotion,  # type: ignore[attr-defined]
        "add_impl": jax.lax.add_p.impl,
        "mul_abstract_eval": jax.lax.mul_p.abstract_eval,
        "default_dtype": str(jnp.asarray(1.0).dtype),
        "cwd": os.getcwd(),
    }


@pytest.fixture(scope="module")
def attacked(easy_task: Task, easy_sample: Transition, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run_dir = tmp_path_factory.mktemp("run")
    targets = _targets(run_dir)
    _xla_cache().mkdir(parents=True, exist_ok=True)
    for t in targets:
        assert not list(t.glob(MARK + "*")), f"stale canary files in {t}"
    listener = socket.create_server(("127.0.0.1", 0))  # an attack that reaches the host's network connects here
    listener.setblocking(False)
    port = listener.getsockname()[1]
    names = sorted(ATTACKS)
    sources = [
        ATTACKS[n].replace("@@TARGET@@", str(targets[i % len(targets)] / f"{MARK}{n}")).replace("@@PORT@@", str(port))
        for i, n in enumerate(names)
    ]
    before, quiet = _engine_state(), _quiet_trees()
    os.environ["LIMEN_TEST_API_KEY"] = SECRET
    start = time.perf_counter()
    try:
        results = compile_many(sources, easy_task, "full", names, sample=easy_sample, limits=LIMITS, workers=2)
    finally:
        del os.environ["LIMEN_TEST_API_KEY"]
    seconds = time.perf_counter() - start
    try:
        peer = listener.accept()[1]
    except BlockingIOError:
        peer = None
    listener.close()
    return {
        "results": dict(zip(names, results)),
        "seconds": seconds,
        "before": before,
        "after": _engine_state(),
        "targets": targets,
        "quiet": (quiet, _quiet_trees()),
        "peer": peer,
    }


def test_the_corpus_covers_every_class_with_at_least_40_attacks() -> None:
    assert len(ATTACKS) >= 40
    assert all(sum(n.startswith(c + ".") for n in ATTACKS) >= 5 for c in CLASSES)


def test_no_file_was_written_outside_the_scratch(attacked: dict[str, Any]) -> None:
    roots = [pathlib.Path.home(), pathlib.Path(tempfile.gettempdir()), pathlib.Path.cwd(), *attacked["targets"]]
    assert _canaries(roots) == []
    before, after = attacked["quiet"]
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert changed == [], f"files outside the scratch changed: {changed[:10]}"


def test_nothing_reached_a_socket_listening_on_the_host(attacked: dict[str, Any]) -> None:
    assert attacked["peer"] is None
    assert any("@@PORT@@" in src for src in ATTACKS.values())  # the corpus does try to connect


PROBE = (
    "import jax\nimport jax.numpy as jnp\n\n"
    "def get_observation(state):\n"
    "    x = state.agent.position[0].astype(jnp.float32)\n"
    "    return jnp.stack([jnp.add(x, 2.0), jnp.multiply(x, 3.0), jnp.asarray(0.1) * 3.0]).astype(jnp.float32)\n\n"
    "def compute_reward(state, action, next_state):\n"
    "    return (next_state.agent.position[0] - state.agent.position[0]).astype(jnp.float32)\n"
)


def test_the_workers_that_ran_the_corpus_still_compute_exactly(
    attacked: dict[str, Any], easy_task: Task, easy_sample: Transition
) -> None:
    """The global-state attacks ran inside workers forked from the same servers; a program
    checked after them traces with untouched primitives, flags and dtypes (float32 0.1 * 3
    is not the float64 value an x64 switch would give)."""
    (probe,) = compile_many([PROBE], easy_task, "full", ["probe"], sample=easy_sample, limits=LIMITS, workers=2)
    assert isinstance(probe, Interface)
    obs = np.asarray(jax.jit(jax.vmap(probe.observe))(easy_sample.sim))
    x = np.asarray(easy_sample.sim.agent.position[:, 0], np.float32)
    np.testing.assert_array_equal(obs[:, 0], x + np.float32(2.0))
    np.testing.assert_array_equal(obs[:, 1], x * np.float32(3.0))
    np.testing.assert_array_equal(obs[:, 2], np.full_like(x, np.float32(0.1) * np.float32(3.0)))


def test_the_engine_configuration_is_unchanged(attacked: dict[str, Any]) -> None:
    assert attacked["after"] == attacked["before"]
    assert attacked["after"]["x64"] is False and attacked["after"]["default_dtype"] == "float32"
    assert float(jnp.add(1.0, 2.0)) == 3.0


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_rejected_or_harmless(name: str, attacked: dict[str, Any], easy_sample: Transition) -> None:
    result = attacked["results"][name]
    if isinstance(result, ProgramError):
        text = result.feedback()
        for leak in (SECRET, sys.prefix, str(pathlib.Path.home()) + "/", "site-packages", "/work/"):
            assert leak not in text, f"{leak!r} leaked into the feedback: {text}"
        return
    assert isinstance(result, Interface)
    _assert_harmless(result, easy_sample)


def _assert_harmless(iface: Interface, sample: Transition) -> None:
    """The artifact gives the checked shapes on every batch size, twice, and bounded values."""
    for n in (len(sample.action), 5):
        part = jax.tree.map(lambda x, n=n: x[:n], sample)
        for _ in range(2):
            obs = np.asarray(jax.jit(jax.vmap(iface.observe))(part.sim))
            rew = np.asarray(jax.jit(jax.vmap(iface.reward))(part.sim, part.action, part.next_sim))
            assert obs.shape == (n, iface.obs_dim) and rew.shape == (n,)
            assert np.isfinite(obs).all() and np.isfinite(rew).all()
            assert np.abs(obs).max() <= 1e6 and np.abs(rew).max() <= 1e6


def test_a_program_is_traced_exactly_once(easy_sample: Transition) -> None:
    """State kept between traces has nothing to act on: the checked trace is what trains.

    (The policy already refuses the corpus's stateful programs; this drives the worker's
    trace-export-load path directly with a function whose width grows on every call.)
    """
    from limen_jax.program import artifact
    from limen_jax.program.checks import trace_functions

    calls: list[int] = []

    def observe(state: Any) -> jax.Array:
        calls.append(1)
        return jnp.zeros(len(calls) + 1, jnp.float32) + state.agent.position[0]

    traced = trace_functions("", easy_sample, Limits(), observe=observe)
    specs = artifact.leaf_specs(easy_sample.sim)
    blob = artifact.export_jaxpr(traced.observe, specs, artifact.observation_post(2), ["cpu"])
    fn = artifact.unbatched(artifact.batched_call(artifact.load(blob, specs, (2,))))
    out = jax.jit(jax.vmap(fn))(easy_sample.sim)
    assert traced.obs_dim == 2 and out.shape == (len(easy_sample.action), 2) and len(calls) == 1
    np.testing.assert_array_equal(np.asarray(out[:, 0]), np.asarray(easy_sample.sim.agent.position[:, 0], np.float32))


def test_rewards_outside_the_sample_are_bounded(attacked: dict[str, Any], easy_sample: Transition) -> None:
    iface = attacked["results"]["check_vs_train.huge_reward_in_unsampled_states"]
    assert isinstance(iface, Interface)
    far = easy_sample.sim.replace(step_num=jnp.full_like(easy_sample.sim.step_num, 200_000))
    reward = np.asarray(jax.jit(jax.vmap(iface.reward))(far, easy_sample.action, easy_sample.next_sim))
    np.testing.assert_array_equal(reward, np.full_like(reward, 1e6))


def test_crashes_and_hangs_are_the_programs_fault(attacked: dict[str, Any]) -> None:
    for name in ("crashes.list_bomb", "crashes.power_bomb", "hangs.while_true_at_import", "hangs.python_loop_in_trace"):
        result = attacked["results"][name]
        assert isinstance(result, ProgramError) and result.stage in ("allocation", "timeout", "policy", "exec"), name
    assert attacked["seconds"] < 600
