"""The attack corpus (tests/program/attacks/, one class per module) against the sandboxed checker.

All attacks run in one parallel batch (compile_many). Each is rejected, or accepted and
then harmless in the engine: no file written outside the worker's scratch (HOME, the temp
dir, the XLA cache the engine uses and a populated run directory snapshotted recursively
before and after, file contents hashed where the attacks aim (side_effects.py); a canary
name searched for under those and the working directory; the sources and site-packages
unchanged), no connection to a socket listening on the host, no engine configuration
changed, no crash or hang of this process, no host path or environment value in what the
LLM would read.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pathlib
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import side_effects
from side_effects import DECOY, xla_cache_dir

from limen_jax.interface import Interface
from limen_jax.program import Limits, ProgramError, compile_many
from limen_jax.rundir import RunDir
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


def _targets(run_dir: pathlib.Path) -> list[pathlib.Path]:
    """Places outside any worker scratch where an attack tries to write."""
    site = pathlib.Path(np.__file__).parents[1]
    return [pathlib.Path.cwd(), site, pathlib.Path(tempfile.gettempdir()), pathlib.Path.home(), xla_cache_dir(),
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
    package sources and site-packages. Byte-code caches are left out (a sibling test
    process may import a module first)."""
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
    return seen


def _plant_xla_entry(cache: pathlib.Path) -> pathlib.Path:
    """An entry in the XLA cache, named as JAX names them under a key no compile will ever
    look up, at rest (an hour old): what an attack that overwrites the cache finds. One per
    test session (pid), removed after the module's tests."""
    key = hashlib.sha256(f"{os.getpid()} {time.time_ns()}".encode()).hexdigest()
    entry = cache / f"jit_{DECOY}-{key}-cache"
    entry.write_bytes(bytes(range(256)) * 64)
    hour_ago = time.time() - 3600
    os.utime(entry, (hour_ago, hour_ago))
    return entry


def _populate_run(run_dir: pathlib.Path) -> None:
    """A run directory as a run leaves it (limen_jax.rundir): config, an event log, a
    checkpoint and its previous copy, the LLM cache, programs, the best program."""
    rd = RunDir(run_dir)
    rd.write_json("config.json", {"task": "xland_easy", "seed": 0})
    rd.log("run_start", task="xland_easy")
    rd.log("program", id="c0", iteration=0)
    rd.log("score", id="c0", score=0.25)
    rd.write_json("state.json", {"iteration": 0, "best": None})
    rd.write_json("state.json", {"iteration": 1, "best": "c0"})
    rd.cache_path.write_text('{"key": "k0", "response": "..."}\n')
    (run_dir / "programs" / "c0.py").write_text(PROBE)
    (run_dir / "best_interface.py").write_text("# score 0.25\n" + PROBE)


def _filled(source: str, target: pathlib.Path, fill: dict[str, str]) -> str:
    """An attack's source with its placeholders (attacks/__init__.py) replaced."""
    source = source.replace("@@TARGET@@", str(target))
    for key, value in fill.items():
        source = source.replace(key, value)
    return source


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
def attacked(
    easy_task: Task, easy_sample: Transition, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("attack") / "runs" / f"{DECOY}_run"  # where ./runs/*/ globs find it
    _populate_run(run_dir)
    xla = xla_cache_dir()
    xla.mkdir(parents=True, exist_ok=True)
    entry = _plant_xla_entry(xla)
    try:
        targets = _targets(run_dir)
        for t in targets:
            assert not list(t.glob(MARK + "*")), f"stale canary files in {t}"
        listener = socket.create_server(("127.0.0.1", 0))  # an attack that reaches the host's network connects here
        listener.setblocking(False)
        port = listener.getsockname()[1]
        names = sorted(ATTACKS)
        fill = {"@@PORT@@": str(port), "@@XLA_ENTRY@@": str(entry), "@@RUN_DIR@@": str(run_dir)}
        sources = [_filled(ATTACKS[n], targets[i % len(targets)] / f"{MARK}{n}", fill) for i, n in enumerate(names)]
        watched = side_effects.watched_trees(
            pathlib.Path.home(), pathlib.Path(tempfile.gettempdir()), xla, run_dir,
            side_effects.pytest_tmp_root(tmp_path_factory.getbasetemp()), entry,
        )  # fmt: skip
        before, quiet, files = _engine_state(), _quiet_trees(), side_effects.take(watched, MARK)
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
        yield {
            "results": dict(zip(names, results)),
            "seconds": seconds,
            "before": before,
            "after": _engine_state(),
            "targets": targets,
            "quiet": (quiet, _quiet_trees()),
            "files": (files, side_effects.take(watched, MARK)),
            "planted": [entry, run_dir / "events.jsonl", run_dir / "state.json", run_dir / "programs" / "c0.py"],
            "peer": peer,
        }
    finally:
        entry.unlink(missing_ok=True)


def test_the_corpus_covers_every_class_with_at_least_40_attacks() -> None:
    assert len(ATTACKS) >= 40
    assert all(sum(n.startswith(c + ".") for n in ATTACKS) >= 5 for c in CLASSES)


def test_no_file_was_written_outside_the_scratch(attacked: dict[str, Any]) -> None:
    before, after = attacked["files"]
    watched = [pathlib.Path(t.root) for t in after.trees]
    elsewhere = [t for t in attacked["targets"] if not any(t == w or w in t.parents for w in watched)]
    assert after.marked + _canaries(elsewhere) == []
    old, new = attacked["quiet"]
    changed = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
    assert changed == [], f"files outside the scratch changed: {changed[:10]}"


def test_home_tmpdir_the_xla_cache_and_the_run_dir_are_as_they_were(attacked: dict[str, Any]) -> None:
    """Recursively, byte for byte where the attacks aim (the XLA cache entry, the run's log,
    checkpoint and programs they overwrite or append to), less what other processes
    legitimately write (side_effects.watched_trees)."""
    before, after = attacked["files"]
    recorded = set().union(*before.entries)
    assert all(str(p) in recorded for p in attacked["planted"])  # the snapshot sees what the attacks aim at
    assert any(len(facts[0]) == 7 for facts in before.entries[2].values())  # XLA cache contents hashed
    found = side_effects.changes(before, after)
    assert found == [], "outside the workers' scratch:\n" + "\n".join(found[:20])


def test_the_snapshot_sees_what_an_escaped_program_would_change(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: a changed XLA cache entry (same size, mtime put back), a
    line appended to events.jsonl and a new file deep under HOME, written here by the test
    itself, are each reported; what other processes do meanwhile (a new cache entry, a file
    in a directory in use, byte code, matplotlib's cache, a new top-level temp dir) is not."""
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR"):
        monkeypatch.delenv(var, raising=False)
    home, tmp, xla = tmp_path / "home", tmp_path / "tmp", tmp_path / "home" / ".cache" / "limen_jax" / "xla"
    run_dir = tmp / "pytest-of-someone" / "pytest-1" / "runs" / "r"
    deep = home / ".local" / "share" / "app" / "data"
    for d in (deep, xla, home / ".local" / "state", tmp / "pytest-of-someone"):
        d.mkdir(parents=True)
    (home / ".bashrc").write_text("export A=1\n")
    (deep / "notes.txt").write_text("notes\n")
    for n in range(3):
        (xla / f"jit_f-{hashlib.sha256(bytes([n])).hexdigest()}-cache").write_bytes(bytes([n]) * 1000)
    _populate_run(run_dir)
    entry = _plant_xla_entry(xla)
    hour_ago = time.time() - 3600
    for parent, dirs, files in os.walk(tmp_path):
        for n in dirs + files:
            os.utime(os.path.join(parent, n), (hour_ago, hour_ago))
    busy = home / ".local" / "state" / "busy_app"  # a directory another program is using right now
    busy.mkdir()
    watched = side_effects.watched_trees(home, tmp, xla, run_dir, tmp / "pytest-of-someone", entry)
    before = side_effects.take(watched, MARK)

    # Other processes at work: no change of theirs may be reported.
    (xla / f"jit_g-{'ab' * 32}-cache").write_bytes(b"compiled")
    (busy / "state.db").write_text("x")
    (home / ".local" / "__pycache__").mkdir()
    (home / ".local" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"pyc")
    (home / ".cache" / "matplotlib").mkdir()
    (home / ".cache" / "matplotlib" / "fontlist.json").write_text("{}")
    (tmp / "tmpabc123").mkdir()
    (tmp / "pytest-of-someone" / "pytest-2").mkdir()
    assert side_effects.changes(before, side_effects.take(watched, MARK)) == []

    # What an escaped program would do.
    cached = sorted(xla.glob("jit_f-*"))[1]
    st = cached.stat()
    cached.write_bytes(b"\xff" * st.st_size)
    os.utime(cached, ns=(st.st_atime_ns, st.st_mtime_ns))
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write('{"event": "forged"}\n')
    (deep / "more" / "deeper").mkdir(parents=True)
    (deep / "more" / "deeper" / "new.txt").write_text("x")
    assert side_effects.changes(before, side_effects.take(watched, MARK)) == [
        f"added: {deep / 'more'}",
        f"changed: {cached}",
        f"changed: {run_dir / 'events.jsonl'}",
    ]


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
