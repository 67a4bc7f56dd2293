"""What the demos pre-screen saves: ranking accuracy of known rewards, then searches with
and without ``--prescreen demos`` (issue 30's Measure).

1. Ranking accuracy A (limen_jax.search.demos) of the reference interfaces' rewards
   (envs/interfaces/), the sparse reward and deliberately hackable ones (one paid for
   holding the object forever, one for spinning) on xland_medium and xland_hard: 16
   expert and 16 random episodes.
2. The offline mutator's search on xland_medium and xland_hard, the same batches
   (iterations x candidates) with and without the pre-screen: programs trained (each
   at the same budget: the training compute), training seconds (the evaluator's wall
   time; the second run of a task reuses compiled trainers, so seconds are not compared),
   best success. The last line is the fraction of programs trained that the pre-screen
   saved, averaged over the tasks where its best success is equal or better (0 when none).

    python benchmarks/prescreen.py --quick   # 2 iterations x 2 candidates, 20,000 steps
    python benchmarks/prescreen.py           # 4 x 4 at the cpu preset's full budget
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HACKS = ROOT / "tests" / "search"


def ranking(task_name: str, episodes: int) -> dict[str, float]:
    from limen_jax import demos
    from limen_jax.interface import default_interface
    from limen_jax.program import compile_interface
    from limen_jax.search.demos import demo_rewards, ranking_accuracy
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


def search(task_name: str, prescreen: str | None, iterations: int, candidates: int, steps: int | None,
           run_dir: Path) -> dict[str, float]:
    import limen_jax as lj

    config: dict = {"seed": 0, "llm": {"mutator": "offline"},
                    "search": {"iterations": iterations, "candidates": candidates, "prescreen": prescreen}}
    if steps:
        config["cascade"] = {"full_steps": steps, "short_steps": 0}
    run = lj.evolve(task_name, config, run_dir=run_dir, verbose=False)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    train_s = sum(e.get("train_s", 0.0) for e in events if e["event"] == "iteration")
    screened = [e for e in events if e["event"] == "prescreen"]
    best = max((r.success for r in run.records if r.evaluated), default=0.0)
    return {"trained": sum(r.evaluated for r in run.records),
            "rejected by prescreen": sum(not e["passed"] for e in screened), "train_s": train_s, "best": float(best)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="2 iterations x 2 candidates at 20,000 steps")
    args = p.parse_args()
    iterations, candidates, steps = (2, 2, 20_000) if args.quick else (4, 4, None)
    tasks = ("xland_medium", "xland_hard")
    print("ranking accuracy A on 16 expert and 16 random episodes (seed 0):")
    for name in tasks:
        for label, a in ranking(name, 16).items():
            print(f"  {name:13s} {label:24s} {a:.3f}")
    print(f"offline search, {iterations} iterations x {candidates} candidates"
          f"{f', {steps:,} steps' if steps else ''}, with and without --prescreen demos (threshold 0.5):")
    saved = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in tasks:
            off = search(name, None, iterations, candidates, steps, Path(tmp) / f"{name}-off")
            on = search(name, "demos", iterations, candidates, steps, Path(tmp) / f"{name}-on")
            for label, r in (("without", off), ("with", on)):
                print(f"  {name:13s} {label:8s} trained {r['trained']:2d}, rejected by the pre-screen "
                      f"{r['rejected by prescreen']:2d}, training {r['train_s']:7.1f} s, best success {r['best']:.3f}")
            if on["best"] >= off["best"] and off["trained"] > 0:
                saved.append(1.0 - on["trained"] / off["trained"])
    frac = sum(saved) / len(saved) if saved else 0.0
    print(f"training compute saved at equal or better best success: {frac:.2f} "
          f"(over {len(saved)} of {len(tasks)} tasks)")


if __name__ == "__main__":
    main()
