"""Training feedback for the prompt: learning-curve trend, per-seed spread, plateau,
reward terms (each named term's curve) and reward hacking (return rising while success
stays near 0, with the term that grew most).

Pure functions of a :class:`~limen_jax.archive.store.ProgramRecord`'s curves and
per-seed scores. The evolution loop may store the result in ``record.feedback``;
:mod:`limen_jax.llm.prompts` uses that when present and computes it otherwise.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence

from limen_jax.archive.store import ProgramRecord

FEEDBACK_KEYS = ("trend", "per_seed", "plateau")
# Curves described to the LLM, in this order, when present.
PREFERRED_CURVES = ("success", "return")
# A dict reward's terms log their curves as "reward/<name>" (limen_jax.rl.trainer).
TERM_PREFIX = "reward/"
TERM_POINTS = 10  # a term's curve in the prompt: the mean of each tenth of training


@dataclasses.dataclass(frozen=True)
class FeedbackConfig:
    """tail: fraction of training at the end that the plateau test looks at.
    plateau_tol: a curve has plateaued when its change over the tail is at most this
        fraction of its whole range. high_spread: per-seed standard deviation of success
        above which seeds are called inconsistent."""

    tail: float = 0.25
    plateau_tol: float = 0.1
    high_spread: float = 0.15
    # the training-time success curve counts the episodes that *ended* during each update;
    # early in training those are mostly the short, successful ones, so the curve can sit at
    # 1 while the policy succeeds in 21 % of evaluation episodes. When its end is further
    # than this from the evaluation success, the curve is not described as the success.
    max_curve_gap: float = 0.2
    # reward hacking: the return rose (as curve_trend's "rose") while the evaluation
    # success (or, untrained, the curve's end) stayed at most this
    farm_success: float = 0.05


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _finite(curve: Sequence[float | None]) -> list[float]:
    """The curve without gaps: trainers log NaN (or None in JSON) for updates in which no
    episode ended, e.g. early in long-horizon tasks."""
    return [float(x) for x in curve if x is not None and math.isfinite(x)]


def _ends(curve: Sequence[float]) -> tuple[float, float]:
    """Mean of the first and of the last 10 % of the curve (at least one point each)."""
    k = max(1, len(curve) // 10)
    return sum(curve[:k]) / k, sum(curve[-k:]) / k


def curve_trend(name: str, curve: Sequence[float | None]) -> str:
    """E.g. "success rose from 0.02 to 0.41 (peak 0.45)". Gaps (NaN, None) are skipped."""
    curve = _finite(curve)
    if len(curve) == 0:
        return f"{name}: no data"
    start, end = _ends(curve)
    peak = max(curve)
    span = peak - min(curve)
    if span == 0:
        return f"{name} stayed at {_fmt(start)} (no learning signal)"
    verb = "rose" if end - start > 0.05 * span else "fell" if start - end > 0.05 * span else "stayed level"
    if verb == "stayed level":
        return f"{name} stayed level around {_fmt(end)} (peak {_fmt(peak)})"
    return f"{name} {verb} from {_fmt(start)} to {_fmt(end)} (peak {_fmt(peak)})"


def curve_plateau(name: str, curve: Sequence[float | None], config: FeedbackConfig = FeedbackConfig()) -> str:
    """Whether the curve still moved during the last ``tail`` of training. Gaps are skipped."""
    curve = _finite(curve)
    if len(curve) < 4:
        return f"{name}: too few points to tell"
    span = max(curve) - min(curve)
    i = min(len(curve) - 2, int(math.floor(len(curve) * (1.0 - config.tail))))
    delta = curve[-1] - curve[i]
    pct = int(round(100 * config.tail))
    if delta == 0:
        return f"{name} plateaued: no change over the last {pct}% of training"
    if abs(delta) <= config.plateau_tol * span:
        return f"{name} plateaued: it changed by {delta:+.3g} over the last {pct}% of training"
    direction = "still rising" if delta > 0 else "declining"
    return f"{name} {direction}: {delta:+.3g} over the last {pct}% of training"


def seed_spread(success_per_seed: Sequence[float], config: FeedbackConfig = FeedbackConfig()) -> str:
    """E.g. "0.20, 0.90, 0.55 (mean 0.55, std 0.29, range 0.70): inconsistent across seeds"."""
    xs = [float(x) for x in success_per_seed]
    if not xs:
        return "not measured"
    listed = ", ".join(f"{x:.2f}" for x in xs)
    if len(xs) == 1:
        return f"{listed} (a single seed)"
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    text = f"{listed} (mean {mean:.2f}, std {std:.2f}, range {max(xs) - min(xs):.2f})"
    if std > config.high_spread:
        text += ": inconsistent across seeds; the interface learns on some seeds only"
    return text


def _biased(name: str, curve: list[float], record: ProgramRecord, config: FeedbackConfig) -> bool:
    """The training-time success curve disagrees with the evaluation success."""
    if name != "success" or record.success is None or not curve:
        return False
    return abs(_ends(curve)[1] - float(record.success)) > config.max_curve_gap


def curve_points(curve: Sequence[float | None], points: int = TERM_POINTS) -> list[float | None]:
    """The curve as ``points`` values, each the mean of one of ``points`` equal chunks of
    it (gaps skipped; None for a chunk with no value); fewer for a shorter curve."""
    values = [float("nan") if x is None else float(x) for x in curve]
    n = min(points, len(values))
    out: list[float | None] = []
    for i in range(n):
        chunk = [x for x in values[i * len(values) // n : (i + 1) * len(values) // n] if math.isfinite(x)]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


def term_curve(name: str, curve: Sequence[float | None], points: int = TERM_POINTS) -> str:
    """E.g. "`turn`: 0.5, 3.1, ..., 38 (max 39.2, mean 21.4, min 0.4)": the term's episode
    sum over training in ``points`` points, and the max, mean and min of the whole curve."""
    finite = _finite(curve)
    if not finite:
        return f"`{name}`: no data"
    shown = ", ".join("-" if x is None else _fmt(x) for x in curve_points(curve, points))
    mean = sum(finite) / len(finite)
    return f"`{name}`: {shown} (max {_fmt(max(finite))}, mean {_fmt(mean)}, min {_fmt(min(finite))})"


def term_curves(curves: Mapping[str, Sequence[float | None]]) -> dict[str, Sequence[float | None]]:
    """The reward terms' curves among ``curves``, by term name (sorted)."""
    out = {}
    for key in sorted(curves):
        if key.startswith(TERM_PREFIX):
            name = key[len(TERM_PREFIX) :]
            # names were checked as identifiers; a record read from disk is shown escaped
            out[name if re.fullmatch(r"\w{1,32}", name, re.ASCII) else ascii(name)[:40]] = curves[key]
    return out


def reward_terms_text(record: ProgramRecord, points: int = TERM_POINTS) -> str:
    """The prompt's lines on a dict reward's terms (each term's episode sum over training:
    :func:`term_curve`); "" for a scalar reward."""
    terms = term_curves(record.curves)
    if not terms:
        return ""
    head = f"- Reward terms, each one's sum per episode over training ({points} points, first to last):"
    return "\n".join([head, *(f"  - {term_curve(n, c, points)}" for n, c in terms.items())])


def farmed_term(record: ProgramRecord, config: FeedbackConfig = FeedbackConfig()) -> str | None:
    """A sentence when the return rose while success stayed near 0 (the policy collects
    reward without solving the task), naming the reward term whose episode sum grew most;
    None otherwise."""
    ret = _finite(record.curves.get("return", []))
    if len(ret) < 2:
        return None
    start, end = _ends(ret)
    if not end - start > 0.05 * (max(ret) - min(ret)) or end <= start:
        return None
    success_curve = _finite(record.curves.get("success", []))
    success = record.success if record.success is not None else _ends(success_curve)[1] if success_curve else None
    if success is None or success > config.farm_success:
        return None
    text = (
        f"return rose from {_fmt(start)} to {_fmt(end)} while success stayed at {_fmt(success)}: the policy "
        "collects reward without solving the task (reward hacking)"
    )
    growth = {}
    for name, curve in term_curves(record.curves).items():
        values = _finite(curve)
        if len(values) >= 2:
            growth[name] = _ends(values)
    if not growth:
        return text + "; find the part of the reward it can collect without succeeding and remove or bound it"
    name = max(growth, key=lambda n: growth[n][1] - growth[n][0])
    first, last = growth[name]
    if last <= first:
        return text
    return (
        f"{text}; the term `{name}` grew most (its sum per episode rose from {_fmt(first)} to {_fmt(last)}): "
        "it pays for behaviour that does not lead to success; remove it, bound it, or make it potential-based"
    )


def training_feedback(record: ProgramRecord, config: FeedbackConfig = FeedbackConfig()) -> dict[str, str] | None:
    """{"trend", "per_seed", "plateau"} sentences for ``record``, and "terms"
    (:func:`reward_terms_text`) for a dict reward; None if it has no curves. "trend" ends
    with the reward-hacking sentence (:func:`farmed_term`) when it applies.

    The one implementation of training feedback: the loop stores its result in
    ``record.feedback`` (and so logs it) and the prompts show exactly that.
    """
    curves = {n: _finite(c) for n, c in record.curves.items()}
    names = [n for n in PREFERRED_CURVES if curves.get(n)]
    names = names or sorted(n for n, c in curves.items() if c)[:2]
    if not names:
        return None
    trends, plateaus = [], []
    for n in names:
        if _biased(n, curves[n], record, config):
            trends.append(
                f"evaluation success {_fmt(float(record.success or 0.0))}; the success of the episodes that "
                f"ended during training ({_fmt(_ends(curves[n])[1])} at the end) overstates it, because the "
                "short, successful episodes end first"
            )
            continue
        trends.append(curve_trend(n, curves[n]))
        plateaus.append(curve_plateau(n, curves[n], config))
    farmed = farmed_term(record, config)
    if farmed:
        trends.append(farmed)
    out = {
        "trend": "; ".join(trends),
        "per_seed": seed_spread(record.success_per_seed, config),
        "plateau": "; ".join(plateaus) or "not measured",
    }
    terms = reward_terms_text(record)
    if terms:  # a scalar reward's feedback stays exactly what it was
        out["terms"] = terms
    return out
