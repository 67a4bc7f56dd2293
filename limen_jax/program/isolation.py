"""How checker workers are walled off from the host: the mechanism, its command line, its limits.

Chosen once per process (:func:`mechanism`), best first:

- ``"bwrap"``: bubblewrap. New user, PID, network, IPC, UTS and cgroup namespaces (no
  network at all), no capabilities, a read-only view of only the directories Python
  needs (system libraries, the interpreter, the virtualenv, the import path; not the
  home directory, not /tmp), an empty tmpfs as working directory, an empty environment,
  killed with its parent. Plus everything below.
- ``"seccomp"``: no namespaces; a seccomp-bpf filter (seccomp.py) refuses writes,
  sockets, new processes and programs, an empty private working directory.
- ``"rlimits"``: only resource limits, a scrubbed environment and an empty working
  directory. Weak: reported as such by ``python -m limen_jax.check --sandbox-info``.

On every mechanism the worker sets its own rlimits before it reads a program (address
space, CPU seconds, file size 0, no core dumps) and the engine kills it at a wall-clock
deadline. ``LIMEN_JAX_SANDBOX=bwrap|seccomp|rlimits`` forces one (tests force the
fallbacks this way).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
from typing import Any

from limen_jax.program import seccomp

MECHANISMS = ("bwrap", "seccomp", "rlimits")
ENV_FORCE = "LIMEN_JAX_SANDBOX"
WORKER_MODULE = "limen_jax.program.worker"
# The only variables a worker sees: JAX on the CPU, one compute thread (K workers run
# side by side), no bytecode writes.
WORKER_ENV = {
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
}
_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")


@functools.cache
def mechanism() -> str:
    """The strongest mechanism that works here (or the one forced by $LIMEN_JAX_SANDBOX)."""
    forced = os.environ.get(ENV_FORCE, "").strip()
    if forced:
        if forced not in MECHANISMS:
            raise ValueError(f"{ENV_FORCE}={forced!r}; expected one of {MECHANISMS}")
        return forced
    if _bwrap_works():
        return "bwrap"
    if seccomp.available():
        return "seccomp"
    return "rlimits"


def describe(name: str | None = None) -> dict[str, Any]:
    """What protects the engine: ``{"mechanism", "protections", "missing", "bwrap", "seccomp"}``."""
    name = name or mechanism()
    protections = ["rlimits (address space, CPU time, file size 0, no core dumps)", "wall-clock kill",
                   "empty environment", "empty working directory"]  # fmt: skip
    missing = []
    if name in ("bwrap", "seccomp"):
        protections.append("seccomp filter (no file writes, sockets, exec, fork, ptrace)")
    else:
        missing.append("seccomp filter: install libseccomp2")
    if name == "bwrap":
        protections += ["bubblewrap namespaces (user, pid, net, ipc, uts, cgroup)", "read-only minimal filesystem"]
    else:
        missing.append("bubblewrap namespaces and read-only filesystem: apt-get install bubblewrap")
    return {
        "mechanism": name,
        "protections": protections,
        "missing": missing,
        "bwrap": shutil.which("bwrap"),
        "seccomp": seccomp.available(),
    }


def _bwrap_works() -> bool:
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        done = subprocess.run(
            [*bwrap_prefix(exe), sys.executable, "-I", "-c", "pass"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _read_only_paths() -> list[str]:
    """Directories a worker needs: system libraries, the interpreter, the import path."""
    import limen_jax

    paths = {*_SYSTEM_DIRS, *_SYSTEM_FILES, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.executable}
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(limen_jax.__file__))))
    paths.update(p for p in sys.path if p)
    found = {os.path.abspath(p) for p in paths if os.path.exists(p)}
    # Packages found by a finder rather than the path (editable installs map a name to a
    # directory anywhere: a task package under development) are bound where they live.
    found |= _packages_outside(found)
    # Symlinked paths (/lib -> usr/lib, a venv's python) are bound at both ends.
    found |= {os.path.realpath(p) for p in found}
    # /tmp itself stays hidden (the engine's scratch and other users' files live there);
    # import paths inside it (a checkout or a test's package under /tmp) are bound on top.
    found.discard("/tmp")
    # Parents before children, so nested binds stack correctly.
    return sorted(found, key=lambda p: (p.count("/"), p))


def _packages_outside(bound: set[str]) -> set[str]:
    """Directories of the imported top-level packages that no path in ``bound`` contains."""
    out = set()
    # copy() runs in C without a point where another thread's import can grow the dict
    # (iterating items() can be cut short by one: "dictionary changed size during iteration")
    for name, module in sys.modules.copy().items():
        where = getattr(module, "__file__", None)
        if "." in name or not where:
            continue
        where = os.path.abspath(os.path.dirname(where))
        if not any(where == b or where.startswith(b.rstrip("/") + "/") for b in bound):
            out.add(where)
    return out


def bwrap_prefix(exe: str) -> list[str]:
    """The bubblewrap command line before the worker's own argv."""
    args = [exe, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"]
    paths = _read_only_paths()
    in_tmp = [p for p in paths if p.startswith("/tmp/")]
    for path in [p for p in paths if p not in in_tmp]:
        if os.path.islink(path):
            if os.path.dirname(path) == "/":  # /lib -> usr/lib; deeper links live in bound dirs
                args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", path, path]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in in_tmp:  # after the empty /tmp is mounted, or it would cover them
        if not os.path.islink(path):
            args += ["--ro-bind", path, path]
    args += ["--remount-ro", "/", "--chdir", "/tmp"]
    for key, value in WORKER_ENV.items():
        args += ["--setenv", key, value]
    return args


def worker_command(name: str, module: str = WORKER_MODULE) -> list[str]:
    """argv that starts a worker under mechanism ``name`` (or with ``module`` another
    program's ``main``: the fork server, forkserver.py)."""
    # The worker imports the engine's own limen_jax, wherever this process found it (a
    # checkout on the path may differ from what is installed, which -I would pick).
    import limen_jax

    root = os.path.dirname(os.path.dirname(os.path.abspath(limen_jax.__file__)))
    boot = f"import sys; sys.path.insert(0, {root!r}); from {module} import main; main(sys.argv[1:])"
    argv = [sys.executable, "-I", "-B", "-c", boot, name]
    if name == "bwrap":
        exe = shutil.which("bwrap")
        if exe is None:
            raise RuntimeError("bubblewrap is not installed")
        return [*bwrap_prefix(exe), *argv]
    return argv


# --- inside the worker ----------------------------------------------------------------


def lockdown(name: str, memory_bytes: int, cpu_seconds: int) -> None:
    """:func:`limit` then :func:`seal`: everything at once. Irreversible."""
    limit(memory_bytes, cpu_seconds)
    seal(name)


def limit(memory_bytes: int, cpu_seconds: int) -> None:
    """Resource limits on this (worker) process, set before it reads anything. Irreversible.

    memory_bytes: address-space limit. cpu_seconds: CPU-time limit (SIGXCPU, then kill).
    """
    # Writes past the size limit fail with EFBIG instead of killing with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for which, value in (
        (resource.RLIMIT_AS, memory_bytes),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(which, (value, value))


def seal(name: str) -> None:
    """The seccomp filter (mechanisms "bwrap" and "seccomp"), installed after the worker's
    trusted set-up (imports of the task's modules may start helper processes, as
    MuJoCo's GLFW probe does) and before any program code runs. Irreversible."""
    if name in ("bwrap", "seccomp"):
        seccomp.install()
