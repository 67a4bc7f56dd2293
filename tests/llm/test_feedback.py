from __future__ import annotations

from limen_jax.archive import ProgramRecord
from limen_jax.llm.feedback import curve_plateau, curve_trend, seed_spread, training_feedback


def test_trend_exact():
    curve = [0.0, 0.0, 0.1, 0.2, 0.3, 0.4, 0.4, 0.4, 0.4, 0.4]
    assert curve_trend("success", curve) == "success rose from 0 to 0.4 (peak 0.4)"
    assert curve_trend("return", [5.0, 4.0, 3.0, 2.0]) == "return fell from 5 to 2 (peak 5)"
    assert curve_trend("success", [0.0] * 6) == "success stayed at 0 (no learning signal)"
    assert curve_trend("success", [0.1, 0.5, 0.1]) == "success stayed level around 0.1 (peak 0.5)"
    assert curve_trend("success", []) == "success: no data"


def test_plateau_exact():
    # 8 points, tail 25 %: compares the last point with index floor(8 * 0.75) = 6
    assert curve_plateau("success", [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.5, 0.5]) == (
        "success plateaued: no change over the last 25% of training"
    )
    assert curve_plateau("success", [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8]) == (
        "success still rising: +0.2 over the last 25% of training"
    )
    assert curve_plateau("success", [0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 0.98]) == (
        "success plateaued: it changed by -0.02 over the last 25% of training"
    )
    assert curve_plateau("return", [3.0, 2.0, 1.0, 2.0, 3.0, 3.0, 2.0, 0.0]) == (
        "return declining: -2 over the last 25% of training"
    )
    assert curve_plateau("success", [0.1, 0.2]) == "success: too few points to tell"


def test_seed_spread_exact():
    # mean 0.55; std = sqrt((0.35^2 + 0.35^2 + 0) / 3) = 0.2858
    assert seed_spread([0.2, 0.9, 0.55]) == (
        "0.20, 0.90, 0.55 (mean 0.55, std 0.29, range 0.70): "
        "inconsistent across seeds; the interface learns on some seeds only"
    )
    assert seed_spread([0.5, 0.5, 0.6]) == "0.50, 0.50, 0.60 (mean 0.53, std 0.05, range 0.10)"
    assert seed_spread([0.3]) == "0.30 (a single seed)"
    assert seed_spread([]) == "not measured"


def test_training_feedback_prefers_success_and_return():
    r = ProgramRecord(
        "p",
        "",
        success_per_seed=[1.0, 1.0],
        curves={"success": [0, 0.5, 1, 1], "return": [1, 1, 1, 1], "entropy": [3, 2, 1, 0]},
    )
    fb = training_feedback(r)
    assert fb == {
        "trend": "success rose from 0 to 1 (peak 1); return stayed at 1 (no learning signal)",
        "per_seed": "1.00, 1.00 (mean 1.00, std 0.00, range 0.00)",
        "plateau": "success plateaued: no change over the last 25% of training; "
        "return plateaued: no change over the last 25% of training",
    }
    other = ProgramRecord("q", "", curves={"loss": [1.0, 0.5, 0.2, 0.1]})
    assert training_feedback(other)["trend"] == "loss fell from 1 to 0.1 (peak 1)"
    assert training_feedback(ProgramRecord("z", "")) is None


def test_gaps_in_curves_are_skipped():
    nan = float("nan")
    assert curve_trend("success", [nan, None, 0.0, 0.5, nan, 1.0]) == "success rose from 0 to 1 (peak 1)"
    assert curve_plateau("success", [nan, 0.0, 0.5, 1.0, nan, 1.0]) == (
        "success plateaued: no change over the last 25% of training"
    )
    r = ProgramRecord("p", "", curves={"success": [nan, nan], "return": [nan, 1.0, 2.0]})
    assert training_feedback(r)["trend"] == "return rose from 1 to 2 (peak 2)"


def test_a_success_curve_of_early_short_episodes_is_not_described_as_the_success():
    # every episode that ended during training was a (short) success, but the policy
    # succeeds in 21 % of evaluation episodes: "stayed at 1" would be a lie
    r = ProgramRecord("p", "", success=0.21, success_per_seed=[0.2, 0.22], stage="full",
                      curves={"success": [1.0] * 20, "return": [float(i) for i in range(20)]})
    fb = training_feedback(r)
    assert "stayed at 1" not in fb["trend"] and "evaluation success 0.21" in fb["trend"]
    assert "overstates" in fb["trend"] and fb["trend"].endswith("return rose from 0.5 to 18.5 (peak 19)")
    # a curve that agrees with the evaluation is described as before
    ok = ProgramRecord("q", "", success=0.9, success_per_seed=[0.9], stage="full",
                       curves={"success": [0.1 * i for i in range(10)] + [0.9] * 10})
    assert training_feedback(ok)["trend"].startswith("success rose from 0.05 to 0.9 (peak 0.9)")
