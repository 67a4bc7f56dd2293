"""The offline mutator's answers for the ``rda`` strategy (decomposition and a critic).

Text roles (answers in the formats the RDA prompts ask for, so they go through the same
parsers as an LLM's):

- ``decompose``: the catalog's dense shaping terms, then its required terms, one
  subtask each, named after the term (what a catalog knows of the task's stages).
- ``critic``: per episode and subtask, 1 when the subtask's term summed above
  :data:`CRITIC_THRESHOLD` in that episode, else 0; read from the context program's
  ``episodes`` evaluation (a subtask's aggregate is then the share of episodes that
  passed).
- ``reflect_subtasks``: the same subtasks, each description sharpened with the test the
  offline critic applies.

Program operators: ``rda_initial`` writes a program whose reward is a dict with one term
per offline subtask; ``rda_rewrite`` reweights every term of its parent, keeping the
names. Both mark the genome ``named`` so that :func:`limen_jax.llm.offline.render` writes
a dict reward.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from limen_jax.catalog import Catalog

CRITIC_THRESHOLD = 0.0  # a subtask passed in an episode when its term summed above this
ROLES = ("decompose", "critic", "reflect_subtasks")


def subtask_terms(catalog: Catalog) -> list[str]:
    """The offline subtasks: dense terms (the approach), then required ones (the goal)."""
    dense = [t for t in catalog.dense_terms if t not in catalog.required_terms]
    return dense + list(catalog.required_terms)


def _kind(catalog: Catalog, name: str) -> str:
    return "required" if name in catalog.required_terms else "dense shaping"


def answer(catalog: Catalog, role: str, others: list[Any]) -> str:
    """The offline text for an RDA ``role``; ``others`` are the request's context records."""
    names = subtask_terms(catalog)
    if role == "decompose":
        lines = [f"{i + 1}. {n}: bring about what the catalog's {_kind(catalog, n)} term `{n}` rewards"
                 for i, n in enumerate(names)]
        return "Offline decomposition:\n" + "\n".join(lines)
    if role == "reflect_subtasks":
        lines = [f"{i + 1}. {n}: bring about what the catalog's {_kind(catalog, n)} term `{n}` rewards; "
                 f"done in an episode when `{n}` sums above {CRITIC_THRESHOLD:g}" for i, n in enumerate(names)]
        return "Offline reflection:\n" + "\n".join(lines)
    log = (others[0].evaluations.get("episodes", {}) if others else {}) or {}
    lines = []
    for e, episode in enumerate(log.get("episodes", [])):
        for name, total in episode["sums"].items():
            passed = total > CRITIC_THRESHOLD
            lines.append(f"episode {e + 1}, {name}: {int(passed)} | term sum {total:.4g} "
                         f"{'>' if passed else '<='} {CRITIC_THRESHOLD:g}")
    return "Offline critique:\n" + ("\n".join(lines) if lines else "no episodes to score")


def initial_genome(mutator: Any, rng: np.random.Generator) -> tuple[dict[str, Any], list[str]]:
    """A from-scratch genome whose terms are the offline subtasks, at catalog weights."""
    cat = mutator.catalog
    genome = mutator.random_genome(rng)
    genome["terms"] = {n: cat.term(n).weight for n in subtask_terms(cat)}
    return {**genome, "named": True}, ["rda_initial"]


def rewrite_genome(mutator: Any, parent: dict[str, Any] | None,
                   rng: np.random.Generator) -> tuple[dict[str, Any], list[str]]:
    """Every term of ``parent`` reweighted by a log-normal factor (sigma 0.5), names kept."""
    if parent is None:
        return initial_genome(mutator, rng)
    terms = {n: mutator.reweighted(w, rng) for n, w in parent["terms"].items()}
    return {**parent, "terms": terms, "named": True}, ["rda_rewrite"]
