"""Train one interface with several seeds and report its success.

    python -m limen_jax.train --task xland_easy --interface best_interface.py --seeds 10 --steps 2000000
    python -m limen_jax.train --task xland_easy --default --seeds 3 --steps 500000 --json
    python -m limen_jax.train --task go1_push --interface mine.py --perturb push_force=2.0
    python -m limen_jax.train --task xland_easy --interface mine.py --save-policy out/
    python -m limen_jax.rollout out/ mine

All seeds train in one compiled call (limen_jax.rl). ``--json`` prints one JSON object
as the last line: {"task", "success_mean", "success_per_seed", "success_interval", "eval_episodes",
"steps", "wall_s", "rollout", ...}; "success_interval" is the 95 % interval of the mean success
(limen_jax.stats.success_interval: a bootstrap over the seeds and their evaluation episodes);
for a reward of named terms also "eval_terms" (each term's mean sum per evaluation
episode) and "term_curves" (each term's sum per episode, one value per update, the mean
over seeds; null where no episode ended). ``--save-policy DIR`` keeps every seed's
trained policy as a run directory does: ``DIR/policies/<name>/seed<k>/`` (orbax) and the
program as ``DIR/programs/<name>.py``, where <name> is the program file's stem
("default" for ``--default``), for ``python -m limen_jax.rollout DIR <name>``.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import pathlib
import re
import sys
import time
from typing import Any

from limen_jax.cli_errors import report_bugs


class BadInput(Exception):
    """The command line asks for something that cannot be trained: one line, exit 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m limen_jax.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="registered task name or package.module:Class")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--interface", type=pathlib.Path, help="interface program (.py or an LLM reply)")
    which.add_argument("--default", action="store_true", help="the task's default observation and sparse reward")
    p.add_argument("--mode", default="full", choices=["full", "obs_only", "reward_only", "sparse"],
                   help="ablation: keep the program's observation, reward, both, or neither")  # fmt: skip
    p.add_argument("--seeds", type=int, default=3, help="number of seeds (0..S-1 plus --seed-offset)")
    p.add_argument("--seed-offset", type=int, default=0, help="the first seed (default 0)")
    p.add_argument("--steps", type=int, default=None,
                   help="env steps per seed (default: the task's full budget at --preset paper, else 1,000,000)")
    p.add_argument("--preset", default="cpu", choices=["cpu", "paper", "gpu"],
                   help="the task's PPO hyperparameters (and --steps default) for a CPU or for the paper's GPU runs "
                        "(gpu: the paper's; default cpu)")
    p.add_argument("--ppo", nargs="*", default=[], metavar="KEY=VALUE", help="PPOConfig overrides")
    p.add_argument("--rollout", default="auto", choices=["auto", "split", "fused"],
                   help="fused: compile the rollout with the program inside (faster steps, a few seconds more "
                        "compiling); auto: fused for long runs or big updates")  # fmt: skip
    p.add_argument("--perturb", nargs="*", default=[], metavar="KEY=VALUE", help="task parameter overrides")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--save-policy", type=pathlib.Path, default=None, metavar="DIR",
                   help="save each seed's policy under DIR (for python -m limen_jax.rollout DIR NAME)")  # fmt: skip
    return p


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _prepare(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, float]]:
    """Check the command line and build the task, the interface and the PPO config; every
    bad value raises :class:`BadInput` naming it, before anything trains or is written."""
    if args.seeds < 1:
        raise BadInput(f"--seeds must be at least 1, got {args.seeds}")
    if args.steps is not None and args.steps < 1:
        raise BadInput(f"--steps must be at least 1, got {args.steps}")
    if args.save_policy is not None and args.save_policy.exists() and not args.save_policy.is_dir():
        raise BadInput(f"--save-policy: {args.save_policy} exists and is not a directory")
    source = None
    if not (args.default or args.mode == "sparse"):
        try:
            source = args.interface.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = "is not text (UTF-8)" if isinstance(exc, UnicodeDecodeError) else f"cannot be read ({exc.strerror})"
            raise BadInput(f"--interface {args.interface} {why}") from None
    # heavy imports after the cheap checks, so --help and typos answer at once
    from limen_jax.interface import default_interface
    from limen_jax.registry import task_problem
    from limen_jax.rl import PPOConfig
    from limen_jax.task import make

    try:
        task = make(args.task)
    except (KeyError, ImportError, ValueError, AttributeError) as exc:
        raise BadInput(task_problem(args.task, exc)) from None
    perturb = {k: _number(v, "--perturb", k) for k, v in _pairs(args.perturb, "--perturb").items()}
    if perturb:
        try:
            task = task.with_params(**perturb)
        except ValueError as exc:
            raise BadInput(f"--perturb: {exc}") from None
    if source is None:
        iface = default_interface(task)
    else:
        from limen_jax.program import ProgramError, compile_interface

        try:
            iface = compile_interface(source, task, mode=args.mode, name=args.interface.stem)
        except ProgramError as exc:
            raise BadInput(f"interface rejected: {exc}") from None
    if args.steps is None:
        args.steps = _default_steps(task, args.preset)
    config = PPOConfig.preset(task.name, args.preset)
    overrides = {k: _literal(v) for k, v in _pairs(args.ppo, "--ppo").items()}
    try:
        config = config.replace(**overrides) if overrides else config
    except (TypeError, ValueError) as exc:
        raise BadInput(f"--ppo: {exc}") from None
    return task, iface, config, perturb


def _default_steps(task: Any, preset: str) -> int:
    """The paper preset trains a task's full paper budget (xland_medium 2M, xland_hard 5M);
    the cpu preset, or a task that declares no paper budget, 1M steps."""
    from limen_jax.registry import task_facts

    facts = task_facts(task.name)
    if preset in ("paper", "gpu") and facts is not None and "paper" in facts.budgets:
        return int(facts.budget("paper").full_steps)
    return 1_000_000


def _number(value: str, flag: str, key: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise BadInput(f"{flag}: {key} must be a number, got {value!r}") from None


def _literal(value: str) -> Any:
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def _policy_name(args: argparse.Namespace) -> str:
    """The program's name in a --save-policy directory: its file's stem, made safe."""
    if args.default or args.mode == "sparse":
        return "default"
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", args.interface.stem).lstrip(".")
    return name or "program"


@report_bugs
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        task, iface, config, perturb = _prepare(args)
    except BadInput as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 2
    from limen_jax.rl import train_batch
    from limen_jax.rl.batch import auto_rollout
    from limen_jax.stats import success_interval

    updates = config.num_updates(args.steps)
    rollout = auto_rollout(config, updates) if args.rollout == "auto" else args.rollout
    trained = updates * config.steps_per_update  # what train_batch runs: whole PPO updates only
    seeds = [args.seed_offset + s for s in range(args.seeds)]
    if not args.json:
        where = f"{task.name} ({', '.join(f'{k}={v:g}' for k, v in perturb.items())})" if perturb else task.name
        rounded = (f" (--steps {args.steps:,} rounded to {updates} whole PPO update{'s' * (updates > 1)} of "
                   f"{config.steps_per_update:,} = {config.num_envs} envs x {config.rollout_len} steps)"
                   if trained != args.steps else "")
        print(f"training {iface.name} on {where}: obs_dim {iface.obs_dim}, {len(seeds)} seeds x "
              f"{trained:,} steps{rounded}; {args.preset} preset, {rollout} rollout", flush=True)  # fmt: skip
    result = train_batch(task, [iface], seeds=seeds, total_steps=args.steps, config=config, rollout=rollout,
                         return_policies=args.save_policy is not None)  # fmt: skip
    per_seed = [float(x) for x in result.success[0]]
    for seed, success in zip(seeds, per_seed, strict=True):
        print(f"seed {seed}: success {success:.3f}")
    lo, hi = success_interval(per_seed, config.eval_episodes)
    print(f"mean success {result.success_mean[0]:.3f} [{lo:.3f}, {hi:.3f}] over {len(seeds)} seeds; "
          f"{result.steps:,} steps per seed; {result.wall_s:.1f} s ({result.compile_s:.1f} s compiling)")  # fmt: skip
    print(f"[{lo:.3f}, {hi:.3f}]: 95 % interval, a bootstrap over the seeds and their {config.eval_episodes} "
          "evaluation episodes each")
    eval_terms = {n: float(v.mean()) for n, v in result.eval_terms_of(0).items()}
    for name, value in eval_terms.items():
        print(f"term {name}: {value:.4g} per evaluation episode")
    if args.save_policy is not None:
        _save(args, task, iface, result)
    if args.json:
        record = {
            "task": task.name,
            "params": task.params,
            "interface": iface.name,
            "success_mean": float(result.success_mean[0]),
            "success_per_seed": per_seed,
            "success_interval": [lo, hi],
            "eval_episodes": config.eval_episodes,
            "final_return": float(result.final_return[0].mean()),
            "steps": int(result.steps),
            "seeds": seeds,
            "wall_s": round(result.wall_s, 3),
            "compile_s": round(result.compile_s, 3),
            "rollout": rollout,
        }
        if eval_terms:
            record["eval_terms"] = eval_terms
            record["term_curves"] = {
                n[len("reward/") :]: _seed_mean(c) for n, c in result.curves_of(0).items() if n.startswith("reward/")
            }
        print(json.dumps(record))
    return 0


def _seed_mean(curve: Any) -> list[float | None]:
    """(S, U) -> the mean over seeds per update, None where no seed has a value."""
    out: list[float | None] = []
    for column in curve.T:
        finite = [float(x) for x in column if math.isfinite(x)]
        out.append(round(sum(finite) / len(finite), 5) if finite else None)
    return out


def _save(args: argparse.Namespace, task: Any, iface: Any, result: Any) -> None:
    """Each seed's policy under ``--save-policy`` DIR, and the program beside them."""
    from limen_jax.policies import policy_dir, save_policy
    from limen_jax.rundir import write_text_atomic

    name = _policy_name(args)
    mode = "sparse" if args.default else args.mode
    start = time.perf_counter()
    for policy in result.policies[0]:
        # the task as named here (a registered name or package.module:Class), for rollout's make()
        meta = {**policy.metadata, "task": args.task, "program_id": name, "mode": mode}
        save_policy(policy_dir(args.save_policy, name, meta["seed"]), policy.params, policy.obs_stats, meta)
    if mode != "sparse":
        (args.save_policy / "programs").mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.save_policy / "programs" / f"{name}.py", iface.source)
    from limen_jax.registry import check_recorded

    try:  # a task of one's own (module:Class) is named on rollout's command line: files name no code
        check_recorded(args.task, "")
        named = ""
    except ValueError:
        named = f" --task {args.task}"
    print(f"saved {len(result.policies[0])} policies in {time.perf_counter() - start:.2f} s: "
          f"python -m limen_jax.rollout {args.save_policy} {name}{named}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
