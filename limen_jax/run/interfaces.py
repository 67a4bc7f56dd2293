"""The run's compiled interfaces: the check sample built ahead, and a stored program's
interface compiled again when a resumed run needs it."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from limen_jax.progress import Progress


def prefetch_check_sample(task: Any, limits: Any, progress: Progress) -> None:
    """Build the checker's sample transitions (compiled rollouts of the task: seconds on a
    CPU with no compile cache, longer for an MJX task) on a thread while the first batch
    is asked for, instead of after its first answer.
    The checks wait for it (the sample is cached behind a lock); if building fails,
    the first check builds it again and reports the failure as the engine's."""
    from limen_jax.program import check_sample

    start = time.time()

    def text() -> str:  # redrawn every second: an MJX task's first build takes minutes on a CPU
        elapsed = time.time() - start
        return "building the check sample (once per task and machine)" + (f", {elapsed:.0f} s" if elapsed >= 1 else "")

    def build() -> None:
        progress.set("sample", text)
        with contextlib.suppress(Exception):  # raised again, and classified, by the first check
            check_sample(task, limits)
        progress.clear("sample")

    threading.Thread(target=build, name="check-sample", daemon=True).start()


def stored_interface(record: Any, cache: dict[str, Any], task: Any, mode: str, limits: Any) -> Any:
    """The compiled interface of a stored program: from ``cache`` (checked in this process
    already, by program id), or checked again from its code (a resumed run), in a
    sandboxed worker like any answer, and cached."""
    if record.id not in cache:
        if record.metadata.get("source") == "default":
            from limen_jax.interface import default_interface

            cache[record.id] = default_interface(task)
        else:
            from limen_jax.program import compile_interface

            kwargs = {"limits": limits} if limits is not None else {}
            cache[record.id] = compile_interface(record.code, task, mode=mode, name=record.id, **kwargs)
    return cache[record.id]
