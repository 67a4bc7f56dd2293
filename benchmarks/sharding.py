"""K candidates x S seeds on one device vs sharded over N local devices (on a CPU:
``--xla_force_host_platform_device_count=N``), xland_easy, the CPU preset.

    python benchmarks/sharding.py --quick      # K=8 x S=2, 2 forced CPU devices, 8 updates
    python benchmarks/sharding.py --candidates 8 --seeds 1 --devices 2

Each side runs in a fresh process (the device count is fixed when JAX starts): the
trainer is built and compiled, one update warms it, then ``--updates`` updates are timed.
The last line is the speed-up of the update (one device / N devices).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

CHILD = """
import json, sys, time
sys.path.insert(0, {here!r})
import jax
from _xland_interfaces import family
import limen_jax as lj
from limen_jax.rl import BatchTrainer, PPOConfig
task = lj.make("xland_easy")
config = PPOConfig.preset(task.name, "cpu")
tr = BatchTrainer(task, family(task, {k}), config, {s}, shard={shard})
state = tr.init(list(range({s})), 10**6)
state, _ = tr.run(state, 1)
jax.block_until_ready(state)
t = time.perf_counter()
state, _ = tr.run(state, {u})
jax.block_until_ready(state)
print(json.dumps({{"devices": len(jax.devices()), "layout": tr.layout, "update_s": (time.perf_counter() - t) / {u}}}))
"""


def run(k: int, s: int, u: int, devices: int) -> dict:
    here = str(pathlib.Path(__file__).resolve().parent)
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    code = CHILD.format(here=here, k=k, s=s, u=u, shard=devices > 1)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--updates", type=int, default=None)
    args = p.parse_args()
    u = args.updates or (8 if args.quick else 32)
    one = run(args.candidates, args.seeds, u, 1)
    many = run(args.candidates, args.seeds, u, args.devices)
    print(f"K={args.candidates} x S={args.seeds}, xland_easy cpu preset, {u} updates timed")
    print(f"1 device: {one['update_s'] * 1e3:.0f} ms per update")
    ms = many['update_s'] * 1e3
    print(f"{many['devices']} devices (layout cand x seed {many['layout']}): {ms:.0f} ms per update")
    print(f"speed-up {args.devices} devices / 1: {one['update_s'] / many['update_s']:.2f}x")


if __name__ == "__main__":
    main()
