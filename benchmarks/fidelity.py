"""Our paper preset beside the paper's table: trains interface programs at ``--preset
paper`` with each task's full paper budget and prints success per seed next to the
paper's figure (docs/howto/reproduce-the-paper.md).

    python benchmarks/fidelity.py --quick                          # CPU smoke: xland_easy, 1 seed, 1 update
    python benchmarks/fidelity.py                                  # GPU: xland easy/medium/hard, 3 seeds
    python benchmarks/fidelity.py --programs LIMEN/examples/evolved_interfaces
    python benchmarks/fidelity.py --programs LIMEN/examples/evolved_interfaces \\
        --reference LIMEN --reference-python LIMEN_VENV/bin/python  # also the reference's trainer

Programs: our bundled interfaces (envs/interfaces/<task>.py), or with ``--programs DIR``
the reference's published ones (``easy_pickup.py``, ``medium_place_near.py``,
``hard_rule_chain.py``, ``go1_push_recovery.py``, ``panda_pick_and_track.py``), which
stay outside this repository. ``--reference PATH`` (a checkout of Lossfunk/LIMEN, never
shipped) also trains each program with the reference's own trainer and configs, seeds
42, 43, ... as it numbers them, in a subprocess of ``--reference-python`` (an
environment with its requirements) run from PATH, and prints ours / reference. Reduced
budgets (``--quick``, ``--steps``) are printed as such: only full budgets compare with
the table. The last line is JSON: one record per task.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

# the paper's table (joint evolution, 10-seed retrain of the best program)
PAPER = {"xland_easy": 0.99, "xland_medium": 0.99, "xland_hard": 0.85, "panda_track": 0.45, "go1_push": 0.48}
# task -> (the reference's published program, its config under configs/)
REFERENCE_NAMES = {
    "xland_easy": "easy_pickup", "xland_medium": "medium_place_near", "xland_hard": "hard_rule_chain",
    "go1_push": "go1_push_recovery", "panda_track": "panda_pick_and_track",
}  # fmt: skip

# Runs in the reference's environment, from its checkout (its configs name files relative
# to it): the program trained once per seed by limen's own adapter.run_training (the
# path its evaluator takes, limen/evaluator.py); one JSON line per seed, flushed, so that
# a timeout keeps the seeds already trained.
REFERENCE_DRIVER = """
import dataclasses, json, sys
from limen.adapters import get_adapter
from limen.config import Config
from limen.interface import MDPInterface
config_path, program, seeds, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
config = Config.from_yaml(config_path)
tc = config.training
steps = int(steps) if steps != "full" else tc.total_timesteps_full
adapter = get_adapter(config.environment.adapter_type, config)
interface = MDPInterface.from_file(program)
obs_dim = interface.validate(adapter.get_dummy_state(), config.interface.max_obs_dim, adapter.get_dummy_action())
for i in range(seeds):
    cfg = dataclasses.replace(config, training=dataclasses.replace(tc, seed=tc.seed + i))
    m = adapter.run_training(cfg, interface, obs_dim, total_timesteps=steps)
    print(json.dumps({"seed": tc.seed + i, "steps": steps, "success": float(m["success_rate"]),
                      "train_s": float(m["training_time"])}), flush=True)
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default=None, help=f"comma-separated, of {', '.join(PAPER)} (default: the xland three)")
    p.add_argument("--seeds", type=int, default=None, help="default 3 (the paper's), 1 with --quick")
    p.add_argument("--steps", type=int, default=None, help="env steps per seed (default: the task's paper budget)")
    p.add_argument("--quick", action="store_true", help="xland_easy, 1 seed, one PPO update (a CPU smoke run)")
    _record.add_argument(p)
    p.add_argument("--programs", type=pathlib.Path, default=None, metavar="DIR",
                   help="the reference's examples/evolved_interfaces (default: our bundled interfaces)")  # fmt: skip
    p.add_argument("--reference", type=pathlib.Path, default=None, metavar="PATH",
                   help="a Lossfunk/LIMEN checkout: also train with its trainer")  # fmt: skip
    p.add_argument("--reference-python", default=sys.executable, help="the python of the reference's environment")
    p.add_argument("--reference-timeout", type=float, default=10_800, metavar="S",
                   help="stop the reference's trainer after S seconds a task, keeping the seeds it finished "
                        "(default 10800)")  # fmt: skip
    return p


def _check(args: argparse.Namespace) -> list[str]:
    """The tasks to run; every bad value exits 2 with one line, before anything trains."""

    def bad(msg: str) -> SystemExit:
        print(f"fidelity: {msg}", file=sys.stderr)
        return SystemExit(2)

    tasks = ["xland_easy"] if args.quick else ["xland_easy", "xland_medium", "xland_hard"]
    if args.tasks:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in PAPER]
    if unknown or not tasks:
        raise bad(f"--tasks: unknown {unknown or tasks}; expected some of {', '.join(PAPER)}")
    if args.seeds is not None and args.seeds < 1:
        raise bad(f"--seeds must be at least 1, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        raise bad(f"--steps must be at least 1, got {args.steps}")
    if not args.reference_timeout > 0:
        raise bad(f"--reference-timeout must be a positive number of seconds, got {args.reference_timeout:g}")
    if args.programs is not None:
        names = [f"{REFERENCE_NAMES[t]}.py" for t in tasks]
        missing = [n for n in names if not (args.programs / n).is_file()]
        if missing:
            raise bad(f"--programs {args.programs}: missing {', '.join(missing)}")
    if args.reference is not None:
        if args.programs is None:
            raise bad("--reference needs --programs (the same programs on both sides)")
        missing = [f"configs/{REFERENCE_NAMES[t]}.yaml" for t in tasks
                   if not (args.reference / "configs" / f"{REFERENCE_NAMES[t]}.yaml").is_file()]  # fmt: skip
        if not (args.reference / "limen" / "train.py").is_file() or missing:
            why = ", ".join(missing) or "no limen/train.py"
            raise bad(f"--reference {args.reference}: not a Lossfunk/LIMEN checkout ({why})")
    return tasks


def program_path(task: str, programs: pathlib.Path | None) -> pathlib.Path:
    """The program trained for ``task``: the reference's published one under ``programs``,
    or our bundled interface."""
    if programs is not None:
        return programs / f"{REFERENCE_NAMES[task]}.py"
    from limen_envs import interfaces

    return interfaces.path(task)


def run_ours(
    task_name: str, program: pathlib.Path, seeds: int, steps: int, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Our paper preset (with PPOConfig ``overrides``, if any): success per seed (seeds
    0..seeds-1), the steps trained, wall s."""
    import numpy as np

    import limen_jax as lj
    from limen_jax.program import compile_interface
    from limen_jax.rl import PPOConfig, train_batch

    task = lj.make(task_name)
    config = PPOConfig.preset(task.name, "paper").replace(**(overrides or {}))
    iface = compile_interface(program.read_text(encoding="utf-8"), task, name=program.stem)
    start = time.perf_counter()
    result = train_batch(task, [iface], seeds=list(range(seeds)), total_steps=steps, config=config)
    success = [round(float(x), 4) for x in np.asarray(result.success)[0]]
    return {"success": success, "steps": int(result.steps), "wall_s": round(time.perf_counter() - start, 1),
            "compile_s": round(result.compile_s, 1)}  # fmt: skip


def run_reference(
    task_name: str,
    program: pathlib.Path,
    seeds: int,
    steps: int | None,
    root: pathlib.Path,
    python: str,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """The reference's trainer on the same program (see REFERENCE_DRIVER): success per
    seed (42, 43, ...), the steps it was asked for, wall s. Past ``timeout_s`` it is
    killed and the seeds it finished are kept, marked ``timed_out``; a crash, or a timeout
    before the first seed, raises RuntimeError naming the task."""
    config = f"configs/{REFERENCE_NAMES[task_name]}.yaml"
    argv = [python, "-c", REFERENCE_DRIVER, config, str(program.resolve()), str(seeds), str(steps or "full")]
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out, tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        proc = subprocess.Popen(argv, cwd=root, stdout=out, stderr=err, text=True)
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            returncode = None
        out.seek(0)
        err.seek(0)
        runs = [json.loads(line) for line in out.read().splitlines() if line.startswith("{")]
        tail = (err.read().strip().splitlines() or ["(no output)"])[-1]
    wall = round(time.perf_counter() - start, 1)
    if returncode is None and not runs:
        raise RuntimeError(f"the reference's trainer finished no seed of {task_name} in {timeout_s:g} s")
    if returncode not in (None, 0):
        raise RuntimeError(f"the reference's trainer failed on {task_name}: {tail}")
    return {"success": [r["success"] for r in runs], "steps": int(runs[0]["steps"]), "wall_s": wall,
            "timed_out": returncode is None}  # fmt: skip


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tasks = _check(args)
    from limen_jax.registry import task_facts

    seeds = args.seeds or (1 if args.quick else 3)
    records = []
    print(f"{'task':<13} {'paper':>6} {'ours':>6}  per seed (ours)            steps     wall")
    for name in tasks:
        full = int(task_facts(name).budget("paper").full_steps)
        # --quick: one PPO update of the paper preset (8192 envs x 16 steps)
        steps = args.steps or (131_072 if args.quick else full)
        program = program_path(name, args.programs)
        ours = run_ours(name, program, seeds, steps)
        reduced = "" if ours["steps"] >= full // 131_072 * 131_072 else f"  (reduced: the paper trains {full:,})"
        per_seed = ", ".join(f"{s:.2f}" for s in ours["success"])
        print(f"{name:<13} {PAPER[name]:>6.2f} {_mean(ours['success']):>6.2f}  {per_seed:<24} {ours['steps']:>10,} "
              f"{ours['wall_s']:>7.1f} s{reduced}", flush=True)  # fmt: skip
        record: dict[str, Any] = {"task": name, "program": program.name, "paper": PAPER[name], "ours": ours}
        if args.reference is not None:
            ref = run_reference(name, program, seeds, args.steps or (131_072 if args.quick else None),
                                args.reference, args.reference_python, args.reference_timeout)  # fmt: skip
            cut = f"  (timed out: {len(ref['success'])} of {seeds} seeds)" if ref["timed_out"] else ""
            ratio = _mean(ours["success"]) / max(_mean(ref["success"]), 1e-9)
            print(f"{'  reference':<13} {'':>6} {_mean(ref['success']):>6.2f}  "
                  f"{', '.join(f'{s:.2f}' for s in ref['success']):<24} {ref['steps']:>10,} {ref['wall_s']:>7.1f} s"
                  f"  ours / reference {ratio:.2f}{cut}", flush=True)  # fmt: skip
            record["reference"], record["ratio"] = ref, round(ratio, 3)
        records.append(record)
    print(json.dumps(records))
    figures: dict[str, Any] = {}
    for r in records:
        figures[f"{r['task']}: ours success"] = _mean(r["ours"]["success"])
        figures[f"{r['task']}: paper success"] = r["paper"]
        if "ratio" in r:
            figures[f"{r['task']}: ours / reference"] = r["ratio"]
        figures[f"{r['task']}: steps x seeds"] = f"{r['ours']['steps']:,} x {len(r['ours']['success'])}"
    _record.write(__file__, figures, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
