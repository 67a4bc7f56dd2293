"""search.programs: a budget of programs that ends a run whatever its iterations say, kept
over a resume and raised by one (the comparison of strategies with unequal batches)."""

from __future__ import annotations

import pytest
from test_evolve import toy_config

import limen_jax as lj
from limen_jax.config import EvolveConfig


def test_a_run_finishes_after_the_batch_that_reaches_its_program_budget_and_a_resume_raises_it(tmp_path):
    config = toy_config(search={"iterations": 10, "candidates": 2, "programs": 3})
    run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "r", verbose=False)
    # 2 from scratch, then one batch of 2 reaches the budget of 3: two batches of ten asked for
    assert run.complete and run.stopped == "finished early: program budget of 3 reached (4 programs)"
    assert [r.iteration for r in run.records] == [0, 0, 1, 1]
    again = lj.resume(tmp_path / "r", verbose=False)  # still spent: nothing more is made
    assert again.stopped == run.stopped and len(again.records) == 4
    more = lj.resume(tmp_path / "r", {"search": {"programs": 6}}, verbose=False)
    assert more.stopped == "finished early: program budget of 6 reached (6 programs)"
    assert [r.iteration for r in more.records] == [0, 0, 1, 1, 2, 2]


def test_a_budget_below_one_program_is_refused():
    with pytest.raises(ValueError, match="search.programs must be a whole number >= 1, got 0"):
        EvolveConfig.from_dict({"task": "toy_corridor", "search": {"programs": 0}})
