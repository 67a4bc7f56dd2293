"""benchmarks/prescreen.py's arithmetic on hand-made numbers: rank correlation with ties,
and what each threshold would have rejected."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "prescreen.py"


def load():
    spec = importlib.util.spec_from_file_location("bench_prescreen", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rank_correlation_gives_ties_their_mean_rank():
    b = load()
    assert b.ranks([0.76, 0.84, 0.76, 0.85]).tolist() == [1.5, 3.0, 1.5, 4.0]
    assert b.spearman([1, 2, 3], [10, 20, 30]) == 1.0
    assert b.spearman([1, 2, 3], [3, 2, 1]) == -1.0
    # ranks (1.5, 1.5, 3) against (1, 2, 3): r = 0.866
    assert math.isclose(b.spearman([0.7, 0.7, 0.9], [0.1, 0.2, 0.3]), math.sqrt(3) / 2)
    assert math.isnan(b.spearman([0.5, 0.5], [0.1, 0.2]))


def test_each_threshold_says_what_it_rejects_and_whether_the_best_survives():
    lines = load().thresholds([(0.76, 0.04), (0.84, 0.27), (0.76, 0.05), (0.84, 0.55)], levels=(0.5, 0.8, 0.9))
    assert lines == [
        "threshold 0.5: rejects  0 of 4 (0%), best of the rest 0.550 (the best kept)",
        "threshold 0.8: rejects  2 of 4 (50%), best of the rest 0.550 (the best kept)",
        "threshold 0.9: rejects  4 of 4 (100%), best of the rest 0.000 (the best lost)",
    ]
