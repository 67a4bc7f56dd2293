"""Batched training (K candidates x S seeds, one compile) vs the reference's way (one
candidate at a time, one compile per seed), same total env steps, same machine, one run.

    python benchmarks/batched_vs_sequential.py            # GPU: K=8 x 3 seeds, 1M steps each
    python benchmarks/batched_vs_sequential.py --quick    # CPU: K=8 x 3 seeds, 16k steps

The reference (the baseline) trains one (candidate, seed) at a time with a whole-training
program compiled for it: a PureJaxRL-style ``make_train`` closure (benchmarks/vs_purejaxrl.py)
jitted per (candidate, seed), as a script that trains one interface per call does. A second
line trains one at a time with our trainer (K=1 x S=1), which reuses its compiled core
across candidates and compiles only each program's kernel: a fairer sequential loop, but
not the reference's. The persistent compilation cache is off for every side, so each pays
every compile it makes. The last line is the speed-up over the reference.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

os.environ["LIMEN_JAX_XLA_CACHE"] = "off"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import _record  # noqa: E402
import numpy as np  # noqa: E402
from _xland_interfaces import family  # noqa: E402
from vs_purejaxrl import evaluate, make_train  # noqa: E402

import limen_jax as lj  # noqa: E402
from limen_jax.rl import PPOConfig, train_batch  # noqa: E402


def batched(task, cands, seeds: list[int], steps: int, config: PPOConfig) -> dict:
    """All (candidate, seed) slots in one compiled batch: wall and compile seconds, mean success."""
    t = time.perf_counter()
    result = train_batch(task, cands, seeds=seeds, total_steps=steps, config=config)
    return {"wall_s": time.perf_counter() - t, "compile_s": result.compile_s, "success": float(result.success.mean())}


def reference(task, cands, seeds: list[int], steps: int, config: PPOConfig, deadline: float | None = None) -> dict:
    """The reference's way: one (candidate, seed) at a time, a whole-training compile each.
    Stops starting runs once ``time.perf_counter()`` passes ``deadline``; ``runs`` says how
    many of the len(cands) x len(seeds) finished."""
    import jax

    pj = {"NUM_ENVS": config.num_envs, "NUM_STEPS": config.rollout_len, "TOTAL_TIMESTEPS": steps,
          "UPDATE_EPOCHS": config.epochs, "NUM_MINIBATCHES": config.minibatches, "LR": config.lr,
          "GAMMA": config.gamma, "GAE_LAMBDA": config.gae_lambda, "CLIP_EPS": config.clip_eps,
          "ENT_COEF": config.ent_coef, "VF_COEF": config.vf_coef, "MAX_GRAD_NORM": config.max_grad_norm}  # fmt: skip
    t = time.perf_counter()
    compile_s, successes = 0.0, []
    for cand in cands:
        for seed in seeds:  # a fresh closure: one whole-training compile per (candidate, seed)
            if deadline is not None and time.perf_counter() > deadline:
                break
            t0 = time.perf_counter()
            train = jax.jit(make_train(pj, task, cand)).lower(jax.random.key(seed)).compile()
            compile_s += time.perf_counter() - t0
            params, _ = jax.block_until_ready(train(jax.random.key(seed)))
            successes.append(float(jax.jit(lambda p, k, c=cand: evaluate(task, c, p, k))(params, jax.random.key(seed))))
    return {"wall_s": time.perf_counter() - t, "compile_s": compile_s, "runs": len(successes),
            "success": float(np.mean(successes)) if successes else None}  # fmt: skip


def ours_one_at_a_time(task, cands, seeds: list[int], steps: int, config: PPOConfig) -> dict:
    """Our trainer one slot at a time (K=1 x S=1): one core compile, a kernel per program."""
    t = time.perf_counter()
    compile_s, successes = 0.0, []
    for cand in cands:
        for seed in seeds:
            one = train_batch(task, [cand], seeds=[seed], total_steps=steps, config=config)
            compile_s += one.compile_s
            successes.append(float(one.success[0, 0]))
    return {"wall_s": time.perf_counter() - t, "compile_s": compile_s, "runs": len(successes),
            "success": float(np.mean(successes))}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small budget for a CPU")
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=None, help="env steps per candidate per seed")
    p.add_argument("--preset", default=None, choices=["cpu", "paper"])
    _record.add_argument(p)
    args = p.parse_args()
    steps = args.steps or (16_384 if args.quick else 1_000_000)
    preset = args.preset or ("cpu" if args.quick else "paper")
    task = lj.make("xland_easy")
    config = PPOConfig.preset(task.name, preset)
    cands = family(task, args.candidates)
    seeds = list(range(args.seeds))
    print(f"{args.candidates} candidates (obs dims {[c.obs_dim for c in cands]}) x {args.seeds} seeds x "
          f"{steps:,} steps, {preset} preset", flush=True)  # fmt: skip
    ours = batched(task, cands, seeds, steps, config)
    print(f"batched:    {ours['wall_s']:7.1f} s ({ours['compile_s']:.1f} s compiling, 1 compile); "
          f"mean success {ours['success']:.3f}", flush=True)  # fmt: skip
    ref = reference(task, cands, seeds, steps, config)
    print(f"reference (PureJaxRL-style, one at a time): {ref['wall_s']:7.1f} s ({ref['compile_s']:.1f} s compiling, "
          f"{ref['runs']} whole-training compiles); mean success {ref['success']:.3f}", flush=True)  # fmt: skip
    one = ours_one_at_a_time(task, cands, seeds, steps, config)
    print(f"ours one at a time (K=1 x S=1): {one['wall_s']:7.1f} s ({one['compile_s']:.1f} s compiling: one core, "
          f"{one['runs']} kernels); mean success {one['success']:.3f}", flush=True)  # fmt: skip
    print(f"speedup batched vs ours one at a time: {one['wall_s'] / ours['wall_s']:.2f}x")
    speedup = ref["wall_s"] / ours["wall_s"]
    print(f"speedup batched vs the reference (one at a time, a compile per seed): {speedup:.2f}x")
    _record.write(__file__, {
        "speed-up batched vs the reference (x)": speedup,
        "speed-up batched vs ours one at a time (x)": one["wall_s"] / ours["wall_s"],
        "batched wall (s)": ours["wall_s"], "batched compile (s)": ours["compile_s"],
        "reference wall (s)": ref["wall_s"], "reference compile (s)": ref["compile_s"],
        "ours one at a time wall (s)": one["wall_s"], "ours one at a time compile (s)": one["compile_s"],
        "batched mean success": ours["success"], "reference mean success": ref["success"],
        "ours one at a time mean success": one["success"],
        "candidates x seeds x steps": f"{args.candidates} x {args.seeds} x {steps:,}",
    }, args)


if __name__ == "__main__":
    main()
