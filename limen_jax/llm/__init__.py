"""Mutation operators and their prompts.

- :mod:`limen_jax.llm.mutator`: the :class:`Mutator` protocol, request/response types, errors;
- :mod:`limen_jax.llm.prompts`: prompt assembly from ``prompts/*.md``;
- :mod:`limen_jax.llm.rules`: the checker's rules as the prompts state them (from the policy);
- :mod:`limen_jax.llm.feedback`: the training feedback the prompts show (and the loop logs);
- :mod:`limen_jax.llm.anthropic_client`: Claude through the official SDK (retries, cost, budget);
- :mod:`limen_jax.llm.replay`: the JSONL response cache (the run's spend ledger too), replay
  and recording wrappers;
- :mod:`limen_jax.llm.offline`: catalog-driven edits with no network.

The Anthropic SDK and the offline catalogs load only when their mutator is first used.
"""

from __future__ import annotations

from typing import Any

from limen_jax.llm.mutator import (
    MODES,
    BudgetExceeded,
    MutationRequest,
    MutationResponse,
    Mutator,
    MutatorError,
)
from limen_jax.llm.prompts import Prompt, PromptConfig, build_prompt, build_system
from limen_jax.llm.replay import CacheMiss, CachingMutator, ReplayMutator, ResponseCache

_LAZY = {
    "AnthropicMutator": "limen_jax.llm.anthropic_client",
    "OfflineMutator": "limen_jax.llm.offline",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'limen_jax.llm' has no attribute {name!r}")


__all__ = [
    "MODES",
    "AnthropicMutator",
    "BudgetExceeded",
    "CacheMiss",
    "CachingMutator",
    "MutationRequest",
    "MutationResponse",
    "Mutator",
    "MutatorError",
    "OfflineMutator",
    "Prompt",
    "PromptConfig",
    "ReplayMutator",
    "ResponseCache",
    "build_prompt",
    "build_system",
]
