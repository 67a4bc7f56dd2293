"""Choose and wire the client a run asks for (config.llm.mutator)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from limen_jax.llm.client import Client, MissingAPIKey, PricedClient
from limen_jax.llm.offline import OfflineAuthor
from limen_jax.llm.prices import Price, price_for
from limen_jax.llm.replay import CACHE_FILENAME, CachingClient, ReplayClient, ResponseCache

LIVE = ("anthropic", "openai", "ensemble")
MUTATORS = ("auto", *LIVE, "offline", "replay")
# The newest Sonnet that accepts a sampling temperature: an anthropic run's model unless it names one.
ANTHROPIC_MODEL = "claude-sonnet-4-6"


def resolve_mutator(kind: str, models: list[dict[str, Any]] | None = None) -> str:
    """The mutator "auto" stands for here: the ensemble when ``models`` (llm.models) names
    any, else anthropic with ``ANTHROPIC_API_KEY`` set, else openai with ``OPENAI_API_KEY``
    or ``OPENAI_BASE_URL`` set, else offline."""
    if kind != "auto":
        return kind
    if models:
        return "ensemble"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return "openai"
    return "offline"


def settled(llm: Any) -> Any:
    """``llm`` (a :class:`limen_jax.config.LLMConfig`, "auto" already resolved) as the run
    records it: an anthropic run's default model named, and the price of every model it
    may call added to ``llm.prices`` ([IN, OUT, CACHE_READ, CACHE_WRITE]). ValueError (one
    line) for a malformed choice or a model without a price."""
    kind = llm.mutator
    if kind not in MUTATORS:
        raise ValueError(f"unknown mutator {kind!r}; expected {', '.join(MUTATORS)}")
    if llm.models and kind in ("anthropic", "openai"):
        raise ValueError(f"llm.models makes an ensemble: leave --mutator out or give ensemble, not {kind}")
    if kind == "ensemble" and not llm.models:
        raise ValueError("mutator ensemble needs llm.models: --set 'llm.models=[{\"mutator\": \"openai\", "
                         "\"model\": ID}, ...]' (docs/howto/use-your-llm.md)")
    if kind == "anthropic" and not llm.model:
        llm = dataclasses.replace(llm, model=ANTHROPIC_MODEL)
    if kind == "openai" and not llm.model:
        raise ValueError("mutator openai needs --model NAME (the endpoint's model id)")
    if kind not in LIVE:
        return llm
    given = {**llm.prices, **{m["model"]: m["price"] for m in llm.models if "price" in m}}
    models = [m["model"] for m in llm.models] or [llm.model]
    used = {m: price_for(m, given).to_list() for m in models}
    return dataclasses.replace(llm, prices={**llm.prices, **used})


def make_mutator(llm: Any, task: Any, *, cache_path: str | os.PathLike[str],
                 records: Callable[[], Iterable[Any]] | None = None) -> CachingClient:
    """The run's client, always recording into ``cache_path``.

    llm: a :class:`limen_jax.config.LLMConfig`, :func:`settled`. "replay" answers from
    ``llm.replay_from`` (a run directory or a cache file) and fails on a miss. Answers
    already in this run's own cache are reused, so a resumed run pays nothing twice; what
    the cache's ledger says was paid counts against the cap (a resumed run keeps its spend,
    including calls of an iteration that never finished): the cap
    (:class:`~limen_jax.llm.cap.Capped`) wraps the client, the cache wraps the cap.
    records: the run's program records so far, which an ensemble's bandit learns from.
    """
    kind = resolve_mutator(llm.mutator, llm.models)
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
            raise ValueError(f"task {task.name!r} has no offline catalog; use an LLM mutator (set ANTHROPIC_API_KEY "
                             "or OPENAI_API_KEY)")
        return CachingClient(OfflineAuthor(catalog), cache)
    if kind not in LIVE:
        raise ValueError(f"unknown mutator {kind!r}; expected {', '.join(MUTATORS)}")
    from limen_jax.llm.cap import Capped

    llm = settled(dataclasses.replace(llm, mutator=kind))
    inner: Client = Capped(live_client(llm, records), llm.max_cost_usd, cache.ledger.cost_usd)
    return CachingClient(inner, cache)


def live_client(llm: Any, records: Callable[[], Iterable[Any]] | None = None) -> PricedClient:
    """The priced client of a settled live ``llm``: one model, or the ensemble of
    ``llm.models`` (its bandit reading ``records``)."""
    if llm.mutator != "ensemble":
        return _member_client({"mutator": llm.mutator, "model": llm.model}, llm)
    from limen_jax.llm.ensemble import Ensemble, Member

    members = [Member(_member_client(e, llm), e["model"], float(e.get("weight", 1)), _price(llm, e["model"]))
               for e in llm.models]
    return Ensemble(members, llm.select, records)


def _price(llm: Any, model: str) -> Price:
    return Price.parse(llm.prices[model], what=f"llm.prices[{model!r}]")


# The variable a provider's client reads its key from when an ensemble entry names none.
PROVIDER_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def member_provider(entry: dict[str, Any]) -> str:
    """The provider an ``llm.models`` entry calls: its mutator, "openai" when unsaid."""
    return str(entry.get("mutator", "openai"))


def _member_client(entry: dict[str, Any], llm: Any) -> PricedClient:
    """One model's client: entry's mutator, model, base_url and key_env, else the run's."""
    from limen_jax.llm.retry import RetryPolicy

    common: dict[str, Any] = {"temperature": llm.temperature, "timeout": llm.timeout_s, "max_tokens": llm.max_tokens,
                              "retry": RetryPolicy(max_retries=llm.max_retries)}
    model = entry["model"]
    key = os.environ.get(entry["key_env"]) if entry.get("key_env") else None
    if entry.get("key_env") and not key:
        raise MissingAPIKey(f"{entry['key_env']} is not set: export it to use {model} (llm.models)")
    if member_provider(entry) == "anthropic":
        from limen_jax.llm.anthropic_client import AnthropicClient

        return AnthropicClient(model, prices=_price(llm, model), api_key=key, base_url=entry.get("base_url"),
                               **common)
    try:
        from limen_jax.llm.openai_client import OpenAIClient
    except ImportError as exc:
        raise ValueError(f"mutator openai needs the openai package: pip install 'limen_jax[openai]' ({exc})") from None
    return OpenAIClient(model, price=_price(llm, model), api_key=key, base_url=entry.get("base_url") or llm.base_url,
                        api_key_env=entry.get("key_env") or PROVIDER_KEY_ENV["openai"], **common)
