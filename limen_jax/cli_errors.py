"""What every ``python -m limen_jax.X`` does with an exception it did not expect.

A CLI answers bad input itself, in one line with exit status 2. Anything else that
escapes its ``main`` is the engine's bug: the traceback is printed, then one line asking
for a report, and the status is 1. KeyboardInterrupt and SystemExit are not exceptions
of that kind (they derive from BaseException) and pass through unchanged.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., int])

BUG_LINE = "this is a limen_jax bug; please report it to the maintainers with the traceback above"


def report_bugs(main: F) -> F:
    """``main`` with an unexpected exception printed as the engine's bug (exit status 1)."""

    @functools.wraps(main)
    def wrapped(*args: object, **kwargs: object) -> int:
        try:
            return main(*args, **kwargs)
        except Exception:
            traceback.print_exc()
            print(BUG_LINE, file=sys.stderr, flush=True)
            return 1

    return wrapped  # type: ignore[return-value]
