"""A provider's odd replies, handled the same way for every client.

An HTTP 200 that carries no usable answer -- no usage, no choices or an empty content list,
empty text, text with invalid Unicode (lone surrogates), a cut-off or non-JSON body (a
proxy's HTML page) -- is the provider's fault, never the program's: the attempt raises
:class:`~limen_jax.llm.retry.Transient` and is retried, and what it was billed (its
reported usage, else an estimate from the characters sent and received) is carried in
``Transient.paid`` so the ledger records it. A reasoning model's ``<think>...</think>``
text is not part of the answer: it is cut out before the text is returned.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from limen_jax.llm.client import Usage
from limen_jax.llm.prices import Price
from limen_jax.llm.retry import Transient

# A pessimistic characters-per-token ratio for estimates made before a call (and for a
# reply that reports no usage): English prose runs ~4, code ~3; overestimating only makes
# the cap stop a little early.
CHARS_PER_TOKEN_ESTIMATE = 3.0
# Tokens an image may cost at most (providers downsize larger images to about this).
IMAGE_TOKENS_ESTIMATE = 1600

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


class OddReply(Exception):
    """HTTP 200 without a usable answer. what: which oddity; paid: what it was billed."""

    def __init__(self, what: str, paid: Usage = Usage()) -> None:
        super().__init__(what)
        self.what = what
        self.paid = paid


def transient(err: OddReply) -> Transient:
    """The retry loop's view of an odd reply: another attempt, its bill kept."""
    return Transient(f"odd reply: {err.what}", paid=err.paid)


def estimated_tokens(text_chars: int, images: int = 0) -> int:
    """Tokens at most for ``text_chars`` characters and ``images`` pictures."""
    return math.ceil(text_chars / CHARS_PER_TOKEN_ESTIMATE) + IMAGE_TOKENS_ESTIMATE * images


def prompt_tokens(system: str, user: str, images: Sequence[str]) -> int:
    """Estimated input tokens of a prompt (the cap's worst case and a usage-less reply's bill)."""
    return estimated_tokens(len(system) + len(user), len(images))


def estimated_usage(price: Price, input_tokens: int, reply_chars: int) -> Usage:
    """A reply's bill when it reports no usage: the estimated prompt and reply tokens."""
    out = estimated_tokens(reply_chars)
    return Usage(input_tokens, out, price.cost(input_tokens, out))


def answer_text(raw: str | None, paid: Usage, *, truncated: bool) -> str:
    """The answer in ``raw``: ``<think>`` blocks cut out (an unclosed one to the end).
    OddReply when the text holds invalid Unicode, or nothing is left of an answer that was
    not cut off at its token cap (a cut-off answer is the model's, marked truncated)."""
    text = raw or ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OddReply("invalid Unicode in the text (a lone surrogate)", paid) from None
    visible = _THINK.sub("", text).strip() if "<think>" in text else text
    if not visible.strip() and not truncated:
        raise OddReply("empty content" if not text.strip() else "only <think> text, no answer", paid)
    return visible


def retry_after(headers: Mapping[str, str] | None) -> float:
    """Seconds the server asked us to wait: ``retry-after-ms`` (milliseconds) first, then
    ``retry-after`` (seconds); 0 when neither is a number (an HTTP date: our own backoff)."""
    if headers is None:
        return 0.0
    for header, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(header)
        try:
            if value is not None:
                return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return 0.0


def classified(call: Callable[[], Any], *, is_transient: Callable[[Exception], bool],
               describe: Callable[[Exception], str], refused: Callable[[Exception], Exception | None]) -> Any:
    """``call()`` with its failures sorted once: an :class:`OddReply` or an error
    ``is_transient`` calls worth another try becomes :class:`Transient` (with the server's
    retry-after); one ``refused`` maps to an exception is raised as that; anything else
    propagates (a bug)."""
    try:
        return call()
    except OddReply as err:
        raise transient(err) from err
    except Exception as err:  # classified here; anything unexpected propagates
        if is_transient(err):
            response = getattr(err, "response", None)
            raise Transient(describe(err), retry_after(getattr(response, "headers", None))) from err
        mapped = refused(err)
        if mapped is not None:
            raise mapped from err
        raise
