"""Adding a strategy's own section to a rendered standard prompt, and the standard prompt
without MAP-Elites' optional sections (the archive's best, other cells, failures), which
the published strategies do not show."""

from __future__ import annotations

import dataclasses

from limen_jax.search.base import SearchView
from limen_jax.search.requests import ProgramRequest

_INSTRUCTIONS = "\n## Instructions\n"


def plain(view: SearchView) -> SearchView:
    """``view`` with every optional prompt section left out (the prompt draws the same
    randomness either way)."""
    return dataclasses.replace(view, prompt=dataclasses.replace(view.prompt, section_prob=0.0))


def insert_section(request: ProgramRequest, section: str) -> ProgramRequest:
    """``request`` with ``section`` placed just before the prompt's instructions. The last
    "## Instructions" heading is the template's own: the task text and the parent's code,
    which may hold the same words, come before it."""
    head, sep, tail = request.user.rpartition(_INSTRUCTIONS)
    if not sep:
        raise ValueError(f"request {request.id}: the prompt has no instructions heading")
    return dataclasses.replace(request, user=f"{head}\n{section.strip()}\n{sep}{tail}")
