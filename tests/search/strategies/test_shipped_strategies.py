"""The shipped strategies choose exactly what they chose before the loop ran requests:
data/shipped_strategies.json holds the ids, parents, islands, per-seed successes, stages
and code hashes of offline xland_easy runs (cpu preset, 20,000 steps, seed 3) recorded
with the loop at bc8872b, before the search-requests rewrite. The code hashes were taken
again when offline programs began to return their reward as named terms (a dict): the same
terms summed, so every choice and score stayed as recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import limen_jax as lj

RECORDED = json.loads((Path(__file__).parent / "data" / "shipped_strategies.json").read_text())
CASES = {
    "map_elites": {"search": {"strategy": "map_elites"}},
    "greedy": {"search": {"strategy": "greedy"}},
    "independent": {"search": {"mode": "independent"}},
    "map_elites_serial_cascade": {"search": {"strategy": "map_elites", "iterations": 3, "pipeline": "off"},
                                  "cascade": {"full_steps": 20_000, "short_steps": 8_192, "threshold": 0.2}},
    "obs_only": {"search": {"mode": "obs_only"}},
    "sparse": {"search": {"mode": "sparse"}},
}


def brief(record):
    return {"id": record.id, "parents": record.parent_ids, "island": record.island,
            "success_per_seed": record.success_per_seed, "stage": record.stage,
            "error": (record.error or {}).get("stage"),
            "code_sha": hashlib.sha256(record.code.encode()).hexdigest()[:16]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_shipped_strategies_make_the_same_choices_and_scores_as_before(case, tmp_path):
    over = CASES[case]
    config = {"seed": 3, "llm": {"mutator": "offline"}, "cascade": {"full_steps": 20_000},
              **{k: v for k, v in over.items() if k != "search"},
              "search": {"iterations": 2, "candidates": 2, **over["search"]}}
    run = lj.evolve("xland_easy", config, run_dir=tmp_path / case, verbose=False)
    assert [brief(r) for r in run.records] == RECORDED[case]
