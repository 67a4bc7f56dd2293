"""What a new batch of programs costs to compile, against what it costs to train, and
against the previous fused path (every program inlined in one training program).

    python benchmarks/compile_cost.py --quick    # CPU: 8 xland_easy programs, 150k steps x 2 seeds
    python benchmarks/compile_cost.py            # GPU: 8 programs, 1M steps x 3 seeds, paper preset

In one run, on one machine:

1. the previous fused path (every program inlined in one training program, plus init
   and evaluation programs), taken from the pinned commit ``--baseline`` (git archive
   into a temporary folder, run in a subprocess with no persistent cache);
2. ours: a warm-up batch of other programs compiles the program-independent part once
   (reported as "first batch"); then a fresh batch of 8 programs never seen before
   (random reward constants, so no cache holds their kernel) compiles its kernel and
   trains.

Both train the same fresh programs with the same preset, steps and seeds. Prints compile
seconds, training seconds and training env-steps/s for each; the last line is
``compile share: X`` = ours' compile / (compile + train) for the fresh batch.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _record  # noqa: E402

BASELINE = "ab1add6"  # the last commit with the fused path (every program inlined)

_FUSED = """
import json, sys, time
sys.path.insert(0, {here!r})
from _xland_interfaces import family_with
import limen_jax as lj
from limen_jax.rl import PPOConfig, train_batch
task = lj.make("xland_easy")
cfg = PPOConfig.preset(task.name, {preset!r})
cands = family_with(task, {k}, {salt!r})
t = time.perf_counter()
r = train_batch(task, cands, seeds={seeds}, total_steps={steps}, config=cfg)
print(json.dumps({{"wall": time.perf_counter() - t, "compile": r.compile_s, "success": float(r.success.mean()),
                  "steps": r.steps}}))
"""


def run_fused(args: argparse.Namespace, preset: str, steps: int, salt: float) -> dict[str, float]:
    """The pinned commit's train_batch on the same fresh programs, in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        # the engine and the task suite of that commit (the suite imports the engine's
        # internals, so today's envs would not run on the old engine)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "limen_jax", "envs"],
                                 check=True, capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        os.rename(os.path.join(tmp, "envs"), os.path.join(tmp, "limen_envs"))
        code = _FUSED.format(here=str(HERE), preset=preset, k=args.candidates, salt=salt, seeds=args.seeds,
                             steps=steps)  # fmt: skip
        env = {**os.environ, "PYTHONPATH": tmp, "LIMEN_JAX_XLA_CACHE": "off"}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CPU budget")
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="env steps per candidate per seed")
    p.add_argument("--preset", default=None, choices=["cpu", "paper"])
    p.add_argument("--baseline", default=BASELINE, help="commit of the fused path")
    p.add_argument("--no-baseline", action="store_true")
    _record.add_argument(p)
    args = p.parse_args()
    args.seeds = args.seeds or (2 if args.quick else 3)
    steps = args.steps or (150_000 if args.quick else 1_000_000)
    preset = args.preset or ("cpu" if args.quick else "paper")

    cache = tempfile.mkdtemp(prefix="limen_xla_")  # an empty persistent cache for ours
    os.environ["LIMEN_JAX_XLA_CACHE"] = cache
    sys.path.insert(0, str(HERE))
    import jax
    import numpy as np
    from _xland_interfaces import family_with

    import limen_jax as lj
    from limen_jax.rl import BatchTrainer, PPOConfig

    task = lj.make("xland_easy")
    config = PPOConfig.preset(task.name, preset)
    salt = float(np.random.default_rng(int(time.time())).uniform(0.001, 0.002))
    print(f"{args.candidates} fresh xland_easy programs x {args.seeds} seeds x {steps:,} steps, {preset} preset; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    seeds = list(range(args.seeds))
    updates = config.num_updates(steps)
    env_steps = args.candidates * args.seeds * updates * config.steps_per_update

    if not args.no_baseline:
        fused = run_fused(args, preset, steps, salt)
        f_train = fused["wall"] - fused["compile"]
        print(f"fused ({args.baseline}): compile {fused['compile']:.1f} s, train+eval {f_train:.1f} s "
              f"({env_steps / f_train:,.0f} env-steps/s incl. eval), success {fused['success']:.3f}",
              flush=True)  # fmt: skip

    # warm-up: other programs, same shapes: compiles the program-independent part
    t = time.perf_counter()
    warm = BatchTrainer(task, family_with(task, args.candidates, -salt), config, args.seeds)
    state = warm.init(seeds, updates)
    state, _ = warm.run(state, 1)
    warm.evaluate(state, jax.random.key(0))
    print(f"first batch (program-independent part cold): compile {warm.compile_s:.1f} s "
          f"(kernel {warm.kernel_compile_s:.1f} s), {time.perf_counter() - t:.1f} s wall", flush=True)  # fmt: skip
    parts = ", ".join(f"{k} {v:.1f}" for k, v in warm.core.compile_times.items())
    print(f"  program-independent functions, compile s: {parts}", flush=True)

    t0 = time.perf_counter()
    cands = family_with(task, args.candidates, salt)
    tr = BatchTrainer(task, cands, config, args.seeds)
    state = tr.init(seeds, updates)
    state, _ = tr.run(state, 1)  # compiles the kernel; trains one update
    jax.block_until_ready(state)
    state, _ = tr.run(state, updates - 1)
    jax.block_until_ready(state)
    t2 = time.perf_counter()
    success = tr.evaluate(state, jax.random.key(0))
    t3 = time.perf_counter()
    compile_s = tr.compile_s
    train_s = (t2 - t0) - compile_s
    print(f"ours, fresh batch: compile {compile_s:.1f} s (kernel {tr.kernel_compile_s:.1f} s), train {train_s:.1f} s "
          f"({env_steps / train_s:,.0f} env-steps/s), eval {t3 - t2:.1f} s, success {float(success.mean()):.3f}",
          flush=True)  # fmt: skip
    if not args.no_baseline:
        ours_total = t3 - t0
        ours_te = ours_total - compile_s  # training + evaluation, as the fused figure counts it
        print(f"ratios (fused / ours): compile {fused['compile'] / compile_s:.2f}x, "
              f"train+eval time {f_train / ours_te:.2f} (>= 0.9 wanted), wall {fused['wall'] / ours_total:.2f}x",
              flush=True)  # fmt: skip
    print(f"compile share: {compile_s / (compile_s + train_s):.3f}")
    figures = {"compile share": compile_s / (compile_s + train_s), "fresh batch compile (s)": compile_s,
               "fresh batch kernel compile (s)": tr.kernel_compile_s, "fresh batch train (s)": train_s,
               "fresh batch env-steps/s": env_steps / train_s, "first batch compile (s)": warm.compile_s}
    if not args.no_baseline:
        figures.update({"fused compile (s)": fused["compile"], "fused train+eval (s)": f_train,
                        "compile ratio fused / ours (x)": fused["compile"] / compile_s,
                        "train+eval ratio fused / ours": f_train / ours_te})
    figures["programs x seeds x steps"] = f"{args.candidates} x {args.seeds} x {steps:,}"
    _record.write(__file__, figures, args)


if __name__ == "__main__":
    main()
