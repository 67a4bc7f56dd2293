"""The same search with the in-process evaluator and with Ray actors: programs judged per hour.

    python benchmarks/evaluators.py --quick    # CPU: xland_easy, 2 iterations x 8 candidates
    python benchmarks/evaluators.py            # a bigger budget (20 iterations x 8 candidates)

Both sides run the same offline search (same seed, so the same programs and scores) in
fresh run directories; the Ray side starts a local Ray with ``--actors`` actors of one
CPU each, and its time counts from building the evaluator (Ray's start-up, the actors'
imports) to the end of the run. The persistent compilation cache is off for both, so each
side pays its own compiles (Ray's actors compile in their own processes). The Ray side
sends whole batches, the default for a local Ray on CPUs (one actor trains each batch);
``--split`` splits each batch over the actors, the default on GPUs and clusters. The last
line is the ratio of programs judged per hour, ray / in-process.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time
from pathlib import Path

os.environ["LIMEN_JAX_XLA_CACHE"] = "off"  # read by the actors too (they inherit the environment)

import limen_jax as lj  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402


def config(iterations: int, candidates: int, steps: int) -> dict:
    return {"search": {"iterations": iterations - 1, "candidates": candidates, "seeds": 2},
            "cascade": {"short_steps": 0, "full_steps": steps}, "llm": {"mutator": "offline"},
            "keep_policies": "none"}  # fmt: skip


def judged(run: lj.RunResult) -> int:
    """Programs the run trained (checked and scored, failed training included)."""
    return sum(1 for r in run.records if r.stage in ("short", "full") or (r.error or {}).get("stage") == "train")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 iterations x 8 candidates, 16k steps")
    p.add_argument("--iterations", type=int, default=None)
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--steps", type=int, default=None, help="env steps per candidate per seed")
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--split", action="store_true", help="split each batch over the actors (default: whole batches)")
    _record.add_argument(p)
    args = p.parse_args()
    iterations = args.iterations or (2 if args.quick else 20)
    steps = args.steps or (16_384 if args.quick else 150_000)
    cfg = config(iterations, args.candidates, steps)
    print(f"xland_easy: {iterations} iterations x {args.candidates} candidates x 2 seeds x {steps:,} steps, "
          f"offline mutator", flush=True)  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="limen-evaluators-"))

    t = time.perf_counter()
    here = lj.evolve("xland_easy", cfg, run_dir=root / "in_process", verbose=False)
    here_s = time.perf_counter() - t
    n_here = judged(here)
    print(f"in-process: {n_here} programs in {here_s:.1f} s: {3600 * n_here / here_s:,.0f} programs/h", flush=True)

    from limen_jax.search.evaluation.ray_evaluator import RayEvaluator

    t = time.perf_counter()
    evaluator = RayEvaluator(actors=args.actors, cpus_per_actor=1, split=args.split)
    up_s = time.perf_counter() - t
    try:
        there = lj.evolve("xland_easy", cfg, run_dir=root / "ray", verbose=False, evaluator=evaluator)
    finally:
        evaluator.close()
    ray_s = time.perf_counter() - t
    n_ray = judged(there)
    same = [(r.id, r.success_per_seed) for r in here.records] == [(r.id, r.success_per_seed) for r in there.records]
    how = "batches split over the actors" if args.split else "whole batches"
    print(f"ray ({args.actors} actors x 1 CPU, {how}): {n_ray} programs in {ray_s:.1f} s ({up_s:.1f} s starting Ray): "
          f"{3600 * n_ray / ray_s:,.0f} programs/h; same records and scores as in-process: {same}", flush=True)
    print(f"programs judged per hour, ray / in-process: {(n_ray / ray_s) / (n_here / here_s):.2f}")
    _record.write(__file__, {
        "programs per hour, ray / in-process": (n_ray / ray_s) / (n_here / here_s),
        "in-process programs per hour": 3600 * n_here / here_s, "ray programs per hour": 3600 * n_ray / ray_s,
        "in-process wall (s)": here_s, "ray wall (s)": ray_s, "ray start-up (s)": up_s,
        "same records and scores": same, "ray actors": f"{args.actors} ({how})",
        "iterations x candidates x steps": f"{iterations} x {args.candidates} x {steps:,}",
    }, args)  # fmt: skip


if __name__ == "__main__":
    main()
