"""The README's first command from a cold start: wall time of ``python -m limen_jax.evolve
--task xland_hard --preset quick`` with an empty compilation cache, and the best program's
success against the run's baseline (the task's default interface with the sparse reward).

    python benchmarks/quick_start.py

The command runs in a subprocess exactly as a new user types it, with
``LIMEN_JAX_XLA_CACHE`` pointing at a fresh temporary folder (so every compile is paid) and
its run directory in a temporary folder. The wall time counts from the process's start to
its exit, imports and compiles included; success and baseline are read from the run's
``best:`` and ``baseline:`` lines.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

COMMAND = ["-m", "limen_jax.evolve", "--task", "xland_hard", "--preset", "quick"]


def parse(out: str) -> dict[str, float | None]:
    """The best's and the baseline's success from the run's summary lines."""
    best = re.search(r"^best: \S+ success ([0-9.]+)", out, flags=re.M)
    base = re.search(r"^baseline: success ([0-9.]+)", out, flags=re.M)
    return {"best success": float(best.group(1)) if best else None,
            "baseline success": float(base.group(1)) if base else None}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _record.add_argument(p)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="limen-quick-start-") as tmp:
        cache = pathlib.Path(tmp) / "xla"
        cache.mkdir()
        env = {**os.environ, "LIMEN_JAX_XLA_CACHE": str(cache)}
        cmd = [sys.executable, *COMMAND, "--run-dir", str(pathlib.Path(tmp) / "run")]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    print(proc.stdout[-3000:], end="")
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    found = parse(proc.stdout)
    print(f"quick start: {wall:.0f} s wall, best success {found['best success']}, "
          f"baseline success {found['baseline success']}")  # fmt: skip
    _record.write(__file__, {"wall (s)": wall, **found, "command": "python " + " ".join(COMMAND)}, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
