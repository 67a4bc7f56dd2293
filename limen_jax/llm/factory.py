"""Choose and wire the mutator a run asks for (config.llm.mutator)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from limen_jax.llm.mutator import Mutator
from limen_jax.llm.replay import CACHE_FILENAME, CachingMutator, ReplayMutator, ResponseCache


def resolve_mutator(kind: str) -> str:
    """The mutator "auto" stands for here: anthropic with ``ANTHROPIC_API_KEY`` set, else offline."""
    if kind == "auto":
        return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "offline"
    return kind


def make_mutator(llm: Any, task: Any, *, cache_path: str | os.PathLike[str]) -> CachingMutator:
    """The run's mutator, always recording into ``cache_path``.

    llm: a :class:`limen_jax.config.LLMConfig`. "auto" picks Anthropic when
    ``ANTHROPIC_API_KEY`` is set and the offline mutator otherwise; "replay" answers from
    ``llm.replay_from`` (a run directory or a cache file) and fails on a miss.
    Answers already in this run's own cache are reused, so a resumed run pays nothing
    twice; what the cache's ledger says was paid counts against the cap (a resumed run
    keeps its spend, including calls of an iteration that never finished).
    """
    kind = resolve_mutator(llm.mutator)
    cache = ResponseCache(cache_path)
    if kind == "replay":
        if not llm.replay_from:
            raise ValueError("mutator 'replay' needs replay_from (a run directory or llm_cache.jsonl)")
        source = Path(llm.replay_from)
        if not source.exists():
            raise ValueError(f"nothing to replay at {source}: expected a run directory or its {CACHE_FILENAME}")
        return CachingMutator(ReplayMutator(source / CACHE_FILENAME if source.is_dir() else source), cache)
    if kind == "offline":
        from limen_jax.llm.offline import OfflineMutator

        catalog = task.offline_catalog()
        if catalog is None:
            raise ValueError(f"task {task.name!r} has no offline catalog; use an LLM mutator (set ANTHROPIC_API_KEY)")
        inner: Mutator = OfflineMutator(catalog)
    elif kind == "anthropic":
        from limen_jax.llm.anthropic_client import AnthropicMutator, RetryPolicy

        kwargs: dict[str, Any] = {"temperature": llm.temperature, "max_cost_usd": llm.max_cost_usd,
                                  "prior_cost_usd": cache.ledger.cost_usd, "timeout": llm.timeout_s,
                                  "max_tokens": llm.max_tokens, "retry": RetryPolicy(max_retries=llm.max_retries)}
        if llm.model:
            kwargs["model"] = llm.model
        inner = AnthropicMutator(**kwargs)
    else:
        raise ValueError(f"unknown mutator {kind!r}; expected auto, anthropic, offline or replay")
    return CachingMutator(inner, cache)
