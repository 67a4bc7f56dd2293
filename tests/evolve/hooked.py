"""``python -m hooked ARGS``: ``python -m limen_jax.evolve ARGS`` that stalls at one exact
moment, so that a test can signal or kill it there instead of guessing with sleeps.

$LIMEN_TEST_STALL names the moment:

- ``event:N``: right after the N-th line of events.jsonl is written (N counts the file's
  lines, an earlier session's included; a session that starts past N stalls after its
  first event);
- ``compile``: the evaluation thread's first XLA compile of a batch (the main thread
  waits on the batch meanwhile): touched as the compile starts, stalled once it is done;
- ``state:K``: the K-th checkpoint write of this process (1 = its first), between moving
  the old state.json aside to state.json.prev and writing the new one;
- ``state-torn:K``: the same, with the first half of the new state.json.tmp written.

At the moment the process touches $LIMEN_TEST_MARK, then waits until $LIMEN_TEST_GO exists
(at most 10 minutes): the test kills it while it waits, or signals it and then makes GO
so that it goes on to its next safe point. Only the first arrival stalls.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ENV_STALL, ENV_MARK, ENV_GO = "LIMEN_TEST_STALL", "LIMEN_TEST_MARK", "LIMEN_TEST_GO"

_once = threading.Lock()
_stalled = False


def stall() -> None:
    """Touch the mark and wait for the go file (only the first call; later ones pass)."""
    global _stalled
    with _once:
        if _stalled:
            return
        _stalled = True
    Path(os.environ[ENV_MARK]).touch()
    go = Path(os.environ[ENV_GO])
    deadline = time.time() + 600
    while not go.exists() and time.time() < deadline:
        time.sleep(0.01)  # a signal's handler runs here (and may raise) when this is the main thread


def _after_event(n: int) -> None:
    from limen_jax import rundir

    log = rundir.RunDir.log

    def hooked(self: Any, event: str, **fields: Any) -> None:
        log(self, event, **fields)
        if self.events_path.read_bytes().count(b"\n") >= n:
            stall()

    rundir.RunDir.log = hooked  # type: ignore[method-assign]


def _in_compile() -> None:
    from limen_jax.rl import compiled

    get = compiled.CompileOnce.get

    def hooked(self: Any, sig: Any, build: Any) -> Any:
        if threading.current_thread().name != "limen-eval":
            return get(self, sig, build)

        def stalled() -> Any:
            Path(os.environ[ENV_MARK]).touch()  # the compile starts: the test may signal now
            exe = build()
            stall()
            return exe

        return get(self, sig, stalled)

    compiled.CompileOnce.get = hooked  # type: ignore[method-assign]


def _in_state_write(k: int, torn: bool) -> None:
    from limen_jax import rundir

    write = rundir.write_text_atomic
    count = 0

    def hooked(path: Path, text: str) -> None:
        nonlocal count
        if path.name == "state.json":
            count += 1
            if count == k:
                if torn:
                    tmp = path.with_name(path.name + ".tmp")
                    tmp.write_text(text[: len(text) // 2], encoding="utf-8")
                stall()
        write(path, text)

    rundir.write_text_atomic = hooked


def install(where: str) -> None:
    kind, _, arg = where.partition(":")
    if kind == "event":
        _after_event(int(arg))
    elif kind == "compile":
        _in_compile()
    elif kind in ("state", "state-torn"):
        _in_state_write(int(arg), torn=kind == "state-torn")
    else:
        raise SystemExit(f"hooked: unknown {ENV_STALL}={where!r}")


if __name__ == "__main__":
    install(os.environ[ENV_STALL])
    from limen_jax.run.cli import main

    sys.exit(main(sys.argv[1:]))
