"""The checker's real rules, as the prompts state them, generated from the program policy.

The lists come from :mod:`limen_jax.program.names` and :mod:`limen_jax.program.policy`
(the same constants the checker enforces), so a prompt can never promise or forbid
something the checker does not; the wording is ``prompts/rules.md``.
"""

from __future__ import annotations

import functools


@functools.cache
def checker_rules(max_obs_dim: int = 512, max_work_vs_step: float = 100.0) -> str:
    """Markdown bullet lines: allowed imports, forbidden constructs and names, limits."""
    from limen_jax.interface import MAX_REWARD_TERMS
    from limen_jax.llm.templates import render
    from limen_jax.program import names, policy

    imports = ", ".join(f"`{m}`" for m in sorted(names.ALLOWED_MODULES))
    # each message reads "<construct> is/are not allowed; <advice>": keep the construct
    constructs = sorted({why.split(" is not allowed")[0].split(" are not allowed")[0].split(" (")[0]
                         for why in policy._FORBIDDEN_NODES.values()})
    return render(
        "rules",
        imports=imports,
        constructs=", ".join(constructs),
        names=", ".join(f"`{n}`" for n in sorted(names.FORBIDDEN_NAMES)),
        max_chars=f"{policy.MAX_SOURCE_CHARS:,}",
        max_obs_dim=str(max_obs_dim),
        max_work=f"{max_work_vs_step:g}",
        max_terms=str(MAX_REWARD_TERMS),
    )
