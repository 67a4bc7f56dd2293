"""The baseline's summary line and its level on progress.png."""

from __future__ import annotations

from types import SimpleNamespace

from limen_jax.run.baseline import baseline_line


def test_the_summary_line_gives_the_baseline_and_the_best_margin_over_it():
    base = {"id": "baseline", "success": 0.008, "success_per_seed": [0.008], "error": None}
    best = SimpleNamespace(id="it0001-c01", success=0.938)
    assert baseline_line(base, best) == [
        "baseline: success 0.008 (default observation, sparse reward); best +0.930 over it"]
    assert baseline_line(None, best) == []
    # a sparse run's best is its baseline: no margin over itself
    assert baseline_line({**base, "id": "it0000-c00"}, SimpleNamespace(id="it0000-c00", success=0.008)) == [
        "baseline: success 0.008 (default observation, sparse reward)"]


def test_progress_png_draws_the_baseline_as_a_dashed_level(tmp_path):
    from limen_jax.plots import plot_progress

    records = [{"id": "a", "iteration": 0, "success": 0.5}, {"id": "b", "iteration": 1, "success": 0.9}]
    fig = plot_progress(records, None, baseline=0.25)
    dashed = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and list(dashed[0].get_ydata()) == [0.25, 0.25]
    assert not [line for line in plot_progress(records, None).axes[0].get_lines() if line.get_linestyle() == "--"]
