"""Pull the program out of an LLM's reply.

Replies come as one ```python block, several blocks (an explanation snippet and the
final program, or one block per function), a truncated block without its closing
fence, bare code with prose around it, or a whole .py file. The rule: prefer the last
fenced block that defines every required function; else join the blocks that define
any of them; else take the whole text if it parses (line numbers then match the file);
else the bare code, with prose trimmed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from limen_jax.program.errors import ProgramError

# An opening fence with an optional language tag, the body, and a closing fence (or the
# end of the text, for replies cut off by the token limit). The lookaheads keep the blanks
# and the tag from giving characters back to the rest of the line: a long unclosed fence
# line costs linear time, not quadratic.
_FENCE = re.compile(r"^[ \t]*```[ \t]*(?![ \t])([\w+.-]*)(?![\w+.-])[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)",
                    re.M | re.S)
_NON_PYTHON_TAGS = {"json", "text", "txt", "bash", "sh", "shell", "console", "yaml", "markdown", "md", "output"}
# Lines that can start a Python program.
_CODE_START = re.compile(r"^(import [\w.]+|from [\w.]+ import |def |@|[A-Za-z_][A-Za-z0-9_]*\s*(: [^=]+)?=[^=])")
# Statements that can start a top-level line (prose rarely starts with a lower-case keyword).
_TOP_LEVEL = re.compile(r"^(if|for|while|with|try|class|else|elif|except|finally|return|pass|assert|raise)\b")


def defined_functions(code: str) -> set[str]:
    """Names of top-level ``def`` statements in ``code`` (by regex: it may not parse)."""
    return set(re.findall(r"^def[ \t]+([A-Za-z_]\w*)[ \t]*\(", code, re.M))


def extract_code(text: str, required: Sequence[str] = ("get_observation", "compute_reward")) -> str:
    """The program source in ``text``.

    required: function names the program must define (chooses between blocks).
    Raises ProgramError(stage="extract") when no code defining any required function
    is found.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    blocks = [
        _dedent(body) for tag, body in _FENCE.findall(text) if tag.lower() not in _NON_PYTHON_TAGS and body.strip()
    ]
    want = set(required)
    if blocks:
        complete = [b for b in blocks if want <= defined_functions(b)]
        if complete:
            return complete[-1].strip("\n") + "\n"
        partial = [b for b in blocks if want & defined_functions(b) or _has_imports(b)]
        if any(want & defined_functions(b) for b in partial):
            # One block per function (with an imports block, perhaps): join them in order.
            return "\n\n".join(b.strip("\n") for b in partial) + "\n"
    if not blocks and want & defined_functions(text) and _parses(text):
        return text.strip("\n") + "\n"  # a .py file: keep it whole, so line numbers match
    bare = _bare_code(text)
    if bare is not None and want & defined_functions(bare):
        return bare
    names = " and ".join(f"`{n}`" for n in required)
    raise ProgramError(
        "extract",
        f"no Python code defining {names} was found in the reply. Answer with exactly one "
        "```python fenced block that contains the complete program (imports, helpers and "
        f"{names} as top-level `def` functions).",
    )


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _has_imports(code: str) -> bool:
    return re.search(r"^(import|from)\s+\w", code, re.M) is not None


def _dedent(code: str) -> str:
    lines = code.split("\n")
    indents = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(indents, default=0)
    return "\n".join(ln[cut:] for ln in lines)


def _bare_code(text: str) -> str | None:
    """Unfenced code: from the first line that looks like code, trailing prose dropped."""
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), None)
    if start is None:
        return None
    lines = lines[start:]
    while lines and not _looks_like_code(lines[-1]):
        lines.pop()
    # Prose between code lines stays: the syntax stage reports it with its line.
    return "\n".join(lines).strip("\n") + "\n"


def _looks_like_code(line: str) -> bool:
    return bool(line.strip()) and (line[0] in " \t#)]}" or bool(_CODE_START.match(line) or _TOP_LEVEL.match(line)))
