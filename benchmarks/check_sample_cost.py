"""What building a task's check sample costs, part by part (compile included), and whether
the bundled reference interface passes the checker on it: absolute seconds, with no baseline.

    LIMEN_JAX_XLA_CACHE=$(mktemp -d) python benchmarks/check_sample_cost.py --task go1_push

(a fresh compilation cache, so compile times are not read from disk). Parts: the short
random sample, the long random sample, the scripted sample (program/scripted.py).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax.numpy as jnp
from limen_envs import interfaces

import limen_jax as lj
from limen_jax.program import Limits, check_sample, check_source
from limen_jax.program.checks import _LONG_HORIZON_CAP, sample_for, scripted_for

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="go1_push")
    parser.add_argument("--no-reference", action="store_true", help="skip checking the reference interface")
    _record.add_argument(parser)
    args = parser.parse_args()
    task, limits = lj.make(args.task), Limits()
    horizon = min(task.episode_length, _LONG_HORIZON_CAP)
    t0 = time.perf_counter()
    sample_for(task, limits.sample_size, limits.sample_seed)
    t1 = time.perf_counter()
    if horizon > 64:
        sample_for(task, limits.long_sample_size, limits.sample_seed + 1, horizon)
    t2 = time.perf_counter()
    scripted = scripted_for(task, limits.scripted_sample_size, limits.sample_seed + 2, horizon)
    t3 = time.perf_counter()
    print(f"{args.task}: short random {t1 - t0:.1f} s, long random {t2 - t1:.1f} s, "
          f"scripted ({limits.scripted_sample_size} envs x {horizon} steps) {t3 - t2:.1f} s", flush=True)  # fmt: skip
    print("scripted actions (first 4 envs):", jnp.round(scripted.action[:4], 2).tolist())
    figures = {"check sample build, all parts (s)": t3 - t0, "short random sample (s)": t1 - t0,
               "long random sample (s)": t2 - t1, "scripted sample (s)": t3 - t2}
    if not args.no_reference:
        report = check_source(interfaces.path(args.task).read_text(), task, sample=check_sample(task, limits))
        print(f"reference interface on the full check sample: ok={report.ok} {report.error or ''} "
              f"({report.seconds:.1f} s)")  # fmt: skip
        figures.update({"reference interface passes": report.ok, "reference interface check (s)": report.seconds})
    figures["task"] = args.task
    _record.write(__file__, figures, args)


if __name__ == "__main__":
    main()
