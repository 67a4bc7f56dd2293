"""Search strategies side by side on one task, with the offline mutator, at an equal budget.

    python benchmarks/strategies.py --quick --out runs/strategies          # xland_hard
    python benchmarks/strategies.py --strategies map_elites,greedy,independent --out runs/strategies-cpu

Every strategy in ``--strategies`` (default: map_elites, eureka, mcts, forge, portfolio,
independent) runs once per run seed (``--run-seeds``, default 0,1,2) on the same task at
the same budget of programs (``search.programs``: a run finishes after the batch that
reaches it; only each run's first that many programs count in the tables, so a batch that
went past the budget gains nothing) and the same environment steps and training seeds per
program. A strategy's own stopping rule may end it sooner (forge's); the tables show the
programs each run made. A name this process cannot make (no registration, or its module
is missing) is skipped with a line saying so. The options a paper sizes by the budget are
set from it (mcts: ``budget`` = the programs, ``first_level`` = the first generation's size;
forge: ``components`` = that size); ``--option NAME.KEY=VALUE`` sets any option (checked
against the strategy's options before anything runs; mcts's ``leaves`` sizes its expansion
batches, the paper's 8 by default). Runs go
to ``OUT/<strategy>/seed<k>``; a run directory that already holds a finished run is read
back, not re-run, and an interrupted one resumes.

Budgets: the task's CPU preset by default (xland_hard: 3 from scratch + 5 x 3 = 18
programs, 1M steps x 2 seeds each; ``--preset paper`` for the paper's, with its cascade);
``--quick``: 9 programs (3 from scratch, batches of 3), 300k steps x 1 seed;
``--programs``, ``--candidates``, ``--steps`` and ``--train-seeds`` override either.
``--mutator anthropic`` runs the same comparison with Claude.

It prints the ``limen_jax.compare`` tables (one row per run with each best's 95 %
interval, then one row per strategy: best success mean with its interval over run seeds
and, from 4 runs on, its IQM, first-generation best, programs trained until the best,
wall per run), then one line per pair of strategies saying whether they differ beyond
noise (probability of improvement, a permutation test over run seeds, paired when both
ran the same seeds); its last line names the strategy with the highest mean best and its
margin over ``independent`` (or, when that is ``independent``, its margin over the best
of the others), and whether that margin is within noise.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from pathlib import Path
from typing import Any

import limen_jax as lj
from limen_jax.compare import comparisons, load_run, noise, strategy_table, summarise, table
from limen_jax.config import EvolveConfig
from limen_jax.search.strategy_registry import check_options, strategy_class

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

DEFAULT_STRATEGIES = ("map_elites", "eureka", "mcts", "forge", "portfolio", "independent")
QUICK = {"initial": 3, "candidates": 3, "programs": 9, "steps": 300_000, "train_seeds": 1}


def budget(task: str, args: argparse.Namespace) -> dict[str, Any]:
    """The search and cascade overrides every strategy runs with: the task's budget at
    ``--preset``, or ``QUICK``, then the command line's own numbers. The budget is one of
    programs (``search.programs``); iterations are left ample (twice the programs: a
    strategy may spend a batch on text alone, as mcts's verification does), so that the
    program budget, or a strategy's own stopping rule, ends each run."""
    preset = EvolveConfig.preset_for(task, args.preset)
    initial = preset.search.initial or preset.search.candidates
    chosen = dict(QUICK) if args.quick else {
        "initial": initial, "candidates": preset.search.candidates,
        "programs": initial + preset.search.iterations * preset.search.candidates,
        "steps": preset.cascade.full_steps, "train_seeds": preset.search.seeds,
    }  # fmt: skip
    for key in ("programs", "candidates", "steps", "train_seeds"):
        if getattr(args, key) is not None:
            chosen[key] = getattr(args, key)
    if args.candidates is not None:
        chosen["initial"] = args.candidates
    return {
        "search": {"initial": chosen["initial"], "iterations": 2 * chosen["programs"], "programs": chosen["programs"],
                   "candidates": chosen["candidates"], "seeds": chosen["train_seeds"]},
        "cascade": {"full_steps": chosen["steps"]},
    }  # fmt: skip


def budget_options(name: str, search: dict[str, Any]) -> dict[str, Any]:
    """A strategy's options that its paper sizes by the budget, set from this one (``--option``
    overrides them): mcts's λ schedule runs over the program budget and its first level is
    as wide as the others' first generation; forge codes as many components as that."""
    if name == "mcts":
        return {"budget": search["programs"], "first_level": search["initial"]}
    if name == "forge":
        return {"components": search["initial"]}
    return {}


def runnable(name: str) -> str | None:
    """Why this process cannot make strategy ``name``, or None if it can."""
    try:
        strategy_class(name)
    except (ValueError, ImportError, AttributeError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def run_one(task: str, name: str, seed: int, over: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One search (resumed, or read back when finished); its run summary for compare."""
    run_dir = args.out / name / f"seed{seed}"
    config = {
        "seed": seed,
        "preset": args.preset,
        "llm": {"mutator": args.mutator},
        "search": {**over["search"], "strategy": name,
                   "options": {**budget_options(name, over["search"]), **args.options.get(name, {})}},
        "cascade": over["cascade"],
    }
    start = time.time()
    lj.evolve(task, config, run_dir=run_dir, verbose=False)
    run = {**load_run(run_dir), "name": f"{name}/seed{seed}"}
    s = summarise([run], args.budget)
    print(f"{name} seed {seed}: best {s['bests'][0]:.3f} after {s['programs'][0]} programs "
          f"({time.time() - start:.0f} s here)", flush=True)  # fmt: skip
    return run


def verdict(groups: dict[str, list[dict[str, Any]]], programs: int | None = None) -> str:
    """The last line: the strategy with the highest mean best and its margin over independent
    (when independent is the best, its margin over the best of the others), and whether
    that margin is beyond noise (:func:`limen_jax.compare.noise`)."""
    means = {name: summarise(runs, programs)["mean"] for name, runs in groups.items()}
    best = max(means, key=lambda n: means[n])
    if "independent" not in means:
        return f"best: {best} (mean best {means[best]:.3f}); independent did not run, no margin"
    others = [n for n in means if n != "independent"]
    if best == "independent" and others:  # the baseline wins: by how much over the best of the rest
        runner = max(others, key=lambda n: means[n])
        return (f"best: independent (mean best {means[best]:.3f}), {means[best] - means[runner]:+.3f} over the "
                f"best other strategy, {runner} ({means[runner]:.3f}); "
                f"{noise(best, groups[best], runner, groups[runner], programs)}")  # fmt: skip
    margin = means[best] - means["independent"]
    why = noise(best, groups[best], "independent", groups["independent"], programs)
    return (f"best: {best} (mean best {means[best]:.3f}), {margin:+.3f} over independent "
            f"({means['independent']:.3f}); {why}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    about = __doc__.split("\n\n")[0]
    p = argparse.ArgumentParser(prog="python benchmarks/strategies.py", description=about)
    p.add_argument("--task", default="xland_hard")
    p.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES), help="comma-separated strategy names")
    p.add_argument("--run-seeds", default="0,1,2", help="comma-separated search seeds (--seed of each run)")
    p.add_argument("--out", type=Path, required=True, help="results directory (OUT/<strategy>/seed<k>)")
    p.add_argument("--quick", action="store_true", help="the small budget (see the module docstring)")
    p.add_argument("--preset", choices=("cpu", "paper"), default="cpu", help="the budget's base (and cascade)")
    p.add_argument("--mutator", default="offline", help="offline (default), anthropic (needs ANTHROPIC_API_KEY)")
    p.add_argument("--programs", type=int, default=None, help="the budget: programs per run")
    p.add_argument("--candidates", type=int, default=None, help="children per iteration (and from scratch)")
    p.add_argument("--steps", type=int, default=None, help="environment steps per program and seed")
    p.add_argument("--train-seeds", type=int, default=None, help="training seeds per program")
    p.add_argument("--option", action="append", default=[], metavar="STRATEGY.KEY=VALUE",
                   help="a strategy's option (search.options), e.g. mcts.leaves=3 so that its batch matches "
                        "--candidates; repeatable")
    _record.add_argument(p)
    args = p.parse_args(argv)
    args.options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        name, dot, field = key.partition(".")
        if not (sep and dot and name and field):
            p.error(f"--option takes STRATEGY.KEY=VALUE, got {item!r}")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value  # a bare string
        args.options.setdefault(name, {})[field] = parsed
    names = [n.strip() for n in args.strategies.split(",") if n.strip()]
    seeds = [int(s) for s in args.run_seeds.split(",") if s.strip()]
    over = budget(args.task, args)
    s = over["search"]
    args.budget = s["programs"]
    for name in names:  # a bad option is an error now, not when its strategy's turn comes
        if runnable(name) is None:
            try:
                check_options(name, {**budget_options(name, s), **args.options.get(name, {})})
            except ValueError as exc:
                p.error(f"--option {name}: {exc}")
    print(f"{args.task}: {s['programs']} programs per run ({s['initial']} from scratch, then batches of "
          f"{s['candidates']} where the strategy takes search.candidates), {over['cascade']['full_steps']:,} steps x "
          f"{s['seeds']} seeds each; run seeds {seeds}", flush=True)
    groups: dict[str, list[dict[str, Any]]] = {}
    start = time.time()
    for name in names:
        why = runnable(name)
        if why is not None:
            print(f"skipped {name}: not registered in this process ({why})", flush=True)
            continue
        groups[name] = [run_one(args.task, name, seed, over, args) for seed in seeds]
    if not groups:
        print("no strategy could run", file=sys.stderr)
        return 2
    print(f"\nall runs: {(time.time() - start) / 60:.1f} min\n")
    print(table([run for runs in groups.values() for run in runs]))
    print()
    print(strategy_table(groups, args.budget))
    print()
    if len(groups) > 1:
        print("\n".join(comparisons(groups, args.budget)))
        print()
    print(verdict(groups, args.budget))
    figures: dict[str, Any] = {"verdict": verdict(groups, args.budget)}
    for name, runs in groups.items():
        bests = summarise(runs, args.budget)["bests"]
        figures[f"{name}: best success, mean over {len(bests)} run seeds"] = sum(bests) / len(bests)
    figures["task, programs per run"] = f"{args.task}, {s['programs']}"
    _record.write(__file__, figures, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
