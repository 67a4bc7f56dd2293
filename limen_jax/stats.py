"""Uncertainty of a success rate, and of a difference between runs: pure functions.

A program's success is the mean over training seeds of its success rate on ``E`` fresh
evaluation episodes per seed (limen_jax.rl: ``success_per_seed`` and
``PPOConfig.eval_episodes``). Its 95 % interval is :func:`success_interval`, a two-level
bootstrap (seeds, then episodes within each drawn seed), computed exactly. Not the Wilson
interval over the pooled ``S x E`` episodes (:func:`wilson_interval`): that treats every
episode as independent and ignores how much seeds disagree, and seeds are the main
source of variance here (one program's seeds at 0.2 and 0.9 are common); pooled, two such
seeds of 128 episodes give [0.49, 0.61], the bootstrap [0.17, 0.92].

Comparing runs (one best per search seed, rliable's habits): the probability of
improvement :func:`probability_of_improvement`, an exact permutation test over search
seeds (:func:`permutation_test`, paired when both sides ran the same seeds), the
interquartile mean :func:`iqm`, and a stratified bootstrap interval
(:func:`bootstrap_interval`, seeded: the same call gives the same interval).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
# Above this many arrangements a permutation test samples them instead (seeded).
MAX_EXACT = 100_000


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval for ``successes`` of ``trials`` independent trials."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes} of {trials}")
    z, p = _z(confidence), successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    # at 0 or all successes the bound is exactly 0 or 1 (the formula leaves rounding there)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == trials else min(1.0, centre + half)
    return lo, hi


def success_interval(
    per_seed: Sequence[float], episodes: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The two-level bootstrap's percentile interval for the mean success over seeds.

    per_seed: each seed's success rate, a whole number of successes out of ``episodes``
    (the nearest one is taken). episodes: evaluation episodes per seed.

    The bootstrap draws S seeds with replacement, then ``episodes`` episodes with
    replacement from each drawn seed: a drawn seed with rate p contributes
    Binomial(episodes, p) successes. The S draws are independent and alike, so the
    distribution of their total is a mixture of binomials convolved S times: computed
    exactly (no resampling noise, no seed), on S * episodes + 1 values. With one seed only
    the episodes vary; with 2-3 seeds the seed level is rough but still widens the interval
    as far as the seeds disagree, which a pooled interval never does.
    """
    if episodes < 1 or not per_seed:
        raise ValueError("need at least one seed and one episode")
    if not all(0.0 <= p <= 1.0 for p in per_seed):
        raise ValueError(f"success rates must lie in [0, 1], got {list(per_seed)}")
    one = np.mean([_binomial(episodes, round(p * episodes)) for p in per_seed], axis=0)
    total = one
    for _ in range(len(per_seed) - 1):
        total = np.convolve(total, one)
    cdf = np.cumsum(total)
    alpha = 1.0 - confidence
    # the first total whose cumulative probability reaches each tail (a hair of slack for
    # the sums' rounding: exact ties at a tail's edge resolve to the lower value)
    lo, hi = np.searchsorted(cdf, [alpha / 2 - 1e-12, 1 - alpha / 2 - 1e-12])
    n = len(per_seed) * episodes
    return int(lo) / n, int(min(hi, n)) / n


def _binomial(n: int, k: int) -> np.ndarray:
    """The pmf [n + 1] of Binomial(n, k / n), exact at 0 and 1, in logs otherwise."""
    out = np.zeros(n + 1)
    if k in (0, n):
        out[k] = 1.0
        return out
    p = k / n
    j = np.arange(n + 1)
    log = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(n + 1)])
    return np.exp(log + j * math.log(p) + (n - j) * math.log1p(-p))


def probability_of_improvement(x: Sequence[float], y: Sequence[float]) -> float:
    """P(X > Y) + P(X = Y) / 2 for X drawn from ``x`` and Y from ``y`` (all pairs: the
    Mann-Whitney U over n * m), rliable's measure; 0.5 is no difference."""
    if not x or not y:
        raise ValueError("both sides need at least one run")
    wins = sum((a > b) + 0.5 * (a == b) for a in x for b in y)
    return wins / (len(x) * len(y))


def permutation_test(
    x: Sequence[float], y: Sequence[float], *, paired: bool = False, resamples: int = 20_000, seed: int = 0
) -> float:
    """Two-sided p-value of "x and y come from one distribution", on the difference of
    their means: every relabelling of the runs (unpaired: every split of the pooled runs
    into len(x) and len(y); paired: every sign of each pair's difference, x[i] against
    y[i]), exactly when there are at most :data:`MAX_EXACT` of them, else ``resamples``
    seeded random ones. Few runs cannot give a small p: see :func:`smallest_p`."""
    if paired and len(x) != len(y):
        raise ValueError("a paired test needs as many runs on each side")
    if not x or not y:
        raise ValueError("both sides need at least one run")
    eps = 1e-12  # equal differences, up to the sums' rounding, count as at least as extreme
    if paired:
        d = np.asarray(x, float) - np.asarray(y, float)
        observed = abs(d.mean())
        if 2 ** len(d) <= MAX_EXACT:
            signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
        else:
            signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(resamples, len(d)))
        stats = np.abs((signs * d).mean(axis=1))
        return _p(stats, observed, eps, exact=2 ** len(d) <= MAX_EXACT)
    pooled = np.asarray([*x, *y], float)
    n, total = len(x), len(pooled)
    observed = abs(float(np.mean(x)) - float(np.mean(y)))
    exact = math.comb(total, n) <= MAX_EXACT
    if exact:
        masks = np.zeros((math.comb(total, n), total), bool)
        for row, chosen in enumerate(itertools.combinations(range(total), n)):
            masks[row, list(chosen)] = True
    else:
        rng = np.random.default_rng(seed)
        masks = np.argsort(rng.random((resamples, total)), axis=1) < n
    left = (masks * pooled).sum(axis=1) / n
    right = (~masks * pooled).sum(axis=1) / (total - n)
    return _p(np.abs(left - right), observed, eps, exact)


def _p(stats: np.ndarray, observed: float, eps: float, exact: bool) -> float:
    extreme = int(np.count_nonzero(stats >= observed - eps))
    return extreme / len(stats) if exact else (extreme + 1) / (len(stats) + 1)


def smallest_p(n: int, m: int, paired: bool) -> float:
    """The smallest two-sided p an exact permutation test of these sizes can give (no
    ties): 2 / 2**n paired; unpaired 2 / C(n + m, n) when n == m, else 1 / C(n + m, n).
    Three runs a side: 0.25 paired, 0.1 unpaired, so no difference reaches 0.05."""
    if paired:
        return min(1.0, 2 / 2**n)
    return min(1.0, (2 if n == m else 1) / math.comb(n + m, n))


def iqm(values: np.ndarray | Sequence[float]) -> np.ndarray | float:
    """The interquartile mean along the last axis: the mean of what is left once
    floor(n / 4) values are cut from each end (rliable's, scipy's trim_mean(x, 0.25))."""
    a = np.sort(np.asarray(values, float), axis=-1)
    n = a.shape[-1]
    if n == 0:
        raise ValueError("the IQM of no values")
    cut = n // 4
    out = a[..., cut : n - cut].mean(axis=-1)
    return float(out) if out.ndim == 0 else out


def _mean(values: np.ndarray) -> np.ndarray:
    return np.asarray(values.mean(axis=-1))


def bootstrap_interval(
    strata: Sequence[Sequence[float]],
    statistic: Callable[[np.ndarray], np.ndarray | float] = _mean,
    confidence: float = CONFIDENCE,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` under a stratified bootstrap: each stratum
    (e.g. a task's runs) is resampled with replacement on its own, the strata are joined
    and the statistic taken (along the last axis of a [resamples, n] array: the default
    mean, or :func:`iqm`). Seeded, so a table is the same on every call."""
    arrays = [np.asarray(s, float) for s in strata]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every stratum needs at least one value")
    rng = np.random.default_rng(seed)
    draws = np.concatenate([a[rng.integers(0, a.size, size=(resamples, a.size))] for a in arrays], axis=1)
    values = np.asarray(statistic(draws), float)
    alpha = 1.0 - confidence
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Two sets of runs compared: ``poi`` P(x better than y), ``p`` the permutation
    test's p-value (``paired`` over shared search seeds or not), the runs a side, and
    ``smallest_p`` (what these sizes can give at best)."""

    poi: float
    p: float
    paired: bool
    n: int
    m: int
    smallest_p: float

    def within_noise(self, alpha: float = 1.0 - CONFIDENCE) -> bool:
        """The test finds no difference at level ``alpha``."""
        return self.p >= alpha


def compare(x: Sequence[float], y: Sequence[float], *, paired: bool = False) -> Comparison:
    """:func:`probability_of_improvement` and :func:`permutation_test` of ``x`` against ``y``."""
    return Comparison(
        poi=probability_of_improvement(x, y),
        p=permutation_test(x, y, paired=paired),
        paired=paired,
        n=len(x),
        m=len(y),
        smallest_p=smallest_p(len(x), len(y), paired),
    )
