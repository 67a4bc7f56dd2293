"""Paper-scale training on the MuJoCo tasks: the reference interface of go1_push or
panda_track trained with the paper's PPO settings and full budget (DESIGN.md §4),
several seeds in one compiled call; prints success, wall time and the training
throughput as a fraction of the raw simulator's (random actions, as many envs).

    python benchmarks/mujoco_tasks.py --task go1_push              # GPU: 25M steps x 3 seeds
    python benchmarks/mujoco_tasks.py --task panda_track           # GPU: 15M steps x 3 seeds
    python benchmarks/mujoco_tasks.py --task go1_push --quick      # CPU, reduced budget

--quick uses the CPU preset (64 envs) and 32 updates: success is meaningless there;
the throughput ratio is the figure to read. The last line is that ratio.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from limen_envs import interfaces  # noqa: E402
from throughput import raw_throughput  # noqa: E402

import limen_jax as lj  # noqa: E402
from limen_jax.config import EvolveConfig  # noqa: E402
from limen_jax.program import compile_interface  # noqa: E402
from limen_jax.rl import BatchTrainer, PPOConfig  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402


def measure(task, config: PPOConfig, seeds: int, steps: int, raw_updates: int = 4) -> dict:
    """The raw simulator's steps/s (random actions, envs x seeds at once, ``raw_updates``
    rollouts' worth of steps) and the reference interface trained for ``steps`` per seed:
    training steps/s (compiles excluded), compile / run / evaluation seconds, success."""
    iface = compile_interface(interfaces.path(task.name).read_text(), task, name=task.name)
    # the raw side steps as many environments at once as training does (envs x seeds)
    envs = config.num_envs * seeds
    raw = raw_throughput(task, envs, config.rollout_len * raw_updates, repeats=2)
    start = time.perf_counter()
    trainer = BatchTrainer(task, [iface], config, seeds)
    updates = config.num_updates(steps)
    state = trainer.init(list(range(seeds)), updates)
    before_run, compiled = time.perf_counter(), trainer.compile_s
    state, curves = trainer.run(state, updates)  # returns host arrays: the run has finished
    run_s = time.perf_counter() - before_run - (trainer.compile_s - compiled)
    train_s = time.perf_counter() - start
    success, returns = trainer.evaluate_full(state, jax.random.key(0))
    wall = time.perf_counter() - start
    rate = updates * config.steps_per_update * seeds / run_s
    return {"raw_envs": envs, "raw_steps_per_s": raw, "train_steps_per_s": rate, "fraction_of_raw": rate / raw,
            "steps": updates * config.steps_per_update, "seeds": seeds, "compile_s": trainer.compile_s,
            "run_s": run_s, "eval_s": wall - train_s, "wall_s": wall,
            "success_per_seed": [float(x) for x in np.asarray(success)[0]], "final_return": float(np.mean(returns))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=["go1_push", "panda_track"], default="go1_push")
    p.add_argument("--quick", action="store_true", help="CPU preset and a reduced budget")
    p.add_argument("--seeds", type=int, default=None, help="default: 3 (paper), 2 with --quick")
    p.add_argument("--steps", type=int, default=None, help="env steps per seed (default: the paper's full run)")
    _record.add_argument(p)
    args = p.parse_args()
    task = lj.make(args.task)
    kind = "cpu" if args.quick else "paper"
    config = PPOConfig.preset(task.name, kind)
    seeds = args.seeds or (2 if args.quick else 3)
    paper_steps = EvolveConfig.preset_for(task.name, "paper").cascade.full_steps
    steps = args.steps or (32 * config.steps_per_update if args.quick else paper_steps)
    print(f"{task.name}: {jax.devices()[0].platform}, PPO preset {kind!r} ({config.num_envs} envs x "
          f"{config.rollout_len} steps per update), {steps:,} steps x {seeds} seeds", flush=True)  # fmt: skip
    m = measure(task, config, seeds, steps)
    print(f"raw simulator, random actions, {m['raw_envs']} envs: {m['raw_steps_per_s']:,.0f} steps/s", flush=True)
    per_seed = ", ".join(f"{s:.2f}" for s in m["success_per_seed"])
    print(f"success {float(np.mean(m['success_per_seed'])):.3f} (per seed: {per_seed}), "
          f"final return {m['final_return']:.2f}")  # fmt: skip
    print(f"wall {m['wall_s']:.1f} s, of which compiling {m['compile_s']:.1f} s; training run {m['run_s']:.1f} s; "
          f"evaluation {m['eval_s']:.1f} s (its compile included)", flush=True)  # fmt: skip
    rate = m["train_steps_per_s"]
    print(f"training {rate:,.0f} steps/s over {seeds} seeds ({rate / seeds:,.0f} per seed)")
    print(f"training throughput / raw simulator throughput: {m['fraction_of_raw']:.2f}")
    _record.write(__file__, {
        "training throughput / raw simulator throughput": m["fraction_of_raw"],
        "training steps/s": rate, "raw simulator steps/s": m["raw_steps_per_s"],
        "success": float(np.mean(m["success_per_seed"])), "wall (s)": m["wall_s"], "compile (s)": m["compile_s"],
        "task, steps x seeds": f"{task.name}, {steps:,} x {seeds}",
    }, args, variant=None if task.name == "go1_push" else task.name)  # fmt: skip


if __name__ == "__main__":
    main()
