"""benchmarks/strategies.py on a tiny budget: two strategies and one unknown name, two run
seeds each, on xland_easy; its tables and its last line come from the run directories, cut
to the budget of programs."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from limen_jax.compare import load_run, noise, summarise
from limen_jax.search.strategy_registry import check_options
from limen_jax.stats import success_interval

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "strategies.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_strategies", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_strategies_benchmark_runs_each_strategy_per_seed_and_names_the_best(tmp_path, capsys):
    bench = load_script()
    argv = ["--task", "xland_easy", "--strategies", "greedy,no_such_strategy,independent", "--run-seeds", "0,1",
            "--programs", "3", "--candidates", "2", "--steps", "20000", "--train-seeds", "1",
            "--out", str(tmp_path)]  # fmt: skip
    assert bench.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("xland_easy: 3 programs per run (2 from scratch, then batches of 2 where the strategy takes "
                        "search.candidates), 20,000 steps x 1 seeds each; run seeds [0, 1]")
    assert any(line.startswith("skipped no_such_strategy: not registered in this process") for line in lines)

    runs = {name: [load_run(tmp_path / name / f"seed{s}") for s in (0, 1)] for name in ("greedy", "independent")}
    for name, pair in runs.items():
        for seed, run in zip((0, 1), pair):
            # the equal budget every strategy gets: 3 programs, 20k steps x 1 seed; the second batch of
            # 2 went past it (4 programs), so the run stopped there, with iterations to spare
            assert (run["config"]["seed"], run["config"]["search"]["strategy"]) == (seed, name)
            assert run["config"]["cascade"]["full_steps"] == 20_000 and run["config"]["search"]["seeds"] == 1
            assert run["config"]["search"]["programs"] == 3 and run["config"]["search"]["iterations"] == 6
            assert len(run["records"]) == 4 and max(r["iteration"] for r in run["records"]) == 1
            assert run["wall_s"] > 0
    # the same run seed gives the same from-scratch first generation to both strategies
    first = {n: [r["code"] for r in runs[n][0]["records"] if r["iteration"] == 0] for n in runs}
    assert first["greedy"] == first["independent"]

    # compare's per-run table names each run by strategy and seed
    for name in runs:
        for seed in (0, 1):
            assert any(line.startswith(f"| {name}/seed{seed} | xland_easy | full | {name} | offline | 20,000 x 1 | 4 |")
                       for line in lines)  # fmt: skip
    # the strategy rows count only the first 3 programs of each run
    sums = {name: summarise(pair, 3) for name, pair in runs.items()}
    for name, s in sums.items():
        assert s["programs"] == [3, 3]
        cut = [max(r["success"] or 0.0 for r in run["records"][:3]) for run in runs[name]]
        assert s["bests"] == cut
        row = next(line for line in lines if line.startswith(f"| {name} | 2 | 20,000 x 1 | 3 |"))
        bests = ", ".join(f"{b:.2f}" for b in s["bests"])
        lo, hi = s["interval"]  # over the 2 run seeds; no IQM under 4 runs
        assert f"| **{s['mean']:.3f}** [{lo:.2f}, {hi:.2f}] ({bests}) | - |" in row
        assert s["mean"] == sum(s["bests"]) / 2 and 1 <= min(s["to_best"]) <= max(s["to_best"]) <= 3
    g, i = sums["greedy"]["mean"], sums["independent"]["mean"]
    # two run seeds a side, the same ones: a paired test that cannot reach p < 0.05
    if g >= i:
        why = noise("greedy", runs["greedy"], "independent", runs["independent"], 3)
        assert lines[-1] == f"best: greedy (mean best {g:.3f}), {g - i:+.3f} over independent ({i:.3f}); {why}"
        first = "greedy vs independent"
    else:  # the baseline wins: its margin over the other strategy
        why = noise("independent", runs["independent"], "greedy", runs["greedy"], 3)
        assert lines[-1] == (f"best: independent (mean best {i:.3f}), {i - g:+.3f} over the best other strategy, "
                             f"greedy ({g:.3f}); {why}")  # fmt: skip
        first = "independent vs greedy"
    assert "paired over search seeds 0, 1" in why and why.endswith("(pairs this few cannot reach p < 0.05)")
    assert lines[-3].startswith(f"{first}: mean best ") and lines[-3].endswith(why)

    # a second call reads the finished runs back instead of training them again
    before = (tmp_path / "greedy" / "seed0" / "events.jsonl").read_text()
    assert bench.main(argv) == 0
    assert (tmp_path / "greedy" / "seed0" / "events.jsonl").read_text().count('"event": "score"') == \
        before.count('"event": "score"')
    assert capsys.readouterr().out.splitlines()[-1] == lines[-1]
    assert json.loads((tmp_path / "independent" / "seed1" / "config.json").read_text())["seed"] == 1


def test_strategies_benchmark_refuses_a_malformed_option_before_running(tmp_path, capsys):
    with pytest.raises(SystemExit):
        load_script().main(["--out", str(tmp_path), "--option", "mcts_leaves=3"])
    assert "--option takes STRATEGY.KEY=VALUE, got 'mcts_leaves=3'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_option_help_names_real_options_and_a_bad_option_stops_it_before_running(tmp_path, capsys):
    with pytest.raises(SystemExit):
        load_script().main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    examples = re.findall(r"e\.g\. (\w+)\.(\w+)=(\S+)", shown)
    assert ("mcts", "leaves", "3") in examples
    for name, key, value in examples:  # each example is an option its strategy takes
        assert getattr(check_options(name, {key: json.loads(value)}), key) == json.loads(value)
    for bad, why in (("mcts.leaves=0", "leaves must be at least 1"), ("mcts.leaf=3", "unknown options ['leaf']")):
        with pytest.raises(SystemExit):
            load_script().main(["--out", str(tmp_path), "--strategies", "mcts,greedy", "--option", bad])
        err = " ".join(capsys.readouterr().err.split())
        assert "--option mcts: search.options" in err and why in err, err
    assert not any(tmp_path.iterdir())


def test_the_last_line_names_the_best_and_its_margin_over_independent():
    bench = load_script()

    def runs(*bests):  # one run per best (run seeds 0, 1, ...), its only program scoring it on one seed
        return [{"name": f"r{k}", "config": {"task": "t", "seed": k}, "eval_episodes": 100,
                 "records": [{"iteration": 0, "success": b, "success_per_seed": [b]}]} for k, b in enumerate(bests)]

    # the same run seeds: paired; of the sign patterns of (0.4, 0.1) two reach the observed mean 0.25
    assert bench.verdict({"map_elites": runs(0.9, 0.7), "independent": runs(0.5, 0.6)}) == \
        ("best: map_elites (mean best 0.800), +0.250 over independent (0.550); P(map_elites > independent) = 1.00; "
         "permutation test (paired over search seeds 0, 1): p = 0.50: within noise (pairs this few cannot reach "
         "p < 0.05)")  # fmt: skip
    # one run each: the two bests' intervals over their seed's 100 episodes
    (a_lo, a_hi), (b_lo, b_hi) = success_interval([0.8], 100), success_interval([0.5], 100)
    assert b_hi < a_lo
    assert bench.verdict({"greedy": runs(0.4), "mcts": runs(0.5), "independent": runs(0.8)}) == \
        ("best: independent (mean best 0.800), +0.300 over the best other strategy, mcts (0.500); one run each, so "
         f"the search's own spread is unknown; the bests' intervals [{a_lo:.2f}, {a_hi:.2f}] and [{b_lo:.2f}, "
         f"{b_hi:.2f}] do not overlap: a difference beyond the training noise")  # fmt: skip
    assert bench.verdict({"greedy": runs(0.4)}) == "best: greedy (mean best 0.400); independent did not run, no margin"
