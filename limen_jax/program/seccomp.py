"""A seccomp-bpf filter for checker workers, built with libseccomp through ctypes.

Installed by the worker itself (worker.py) after its trusted imports and before it reads
a program, on every mechanism (under bubblewrap too, as a second wall). What it refuses,
with an errno rather than a kill, so the program sees an ordinary Python error:

- opening any file for writing, creating, truncating; deleting, renaming, linking,
  changing modes or owners, making directories or device nodes;
- every socket (no network, no local sockets) and io_uring (which bypasses the filter);
- starting programs (execve) and new processes (fork, vfork, clone without
  CLONE_THREAD; clone3 answers ENOSYS so glibc falls back to clone for threads);
- signals to other processes, ptrace and cross-process memory access;
- namespaces, mounts, chroot, BPF, perf, keyrings, userfaultfd.

libseccomp's own Python bindings are not on PyPI, so the few calls needed are declared
here; ``libseccomp.so.2`` ships with every mainstream Linux distribution.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform

_ALLOW = 0x7FFF0000  # SCMP_ACT_ALLOW
_CMP_NE, _CMP_MASKED_EQ = 1, 7  # enum scmp_compare
_O_WRONLY, _O_RDWR, _O_CREAT, _O_TRUNC = os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC
_CLONE_THREAD = 0x00010000


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)  # SCMP_ACT_ERRNO(code)


# Calls refused whatever their arguments.
_DENIED = {
    errno.EACCES: (
        "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir",
        "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown",
        "lchown", "fchownat", "truncate", "ftruncate", "mknod", "mknodat", "utime", "utimes",
        "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
        "lremovexattr", "fremovexattr", "socket", "socketpair", "openat2", "name_to_handle_at",
        "open_by_handle_at",
    ),
    errno.EPERM: (
        "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
        "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "bpf", "perf_event_open",
        "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup", "io_uring_enter",
        "io_uring_register", "kexec_load", "init_module", "finit_module", "delete_module",
        "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "sethostname",
        "setdomainname", "acct", "quotactl", "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
        "fanotify_init", "move_mount", "fsopen", "fsmount", "open_tree", "tkill",
    ),
    errno.ENOSYS: ("clone3",),
}  # fmt: skip


class SeccompUnavailable(RuntimeError):
    """libseccomp is missing or the kernel refused the filter."""


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp not found ({exc})") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_load.argtypes = (ctypes.c_void_p,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    return lib


def available() -> bool:
    """Whether libseccomp can be loaded here (Linux only)."""
    if platform.system() != "Linux":
        return False
    try:
        _library()
    except SeccompUnavailable:
        return False
    return True


def install() -> None:
    """Install the worker filter on this process (irreversible; inherited by its threads).

    Raises SeccompUnavailable when libseccomp is missing or a rule is refused.
    """
    lib = _library()
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        pid = os.getpid()

        def rule(action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:  # not a syscall on this architecture (e.g. `open` on arm64)
                return
            arr = (_ArgCmp * max(1, len(cmps)))(*(_ArgCmp(*c) for c in cmps))
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp rule for {name} refused ({os.strerror(-rc)})")

        for code, names in _DENIED.items():
            for name in names:
                rule(_errno_action(code), name)
        deny_write = _errno_action(errno.EACCES)
        for flag in (_O_WRONLY, _O_RDWR, _O_CREAT, _O_TRUNC):
            rule(deny_write, "open", (1, _CMP_MASKED_EQ, flag, flag))
            rule(deny_write, "openat", (2, _CMP_MASKED_EQ, flag, flag))
        # New threads only: a clone without CLONE_THREAD is a new process.
        rule(_errno_action(errno.EPERM), "clone", (0, _CMP_MASKED_EQ, _CLONE_THREAD, 0))
        # Signals only to this process (its own threads).
        for name in ("kill", "tgkill"):
            rule(_errno_action(errno.EPERM), name, (0, _CMP_NE, pid, 0))
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise SeccompUnavailable(f"seccomp_load failed ({os.strerror(-rc)})")
    finally:
        lib.seccomp_release(ctx)
