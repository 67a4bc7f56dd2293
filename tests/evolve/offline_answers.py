"""A strategy's offline answer to one of its requests, as the ask layer writes it."""

from __future__ import annotations

import numpy as np

from limen_jax.llm.offline import OfflineAuthor
from limen_jax.search.base import OfflineRequest, offline_answer


def answer(strategy, request, catalog, *, parent=None, others=(), mode="full") -> str:
    """The offline text of ``request`` (a ProgramRequest or TextRequest) by ``strategy``,
    from ``catalog`` with ``parent`` and ``others`` (records) as the ask layer hands them."""
    offline = OfflineRequest(request, parent, tuple(others), mode, OfflineAuthor(catalog),
                             np.random.default_rng(request.rng_seed))
    return offline_answer(strategy, offline)


def text_request(role, seed=0, context=()):
    from limen_jax.search import TextRequest

    return TextRequest(id="it0000-t00", iteration=0, role=role, system="s", user="u", rng_seed=seed,
                       context_ids=tuple(r.id for r in context))


def program_request(operator, seed=0, parents=(), tag=None):
    from limen_jax.search import ProgramRequest

    return ProgramRequest(id="it0000-c00", iteration=0, island=0, operator=operator,
                          parent_ids=tuple(r.id for r in parents), context_ids=(), system="s", user="u",
                          sections=(), rng_seed=seed, tag=dict(tag or {}))
