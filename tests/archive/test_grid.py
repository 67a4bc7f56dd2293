from __future__ import annotations

import numpy as np
import pytest
from archive_helpers import rec

from limen_jax.archive import Grid, GridSpec, migrate, should_migrate

NEG = -np.inf


def test_default_bins_are_the_declared_ones():
    spec = GridSpec()
    assert spec.shape == (10, 20)
    cases = {1: 0, 50: 0, 51: 1, 100: 1, 101: 2, 450: 8, 451: 9, 512: 9}
    assert {d: spec.obs_bin(d) for d in cases} == cases
    assert spec.obs_bin(0) == 0 and spec.obs_bin(4000) == 9  # clamped (documented)
    ast = {0: 0, 24: 0, 25: 1, 474: 18, 475: 19, 499: 19, 500: 19, 10_000: 19}
    assert {s: spec.ast_bin(s) for s in ast} == ast
    assert spec.ast_labels()[:2] == ["0-24", "25-49"] and spec.ast_labels()[-1] == "475+"
    assert spec.obs_labels()[-2:] == ["401-450", "451+"]  # open-ended, like the AST axis
    with pytest.raises(ValueError):
        spec.ast_bin(-1)
    with pytest.raises(ValueError):
        GridSpec(obs_edges=(1, 1, 5))


def test_cell_of_record(tiny):
    assert tiny.cell_of(rec("a", 0.1, obs_dim=50, ast=24)) == (0, 0)
    assert tiny.cell_of(rec("a", 0.1, obs_dim=51, ast=25)) == (1, 1)
    assert tiny.cell_of(rec("a", 0.1, obs_dim=5, ast=None)) == (0, 0)  # no reward program: size 0
    with pytest.raises(ValueError, match="no observation dimension"):
        tiny.cell_of(rec("a", 0.1, obs_dim=None))


def test_insert_into_empty(tiny):
    g = Grid.empty(tiny, num_islands=2)
    assert g.fitness.dtype == np.float32 and g.fitness.shape == (2, 2, 2)
    assert np.all(g.fitness == NEG) and g.occupied() == []
    assert g.insert(1, rec("a", 0.25, obs_dim=60, ast=3))
    expected = np.full((2, 2, 2), NEG, np.float32)
    expected[1, 1, 0] = 0.25
    np.testing.assert_array_equal(g.fitness, expected)
    assert g.ids[1, 1, 0] == "a" and g.occupied() == [(1, 1, 0)] and g.occupied(0) == []


def test_replace_only_when_strictly_better(tiny):
    g = Grid.empty(tiny, 2)
    assert g.insert(0, rec("a", 0.5))
    assert not g.insert(0, rec("worse", 0.25))
    assert not g.insert(0, rec("tie", 0.5))
    # 0.5 + 1e-9 is a different float64 but the same float32: still a tie, incumbent stays.
    assert not g.insert(0, rec("tie32", 0.5 + 1e-9))
    assert (g.ids[0, 0, 0], g.fitness[0, 0, 0]) == ("a", np.float32(0.5))
    assert g.insert(0, rec("better", 0.75))
    assert (g.ids[0, 0, 0], g.fitness[0, 0, 0]) == ("better", np.float32(0.75))
    # the other island is independent
    assert g.insert(1, rec("low", 0.0))
    assert g.ids[1, 0, 0] == "low"


def test_insert_rejects_unscored_or_nonfinite(tiny):
    g = Grid.empty(tiny, 1)
    with pytest.raises(ValueError, match="no fitness"):
        g.insert(0, rec("a", None))
    with pytest.raises(ValueError, match="finite"):
        g.insert(0, rec("a", 0.1), fitness=float("nan"))
    assert g.insert(0, rec("a", 0.1), fitness=-2.0)  # a pluggable fitness may be negative


def test_migrate_moves_each_best_one_step_along_the_ring(tiny):
    g = Grid.empty(tiny, 2)
    g.insert(0, rec("A", 0.9, obs_dim=10, ast=30))  # island 0, cell (0, 1): its best
    g.insert(0, rec("B", 0.2, obs_dim=60, ast=0))  # island 0, cell (1, 0)
    g.insert(1, rec("C", 0.5, obs_dim=10, ast=30))  # island 1, cell (0, 1): its best
    moves = migrate(g)
    # A (0.9) beats C (0.5) on island 1; C (taken before the insert) loses to A on island 0.
    assert [(m.source, m.target, m.program_id, m.cell, m.inserted) for m in moves] == [
        (0, 1, "A", (0, 1), True),
        (1, 0, "C", (0, 1), False),
    ]
    expected = np.full((2, 2, 2), NEG, np.float32)
    expected[0, 0, 1], expected[0, 1, 0], expected[1, 0, 1] = 0.9, 0.2, 0.9
    np.testing.assert_array_equal(g.fitness, expected)
    assert g.ids[1, 0, 1] == "A" and g.ids[0, 0, 1] == "A"


def test_migrate_into_empty_island_and_single_island(tiny):
    g = Grid.empty(tiny, 3)
    g.insert(0, rec("A", 0.0, obs_dim=60, ast=30))
    moves = migrate(g)
    assert [(m.source, m.target, m.inserted) for m in moves] == [(0, 1, True)]
    assert g.ids[1, 1, 1] == "A" and g.ids[2, 1, 1] is None  # one step per round, not two
    one = Grid.empty(tiny, 1)
    one.insert(0, rec("A", 0.3))
    assert migrate(one) == []


def test_best_breaks_ties_by_c_order(tiny):
    g = Grid.empty(tiny, 1)
    assert g.best(0) is None
    g.insert(0, rec("late", 0.5, obs_dim=60, ast=30))
    g.insert(0, rec("early", 0.5, obs_dim=10, ast=30))
    assert g.best(0) == ((0, 1), "early", 0.5)


def test_should_migrate_schedule():
    assert [i for i in range(13) if should_migrate(i, 5)] == [5, 10]
    assert not any(should_migrate(i, 0) for i in range(10))


def test_grid_dict_round_trip(tiny):
    g = Grid.empty(tiny, 2)
    g.insert(0, rec("a", 0.1))
    g.insert(1, rec("b", 1 / 3, obs_dim=99, ast=99))
    back = Grid.from_dict(g.to_dict())
    np.testing.assert_array_equal(back.fitness, g.fitness)
    assert back.ids.tolist() == g.ids.tolist() and back.spec == g.spec


def test_the_archive_plot_prints_each_filled_cells_value_and_the_open_axis_ends():
    from limen_jax.plots import plot_archive

    spec = GridSpec()
    heat = np.full((spec.num_obs_bins, spec.num_ast_bins), np.nan)
    heat[0, 2], heat[9, 19] = 0.75, 0.3
    fig = plot_archive(heat, spec.obs_labels(), spec.ast_labels())
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["0.30", "0.75"]
    # the viewer's axes: reward AST nodes across, observation dimension up
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("reward AST nodes", "observation dimension")
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "475+"
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "451+"
    # the region starts at AST bin 1
    assert {(t.get_text(), t.get_position()) for t in ax.texts} == {("0.75", (1, 0)), ("0.30", (18, 9))}


def test_the_archive_plot_shows_the_occupied_region():
    from limen_jax.plots import plot_archive

    spec = GridSpec()
    heat = np.full((spec.num_obs_bins, spec.num_ast_bins), np.nan)
    heat[0, 5], heat[1, 7] = 0.5, 0.25  # obs bins 0-1, AST bins 5-7: one empty cell around them
    ax = plot_archive(heat, spec.obs_labels(), spec.ast_labels()).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == spec.ast_labels()[4:9]
    assert [t.get_text() for t in ax.get_yticklabels()] == spec.obs_labels()[0:3]
    assert {(t.get_text(), t.get_position()) for t in ax.texts} == {("0.50", (1, 0)), ("0.25", (3, 1))}
    assert "occupied region" in ax.get_title()


def test_the_archive_plots_title_fits_even_around_one_cell():
    from limen_jax.plots import plot_archive

    spec = GridSpec()
    heat = np.full((spec.num_obs_bins, spec.num_ast_bins), np.nan)
    heat[0, 11] = 0.94  # one cell: the narrowest plot a run makes
    fig = plot_archive(heat, spec.obs_labels(), spec.ast_labels())
    fig.canvas.draw()
    box, title = fig.bbox, fig.axes[0].title.get_window_extent()
    assert box.x0 <= title.x0 and title.x1 <= box.x1, (title, box)
