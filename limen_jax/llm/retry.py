"""Retries shared by every model client: backoff, the server's wait, logging, counting.

A client's one attempt either returns, raises :class:`Transient` (worth another try: a
429, a 5xx, a timeout, a dropped connection, an odd reply -- :mod:`limen_jax.llm.replies`), raises
:class:`~limen_jax.llm.client.RequestRefused` (never retried), or raises anything else
(a bug: propagates). A client classifies its SDK's errors into these once;
:func:`with_retries` does the rest the same way for all.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from limen_jax.llm.client import Completion, Usage

log = logging.getLogger(__name__)
T = TypeVar("T")


class Transient(Exception):
    """One failed attempt worth another. ``what``: a short description for logs and the
    error message ("HTTP 529", "timeout"); ``retry_after``: seconds the server asked us to
    wait (0: our own backoff); paid: what the failed attempt was billed (an odd reply that
    reported its usage: paid for although unusable)."""

    def __init__(self, what: str, retry_after: float = 0.0, paid: Usage = Usage()) -> None:
        super().__init__(what)
        self.what = what
        self.retry_after = float(retry_after)
        self.paid = paid


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Attempt k (0-based) that fails transiently waits
    ``min(max_delay, max(base_delay * 2**k, retry_after)) * (1 + jitter * u)``, u ~ U[0, 1)
    from the client's Generator (u = 0 without one), then tries again, at most
    ``max_retries`` times."""

    max_retries: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.25

    def delay(self, attempt: int, retry_after: float, rng: np.random.Generator | None) -> float:
        wait = min(self.max_delay, max(self.base_delay * 2.0**attempt, retry_after))
        u = float(rng.random()) if rng is not None else 0.0
        return wait * (1.0 + self.jitter * u)


def with_retries(attempt: Callable[[], T], policy: RetryPolicy, *, label: str,
                 rng: np.random.Generator | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[T | None, int, Transient | None, Usage]:
    """Call ``attempt`` until it returns or ``policy.max_retries`` retries failed.

    Returns (result or None, retries made, the last :class:`Transient` or None, what the
    failed attempts were billed summed: tokens and dollars, ``retries`` 0). Every
    retry is logged as "<label> call failed (<what>), retry i/n in <s>s"; giving up is
    logged as an error. Anything but a :class:`Transient` propagates at once."""
    last: Transient | None = None
    paid = Usage()
    for k in range(policy.max_retries + 1):
        try:
            return attempt(), k, None, paid
        except Transient as err:
            last = err
            paid = plus(paid, err.paid)
            if k == policy.max_retries:
                break
            wait = policy.delay(k, err.retry_after, rng)
            log.warning("%s call failed (%s), retry %d/%d in %.2fs", label, err.what, k + 1, policy.max_retries, wait)
            sleep(wait)
    log.error("%s call gave up after %d attempts: %s", label, policy.max_retries + 1, last.what if last else "?")
    return None, policy.max_retries, last, paid


def plus(a: Usage, b: Usage) -> Usage:
    """Two usages summed field by field."""
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, a.cost_usd + b.cost_usd,
                 a.retries + b.retries)


Finish = Callable[[T], tuple[str, Usage, dict[str, Any]]]  # an answer -> (text, its usage, metadata)


def retried_completion(attempt: Callable[[], T], policy: RetryPolicy, finish: Finish[T], *, model: str, label: str,
                       rng: np.random.Generator | None = None,
                       sleep: Callable[[float], None] = time.sleep) -> Completion:
    """One answer of a client: ``attempt`` under :func:`with_retries`, then ``finish(answer)``
    -> (text, the answer's usage, metadata). The completion's usage adds what failed
    attempts were billed and counts the retries; when every attempt failed, its text is
    empty and ``error`` says why."""
    answer, retries, last, paid = with_retries(attempt, policy, label=label, rng=rng, sleep=sleep)
    if answer is None:
        return Completion(text="", usage=plus(paid, Usage(retries=retries)), model=model, error=gave_up(policy, last))
    text, usage, metadata = finish(answer)
    return Completion(text=text, usage=plus(paid, dataclasses.replace(usage, retries=retries)), model=model,
                      metadata=metadata)


def gave_up(policy: RetryPolicy, last: Transient | None) -> str:
    """The error text of a call whose every attempt failed."""
    return f"no answer after {policy.max_retries + 1} attempts; last error: {last.what if last else 'unknown'}"
