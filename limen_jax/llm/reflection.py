"""Reward reflection (Eureka's, also RF-Agent's feedback): a trained program's named reward
terms over training (10 points with max / mean / min each), its success and episode
length curves, the reading hints, and what the statistics say about this program (a
term that never moved, a term that drowns the others, a farmed term).

Pure functions of a :class:`~limen_jax.archive.store.ProgramRecord`; the curves are the
trainer's (``reward/<term>``, ``success``, ``episode_length``), shown through
:mod:`limen_jax.llm.feedback`.
"""

from __future__ import annotations

from collections.abc import Sequence

from limen_jax.archive.store import ProgramRecord
from limen_jax.llm.feedback import TERM_POINTS, _finite, curve_points, farmed_term, reward_terms_text, term_curves
from limen_jax.llm.templates import load_template, render

DROWNS = 10.0  # a term whose mean size is this many times the others' together drowns them


def _points(curve: Sequence[float | None]) -> str:
    shown = curve_points(curve, TERM_POINTS)
    return ", ".join("-" if x is None else f"{x:.3g}" for x in shown) if _finite(curve) else "not recorded"


def findings(record: ProgramRecord) -> list[str]:
    """What the statistics say about ``record``: each term that never moved, a term that
    drowns the others (mean absolute episode sum over ``DROWNS`` times the others'
    together), and the farmed-term sentence (:func:`~limen_jax.llm.feedback.farmed_term`)."""
    out = []
    sizes = {}
    for name, curve in term_curves(record.curves).items():
        values = _finite(curve)
        if not values:
            continue
        sizes[name] = sum(abs(v) for v in values) / len(values)
        if max(values) == min(values):
            out.append(f"`{name}` never moved (it stayed at {values[0]:.4g}): the policy is not optimising it.")
    for name, size in sizes.items():
        rest = sum(s for n, s in sizes.items() if n != name)
        if len(sizes) > 1 and size > DROWNS * rest:
            out.append(f"`{name}` is more than {DROWNS:g} times larger than the other terms together "
                       f"(mean size {size:.4g} vs {rest:.4g}): it drowns them out.")
    farmed = farmed_term(record)
    if farmed:
        out.append(f"The {farmed}.")
    return out


def reflection(record: ProgramRecord) -> str:
    """The reward-reflection section for a trained ``record`` (``reflection.md``)."""
    found = findings(record)
    return render(
        "reflection",
        terms=reward_terms_text(record) or load_template("reflection_terms_none").strip(),
        points=str(TERM_POINTS),
        success=_points(record.curves.get("success", [])),
        length=_points(record.curves.get("episode_length", [])),
        score="not measured" if record.success is None else f"{record.success:.2f}",
        findings="\n".join(["In this program:", *(f"- {f}" for f in found)]) if found else "",
    ) + "\n"
