"""The training watchdog's signal: a batch ran past its deadline.

:meth:`BatchTrainer.run` checks a deadline (``time.monotonic()`` seconds) after each
update and raises :class:`BatchTimeout`; the caller (the search's evaluator) decides who
is to blame. A single XLA call that never returns cannot be interrupted in-process: the
checker's cost budget and timed run are what stop that class of program first.
"""

from __future__ import annotations

import time


class BatchTimeout(RuntimeError):
    """Training passed its deadline.

    update: updates completed in the run that timed out (its last one included).
    seconds: how long that run had been going. per_update_s: its mean seconds per update.
    """

    def __init__(self, update: int, seconds: float) -> None:
        self.update = int(update)
        self.seconds = float(seconds)
        self.per_update_s = self.seconds / max(self.update, 1)
        super().__init__(
            f"training passed its deadline after {self.update} update(s) in {self.seconds:.1f} s "
            f"({self.per_update_s:.2f} s per update)"
        )


def check_deadline(deadline: float | None, update: int, started: float) -> None:
    """Raise BatchTimeout when ``deadline`` (monotonic seconds) has passed."""
    if deadline is not None and time.monotonic() > deadline:
        raise BatchTimeout(update, time.monotonic() - started)
