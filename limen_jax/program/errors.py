"""Structured rejections of interface programs.

Every way a program can fail becomes one :class:`ProgramError` with a ``stage`` (where
it failed), a ``message`` written for the LLM that will repair the program (what is
wrong and what to change) and a short ``trace`` that shows only the program's own lines:
host paths and JAX internals never reach a prompt.
"""

from __future__ import annotations

import re
import traceback
from types import TracebackType
from typing import Any

# The filename under which program source is compiled; frames from it are the only ones
# shown in traces.
PROGRAM_FILENAME = "<interface>"

STAGES = (
    "extract",  # no code found in the LLM's text
    "syntax",  # the code does not parse
    "policy",  # a forbidden import, name, attribute or construct
    "exec",  # running the module body failed
    "signature",  # get_observation / compute_reward missing or with the wrong arguments
    "trace",  # an exception while tracing the functions under jit/vmap
    "shape",  # wrong output shape (or too many features)
    "dtype",  # output not float32
    "nonfinite",  # NaN or inf on the sampled states
    "constant",  # the reward is the same on every sampled transition
    "timeout",  # module body, tracing, compiling or running took too long
    "allocation",  # an intermediate array too large, or too much work per state
    "compile",  # XLA refused to compile the program
)

MAX_TRACE_LINES = 15
_MAX_MESSAGE_CHARS = 1200
_MAX_EXC_CHARS = 500
# A path on the host: a Python file ("/usr/lib/.../x.py", "C:\\...\\x.py") or any absolute
# path of two or more parts ("/work/venvs/x", "/root/.cache"); "a / b" and "1/2" are not paths.
_HOST_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.\-+@~]+)+\.py|(?<![\w.])(?:/[\w.\-+@~]+){2,}/?")


class ProgramError(Exception):
    """A rejected interface program.

    stage: one of :data:`STAGES`.
    message: what is wrong and what to change, addressed to the program's author.
    trace: at most :data:`MAX_TRACE_LINES` lines, the program's own frames only.
    """

    def __init__(self, stage: str, message: str, trace: str = "") -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
        self.stage = stage
        self.message = _clip(scrub_paths(message), _MAX_MESSAGE_CHARS)
        self.trace = _clip_lines(scrub_paths(trace), MAX_TRACE_LINES)
        super().__init__(f"[{stage}] {self.message}")

    def to_dict(self) -> dict[str, str]:
        """JSON-ready: ``{"stage", "message", "trace"}``."""
        return {"stage": self.stage, "message": self.message, "trace": self.trace}

    def feedback(self) -> str:
        """Compact text for a mutation prompt."""
        text = f"Rejected at stage '{self.stage}': {self.message}"
        if self.trace:
            text += "\n" + self.trace
        return text

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable for multiprocessing and run-directory stores.
        return (ProgramError, (self.stage, self.message, self.trace))


def scrub_paths(text: str) -> str:
    """Replace host paths with ``<jax>`` so no host layout leaks into prompts."""
    return _HOST_PATH.sub("<jax>", text)


def exception_summary(exc: BaseException) -> str:
    """``TypeName: first lines of the message`` with host paths removed, clipped."""
    text = str(exc).strip()
    # JAX appends long tutorials and URLs after the first paragraph; keep the head.
    head = text.split("\n\n")[0]
    lines = [ln for ln in head.splitlines() if ln.strip() and "https://" not in ln][:6]
    body = _clip(scrub_paths("\n".join(lines)), _MAX_EXC_CHARS)
    return f"{type(exc).__name__}: {body}" if body else type(exc).__name__


def program_trace(exc: BaseException, source: str, summary: str | None = None) -> str:
    """The program's own frames of ``exc``'s traceback, innermost last, plus its summary.

    Example::

        line 7, in get_observation: if state.step_num > 3:
        TracerBoolConversionError: Attempted boolean conversion of traced array ...

    summary: the last line instead of the exception's own summary ("" for none).
    """
    lines = source.splitlines()
    frames: list[str] = []
    tb: TracebackType | None = exc.__traceback__
    for frame in traceback.extract_tb(tb):
        if frame.filename != PROGRAM_FILENAME or frame.lineno is None:
            continue
        code = lines[frame.lineno - 1].strip() if 0 < frame.lineno <= len(lines) else ""
        where = "<module>" if frame.name == "<module>" else frame.name
        frames.append(f"line {frame.lineno}, in {where}: {code}")
    if isinstance(exc, SyntaxError) and exc.filename == PROGRAM_FILENAME and exc.lineno:
        code = lines[exc.lineno - 1].strip() if 0 < exc.lineno <= len(lines) else ""
        frames.append(f"line {exc.lineno}: {code}")
    frames = _collapse_repeats(frames)
    summary = exception_summary(exc) if summary is None else summary
    tail = summary.splitlines()
    # Keep the innermost frames: they say where it broke.
    keep = max(1, MAX_TRACE_LINES - len(tail))
    return "\n".join([*frames[-keep:], *tail])


def _collapse_repeats(lines: list[str]) -> list[str]:
    """Runs of one line (deep recursion) become the line and ``(repeated N more times)``."""
    out: list[str] = []
    run = 0
    for i, line in enumerate(lines):
        if i and line == lines[i - 1]:
            run += 1
            continue
        if run:
            out.append(f"  (repeated {run} more times)")
        out.append(line)
        run = 0
    if run:
        out.append(f"  (repeated {run} more times)")
    return out


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clip_lines(text: str, limit: int) -> str:
    lines = [ln[:300] for ln in text.splitlines()]
    if len(lines) <= limit:
        return "\n".join(lines)
    return "\n".join([*lines[: limit - 1], f"... ({len(lines) - limit + 1} more lines)"])
