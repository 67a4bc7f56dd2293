"""The client of one search run: which one "auto" is and what its models cost (settled
once, kept on resume), built once when first needed, checked before anything is written,
and what it has cost (its cache's ledger, in all and per model)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from limen_jax.llm.factory import make_mutator, resolve_mutator, settled
from limen_jax.llm.replay import CACHE_FILENAME, CachingClient, ResponseCache


def settle_llm(llm: Any, saved: dict[str, Any] | None) -> Any:
    """``llm`` (a :class:`~limen_jax.config.LLMConfig`) as the run records it: mutator
    "auto" replaced by what it stood for when the run began (its ``saved`` config.json), or
    stands for now in a new run -- the run's mutator from then on (a resume with a key set
    does not switch to Claude); the default model named and the price of each model added
    (:func:`~limen_jax.llm.factory.settled`; a resume keeps the recorded ones). ValueError
    for a model without a price."""
    if llm.mutator == "auto":
        before = ((saved or {}).get("llm") or {}).get("mutator")
        now = before if before not in (None, "auto") else resolve_mutator("auto", llm.models)
        llm = dataclasses.replace(llm, mutator=now)
    return settled(llm)


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
        self._store: Any = None

    def observe(self, store: Any) -> None:
        """The run's :class:`~limen_jax.archive.store.ProgramStore`: what an ensemble's bandit
        learns from and usage.json's improvement per model is read from."""
        self._store = store

    def _records(self) -> list[Any]:
        return list(self._store) if self._store is not None else []

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
        except MissingAPIKey as err:
            if not resumed:
                raise
            kind = self._llm.mutator
            if kind == "anthropic":
                raise ValueError(f"{self._rd.path} is a run of Claude (llm.mutator anthropic) and ANTHROPIC_API_KEY "
                                 "is not set: export it, then resume again") from None
            if kind == "openai":
                raise ValueError(f"{self._rd.path} is a run of an OpenAI-compatible endpoint (llm.mutator openai) "
                                 "and neither OPENAI_API_KEY nor an endpoint (--llm-base-url, OPENAI_BASE_URL) is "
                                 "set: give one, then resume again") from None
            raise ValueError(f"{self._rd.path} is a run of llm.mutator {kind}: {err}") from None

    def _build(self) -> CachingClient:
        if self._given is not None:
            self.name = getattr(self._given, "name", "custom")
            # every answer of every client is recorded: replay and the spend ledger need it
            if isinstance(self._given, CachingClient):
                return self._given
            return CachingClient(self._given, self._rd.cache_path)
        self.name = resolve_mutator(self._llm.mutator, self._llm.models)
        return make_mutator(self._llm, self._task, cache_path=self._rd.cache_path, records=self._records)

    def named(self, asks: bool) -> str:
        """The mutator's name for the start line, without building one for a batch that
        asks the LLM nothing (``asks`` False)."""
        if not asks:
            return "none"
        if self._given is not None:
            return getattr(self._given, "name", "custom")
        return resolve_mutator(self._llm.mutator, self._llm.models)

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
        return {**out, "cache_hits": hits, "mutator": self.name, **self._by_model(cache)}

    def _by_model(self, cache: ResponseCache | None) -> dict[str, Any]:
        """usage.json's per-model part: each priced model's calls, tokens and spend (from the
        cache) with the programs it wrote and their mean improvement over their parents, and
        the prices used ([IN, OUT, CACHE_READ, CACHE_WRITE] USD per million tokens)."""
        if not self._llm.prices or self._given is not None:
            return {}
        from limen_jax.llm.ensemble import arm_stats
        from limen_jax.llm.prices import Price

        prices = {m: Price.parse(v, what=m) for m, v in self._llm.prices.items()}
        arms = arm_stats(self._records(), prices)
        ledgers = cache.by_model if cache is not None else {}
        models = {m: {**(ledgers[m].to_dict() if m in ledgers else {}), **arms[m].to_dict()}
                  for m in prices if m in ledgers or arms[m].calls}
        return {"by_model": models, "prices": dict(self._llm.prices)}
