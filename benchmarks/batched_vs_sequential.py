"""Batched training (K candidates x S seeds, one compile) vs the reference's way (one
candidate at a time, one compile per seed), same total env steps, same machine, one run.

    python benchmarks/batched_vs_sequential.py            # GPU: K=8 x 3 seeds, 1M steps each
    python benchmarks/batched_vs_sequential.py --quick    # 2-core CPU: K=8 x 3 seeds, 16k steps

The persistent compilation cache is off for both sides (the reference has none), so
both pay every compile they make. The last line is the speed-up (sequential / batched).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

os.environ["LIMEN_JAX_XLA_CACHE"] = "off"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _xland_interfaces import family  # noqa: E402

import limen_jax as lj  # noqa: E402
from limen_jax.rl import PPOConfig, train_batch  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small budget for a CPU")
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=None, help="env steps per candidate per seed")
    p.add_argument("--preset", default=None, choices=["cpu", "paper"])
    args = p.parse_args()
    steps = args.steps or (16_384 if args.quick else 1_000_000)
    preset = args.preset or ("cpu" if args.quick else "paper")
    task = lj.make("xland_easy")
    config = PPOConfig.preset(task.name, preset)
    cands = family(task, args.candidates)
    seeds = list(range(args.seeds))
    print(f"{args.candidates} candidates (obs dims {[c.obs_dim for c in cands]}) x {args.seeds} seeds x "
          f"{steps:,} steps, {preset} preset", flush=True)  # fmt: skip

    t = time.perf_counter()
    batched = train_batch(task, cands, seeds=seeds, total_steps=steps, config=config)
    batched_wall = time.perf_counter() - t
    print(f"batched:    {batched_wall:7.1f} s ({batched.compile_s:.1f} s compiling, 1 compile); "
          f"mean success {batched.success.mean():.3f}", flush=True)  # fmt: skip

    t = time.perf_counter()
    compile_s, successes = 0.0, []
    for cand in cands:
        for seed in seeds:
            one = train_batch(task, [cand], seeds=[seed], total_steps=steps, config=config)
            compile_s += one.compile_s
            successes.append(float(one.success[0, 0]))
    sequential_wall = time.perf_counter() - t
    print(f"sequential: {sequential_wall:7.1f} s ({compile_s:.1f} s compiling, {len(successes)} compiles); "
          f"mean success {np.mean(successes):.3f}", flush=True)  # fmt: skip
    print(f"speedup batched vs sequential: {sequential_wall / batched_wall:.2f}x")


if __name__ == "__main__":
    main()
