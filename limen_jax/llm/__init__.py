"""Model clients behind one narrow seam, the offline stand-in, and the prompts.

- :mod:`limen_jax.llm.client`: the :class:`Client` protocol (``complete(system, user,
  images, seed) -> Completion``), :class:`Completion` and :class:`Usage`, the errors;
- :mod:`limen_jax.llm.retry`: the retry loop every client shares (backoff, the server's
  wait, transient vs refused);
- :mod:`limen_jax.llm.cap`: the spend ledger and the budget cap around any priced client;
- :mod:`limen_jax.llm.replay`: the JSONL response cache (the run's spend ledger too), replay
  and recording wrappers;
- :mod:`limen_jax.llm.anthropic_client`: Claude through the official SDK;
- :mod:`limen_jax.llm.offline`: the offline stand-in: the generic program operators from a
  task's catalog, with no network;
- :mod:`limen_jax.llm.prompts`: prompt assembly from ``prompts/*.md``;
- :mod:`limen_jax.llm.rules`: the checker's rules as the prompts state them (from the policy);
- :mod:`limen_jax.llm.feedback`: the training feedback the prompts show (and the loop logs).

The Anthropic SDK loads only when its client is first used.
"""

from __future__ import annotations

from typing import Any

from limen_jax.llm.cap import Capped, Ledger
from limen_jax.llm.client import (
    Answered,
    BudgetExceeded,
    Client,
    ClientError,
    Completion,
    MissingAPIKey,
    RequestRefused,
    Usage,
)
from limen_jax.llm.offline import OfflineAuthor
from limen_jax.llm.prompts import Prompt, PromptConfig, build_prompt, build_system
from limen_jax.llm.replay import CacheMiss, CachingClient, ReplayClient, ResponseCache
from limen_jax.llm.retry import RetryPolicy

_LAZY = {"AnthropicClient": "limen_jax.llm.anthropic_client"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'limen_jax.llm' has no attribute {name!r}")


__all__ = [
    "AnthropicClient",
    "Answered",
    "BudgetExceeded",
    "CacheMiss",
    "CachingClient",
    "Capped",
    "Client",
    "ClientError",
    "Completion",
    "Ledger",
    "MissingAPIKey",
    "OfflineAuthor",
    "Prompt",
    "PromptConfig",
    "ReplayClient",
    "RequestRefused",
    "ResponseCache",
    "RetryPolicy",
    "Usage",
    "build_prompt",
    "build_system",
]
