"""The isolation mechanisms themselves, each tested against code that has escaped the policy.

A locked-down interpreter (the worker's own lockdown) runs attacker code directly: file
writes, sockets, processes, environment secrets, memory. Plus the engine's handling of
workers that cannot start, crash, hang or answer garbage, and a forced fallback.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile

import jax
import numpy as np
import pytest
from program_corpus import GOOD

import limen_jax.program.pool as pool
from limen_jax.program import Limits, ProgramError, SandboxError, check_source, compile_many, isolation, wire
from limen_jax.task import Task, Transition

SECRET = "limen-canary-secret-a41c"
ESCAPED = r"""
import json, os, socket, sys
from limen_jax.program.isolation import lockdown
lockdown(sys.argv[1], 4 << 30, 60)
target, port = sys.argv[2], int(sys.argv[3])
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except BaseException as exc:
        out[name] = type(exc).__name__
def write():
    with open(target, "w") as f:
        f.write("pwned")
attempt("write", write)
attempt("connect", lambda: socket.create_connection(("127.0.0.1", port), timeout=2).close())
def fork():
    if os.fork() == 0:
        os._exit(0)
attempt("fork", fork)
if sys.argv[1] != "rlimits":  # nothing stops exec there; it would end this script
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
attempt("memory", lambda: bytearray(8 << 30))
attempt("kill_parent", lambda: os.kill(os.getppid(), 0))
out["secret_seen"] = any("canary" in v for v in os.environ.values())
sys.stdout.write(json.dumps(out))
"""


def _available() -> list[str]:
    names = ["rlimits"]
    from limen_jax.program import seccomp

    if seccomp.available():
        names.append("seccomp")
    if shutil.which("bwrap") and isolation.mechanism() == "bwrap":
        names.append("bwrap")
    return names


@pytest.mark.parametrize("name", _available())
def test_escaped_code_is_contained(name: str) -> None:
    target = pathlib.Path.cwd() / f"limen_pwned_isolation_{name}"
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    # booted as the pool boots workers: from the engine's own limen_jax (a clone may differ
    # from the installed tree, which isolated mode would otherwise import)
    boot = isolation.worker_command("rlimits")[4].split("; from ")[0] + "\n"
    argv = [sys.executable, "-I", "-B", "-c", boot + ESCAPED, name, str(target), str(port)]
    if name == "bwrap":
        argv = [*isolation.bwrap_prefix(shutil.which("bwrap") or "bwrap"), *argv]
    scratch = tempfile.mkdtemp()
    # The pool starts workers with WORKER_ENV only; bubblewrap also clears whatever it is given.
    env = {**os.environ, "LIMEN_TEST_KEY": SECRET} if name == "bwrap" else dict(isolation.WORKER_ENV)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=120, cwd=scratch, env=env)
    finally:
        listener.close()
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout)
    written = target.read_text() if target.exists() else ""
    target.unlink(missing_ok=True)
    assert written == "" and out["write"] != "done"
    assert out["memory"] == "MemoryError"
    assert not out["secret_seen"]
    if name == "rlimits":  # the weak fallback: no bytes written, memory capped; nothing more
        return
    for escape in ("connect", "fork", "exec", "kill_parent"):  # (exec is only tried here)
        assert out[escape] != "done", (escape, out)


def test_the_environment_is_scrubbed_on_every_mechanism() -> None:
    assert not any(k.endswith(("KEY", "TOKEN", "SECRET")) for k in isolation.WORKER_ENV)
    assert "--clearenv" in isolation.bwrap_prefix("bwrap")


def test_sandbox_info_names_the_mechanism() -> None:
    info = isolation.describe()
    assert info["mechanism"] in isolation.MECHANISMS
    if shutil.which("bwrap"):
        assert info["mechanism"] == "bwrap" and not info["missing"]
    assert isolation.describe("rlimits")["missing"]  # the weak fallback says what it lacks


def _fake_worker(monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    monkeypatch.setenv(pool.ENV_FORKSERVER, "0")  # every check in a fresh (here: fake) worker
    monkeypatch.setattr(isolation, "worker_command", lambda name: [sys.executable, "-c", script])


def test_a_worker_that_cannot_start_is_an_engine_fault(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    _fake_worker(monkeypatch, "import sys; sys.stderr.write('no sandbox here'); sys.exit(3)")
    with pytest.raises(SandboxError, match="no sandbox here"):
        check_source(GOOD, easy_task, sample=easy_sample)


def test_a_crash_after_start_is_the_programs_fault(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    _fake_worker(
        monkeypatch, "import os, signal, sys; sys.stdout.write('R'); sys.stdout.flush(); os.kill(os.getpid(), 11)"
    )
    report = check_source(GOOD, easy_task, sample=easy_sample)
    assert report.error is not None and report.error.stage == "exec" and "SIGSEGV" in report.error.message


def test_a_hung_worker_is_killed_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    _fake_worker(monkeypatch, "import sys, time; sys.stdout.write('R'); sys.stdout.flush(); time.sleep(600)")
    limits = Limits(exec_seconds=0.5, trace_seconds=0.5, compile_seconds=0.5, run_seconds=0.5, startup_seconds=1.0)
    report = check_source(GOOD, easy_task, sample=easy_sample, limits=limits)
    assert report.error is not None and report.error.stage == "timeout"
    assert report.seconds < 30


def test_a_garbage_answer_is_refused(monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition) -> None:
    # A pickle where a frame should be: never unpickled, refused as malformed.
    _fake_worker(monkeypatch, "import pickle, sys; sys.stdout.buffer.write(b'R' + pickle.dumps(print))")
    report = check_source(GOOD, easy_task, sample=easy_sample)
    assert report.error is not None and "malformed" in report.error.message


def test_a_flood_of_output_is_cut_off(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    _fake_worker(
        monkeypatch,
        "import sys\nsys.stdout.buffer.write(b'R')\nwhile True:\n    sys.stdout.buffer.write(bytes(1 << 20))",
    )
    report = check_source(GOOD, easy_task, sample=easy_sample)
    assert report.error is not None and "too much data" in report.error.message
    assert report.seconds < 60


def test_forged_artifacts_are_refused(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    from limen_jax.program.fingerprint import fingerprint

    n = len(easy_sample.reward) if hasattr(easy_sample, "reward") else 4
    forged = fingerprint("full", np.zeros((n, 3), np.float32), np.zeros(n, np.float32)).to_json()
    reply = wire.encode({"ok": True, "code": "x", "obs_dim": 3, "reward_ast_size": 1, "artifacts": ["obs", "reward"],
                         "fingerprint": forged}, [b"not stablehlo", b"\x00" * 16])  # fmt: skip
    script = f"import sys; sys.stdout.buffer.write(b'R' + {reply!r})"
    _fake_worker(monkeypatch, script)
    report = check_source(GOOD, easy_task, sample=easy_sample)
    assert report.error is not None and report.error.stage == "compile" and "read back" in report.error.message


def test_wire_refuses_malformed_frames() -> None:
    header, buffers = wire.decode(wire.encode({"a": 1}, [b"xy"]))
    assert header["a"] == 1 and buffers == [b"xy"]
    for bad in (b"", b"LMN1\x05", wire.encode({}, [b"x"])[:-1], wire.encode({}, []) + b"!"):
        with pytest.raises(wire.WireError):
            wire.decode(bad)
    with pytest.raises(wire.WireError):
        wire.array_from({"dtype": "|O", "shape": [1]}, b"\x00" * 8)


def test_forced_seccomp_fallback_checks_and_contains(
    monkeypatch: pytest.MonkeyPatch, easy_task: Task, easy_sample: Transition
) -> None:
    """LIMEN_JAX_SANDBOX=seccomp: a good program passes; a file-writing one writes nothing."""
    from limen_jax.program import seccomp

    if not seccomp.available():
        pytest.skip("libseccomp not available")
    monkeypatch.setenv(isolation.ENV_FORCE, "seccomp")
    isolation.mechanism.cache_clear()
    target = pathlib.Path.cwd() / "limen_pwned_seccomp_fallback"
    writer = GOOD.replace(
        "def get_observation(state):",
        f"def get_observation(state):\n    jax.tree.map(jnp.finfo(jnp.float32).eps.dump, [{str(target)!r}])",
    )
    try:
        assert isolation.mechanism() == "seccomp"
        good, bad = compile_many([GOOD, writer], easy_task, sample=easy_sample, workers=2)
    finally:
        isolation.mechanism.cache_clear()
    assert not target.exists()
    assert not isinstance(good, ProgramError), good
    assert isinstance(bad, ProgramError)
    assert jax.config.jax_enable_x64 is False  # type: ignore[attr-defined]


def test_a_checker_bug_is_reported_as_such(monkeypatch: pytest.MonkeyPatch, easy_sample: Transition) -> None:
    """Inside the worker: an unexpected exception becomes a "compile" error that says it is ours."""
    from limen_jax.program import worker

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("limen_jax.program.checks.trace_functions", broken)
    header = {"source": GOOD, "mode": "full", "limits": {}, "platforms": ["cpu"]}
    reply, blobs = worker.check_request(header, easy_sample)
    assert not reply["ok"] and reply["bug"] and blobs == []
    assert reply["error"]["stage"] == "compile" and "RuntimeError: boom" in reply["error"]["message"]
    assert isinstance(reply["reward_ast_size"], int)


def test_requests_carry_data_only(easy_task: Task, easy_sample: Transition) -> None:
    header, buffers = pool.request("x = 1", easy_task, "full", easy_sample, Limits())
    json.dumps(header)  # plain JSON
    assert header["task"]["factory"].endswith(":" + type(easy_task).__qualname__)
    assert len(buffers) == len(header["sample"]) and all(isinstance(b, bytes) for b in buffers)


def test_host_callbacks_cannot_be_exported() -> None:
    """Even a jaxpr that reached a callback past the policy cannot become an artifact."""
    import jax.numpy as jnp

    from limen_jax.program import artifact

    def f(x: jax.Array) -> jax.Array:
        return jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")

    closed = jax.make_jaxpr(f)(jnp.zeros(3, jnp.float32))
    specs = [{"shape": [3], "dtype": "float32", "key_impl": None}]
    with pytest.raises(Exception, match="host_callbacks"):
        artifact.export_jaxpr(closed, specs, artifact.observation_post(3), ["cpu"])


def test_a_task_imported_from_under_tmp_is_found_by_the_worker(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, easy_sample: Transition
) -> None:
    """The worker's /tmp is empty, but code the engine imports from there (a checkout or a
    task package under /tmp, as in a CI clone) is bound into it read-only."""
    import limen_envs

    import limen_jax
    from limen_jax.program import compile_interface

    (tmp_path / "task_under_tmp.py").write_text(
        "from limen_envs.xland import XLandEasy\n\n\nclass EasyUnderTmp(XLandEasy):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    task = limen_jax.make("task_under_tmp:EasyUnderTmp")
    source = (pathlib.Path(limen_envs.__file__).parent / "interfaces" / "xland_easy.py").read_text()
    iface = compile_interface(source, task, sample=easy_sample)
    assert iface.obs_dim == 30


def test_the_worker_runs_the_engines_own_limen_jax() -> None:
    """A checkout on the engine's path that is not the installed package (a source tree
    run from its own directory, a CI clone) is what the worker imports: isolated mode
    (-I) ignores the current directory, so the worker is booted from the engine's root."""
    import limen_jax

    root = os.path.dirname(os.path.dirname(os.path.abspath(limen_jax.__file__)))
    argv = isolation.worker_command("rlimit")
    assert argv[:4] == [sys.executable, "-I", "-B", "-c"] and argv[-1] == "rlimit"
    assert argv[4].startswith(f"import sys; sys.path.insert(0, {root!r})")
    out = subprocess.run([*argv[:4], argv[4].split("; from ")[0] + "; import limen_jax; print(limen_jax.__file__)"],
                         capture_output=True, text=True, cwd="/", timeout=60)  # fmt: skip
    assert out.stdout.strip() == os.path.abspath(limen_jax.__file__)


def test_packages_imported_from_outside_the_path_are_bound(tmp_path: pathlib.Path) -> None:
    """An editable install maps a package name to a directory that is not on sys.path (a
    task package under development); the worker's view of the filesystem includes it."""
    import importlib.util

    # outside pytest's temporary tree: an earlier test in this process may have bound a
    # folder of that tree, and a package under a bound folder is not bound again
    outside = pathlib.Path(tempfile.mkdtemp(prefix="limen-outside-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK)
                                            else tmp_path))  # fmt: skip
    pkg = outside / "mytasks_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("X = 1\n")
    assert str(pkg) not in isolation._read_only_paths()
    spec = importlib.util.spec_from_file_location("mytasks_pkg", pkg / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mytasks_pkg"] = module
    try:
        spec.loader.exec_module(module)
        assert str(pkg) in isolation._read_only_paths()
    finally:
        del sys.modules["mytasks_pkg"]
        shutil.rmtree(outside, ignore_errors=True)
