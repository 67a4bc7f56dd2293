"""The offline mutator solves xland_hard at the CPU preset where the sparse baseline
cannot: search seed 0's best reaches 0.6 (the mean over search seeds that issue 33 asks of
the offline mutator) and beats the sparse baseline trained with the same budget by 0.4.
docs/results.md (benchmarks/strategies.py) has the distribution over search seeds this margin is chosen from."""

from __future__ import annotations

import pytest

import limen_jax as lj


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_offline_search_solves_xland_hard_where_sparse_cannot(tmp_path):
    run = lj.evolve("xland_hard", {"seed": 0, "llm": {"mutator": "offline"}}, run_dir=tmp_path / "search",
                    verbose=False)  # fmt: skip
    sparse = lj.evolve("xland_hard", {"search": {"mode": "sparse"}}, run_dir=tmp_path / "sparse", verbose=False)
    best = run.best.success
    assert best >= 0.6 and best >= sparse.best.success + 0.4, (best, sparse.best.success)
