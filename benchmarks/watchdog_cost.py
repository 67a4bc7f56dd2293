"""What the batch watchdog's deadline check costs in training: ``BatchTrainer.run`` with
and without a deadline (which synchronises on each update's result), interleaved.

    python benchmarks/watchdog_cost.py                       # xland_easy, CPU preset, K=2, S=1
    python benchmarks/watchdog_cost.py --updates 20 --repeats 5

Both sides reuse one compiled trainer; the first run (compiles) is not timed. The ratio
of the medians is the figure; on a shared machine compare it with the spread.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import jax

import limen_jax as lj
from limen_jax.interface import default_interface
from limen_jax.rl import BatchTrainer, PPOConfig

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="xland_easy")
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    _record.add_argument(parser)
    args = parser.parse_args()
    task = lj.make(args.task)
    config = PPOConfig.preset(args.task, "cpu")
    trainer = BatchTrainer(task, [default_interface(task)] * args.k, config, 1)
    state = trainer.init([0])
    state, _ = trainer.run(state, 1)  # compile
    times: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.repeats):
        for side in ("without", "with"):
            deadline = time.monotonic() + 1e9 if side == "with" else None
            t0 = time.perf_counter()
            state, curves = trainer.run(state, args.updates, deadline)
            jax.block_until_ready(state)
            times[side].append(time.perf_counter() - t0)
    a, b = statistics.median(times["without"]), statistics.median(times["with"])
    steps = args.updates * config.steps_per_update * args.k
    print(f"{args.task} K={args.k} S=1 {args.updates} updates x {args.repeats} repeats "
          f"({config.num_envs} envs x {config.rollout_len} steps per update)")  # fmt: skip
    for side, ts in times.items():
        print(f"  {side:7s} deadline: median {statistics.median(ts):.3f} s ({steps / statistics.median(ts):,.0f} "
              f"steps/s), all {[round(t, 3) for t in ts]}")  # fmt: skip
    print(f"  with / without: {b / a:.3f}")
    _record.write(__file__, {
        "time ratio with / without deadline": b / a, "median without (s)": a, "median with (s)": b,
        "spread without (s)": max(times["without"]) - min(times["without"]),
        "spread with (s)": max(times["with"]) - min(times["with"]),
        "task, K x updates x repeats": f"{args.task}, {args.k} x {args.updates} x {args.repeats}",
    }, args)


if __name__ == "__main__":
    main()
