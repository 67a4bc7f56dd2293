"""The client of one search run: which one "auto" is, built once when first needed,
checked before anything is written, and what it has cost (its cache's ledger)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from limen_jax.llm.factory import make_mutator, resolve_mutator
from limen_jax.llm.replay import CACHE_FILENAME, CachingClient, ResponseCache


def settle_auto(llm: Any, saved: dict[str, Any] | None) -> Any:
    """``llm`` (a :class:`~limen_jax.config.LLMConfig`) with mutator "auto" replaced by
    what it stood for when the run began (its ``saved`` config.json), or stands for now in
    a new run: the run's mutator from then on (config.json says what ran; a resume with a
    key set does not switch to Claude)."""
    if llm.mutator != "auto":
        return llm
    before = ((saved or {}).get("llm") or {}).get("mutator")
    return dataclasses.replace(llm, mutator=before if before not in (None, "auto") else resolve_mutator("auto"))


class RunMutator:
    """The run's client (a :class:`~limen_jax.llm.replay.CachingClient`) and its name.
    given: a client handed in (a :class:`~limen_jax.llm.client.Client`, or an
    :class:`~limen_jax.llm.offline.OfflineAuthor`; recorded into the run's cache like any
    other), or None for the one ``llm`` (the run's LLMConfig, "auto" settled) names; rd:
    the run's :class:`~limen_jax.rundir.RunDir`."""

    def __init__(self, given: Any, llm: Any, task: Any, rd: Any) -> None:
        self._given, self._llm, self._task, self._rd = given, llm, task, rd
        self._lock = threading.Lock()
        self.mutator: CachingClient | None = None
        self.name = "none"

    def get(self) -> CachingClient:
        """The client, built on the first call (from any thread)."""
        with self._lock:
            if self.mutator is None:
                self.mutator = self._build()
            return self.mutator

    def built_name(self) -> str:
        self.get()
        return self.name

    def check(self, resumed: bool) -> None:
        """Build the mutator now, so that a missing API key, catalog or replay cache is
        refused (ValueError) before anything is written. A resumed run keeps its mutator,
        so a missing key is said without the other mutators, which it cannot switch to."""
        from limen_jax.llm.client import MissingAPIKey

        try:
            self.get()
        except MissingAPIKey:
            if not resumed:
                raise
            raise ValueError(f"{self._rd.path} is a run of Claude (llm.mutator anthropic) and ANTHROPIC_API_KEY is "
                             "not set: export it, then resume again") from None

    def _build(self) -> CachingClient:
        if self._given is not None:
            self.name = getattr(self._given, "name", "custom")
            # every answer of every client is recorded: replay and the spend ledger need it
            if isinstance(self._given, CachingClient):
                return self._given
            return CachingClient(self._given, self._rd.cache_path)
        self.name = resolve_mutator(self._llm.mutator)
        return make_mutator(self._llm, self._task, cache_path=self._rd.cache_path)

    def named(self, asks: bool) -> str:
        """The mutator's name for the start line, without building one for a batch that
        asks the LLM nothing (``asks`` False)."""
        if not asks:
            return "none"
        if self._given is not None:
            return getattr(self._given, "name", "custom")
        return resolve_mutator(self._llm.mutator)

    @property
    def spend(self) -> float:
        """Dollars paid for LLM calls over the whole run (the cache's ledger)."""
        return float(self.mutator.cache.ledger.cost_usd) if self.mutator is not None else 0.0

    def usage(self) -> dict[str, Any]:
        cache = self.mutator.cache if self.mutator is not None else None
        if cache is None:
            path = self._rd.path / CACHE_FILENAME
            cache = ResponseCache(path) if path.exists() else None
        out = cache.ledger.to_dict() if cache is not None else {}
        hits = self.mutator.hits if self.mutator is not None else 0
        return {**out, "cache_hits": hits, "mutator": self.name}
