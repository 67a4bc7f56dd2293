"""python -m limen_jax.compare: ablation runs side by side, from their directories only."""

from __future__ import annotations

import json

from limen_jax.compare import load_run, main
from limen_jax.config import EvolveConfig
from limen_jax.plots import best_so_far
from limen_jax.rl import PPOConfig
from limen_jax.stats import bootstrap_interval, iqm, success_interval


def fake_run(root, name, mode, scores, spend=0.0, usage=None, seed=0):
    """A run directory as the loop leaves it: scores[i] lists iteration i's successes (None = rejected)."""
    run = root / name
    run.mkdir()
    cfg = EvolveConfig.preset_for("xland_hard", "cpu", seed=seed, search={"mode": mode, "seeds": 2})
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    records = [
        {"id": f"it{it:04d}-c{c:02d}", "iteration": it, "success": s,
         "success_per_seed": [] if s is None else [max(s - 0.01, 0.0), min(s + 0.01, 1.0)]}
        for it, row in enumerate(scores) for c, s in enumerate(row)
    ]  # fmt: skip
    state = {"iteration": len(scores) - 1, "archive": {"programs": records}, "spend_usd": spend, "usage": usage}
    (run / "state.json").write_text(json.dumps(state))
    return run


def test_best_so_far_counts_rejected_as_no_score():
    records = [{"iteration": 0, "success": 0.2}, {"iteration": 1, "success": None}, {"iteration": 2, "success": 0.1},
               {"iteration": 3, "success": 0.5}]  # fmt: skip
    assert best_so_far(records) == [0.2, 0.2, 0.2, 0.5]
    assert best_so_far([]) == []


def test_compare_prints_one_row_per_run_and_plots(tmp_path, capsys):
    usage = {"calls": 5, "failed_calls": 1, "retries": 3, "input_tokens": 12000, "output_tokens": 3400,
             "cost_usd": 1.234, "mutator": "anthropic"}
    full = fake_run(tmp_path, "full", "full", [[0.05, None], [0.4, 0.3], [0.9]], spend=1.234, usage=usage)
    sparse = fake_run(tmp_path, "sparse", "sparse", [[0.004]])
    out_png = tmp_path / "cmp.png"
    assert main([str(full), str(sparse), "--plot", str(out_png)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| run | task | mode")
    row_full, row_sparse = lines[2], lines[3]
    # the mutator that ran, not the config's "auto"; calls, failures, retries and tokens
    assert "| full | xland_hard | full | map_elites | anthropic | 1,000,000 x 2 | 5 | 1 | 0.050 |" in row_full
    # the best with its 95 % interval over its 2 seeds and the run's evaluation episodes
    episodes = PPOConfig.preset("xland_hard", "cpu").eval_episodes
    assert load_run(full)["eval_episodes"] == episodes
    lo, hi = success_interval([0.89, 0.91], episodes)
    assert 0.8 < lo < 0.89 and 0.91 < hi < 0.97
    assert f"**0.900** [{lo:.2f}, {hi:.2f}] (0.89, 0.91) | 5 (1 failed, 3 retries) | 12,000 / 3,400 | $1.23 |" \
        in row_full
    assert "| sparse | xland_hard | sparse | sparse | - |" in row_sparse and "**0.004** [0.00, " in row_sparse
    # two strategies (the sparse baseline is one), one run each: their bests' intervals
    pair = next(line for line in lines if line.startswith("map_elites vs sparse"))
    assert lines[lines.index(pair) - 1] == "" and lines[-1] == f"plot: {out_png}"
    assert pair.startswith(f"map_elites vs sparse: mean best 0.900 against 0.004; one run each, so the search's "
                                f"own spread is unknown; the bests' intervals [{lo:.2f}, {hi:.2f}] and [0.00, ")
    assert pair.endswith("do not overlap: a difference beyond the training noise")
    assert out_png.stat().st_size > 0


def test_compare_rejects_a_directory_without_a_checkpoint(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_compare_refuses_a_plot_it_cannot_write_before_reading_runs(tmp_path, capsys):
    run = fake_run(tmp_path, "full", "full", [[0.5]])
    for plot in (tmp_path / "no" / "dir" / "x.png", tmp_path / "x.gif"):
        assert main([str(run), "--plot", str(plot)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--plot needs a .png, .pdf or .svg path in an existing directory" in err
    assert not (tmp_path / "no").exists()


def test_compare_by_strategy_gives_mean_spread_first_generation_programs_per_best_and_wall(tmp_path, capsys):
    a0 = fake_run(tmp_path, "a0", "full", [[0.1, 0.2], [0.6, None], [0.4]])  # best 0.6: 3rd of 5 programs
    a1 = fake_run(tmp_path, "a1", "full", [[0.3, 0.0], [0.1, 0.2], [0.2]])  # best 0.3: the 1st
    ind = fake_run(tmp_path, "ind", "independent", [[0.05, 0.1], [None, None], [0.0]])  # best 0.1: the 2nd
    events = [{"event": "iteration", "iteration": i, "wall_s": w} for i, w in enumerate((30.0, 60.0, 90.0))]
    (a0 / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n{\"event\": \"itera")
    assert main([str(a0), str(a1), str(ind), "--by-strategy"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[6] == ("| strategy | runs | steps x seeds | programs | best: mean [95% CI] (per run) | best: IQM "
                        "| first gen | mean program | programs per best | wall per run |")  # fmt: skip
    # mean (0.6 + 0.3) / 2 = 0.45, its bootstrap over the two runs 0.3, 0.45, 0.6 w.p. 1/4, 1/2, 1/4;
    # no IQM under 4 runs, no interval over one run; first generations 0.2 and 0.3;
    # programs until the best 3 and 1; a0's iterations took 3 min (a1 has no events log)
    # mean program success (a rejected one 0): a0 1.3 / 5, a1 0.8 / 5, mean 0.21; ind 0.15 / 5
    assert lines[8] == ("| map_elites | 2 | 1,000,000 x 2 | 5 | **0.450** [0.30, 0.60] (0.60, 0.30) | - | 0.250 "
                        "| 0.210 | 2 | 3.0 min |")  # fmt: skip
    assert lines[9] == ("| independent | 1 | 1,000,000 x 2 | 5 | **0.100** (0.10) | - | 0.100 | 0.030 "
                        "| 2 | - |")  # fmt: skip
    # both map_elites runs beat the independent one; of the 3 splits of (0.6, 0.3 | 0.1), 2 differ by
    # at least the observed 0.35
    assert lines[-1] == ("map_elites vs independent: mean best 0.450 against 0.100; P(map_elites > independent) = "
                         "1.00; permutation test (2 and 1 runs, unpaired): p = 0.67: within noise (runs this few "
                         "cannot reach p < 0.05)")  # fmt: skip


def test_compare_by_strategy_cuts_runs_to_their_shared_program_budget_or_to_programs_n(tmp_path, capsys):
    a0 = fake_run(tmp_path, "a0", "full", [[0.1, 0.2], [0.6, None], [0.4]])  # 0.6 is the 3rd program
    a1 = fake_run(tmp_path, "a1", "full", [[0.3, 0.0], [0.1, 0.2], [0.9]])  # 0.9 is the 5th
    for run in (a0, a1):  # both held to a budget of 4 programs
        cfg = json.loads((run / "config.json").read_text())
        cfg["search"]["programs"] = 4
        (run / "config.json").write_text(json.dumps(cfg))
    assert main([str(a0), str(a1), "--by-strategy"]) == 0
    out = capsys.readouterr().out.splitlines()
    # first 4 programs: a0's best 0.6 (3rd), a1's 0.3 (1st, its 0.9 came past the budget)
    assert out[-2] == ("| map_elites | 2 | 1,000,000 x 2 | 4 | **0.450** [0.30, 0.60] (0.60, 0.30) | - | 0.250 "
                       "| 0.188 | 2 | - |")  # fmt: skip
    assert out[-1] == "(the first 4 programs of each run)"
    assert main([str(a0), str(a1), "--by-strategy", "--programs", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == ("| map_elites | 2 | 1,000,000 x 2 | 5 | **0.750** [0.60, 0.90] (0.60, 0.90) | - | 0.250 "
                       "| 0.280 | 4 | - |")  # fmt: skip
    assert main([str(a0), "--by-strategy", "--programs", "0"]) == 2
    assert capsys.readouterr().err == "--programs must be >= 1, got 0\n"


def test_the_first_generation_is_the_first_batch_that_made_programs(tmp_path, capsys):
    run = fake_run(tmp_path, "f", "full", [[], [0.2, 0.3], [0.7]])  # iteration 0 asked for text alone
    assert main([str(run), "--by-strategy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "| 0.300 | - | **0.700** [" in out[2] and "] (0.69, 0.71) |" in out[2]  # no baseline in a fake run
    assert out[-1] == ("| map_elites | 1 | 1,000,000 x 2 | 3 | **0.700** (0.70) | - | 0.300 | 0.400 "
                       "| 3 | - |")  # fmt: skip


def test_strategies_over_the_same_search_seeds_are_compared_paired(tmp_path, capsys):
    bests_a, bests_b = (0.9, 0.5, 0.7), (0.6, 0.55, 0.3)
    runs = [fake_run(tmp_path, f"a{i}", "full", [[b]], seed=i) for i, b in enumerate(bests_a)]
    runs += [fake_run(tmp_path, f"i{i}", "independent", [[b]], seed=i) for i, b in enumerate(bests_b)]
    assert main([str(r) for r in runs]) == 0
    # seed by seed 0.9 - 0.6, 0.5 - 0.55, 0.7 - 0.3: 2 of 3 runs ahead, and one behind by 0.05
    # (P = 7/9); of the 8 sign patterns of (0.3, -0.05, 0.4), (+, +, +), (+, -, +) and their negatives
    # reach |0.3 - 0.05 + 0.4| / 3
    assert capsys.readouterr().out.splitlines()[-1] == (
        "map_elites vs independent: mean best 0.700 against 0.483; P(map_elites > independent) = 0.78; "
        "permutation test (paired over search seeds 0, 1, 2): p = 0.50: within noise (pairs this few cannot "
        "reach p < 0.05)")


def test_enough_runs_give_an_iqm_and_a_difference_beyond_noise(tmp_path, capsys):
    bests_a, bests_b = (0.9, 0.8, 0.7, 0.6), (0.1, 0.2, 0.3, 0.4)
    runs = [fake_run(tmp_path, f"a{i}", "full", [[b]], seed=i) for i, b in enumerate(bests_a)]
    runs += [fake_run(tmp_path, f"i{i}", "independent", [[b]], seed=10 + i) for i, b in enumerate(bests_b)]
    assert main([str(r) for r in runs] + ["--by-strategy"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("| map_elites | 4 |"))
    lo, hi = bootstrap_interval([bests_a], iqm)
    assert "| **0.750** [" in row and f"| 0.750 [{lo:.2f}, {hi:.2f}] |" in row  # IQM: the mean of 0.7 and 0.8
    # other search seeds: unpaired; every run of one beats every run of the other, and of the
    # C(8, 4) = 70 splits only this one and its mirror differ by 0.5: p = 2/70
    assert out[-1] == ("map_elites vs independent: mean best 0.750 against 0.250; P(map_elites > independent) = 1.00; "
                       "permutation test (4 and 4 runs, unpaired): p = 0.03, a difference at the 5 % level")


def test_a_run_s_baseline_has_a_column_and_the_plot_runs_over_programs_trained(tmp_path, capsys):
    from limen_jax.compare import best_by_program

    run = fake_run(tmp_path, "b", "full", [[0.2, None], [0.6, 0.4]])
    state = json.loads((run / "state.json").read_text())
    state["baseline"] = {"id": "baseline", "success": 0.05, "success_per_seed": [0.04, 0.06], "error": None}
    (run / "state.json").write_text(json.dumps(state))
    assert main([str(run), "--plot", str(tmp_path / "c.png")]) == 0
    assert "| 0.200 | 0.050 | **0.600** [" in capsys.readouterr().out.splitlines()[2]
    assert (tmp_path / "c.png").stat().st_size > 0
    # a rejected record is no program trained: three programs, the best after each
    assert best_by_program(state["archive"]["programs"]) == [0.2, 0.6, 0.6]
