"""Runs side by side: ``python -m limen_jax.compare RUN_DIR [RUN_DIR ...] [--plot FILE] [--by-strategy]``.

For ablations (``--mode full | obs_only | reward_only | sparse | independent``) and
strategy comparisons on the same task and budget: one markdown table (mode, strategy,
the mutator that actually ran, budget, programs, rejected, first-generation best, the
baseline (the task's default interface as the run trained it), best as ``mean [lo, hi]``
with its seeds, LLM calls with failed calls and retries, tokens, spend) and, with
``--plot``, every run's best success so far over the programs it trained (``--x
iterations``: over batches, whose sizes differ by strategy) on one figure, each run's
baseline a dashed level. The best's interval is 95 % over its training seeds and their evaluation
episodes (:func:`limen_jax.stats.success_interval`); it is the interval of that one
program, picked as the best of many, so its mean leans high. When the runs ran two or
more strategies, one line per pair of strategies says whether their bests differ beyond
noise (:func:`comparisons`). With ``--by-strategy``, a second table gives one row per
strategy over its runs (run seeds): the best success's mean with a bootstrap interval
over runs and its IQM, the first generation's best, the programs trained until the best,
and the wall time; runs held to one budget of programs (``search.programs``) are cut to
it, or to ``--programs N``. Reads the run directories only (config.json, state.json,
events.jsonl); nothing is retrained.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from limen_jax.cli_errors import report_bugs
from limen_jax.modes import strategy_for
from limen_jax.stats import bootstrap_interval, compare, iqm, success_interval


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """The summary of one run directory: its config, its program records, its spend."""
    from limen_jax.run import reader

    path = Path(run_dir)
    config = reader.read_json(path, "config.json", "the run's config")
    if not isinstance(config, dict) or not isinstance(config.get("search", {}), dict):
        raise reader.RunDirError(f"{path / 'config.json'}: not a JSON object with a search object")
    state = reader.check_state(reader.read_json(path, "state.json", "the checkpoint"), path / "state.json")
    for i, record in enumerate(state["archive"]["programs"]):
        field = reader.wrong_record_field(record)
        if field is not None:
            raise reader.RunDirError(f"{path / 'state.json'}: archive.programs[{i}].{field}: of the wrong type")
    return {
        "name": path.name,
        "config": config,
        "records": state["archive"]["programs"],
        "spend_usd": float(state.get("spend_usd", 0.0)),
        # the run's ledger (runs older than the ledger have none)
        "usage": state.get("usage") or {},
        "wall_s": _wall_s(path / "events.jsonl"),
        "eval_episodes": _eval_episodes(config),
        "baseline": state.get("baseline"),  # None: skipped, or a run from before baselines
    }


def _eval_episodes(config: dict[str, Any]) -> int:
    """Evaluation episodes per seed of the run's programs: its task's PPO preset with the
    run's overrides (what its loop trained with)."""
    from limen_jax.rl.config import PPOConfig

    preset = PPOConfig.preset(config["task"], config.get("preset", "cpu"))
    return int(preset.replace(**config.get("ppo", {})).eval_episodes)


def best_interval(run: dict[str, Any], record: dict[str, Any]) -> tuple[float, float] | None:
    """The 95 % interval of a record's success (its seeds and the run's evaluation
    episodes), None without per-seed success rates (numbers in [0, 1])."""
    per_seed = record.get("success_per_seed") or []
    if not per_seed or not all(isinstance(x, int | float) and 0.0 <= x <= 1.0 for x in per_seed):
        return None
    return success_interval(per_seed, run["eval_episodes"])


def _wall_s(events: Path) -> float | None:
    """Seconds the run's iterations took (summed over resumes: a run stopped overnight
    does not count the night), or None without an events log."""
    from limen_jax.run import reader

    if not reader.exists(events.parent, events.name):
        return None
    lines, _ = reader.read_events(events.parent, events.name)  # a line cut by a kill -9 is skipped
    wall = [float(e["wall_s"]) for e in lines if e["event"] == "iteration" and reader.finite(e.get("wall_s"))]
    return sum(wall)


def strategy_name(run: dict[str, Any]) -> str:
    """The strategy a run ran (the baselines' modes name their own)."""
    return strategy_for(run["config"]["search"]["mode"], run["config"]["search"]["strategy"])


def summarise(runs: Sequence[dict[str, Any]], programs: int | None = None) -> dict[str, Any]:
    """One strategy's runs (one per run seed) in numbers: ``bests`` and ``firsts`` (each
    run's best and first-generation best success -- the first batch that made programs;
    0.0 for a run with none scored),
    ``mean`` and ``std`` of the bests (population spread; 0.0 for one run), ``interval``
    (95 %: a bootstrap over runs, stratified by task; None for one run), ``iqm`` ((IQM, its interval) of the
    bests from :data:`MIN_IQM_RUNS` runs on, else None), ``programs``
    (programs each run trained, rejected ones included), ``to_best`` (the 1-based position
    of each run's best among its programs: programs trained until the best),
    ``program_means`` (each run's mean success over its programs, a rejected one 0: how
    good the programs a strategy trains are, not only its best) and ``wall_s`` (each
    run's, None where unknown).

    ``programs``: an equal budget -- only each run's first this many programs (in the order
    they were made) count, so that a run whose last batch went past the budget gains nothing
    from it."""
    bests, firsts, to_best, counts, means = [], [], [], [], []
    for run in runs:
        records = run["records"][:programs]
        counts.append(len(records))
        means.append(statistics.fmean(r.get("success") or 0.0 for r in records) if records else 0.0)
        best, first = _best(records), _best(_first_generation(records))
        bests.append(best["success"] if best else 0.0)
        firsts.append(first["success"] if first else 0.0)
        to_best.append(records.index(best) + 1 if best else len(records))
    return {
        "runs": [run["name"] for run in runs],
        "bests": bests,
        "firsts": firsts,
        "mean": statistics.fmean(bests) if bests else 0.0,
        "std": statistics.pstdev(bests) if len(bests) > 1 else 0.0,
        "interval": _over_runs(runs, bests) if len(bests) > 1 else None,
        "iqm": (float(iqm(bests)), _over_runs(runs, bests, iqm)) if len(bests) >= MIN_IQM_RUNS else None,
        "programs": counts,
        "program_means": means,
        "to_best": to_best,
        "wall_s": [run.get("wall_s") for run in runs],
    }


# Fewer runs than this: the IQM would cut nothing (or one run), so it is not shown.
MIN_IQM_RUNS = 4


def _over_runs(runs: Sequence[dict[str, Any]], values: Sequence[float], statistic: Any = None) -> tuple[float, float]:
    """A seeded bootstrap interval of ``values`` (one per run), resampled within each task."""
    strata: dict[str, list[float]] = {}
    for run, value in zip(runs, values):
        strata.setdefault(run["config"]["task"], []).append(value)
    if statistic is None:
        return bootstrap_interval(list(strata.values()))
    return bootstrap_interval(list(strata.values()), statistic)


def strategy_table(groups: Mapping[str, Sequence[dict[str, Any]]], programs: int | None = None) -> str:
    """A markdown table, one row per strategy over its runs (see :func:`summarise`, which
    ``programs`` cuts to an equal budget): runs, budget, programs per run, best success
    mean [95 % interval over runs] (each run's), its IQM [interval] from
    :data:`MIN_IQM_RUNS` runs on, first generation's best (mean), mean program success
    (mean over runs), programs until the best (mean), wall per run (mean)."""
    columns = ["strategy", "runs", "steps x seeds", "programs", "best: mean [95% CI] (per run)", "best: IQM",
               "first gen", "mean program", "programs per best", "wall per run"]  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name, runs in groups.items():
        s, cfg = summarise(runs, programs), runs[0]["config"]
        walls = [w for w in s["wall_s"] if w is not None]
        cells = [
            name,
            str(len(runs)),
            f"{cfg['cascade']['full_steps']:,} x {cfg['search']['seeds']}",
            f"{statistics.fmean(s['programs']):.3g}",
            f"**{s['mean']:.3f}**{' ' + _bracket(s['interval']) if s['interval'] else ''} "
            f"({', '.join(f'{b:.2f}' for b in s['bests'])})",
            f"{s['iqm'][0]:.3f} {_bracket(s['iqm'][1])}" if s["iqm"] else "-",
            f"{statistics.fmean(s['firsts']):.3f}",
            f"{statistics.fmean(s['program_means']):.3f}",
            f"{statistics.fmean(s['to_best']):.3g}",
            f"{statistics.fmean(walls) / 60:.1f} min" if walls else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _bracket(interval: tuple[float, float]) -> str:
    return f"[{interval[0]:.2f}, {interval[1]:.2f}]"


def comparisons(groups: Mapping[str, Sequence[dict[str, Any]]], programs: int | None = None) -> list[str]:
    """One line per pair of strategies (the higher mean best first) on whether their
    bests differ beyond noise. The probability that a run of one beats a run of the other,
    and an exact permutation test over search seeds, paired when both ran the same seeds;
    a p-value of 0.05 or more is within noise, and the line says when so few runs cannot
    reach less. With one run each the search's own spread is unknown: the two bests'
    intervals are compared instead (overlapping: within noise)."""
    summaries = {name: summarise(runs, programs) for name, runs in groups.items()}
    names = sorted(summaries, key=lambda n: -summaries[n]["mean"])
    return [difference(a, groups[a], b, groups[b], programs) for i, a in enumerate(names) for b in names[i + 1 :]]


def difference(a: str, runs_a: Sequence[dict[str, Any]], b: str, runs_b: Sequence[dict[str, Any]],
               programs: int | None = None) -> str:  # fmt: skip
    """The line of :func:`comparisons` for strategies ``a`` and ``b``."""
    sa, sb = summarise(runs_a, programs), summarise(runs_b, programs)
    return f"{a} vs {b}: mean best {sa['mean']:.3f} against {sb['mean']:.3f}; {noise(a, runs_a, b, runs_b, programs)}"


def noise(a: str, runs_a: Sequence[dict[str, Any]], b: str, runs_b: Sequence[dict[str, Any]],
          programs: int | None = None) -> str:  # fmt: skip
    """Whether strategy ``a``'s bests differ from ``b``'s beyond noise, in words (see
    :func:`comparisons`)."""
    if len(runs_a) == 1 and len(runs_b) == 1:
        ia, ib = (_best_interval(r, programs) for r in (runs_a, runs_b))
        if ia is None or ib is None:
            return "one run each and no per-seed scores: no measure of noise"
        overlap = ia[0] <= ib[1] and ib[0] <= ia[1]
        verdict = "overlap: within noise" if overlap else "do not overlap: a difference beyond the training noise"
        return (f"one run each, so the search's own spread is unknown; the bests' intervals "
                f"{_bracket(ia)} and {_bracket(ib)} {verdict}")  # fmt: skip
    sa, sb = summarise(runs_a, programs), summarise(runs_b, programs)
    seeds_a, seeds_b = ([r["config"]["seed"] for r in runs] for runs in (runs_a, runs_b))
    paired = sorted(seeds_a) == sorted(seeds_b) and len(set(seeds_a)) == len(seeds_a)
    xa, xb = sa["bests"], sb["bests"]
    if paired:  # in seed order, each run against the other strategy's run of its seed
        xa = [x for _, x in sorted(zip(seeds_a, xa))]
        xb = [x for _, x in sorted(zip(seeds_b, xb))]
    c = compare(xa, xb, paired=paired)
    how = (f"paired over search seeds {', '.join(str(s) for s in sorted(seeds_a))}" if paired
           else f"{c.n} and {c.m} runs, unpaired")  # fmt: skip
    line = f"P({a} > {b}) = {c.poi:.2f}; permutation test ({how}): p = {c.p:.2f}"
    if not c.within_noise():
        return f"{line}, a difference at the 5 % level"
    if c.smallest_p >= 0.05:
        return f"{line}: within noise ({'pairs' if paired else 'runs'} this few cannot reach p < 0.05)"
    return f"{line}: within noise"


def _best_interval(runs: Sequence[dict[str, Any]], programs: int | None) -> tuple[float, float] | None:
    run = runs[0]
    best = _best(run["records"][:programs])
    return best_interval(run, best) if best else None


def _mutator(run: dict[str, Any]) -> str:
    """The mutator that ran ("auto" resolved), from the ledger or, failing that, the records."""
    if run["config"]["search"]["mode"] == "sparse":
        return "-"
    ran = run["usage"].get("mutator") or next(
        (r["metadata"]["mutator"] for r in run["records"] if r.get("metadata", {}).get("mutator")), None)
    return str(ran or run["config"]["llm"]["mutator"]) + _models(run["usage"])


def _models(usage: dict[str, Any]) -> str:
    """Each model's calls, spend and mean improvement over the parents (usage.json's
    by_model), in parentheses; "" for a run without them (offline, replayed)."""
    models = usage.get("by_model") or {}
    parts = [f"{m}: {u.get('calls', 0)} calls, ${u.get('cost_usd', 0.0):.2f}, +{u.get('mean_improvement', 0.0):.3f}"
             for m, u in models.items()]
    return f" ({'; '.join(parts)})" if parts else ""


def _calls(usage: dict[str, Any]) -> tuple[str, str]:
    if not usage or "calls" not in usage:
        return "-", "-"
    calls = f"{usage['calls']} ({usage['failed_calls']} failed, {usage['retries']} retries)"
    return calls, f"{usage['input_tokens']:,} / {usage['output_tokens']:,}"


def _first_generation(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The programs of the run's first batch that made any (a strategy may open with text
    alone: forge's plan, RDA's decomposition)."""
    first = min((r["iteration"] for r in records), default=0)
    return [r for r in records if r["iteration"] == first]


def _best(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    scored = [r for r in records if r.get("success") is not None]
    return max(scored, key=lambda r: r["success"]) if scored else None


def table(runs: Sequence[dict[str, Any]]) -> str:
    """A markdown table, one row per run (see the module docstring for the columns)."""
    columns = ["run", "task", "mode", "strategy", "mutator", "steps x seeds", "programs", "rejected", "first gen",
               "baseline", "best (seeds)", "LLM calls", "tokens in / out", "spend"]  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for run in runs:
        cfg, records = run["config"], run["records"]
        best, first = _best(records), _best(_first_generation(records))
        rejected = sum(r.get("success") is None for r in records)
        seeds = ", ".join(f"{s:.2f}" for s in best["success_per_seed"]) if best else ""
        interval = best_interval(run, best) if best else None
        cells = [
            run["name"],
            cfg["task"],
            cfg["search"]["mode"],
            strategy_name(run),  # what ran: a baseline mode runs its own strategy
            _mutator(run),
            f"{cfg['cascade']['full_steps']:,} x {cfg['search']['seeds']}",
            str(len(records)),
            str(rejected),
            f"{first['success']:.3f}" if first else "-",
            _baseline_cell(run.get("baseline")),
            f"**{best['success']:.3f}**{' ' + _bracket(interval) if interval else ''} ({seeds})" if best else "-",
            *_calls(run["usage"]),
            f"${run['spend_usd']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _baseline_cell(baseline: dict[str, Any] | None) -> str:
    return f"{baseline['success']:.3f}" if baseline and baseline.get("success") is not None else "-"


def best_by_program(records: Sequence[dict[str, Any]]) -> list[float]:
    """The running best success after each trained program (1st, 2nd, ...), in the order
    they were made; rejected records and those scored without training are no programs
    trained."""
    best, out = 0.0, []
    for r in records:
        if r.get("success") is not None:
            best = max(best, r["success"])
            out.append(best)
    return out


def plot(runs: Sequence[dict[str, Any]], path: str | Path, x: str = "programs") -> None:
    """Every run's best success so far over the programs it trained (``x="iterations"``:
    over its batches), one step line each; each run's baseline a dashed level."""
    from matplotlib.ticker import MaxNLocator

    from limen_jax.plots import _pyplot, best_so_far

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        line = best_by_program(run["records"]) if x == "programs" else best_so_far(run["records"])
        cfg = run["config"]
        budget = f"{cfg['cascade']['full_steps']:,} steps x {cfg['search']['seeds']}"
        label = f"{run['name']} ({cfg['search']['mode']}, {budget})"
        if len(line) == 1:  # no search (the sparse baseline): a level to beat
            ax.axhline(line[0], linestyle="--", color="grey", label=label)
        else:
            xs = range(1, len(line) + 1) if x == "programs" else range(len(line))
            drawn = ax.step(xs, line, where="post", label=label, marker="o", markersize=3)
            baseline = (run.get("baseline") or {}).get("success")
            if baseline is not None:
                ax.axhline(baseline, linestyle="--", color=drawn[0].get_color(), alpha=0.7,
                           label=f"{run['name']} baseline (sparse reward)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # programs and iterations are whole numbers
    ax.set_xlabel("programs trained" if x == "programs" else "iteration")
    ax.set_ylabel("best success so far")
    ax.set_ylim(-0.05, 1.05)
    tasks = sorted({run["config"]["task"] for run in runs})
    ax.set_title(", ".join(tasks))
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@report_bugs
def main(argv: list[str] | None = None) -> int:
    about = __doc__.split("\n\n")[0].replace("``", "")  # plain text in a terminal
    p = argparse.ArgumentParser(prog="python -m limen_jax.compare", description=about)
    p.add_argument("runs", nargs="+", type=Path, help="run directories")
    p.add_argument("--plot", type=Path, default=None, help="write the best-so-far curves to this image")
    p.add_argument("--x", choices=["programs", "iterations"], default="programs",
                   help="the plot's x axis: programs trained (default; strategies' batches differ in size) or "
                        "iterations")
    p.add_argument("--by-strategy", action="store_true",
                   help="also one row per strategy over its runs: best mean and spread, first generation, "
                        "programs per best, wall")
    p.add_argument("--programs", type=int, metavar="N",
                   help="with --by-strategy: count only each run's first N programs (default: the runs' own "
                        "search.programs budget when they all share one)")
    args = p.parse_args(argv)
    if args.programs is not None and args.programs < 1:
        print(f"--programs must be >= 1, got {args.programs}", file=sys.stderr)
        return 2
    plot_ok = args.plot is None or (args.plot.parent.is_dir() and args.plot.suffix.lower() in (".png", ".pdf", ".svg"))
    if not plot_ok:
        print(f"--plot needs a .png, .pdf or .svg path in an existing directory, got {args.plot}", file=sys.stderr)
        return 2
    runs = []
    for run_dir in args.runs:
        try:
            runs.append(load_run(run_dir))
        except (OSError, KeyError, TypeError, ValueError) as exc:  # JSONDecodeError, a bad PPO override
            print(f"{run_dir}: not a run directory with a checkpoint ({exc})", file=sys.stderr)
            return 2
    print(table(runs))
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(strategy_name(run), []).append(run)
    budgets = {run["config"]["search"].get("programs") for run in runs}
    cut = args.programs if args.programs is not None else (budgets.pop() if len(budgets) == 1 else None)
    if args.by_strategy:
        print()
        print(strategy_table(groups, cut))
        if cut is not None:
            print(f"(the first {cut} programs of each run)")
    if len(groups) > 1:
        print()
        print("\n".join(comparisons(groups, cut)))
    if args.plot is not None:
        plot(runs, args.plot, args.x)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
