"""K candidates x S seeds on one device vs sharded over N local devices (on a CPU:
``--xla_force_host_platform_device_count=N``), xland_easy, the CPU preset (``--preset``);
and how much of the machine's cores one device already uses.

    python benchmarks/sharding.py --quick      # K=8 x S=2, 2 forced CPU devices, 8 updates
    python benchmarks/sharding.py --candidates 8 --seeds 1 --devices 2
    CUDA_VISIBLE_DEVICES=0,1 python benchmarks/sharding.py --preset paper   # 1 GPU vs 2

On GPUs the one-device sides train on one GPU (``shard=False``) and the N-device side on
every visible GPU; the core lines then describe the host's threads only.

Each side runs in a fresh process (the device count is fixed when JAX starts): the
trainer is built and compiled, one update warms it, then ``--updates`` updates are timed.
Three runs, one after another:

1. one device pinned to one core (``os.sched_setaffinity`` before JAX starts: XLA sizes
   its thread pools from the affinity, and every thread of the process runs on that
   core): the work of one core;
2. one device on every core this process may use: what XLA's own threads make of them;
3. N devices on those cores (the slots sharded).

Each prints its CPU time per update (the work done, which other load on the cores
changes much less than the wall time) and CPU time / wall time over the timed updates
(how many cores its threads kept busy). Then: time(1) / time(2), how many cores' worth
one device already uses (1.0: it gains nothing from the other cores; C, the number of
cores: it uses them all); the most a split over the same C cores could give, estimated
as C x time(2) / time(1) (each core doing its share of the slots at the pinned run's
pace: an estimate, not a measurement); and, last, time(2) / time(3), the sharding's
speed-up. The load average is printed before and after: other work on the cores slows
every run, and on a loaded machine the wall-time ratios are the scheduler's, not the
sharding's.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

CHILD = """
import os
if {cores!r} is not None:
    os.sched_setaffinity(0, {cores!r})  # before JAX: XLA sizes its thread pools from the affinity
import json, sys, time
sys.path.insert(0, {here!r})
import jax
from _xland_interfaces import family
import limen_jax as lj
from limen_jax.rl import BatchTrainer, PPOConfig
task = lj.make("xland_easy")
config = PPOConfig.preset(task.name, {preset!r})
tr = BatchTrainer(task, family(task, {k}), config, {s}, shard={shard})
state = tr.init(list(range({s})), 10**6)
state, _ = tr.run(state, 1)
jax.block_until_ready(state)
t, cpu = time.perf_counter(), time.process_time()
state, _ = tr.run(state, {u})
jax.block_until_ready(state)
wall, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({{"devices": len(jax.devices()), "cores": len(os.sched_getaffinity(0)), "layout": tr.layout,
                  "update_s": wall / {u}, "busy": cpu / wall}}))
"""


def run(k: int, s: int, u: int, devices: int, cores: list[int] | None = None, preset: str = "cpu") -> dict:
    """One side in a fresh process: ``devices`` devices, on ``cores`` (None: every core)."""
    here = str(pathlib.Path(__file__).resolve().parent)
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    code = CHILD.format(here=here, k=k, s=s, u=u, shard=devices > 1, cores=None if cores is None else set(cores),
                        preset=preset)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--updates", type=int, default=None)
    p.add_argument("--preset", choices=("cpu", "paper"), default="cpu", help="the PPO preset (paper: for GPUs)")
    _record.add_argument(p)
    args = p.parse_args()
    u = args.updates or (8 if args.quick else 32)
    k, s = args.candidates, args.seeds
    cores = sorted(os.sched_getaffinity(0))
    print(f"K={k} x S={s}, xland_easy {args.preset} preset, {u} updates timed; {len(cores)} cores; "
          f"load average (1, 5, 15 min) before: {load()}", flush=True)
    pinned = run(k, s, u, 1, cores[:1], args.preset)
    one = run(k, s, u, 1, None, args.preset)
    many = run(k, s, u, args.devices, None, args.preset)
    print(f"load average after: {load()}")
    p1, a1, m = pinned["update_s"], one["update_s"], many["update_s"]
    def busy(r: dict) -> str:
        return f"{r['update_s'] * r['busy'] * 1e3:.0f} CPU-ms, {r['busy']:.2f} cores busy (CPU time / wall time)"

    print(f"1 device, 1 core: {p1 * 1e3:.0f} ms per update; {busy(pinned)}")
    print(f"1 device, {one['cores']} cores: {a1 * 1e3:.0f} ms per update; {busy(one)}")
    print(f"one device already uses {p1 / a1:.2f} of {one['cores']} cores' worth (1 core / {one['cores']} cores)")
    print(f"{many['devices']} devices, {many['cores']} cores (layout cand x seed {many['layout']}): "
          f"{m * 1e3:.0f} ms per update; {busy(many)}")
    print(f"most a split over these {one['cores']} cores could give (estimate): {one['cores'] * a1 / p1:.2f}x")
    print(f"speed-up {args.devices} devices / 1: {a1 / m:.2f}x")
    _record.write(__file__, {
        f"speed-up {args.devices} devices / 1 (x)": a1 / m, "1 device, 1 core, per update (ms)": p1 * 1e3,
        f"1 device, {one['cores']} cores, per update (ms)": a1 * 1e3,
        f"{many['devices']} devices, per update (ms)": m * 1e3,
        "cores' worth one device uses": p1 / a1, "most a split could give, estimate (x)": one["cores"] * a1 / p1,
        "K x S x updates": f"{k} x {s} x {u}",
    }, args)  # fmt: skip


if __name__ == "__main__":
    main()
