"""What the demos pre-screen saves: ranking accuracy of known rewards, then searches with
and without ``--prescreen demos``, at the same budget of programs.

1. Ranking accuracy A (limen_jax.search.evaluation.demo_ranking) of the reference interfaces' rewards
   (envs/interfaces/), the sparse reward and deliberately hackable ones (one paid for
   holding the object forever, one for spinning) on xland_medium and xland_hard: 16
   expert and 16 random episodes.
2. The offline mutator's search on xland_medium and xland_hard, the same budget of
   programs with and without the pre-screen (threshold 0.5): programs trained (each at
   the same budget: the training compute), training seconds (the evaluator's wall time;
   the second run of a task reuses compiled trainers, so seconds are not compared), best
   success. The run "without" screens at threshold 0, so every program it trains carries
   its ranking accuracy and nothing is rejected.
3. Would a higher threshold have paid: over the "without" run's programs, the rank
   correlation of ranking accuracy with success, and per threshold the programs it would
   have rejected and the best success among the rest (a counterfactual: a real run at that
   threshold would also have shown the rejections to the mutator).

The last line is the fraction of programs trained that the pre-screen (threshold 0.5)
saved, averaged over the tasks where its best success is equal or better (0 when none).

    python benchmarks/prescreen.py --quick   # 12 programs (3 + 3 x 3) at 300,000 steps x 1 seed
    python benchmarks/prescreen.py           # 18 programs (3 + 5 x 3) at the cpu preset's budget
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HACKS = ROOT / "tests" / "search"


def ranking(task_name: str, episodes: int) -> dict[str, float]:
    from limen_jax import demos
    from limen_jax.interface import default_interface
    from limen_jax.program import compile_interface
    from limen_jax.search.evaluation.demo_ranking import demo_rewards, ranking_accuracy
    from limen_jax.task import make

    task = make(task_name)
    data = demos.build_demos(task, 0, experts=episodes, negatives=episodes)
    named = {"reference": compile_interface((ROOT / "envs" / "interfaces" / f"{task_name}.py").read_text(), task,
                                            mode="reward_only"),
             "sparse": default_interface(task)}
    if task_name == "xland_medium":
        named["hackable (hold forever)"] = compile_interface((HACKS / "hackable_xland_medium.py").read_text(), task,
                                                             mode="reward_only")
    named["hackable (spin)"] = compile_interface((HACKS / "spin_xland_medium.py").read_text(), task, mode="reward_only")
    acc = ranking_accuracy(demo_rewards(list(named.values()), data.transitions), data.expert)
    return {name: float(a) for name, a in zip(named, acc)}


def search(task_name: str, prescreen: str, budget: dict, run_dir: Path) -> dict[str, Any]:
    import limen_jax as lj

    config: dict = {"seed": 0, "llm": {"mutator": "offline"}, "search": {**budget["search"], "prescreen": prescreen}}
    if "cascade" in budget:
        config["cascade"] = budget["cascade"]
    run = lj.evolve(task_name, config, run_dir=run_dir, verbose=False)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    train_s = sum(e.get("train_s", 0.0) for e in events if e["event"] == "iteration")
    screened = [e for e in events if e["event"] == "prescreen"]
    best = max((r.success for r in run.records if r.evaluated), default=0.0)
    scored = [(float(r.metadata["scores"]["demos"]), float(r.success)) for r in run.records
              if r.evaluated and "demos" in r.metadata.get("scores", {})]  # fmt: skip
    return {"trained": sum(r.evaluated for r in run.records),
            "rejected by prescreen": sum(not e["passed"] for e in screened), "train_s": train_s, "best": float(best),
            "scored": scored}  # fmt: skip


def ranks(values: list[float]) -> np.ndarray:
    """1-based ranks, ties given their mean rank."""
    v = np.asarray(values, dtype=float)
    order = v.argsort(kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(1, len(v) + 1)
    for x in np.unique(v):
        r[v == x] = r[v == x].mean()
    return r


def spearman(a: list[float], b: list[float]) -> float:
    """Rank correlation (Pearson's r of the ranks); nan when either side is constant."""
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def thresholds(scored: list[tuple[float, float]], levels: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8)) -> list[str]:
    """Per threshold: the programs it would have rejected and the best success of the rest."""
    best = max(s for _, s in scored)
    out = []
    for t in levels:
        kept = [s for a, s in scored if a >= t]
        top = max(kept, default=0.0)
        out.append(f"threshold {t:.1f}: rejects {len(scored) - len(kept):2d} of {len(scored)} "
                   f"({(len(scored) - len(kept)) / len(scored):.0%}), best of the rest {top:.3f}"
                   f"{' (the best kept)' if top >= best else ' (the best lost)'}")  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="12 programs at 300,000 steps x 1 seed")
    _record.add_argument(p)
    args = p.parse_args()
    if args.quick:
        budget = {"search": {"initial": 3, "candidates": 3, "iterations": 24, "programs": 12, "seeds": 1},
                  "cascade": {"full_steps": 300_000, "short_steps": 0}}  # fmt: skip
    else:
        budget = {"search": {"initial": 3, "candidates": 3, "iterations": 36, "programs": 18}}
    tasks = ("xland_medium", "xland_hard")
    print("ranking accuracy A on 16 expert and 16 random episodes (seed 0):")
    for name in tasks:
        for label, a in ranking(name, 16).items():
            print(f"  {name:13s} {label:24s} {a:.3f}")
    steps = budget.get("cascade", {}).get("full_steps")
    print(f"offline search, {budget['search']['programs']} programs{f', {steps:,} steps' if steps else ''}, "
          "with and without --prescreen demos (threshold 0.5):", flush=True)
    saved = []
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in tasks:
            off = search(name, "demos:0", budget, Path(tmp) / f"{name}-off")
            on = search(name, "demos", budget, Path(tmp) / f"{name}-on")
            for label, r in (("without", off), ("with", on)):
                figures[f"{name} {label}: best success"] = r["best"]
                figures[f"{name} {label}: programs trained"] = r["trained"]
                print(f"  {name:13s} {label:8s} trained {r['trained']:2d}, rejected by the pre-screen "
                      f"{r['rejected by prescreen']:2d}, training {r['train_s']:7.1f} s, best success {r['best']:.3f}",
                      flush=True)  # fmt: skip
            if off["scored"]:
                acc, success = zip(*off["scored"])
                print(f"  {name:13s} without: ranking accuracy vs success over its {len(acc)} programs: rank "
                      f"correlation {spearman(list(acc), list(success)):+.2f}")  # fmt: skip
                for line in thresholds(off["scored"]):
                    print(f"  {name:13s}   {line}")
            if on["best"] >= off["best"] and off["trained"] > 0:
                saved.append(1.0 - on["trained"] / off["trained"])
    frac = sum(saved) / len(saved) if saved else 0.0
    print(f"training compute saved at equal or better best success: {frac:.2f} "
          f"(over {len(saved)} of {len(tasks)} tasks)")
    figures["training compute saved at equal or better best success"] = frac
    figures["tasks where the pre-screen kept the best"] = f"{len(saved)} of {len(tasks)}"
    _record.write(__file__, dict(reversed(figures.items())), args)


if __name__ == "__main__":
    main()
