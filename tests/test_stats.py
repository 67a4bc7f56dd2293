"""limen_jax.stats on tiny inputs whose answers are derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

from limen_jax.stats import (
    bootstrap_interval,
    compare,
    iqm,
    permutation_test,
    probability_of_improvement,
    smallest_p,
    success_interval,
    wilson_interval,
)


def test_wilson_interval_by_hand() -> None:
    # 5 of 10, z = 1.96: centre 0.5, half-width z / (1 + z^2/10) * sqrt(0.025 + z^2/400) = 0.26341
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.236593, abs=1e-6) and hi == pytest.approx(0.763407, abs=1e-6)
    # 0 of 10: [0, z^2/10 / (1 + z^2/10)]
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.277533, abs=1e-6))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_success_interval_is_the_exact_two_level_bootstrap() -> None:
    # one seed, 10 episodes at 0.5: Binomial(10, 1/2); P(<= 1) = 11/1024 < 0.025 <= P(<= 2) = 56/1024,
    # P(<= 7) = 968/1024 < 0.975 <= P(<= 8) = 1013/1024
    assert success_interval([0.5], 10) == (0.2, 0.8)
    assert success_interval([1.0, 1.0], 4) == (1.0, 1.0)
    # seeds 0, 1, 1, 1 of one episode each: the total is Binomial(4, 3/4);
    # P(0) = 1/256, P(<= 1) = 13/256 >= 0.025; P(4) = 81/256 > 0.025
    assert success_interval([0.0, 1.0, 1.0, 1.0], 1) == (0.25, 1.0)
    # seeds 0, 0, 1: all three drawn as 1 has probability 1/27 > 0.025
    assert success_interval([0.0, 0.0, 1.0], 1) == (0.0, 1.0)


def test_seeds_that_disagree_widen_the_interval_which_pooling_hides() -> None:
    lo, hi = success_interval([0.2, 0.9], 128)  # 26 and 115 of 128
    assert (lo, hi) == (0.171875, 0.921875)
    pooled = wilson_interval(26 + 115, 256)
    assert pooled[0] > 0.48 and pooled[1] < 0.62
    # seeds that agree: about as narrow as the pooled episodes
    lo, hi = success_interval([0.5] * 4, 128)
    w_lo, w_hi = wilson_interval(256, 512)
    assert abs((hi - lo) - (w_hi - w_lo)) < 0.02
    with pytest.raises(ValueError):
        success_interval([1.5], 10)
    with pytest.raises(ValueError):
        success_interval([], 10)


def test_probability_of_improvement_counts_pairs_and_half_ties() -> None:
    # 0.6 > 0.3, 0.6 > 0.1, 0.3 = 0.3 (a half), 0.3 > 0.1: 3.5 of 4
    assert probability_of_improvement([0.6, 0.3], [0.3, 0.1]) == 0.875
    assert probability_of_improvement([0.1], [0.2]) == 0.0
    assert probability_of_improvement([0.5, 0.5], [0.5]) == 0.5


def test_permutation_test_exact_and_sampled() -> None:
    x, y = [0.6, 0.7, 0.8], [0.1, 0.2, 0.3]
    # unpaired: of the C(6, 3) = 20 splits only this one and its mirror differ by 0.5
    assert permutation_test(x, y) == pytest.approx(0.1)
    # paired: of the 2^3 sign patterns, all + and all - give |mean| 0.5
    assert permutation_test(x, y, paired=True) == pytest.approx(0.25)
    assert permutation_test([1.0, 1.0], [1.0, 1.0]) == 1.0
    # C(20, 10) splits is too many: seeded samples, the same p on every call
    big = permutation_test(list(range(10)), list(range(5, 15)))
    assert big == permutation_test(list(range(10)), list(range(5, 15))) and 0.0 < big < 0.01
    with pytest.raises(ValueError):
        permutation_test([1.0], [1.0, 2.0], paired=True)


def test_smallest_p_says_what_few_runs_can_show() -> None:
    assert smallest_p(3, 3, paired=True) == 0.25
    assert smallest_p(3, 3, paired=False) == pytest.approx(0.1)
    assert smallest_p(2, 3, paired=False) == pytest.approx(0.1)  # 1 / C(5, 2)
    assert smallest_p(1, 1, paired=False) == 1.0
    c = compare([0.6, 0.7, 0.8], [0.1, 0.2, 0.3], paired=True)
    assert (c.poi, c.paired, c.n, c.m, c.smallest_p) == (1.0, True, 3, 3, 0.25)
    assert c.within_noise()  # a clean sweep over three seeds is still p = 0.25


def test_iqm_cuts_a_quarter_from_each_end() -> None:
    assert iqm([8, 1, 2, 7, 3, 6, 4, 5]) == 4.5  # the mean of 3, 4, 5, 6
    assert iqm([5, 1, 9]) == 5.0  # floor(3 / 4) = 0 cut: the mean
    assert iqm([0, 10, 1, 2, 3]) == 2.0  # cut 0 and 10
    np.testing.assert_array_equal(iqm(np.array([[1, 2, 3, 100], [4, 4, 0, 8]])), [2.5, 4.0])


def test_bootstrap_interval_is_stratified_and_seeded() -> None:
    assert bootstrap_interval([[0.6, 0.3]]) == (0.3, 0.6)  # means 0.3, 0.45, 0.6 w.p. 1/4, 1/2, 1/4
    assert bootstrap_interval([[1.0], [0.0]]) == (0.5, 0.5)
    # strata [0, 1] and [5] resampled apart: means 5/3, 2, 7/3 w.p. 1/4, 1/2, 1/4 (pooled
    # resampling would also draw 5, 5, 5)
    lo, hi = bootstrap_interval([[0.0, 1.0], [5.0]])
    assert (lo, hi) == (pytest.approx(5 / 3), pytest.approx(7 / 3))
    values = [[0.1, 0.4, 0.35, 0.8, 0.2, 0.55]]
    assert bootstrap_interval(values, iqm) == bootstrap_interval(values, iqm)
    lo, hi = bootstrap_interval(values, iqm)
    assert 0.1 <= lo < iqm(values[0]) < hi <= 0.8
