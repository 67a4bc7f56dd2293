"""Train one interface with several seeds and report its success.

    python -m limen_jax.train --task xland_easy --interface best_interface.py --seeds 10 --steps 2000000
    python -m limen_jax.train --task xland_easy --default --seeds 3 --steps 500000 --json
    python -m limen_jax.train --task go1_push --interface mine.py --perturb push_force=2.0

All seeds train in one compiled call (limen_jax.rl). ``--json`` prints one JSON object
as the last line: {"task", "success_mean", "success_per_seed", "steps", "wall_s", ...}.
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
import sys
from typing import Any


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m limen_jax.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="registered task name or package.module:Class")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--interface", type=pathlib.Path, help="interface program (.py or an LLM reply)")
    which.add_argument("--default", action="store_true", help="the task's default observation and sparse reward")
    p.add_argument("--mode", default="full", choices=["full", "obs_only", "reward_only", "sparse"],
                   help="ablation: keep the program's observation, reward, both, or neither")  # fmt: skip
    p.add_argument("--seeds", type=int, default=3, help="number of seeds (0..S-1 plus --seed-offset)")
    p.add_argument("--seed-offset", type=int, default=0)
    p.add_argument("--steps", type=int, default=1_000_000, help="env steps per seed")
    p.add_argument("--preset", default="cpu", choices=["cpu", "paper"])
    p.add_argument("--ppo", nargs="*", default=[], metavar="KEY=VALUE", help="PPOConfig overrides")
    p.add_argument("--rollout", default="auto", choices=["auto", "split", "fused"],
                   help="fused: compile the rollout with the program inside (faster steps, a few seconds more "
                        "compiling); auto: fused for long runs")  # fmt: skip
    p.add_argument("--perturb", nargs="*", default=[], metavar="KEY=VALUE", help="task parameter overrides")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    return p


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _literal(value: str) -> Any:
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # heavy imports after argument parsing, so --help is instant
    from limen_jax.interface import default_interface
    from limen_jax.rl import PPOConfig, train_batch
    from limen_jax.task import make

    task = make(args.task)
    perturb = {k: float(v) for k, v in _pairs(args.perturb, "--perturb").items()}
    if perturb:
        try:
            task = task.with_params(**perturb)
        except ValueError as exc:
            print(f"--perturb: {exc}", file=sys.stderr)
            return 2
    if args.default or args.mode == "sparse":
        iface = default_interface(task)
    else:
        from limen_jax.program import ProgramError, compile_interface

        source = args.interface.read_text()
        try:
            iface = compile_interface(source, task, mode=args.mode, name=args.interface.stem)
        except ProgramError as exc:
            print(f"interface rejected: {exc}", file=sys.stderr)
            return 2
    config = PPOConfig.preset(task.name, args.preset)
    overrides = {k: _literal(v) for k, v in _pairs(args.ppo, "--ppo").items()}
    if overrides:
        config = config.replace(**overrides)
    seeds = [args.seed_offset + s for s in range(args.seeds)]
    if not args.json:
        where = f"{task.name} ({', '.join(f'{k}={v:g}' for k, v in perturb.items())})" if perturb else task.name
        print(f"training {iface.name} on {where}: obs_dim {iface.obs_dim}, {len(seeds)} seeds x "
              f"{args.steps:,} steps ({args.preset} preset)", flush=True)  # fmt: skip
    result = train_batch(task, [iface], seeds=seeds, total_steps=args.steps, config=config, rollout=args.rollout)
    per_seed = [float(x) for x in result.success[0]]
    for seed, success in zip(seeds, per_seed, strict=True):
        print(f"seed {seed}: success {success:.3f}")
    print(f"mean success {result.success_mean[0]:.3f} over {len(seeds)} seeds; {result.steps:,} steps per seed; "
          f"{result.wall_s:.1f} s ({result.compile_s:.1f} s compiling)")  # fmt: skip
    if args.json:
        record = {
            "task": task.name,
            "params": task.params,
            "interface": iface.name,
            "success_mean": float(result.success_mean[0]),
            "success_per_seed": per_seed,
            "final_return": float(result.final_return[0].mean()),
            "steps": int(result.steps),
            "seeds": seeds,
            "wall_s": round(result.wall_s, 3),
            "compile_s": round(result.compile_s, 3),
        }
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
