"""Choose and wire the client a run asks for (config.llm.mutator)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from limen_jax.llm.client import Client
from limen_jax.llm.offline import OfflineAuthor
from limen_jax.llm.replay import CACHE_FILENAME, CachingClient, ReplayClient, ResponseCache


def resolve_mutator(kind: str) -> str:
    """The mutator "auto" stands for here: anthropic with ``ANTHROPIC_API_KEY`` set, else offline."""
    if kind == "auto":
        return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "offline"
    return kind


def make_mutator(llm: Any, task: Any, *, cache_path: str | os.PathLike[str]) -> CachingClient:
    """The run's client, always recording into ``cache_path``.

    llm: a :class:`limen_jax.config.LLMConfig`. "auto" picks Anthropic when
    ``ANTHROPIC_API_KEY`` is set and the offline stand-in otherwise; "replay" answers from
    ``llm.replay_from`` (a run directory or a cache file) and fails on a miss.
    Answers already in this run's own cache are reused, so a resumed run pays nothing
    twice; what the cache's ledger says was paid counts against the cap (a resumed run
    keeps its spend, including calls of an iteration that never finished): the cap
    (:class:`~limen_jax.llm.cap.Capped`) wraps the client, the cache wraps the cap.
    """
    kind = resolve_mutator(llm.mutator)
    cache = ResponseCache(cache_path)
    if kind == "replay":
        if not llm.replay_from:
            raise ValueError("mutator 'replay' needs replay_from (a run directory or llm_cache.jsonl)")
        source = Path(llm.replay_from)
        if not source.exists():
            raise ValueError(f"nothing to replay at {source}: expected a run directory or its {CACHE_FILENAME}")
        return CachingClient(ReplayClient(source / CACHE_FILENAME if source.is_dir() else source), cache)
    if kind == "offline":
        catalog = task.offline_catalog()
        if catalog is None:
            raise ValueError(f"task {task.name!r} has no offline catalog; use an LLM mutator (set ANTHROPIC_API_KEY)")
        return CachingClient(OfflineAuthor(catalog), cache)
    if kind == "anthropic":
        from limen_jax.llm.anthropic_client import AnthropicClient
        from limen_jax.llm.cap import Capped
        from limen_jax.llm.retry import RetryPolicy

        kwargs: dict[str, Any] = {"temperature": llm.temperature, "timeout": llm.timeout_s,
                                  "max_tokens": llm.max_tokens, "retry": RetryPolicy(max_retries=llm.max_retries)}
        if llm.model:
            kwargs["model"] = llm.model
        inner: Client = Capped(AnthropicClient(**kwargs), llm.max_cost_usd, cache.ledger.cost_usd)
        return CachingClient(inner, cache)
    raise ValueError(f"unknown mutator {kind!r}; expected auto, anthropic, offline or replay")
