"""The spend ledger and the budget cap, around any priced client."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from limen_jax.llm.client import BudgetExceeded, Completion, PricedClient


@dataclasses.dataclass
class Ledger:
    """What fresh calls cost (a cached answer costs nothing again). calls: answers
    received; failed_calls: calls that gave up (``error`` set); retries: attempts beyond
    the first, summed."""

    calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, completion: Completion) -> None:
        if completion.cached:
            return
        u = completion.usage
        self.calls += completion.error is None
        self.failed_calls += completion.error is not None
        self.retries += int(u.retries)
        self.input_tokens += int(u.input_tokens)
        self.output_tokens += int(u.output_tokens)
        self.cost_usd += float(u.cost_usd)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "cost_usd": round(self.cost_usd, 6)}


class Capped:
    """``inner`` with a budget cap: a call is refused with :class:`BudgetExceeded` *before*
    it is sent when its worst case (``inner.worst_cost``) could take the spend over
    ``max_cost_usd``. Thread-safe: calls in flight hold their worst case until they settle.

    max_cost_usd: the cap (None: no cap, the ledger still counts). prior_cost_usd: spent by
    this run before (a resumed run: its cache's ledger), counted against the cap.
    ``ledger``: this session's calls."""

    def __init__(self, inner: PricedClient, max_cost_usd: float | None = None, prior_cost_usd: float = 0.0) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_cost_usd = max_cost_usd
        self.prior_cost_usd = float(prior_cost_usd)
        self.ledger = Ledger()
        self._reserved = 0.0
        self._lock = threading.Lock()

    @property
    def spent_usd(self) -> float:
        """Spend of the whole run: earlier sessions (``prior_cost_usd``) plus this one."""
        return self.prior_cost_usd + self.ledger.cost_usd

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        reserved = self.inner.worst_cost(system, user, images)
        self._reserve(reserved)
        try:
            completion = self.inner.complete(system, user, images, seed)
        except BaseException:
            self._settle(reserved, None)
            raise
        self._settle(reserved, completion)
        return completion

    def _reserve(self, amount: float) -> None:
        with self._lock:
            if self.max_cost_usd is None:
                return
            if self.spent_usd + self._reserved + amount > self.max_cost_usd:
                raise BudgetExceeded(
                    f"LLM budget ${self.max_cost_usd:.2f} reached: spent ${self.spent_usd:.4f}"
                    f" (+${self._reserved:.4f} in flight); the next call may cost up to ${amount:.4f}"
                )
            self._reserved += amount

    def _settle(self, reserved: float, completion: Completion | None) -> None:
        with self._lock:
            if self.max_cost_usd is not None:
                self._reserved = max(0.0, self._reserved - reserved)
            if completion is not None:
                self.ledger.add(completion)
