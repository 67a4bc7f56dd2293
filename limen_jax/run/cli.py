"""The command line of a run, ``python -m limen_jax.evolve`` (``limen-evolve``): flags
to a config (assembled by :mod:`limen_jax.config`), then the run from
:mod:`limen_jax.run.start`. Bad input is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from limen_jax.cli_errors import report_bugs
from limen_jax.config import EvolveConfig, from_dict, merged
from limen_jax.modes import MODES
from limen_jax.run.start import default_run_dir, resolve_task, resume, start
from limen_jax.run_result import RunResult
from limen_jax.rundir import holds_config
from limen_jax.search.faults import Interrupted


def _parser() -> argparse.ArgumentParser:
    from limen_jax.config import LLMConfig
    from limen_jax.task import DEFAULT_BUDGETS, PRESETS

    preset = "(default: the task's --preset budget, below)"
    p = argparse.ArgumentParser(
        prog="python -m limen_jax.evolve",
        description="Discover an RL interface (observation + reward programs) for a task.",
        epilog="Budgets: --iterations, --candidates, --seeds, --short-steps and --full-steps default to the "
               "task's --preset budget (python -m limen_jax.tasks --budgets TASK prints it). A task that declares "
               f"none gets cpu: {DEFAULT_BUDGETS['cpu'].summary()}; paper: {DEFAULT_BUDGETS['paper'].summary()}.",
    )
    p.add_argument("--task", help="registered task name, family:name or module:Class (python -m limen_jax.tasks)")
    p.add_argument("--preset", choices=PRESETS,
                   help="budgets (default: cpu; quick: a first look in a few minutes on a CPU; gpu: the paper's PPO, "
                        "8 a batch)")
    p.add_argument("--iterations", type=int, help=f"iterations after the first generation {preset}")
    p.add_argument("--candidates", type=int, help=f"children per iteration, trained together {preset}")
    p.add_argument("--programs", type=int, metavar="N",
                   help="a budget of programs: finish after the batch that brings the run to N programs "
                        "(trained or rejected), whatever --iterations says; holds strategies with different "
                        "batch sizes to one budget (--iterations counts batches, whose sizes differ by "
                        "strategy)")
    p.add_argument("--no-baseline", dest="baseline", action="store_false", default=None,
                   help="do not train the task's default interface (default observation, sparse reward) beside "
                        "the first batch as the level the run is measured against (search.baseline)")
    p.add_argument("--seeds", type=int, help=f"seeds of the full training run {preset}")
    p.add_argument("--mode", choices=MODES, help="what candidates write: full (observation and reward programs, the "
                   "default), obs_only (an observation; the task's sparse reward), reward_only (a reward; the task's "
                   "observation); baselines: sparse (the task's default interface trained once, no LLM), "
                   "independent (full programs, each written from scratch)")
    p.add_argument("--strategy", help="search strategy: map_elites (default, LIMEN), eureka, mcts (RF-Agent), "
                                       "forge, portfolio, grace, rda, greedy, independent, or any registered by the "
                                       "entry-point group limen_jax.strategies (docs/concepts/strategies.md)")
    p.add_argument("--prescreen", metavar="demos[:THRESHOLD]",
                   help="reject reward programs whose ranking accuracy on demonstrations is below THRESHOLD "
                        "(default 0.5) before training them")
    p.add_argument("--no-dedupe", action="store_true",
                   help="train every checked program, even one that behaves exactly like an earlier one of the run "
                        "(by default such a repeat is not trained again and takes that program's result)")
    p.add_argument("--demos", metavar="PATH", help="demonstrations (.npz) to rank reward programs on "
                   "(default: the task's scripted expert and random play; python -m limen_jax.demos --from-policy "
                   "writes one from a trained policy); checked before the run starts")
    p.add_argument("--fitness", metavar="KIND", help="the evaluation kind a strategy with a fitness option "
                   "ranks its children by (grace: demos, its paper's mode, or ppo); sets search.options.fitness")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set any config value by its dotted key, e.g. search.options.k=4 or llm.temperature=1 "
                        "(VALUE is read as JSON when it parses, else as a string); repeatable")
    p.add_argument("--mutator", choices=["auto", "anthropic", "openai", "ensemble", "offline", "replay"],
                   help="auto: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY or "
                        "OPENAI_BASE_URL is set, else offline; openai: any OpenAI-compatible endpoint; ensemble: the "
                        "models of llm.models (docs/howto/use-your-llm.md)")
    p.add_argument("--model", help="LLM model id (anthropic: default claude-sonnet-4-6; openai: required)")
    p.add_argument("--llm-base-url", metavar="URL",
                   help="OpenAI-compatible endpoint including /v1, e.g. http://127.0.0.1:8000/v1 (default: "
                        "OPENAI_BASE_URL, else OpenAI's); the key comes from OPENAI_API_KEY")
    p.add_argument("--max-cost", type=float, help="stop cleanly when the LLM spend reaches this many USD "
                   f"(default {LLMConfig.max_cost_usd:g})")
    p.add_argument("--llm-timeout", type=float, help=f"seconds per LLM call attempt (default {LLMConfig.timeout_s:g})")
    p.add_argument("--max-tokens", type=int, help=f"output token cap per LLM call (default {LLMConfig.max_tokens})")
    p.add_argument("--max-retries", type=int,
                   help=f"retries of a transient LLM failure (default {LLMConfig.max_retries})")
    p.add_argument("--concurrency", type=int, help="LLM calls in flight at once (default: the batch size)")
    p.add_argument("--pipeline", choices=["auto", "on", "off"],
                   help="ask and check batch i+1 while batch i trains (auto: on for a live LLM, or offline with "
                        ">= 2 iterations)")
    p.add_argument("--replay-from", help="run directory (or llm_cache.jsonl) to replay LLM answers from")
    p.add_argument("--short-steps", type=int, help=f"env steps of the short cascade run (0: no cascade) {preset}")
    p.add_argument("--full-steps", type=int, help=f"env steps of the full run {preset}")
    p.add_argument("--seed", type=int, help="run seed (default 0)")
    p.add_argument("--run-dir", help="where to write the run (default runs/<task>-<mode>-<time>)")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR; --iterations, --programs, --max-cost, --model, --llm-base-url, "
                        "--llm-timeout, --max-tokens, --max-retries and --concurrency may change; a flag, --preset or "
                        "--config value that changes anything else is refused")
    p.add_argument("--keep-policies", choices=["all", "best", "none"],
                   help="trained policies kept in RUN_DIR/policies (default best: the best program of each batch); "
                        "python -m limen_jax.rollout RUN_DIR PROGRAM_ID rolls one out")
    p.add_argument("--evaluator", choices=["in_process", "ray"], default="in_process",
                   help="where batches train: in this process (default) or on Ray actors, one per GPU or CPU "
                        "slice (pip install 'limen_jax[ray]'; docs/howto/run-on-ray.md); results are the same")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="with --evaluator ray: a running cluster (auto, ray://host:port); default: start a local Ray")
    p.add_argument("--ray-actors", type=int, metavar="N",
                   help="with --evaluator ray: actors (default one per GPU of the cluster, else one per CPU)")
    p.add_argument("--config", help="JSON file of EvolveConfig overrides")
    return p


def check_flags(args: argparse.Namespace) -> None:
    """Refuse flags that cannot go together or are malformed (ValueError), before any work."""
    if args.evaluator != "ray" and (args.ray_address is not None or args.ray_actors is not None):
        raise ValueError("--ray-address and --ray-actors need --evaluator ray")
    if args.evaluator == "ray":
        from limen_jax.search.evaluation.ray_evaluator import check_settings

        check_settings(args.ray_address, args.ray_actors)
    if args.resume and args.run_dir:
        raise ValueError(f"--run-dir: a resumed run stays in its own directory ({args.resume}); leave --run-dir out")


def make_evaluator(args: argparse.Namespace) -> Any:
    """The evaluator the flags ask for: None (the loop's in-process default) or a Ray one."""
    if args.evaluator != "ray":
        return None
    try:
        from limen_jax.search.evaluation.ray_evaluator import RayEvaluator
    except ImportError as exc:
        raise ValueError(f"--evaluator ray needs Ray: pip install 'limen_jax[ray]' ({exc})") from None
    return RayEvaluator(args.ray_address, actors=args.ray_actors)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The nested config values the command line sets (flags not given are left out)."""
    def given(pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
        return {k: v for k, v in pairs if v is not None}

    search = given((("iterations", args.iterations), ("programs", args.programs), ("candidates", args.candidates),
                    ("seeds", args.seeds), ("mode", args.mode), ("strategy", args.strategy),
                    ("pipeline", args.pipeline), ("prescreen", args.prescreen), ("demos", args.demos),
                    ("baseline", args.baseline)))
    if args.no_dedupe:
        search["dedupe"] = False
    if args.fitness is not None:
        search["options"] = {"fitness": args.fitness}
    cascade = given((("short_steps", args.short_steps), ("full_steps", args.full_steps)))
    llm = given((("mutator", args.mutator), ("model", args.model), ("max_cost_usd", args.max_cost),
                 ("replay_from", args.replay_from), ("timeout_s", args.llm_timeout), ("max_tokens", args.max_tokens),
                 ("max_retries", args.max_retries), ("concurrency", args.concurrency),
                 ("base_url", args.llm_base_url)))
    if args.replay_from and "mutator" not in llm:
        llm["mutator"] = "replay"
    over: dict[str, Any] = given((("seed", args.seed), ("keep_policies", args.keep_policies)))
    for name, part in (("search", search), ("cascade", cascade), ("llm", llm)):
        if part:
            over[name] = part
    return merged(over, parse_sets(getattr(args, "set", None) or []))


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["search.options.k=4", ...]`` as nested overrides; ValueError for a malformed item."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        parts = key.strip().split(".")
        if not eq or not all(p.isidentifier() for p in parts):
            raise ValueError(f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. search.options.k=4")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {item!r}: {p} is set to a value and cannot hold keys")
        node[parts[-1]] = value
    return out


def recorded_config(replay_from: str | None) -> dict[str, Any] | None:
    """The config.json of the run ``--replay-from`` (or ``--resume``) names (a run dir or its
    llm_cache.jsonl), or None when it has none (a bare cache file); ValueError (one line) when
    it is unreadable or names a task that is not registered."""
    if not replay_from:
        return None
    src = Path(replay_from)
    path = (src if src.is_dir() else src.parent) / "config.json"
    if not path.is_file():
        return None
    from limen_jax.registry import check_recorded
    from limen_jax.run.reader import read_json

    data = read_json(path.parent, path.name, "the recorded run's config")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    check_recorded(data.get("task"), str(path))  # before the preset asks the task for its facts
    return data


def config_from_args(args: argparse.Namespace) -> EvolveConfig:
    """The run's config: the preset's for ``--task``, or for ``--replay-from RUN`` the
    recorded run's own (task, budgets, seed, pipeline), then the file and the flags given."""
    recorded = recorded_config(args.replay_from)
    over: dict[str, Any] = {} if recorded else {"seed": 0}
    if args.config:
        over = merged(over, read_config_file(args.config))
    over = merged(over, _overrides(args))
    if recorded is not None:
        if args.task and args.task != recorded.get("task"):
            raise ValueError(f"--replay-from {args.replay_from} replays a run of task {recorded.get('task')!r}, "
                             f"not {args.task!r}; leave --task out or give that one")
        if not recorded.get("task"):
            raise ValueError(f"--replay-from {args.replay_from}: its config.json names no task")
        base = EvolveConfig.preset_for(recorded["task"], recorded.get("preset", args.preset or "cpu")).to_dict()
        return from_dict(EvolveConfig, merged(merged(base, recorded), over))
    task = args.task
    if not task:
        raise ValueError("--task is required (or --resume RUN_DIR); python -m limen_jax.tasks lists them")
    base = EvolveConfig.preset_for(task, args.preset or "cpu").to_dict()
    return from_dict(EvolveConfig, merged(base, over))


def read_config_file(path: str) -> dict[str, Any]:
    """The JSON object of config overrides in ``--config PATH``; ValueError (one line) when
    the file cannot be read or holds anything else."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise ValueError(f"--config {path}: not a JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: expected a JSON object of config overrides, not a {type(data).__name__}")
    return data


def resume_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """What ``--resume`` is asked to change: the flags, ``--config``'s values and ``--preset``
    as config overrides, each refused by its key when it changes what defines the run
    (:data:`limen_jax.config.RESUMABLE`); a changed ``--task`` is refused here, by its flag."""
    recorded = recorded_config(args.resume) or {}
    if args.task and recorded and args.task != recorded.get("task"):
        raise ValueError(f"--resume {args.resume}: the run's task is {recorded.get('task')!r}; "
                         f"--task {args.task} would change it (start a new run for another task)")
    over = read_config_file(args.config) if args.config else {}
    if args.preset is not None:
        over["preset"] = args.preset
    return merged(over, _overrides(args))


@report_bugs
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    evaluator = None
    result: RunResult | None = None
    run_dir: Path | None = None  # once known: what an interrupt while starting tells about
    existed = True
    try:
        check_flags(args)
        if args.resume:
            over = resume_overrides(args)
            run_dir = Path(args.resume)
            evaluator = make_evaluator(args)  # built before the run starts, closed after it
            result = resume(args.resume, over, evaluator=evaluator, handle_signals=True)
        else:
            config = config_from_args(args)
            if recorded_config(args.replay_from) is not None:
                print(f"replay: the recorded run's task, configuration and seed ({config.task}, seed {config.seed}) "
                      f"from {args.replay_from}", flush=True)
            task = resolve_task(config.task)
            run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(config)
            existed = run_dir.exists()
            evaluator = make_evaluator(args)
            result = start(config, task, run_dir, evaluator=evaluator, handle_signals=True)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Interrupted) as stop:  # before the run began (or a library's own Ctrl-C)
        print(f"\ninterrupted while starting: {_starting_stopped(run_dir, existed)}", file=sys.stderr, flush=True)
        _exit_now(128 + int(getattr(stop, "signum", 2)))
    finally:
        if evaluator is not None:  # an interrupted run abandons what the evaluator has in flight
            evaluator.close(wait=result is not None and result.signal is None)
    assert result is not None
    print(result.summary(), flush=True)
    if result.signal is not None:
        print(f"{result.stopped}", file=sys.stderr, flush=True)
        # a batch abandoned in training may still be inside XLA on its daemon thread: tearing the
        # interpreter down around it aborts the process, and everything is on disk already
        _exit_now(128 + result.signal)
    return 0 if result.complete else 1


def _starting_stopped(run_dir: Path | None, existed: bool) -> str:
    """What an interrupt before the run's first batch left, and what to do next: the resume
    command once the run dir holds its config; else nothing was recorded, and a directory
    this command made (no config.json yet) is removed."""
    if run_dir is not None and holds_config(run_dir):
        return f"nothing was lost; resume with python -m limen_jax.evolve --resume {run_dir}"
    if run_dir is not None and not existed and run_dir.is_dir():
        shutil.rmtree(run_dir, ignore_errors=True)
        return f"nothing was recorded yet; removed the half-made {run_dir}; run the same command again"
    return "nothing was recorded yet; run the same command again"


def _exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
