"""Roll out a kept policy: success and each reward term's sum per episode, and frames.

    python -m limen_jax.rollout RUN_DIR PROGRAM_ID [--seed S] [--episodes N] [--frames out.gif]

RUN_DIR is a run directory (``<run>/policies/<id>/seed<k>/`` from ``--keep-policies``)
or a ``python -m limen_jax.train --save-policy`` directory. The policy is loaded with
orbax; the program is compiled again from ``programs/<id>.py`` through the checker (the
sandboxed worker, as in the run), in the mode it trained in. The episodes run through
:func:`limen_jax.rl.rollouts.rollouts`. ``--frames`` writes episode 0 as a GIF where the
task renders (the XLand tasks do; MuJoCo tasks need an OpenGL backend, and say so when
there is none). Bad input: one line on stderr, exit status 2, nothing written.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from typing import Any

from limen_jax.cli_errors import report_bugs


class BadInput(Exception):
    """The command line names something that cannot be rolled out: exit 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m limen_jax.rollout", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=pathlib.Path, help="run directory (or a train --save-policy directory)")
    p.add_argument("program_id", help="the program whose policy to roll out")
    p.add_argument("--seed", type=int, default=None, help="which training seed's policy (default: the first kept)")
    p.add_argument("--episodes", type=int, default=64, help="episodes to run side by side")
    p.add_argument("--rollout-seed", type=int, default=0, help="seed of the episodes' start states and actions")
    p.add_argument("--frames", type=pathlib.Path, default=None, help="write episode 0 to this GIF")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--task", help="the task the policy trained on, when the directory names one that is not "
                   "registered (a module:Class of your own, as train --task took it): a file names no code to "
                   "import, the command line may")
    return p


def _fail(message: str) -> int:
    print(f"rollout: {message}", file=sys.stderr)
    return 2


@dataclasses.dataclass
class RolloutReport:
    """What a rollout of a kept policy shows: success and mean return and length over the
    episodes, each reward term's mean episode sum (by name), the seconds it took (load,
    check, compile, roll out), and episode 0 as a GIF (``gif``) or why there is none
    (``note``)."""

    program_id: str
    seed: int
    task: str
    episodes: int
    success: float
    returns: float
    length: float
    terms: dict[str, float]
    seconds: float
    gif: bytes | None = None
    note: str = ""


def roll_out(run_dir: str | pathlib.Path, program_id: str, *, seed: int | None = None, episodes: int = 64,
             rollout_seed: int = 0, frames: bool = False, task: str | None = None) -> RolloutReport:
    """Roll out the kept policy of ``program_id`` (the command's work, as a library call:
    the run viewer calls it). task: the recorded task's name, given by the caller (see
    :func:`load_kept`). Raises :class:`BadInput` (or a ProgramError) for what cannot
    be rolled out."""
    from limen_jax.rl.rollouts import rollouts

    if episodes < 1:
        raise BadInput("--episodes must be at least 1")
    start = time.perf_counter()
    built, iface, policy = load_kept(run_dir, program_id, seed=seed, task=task)
    log = rollouts(built, iface, policy, rollout_seed, episodes, keep_sims=1 if frames else 0)
    report = RolloutReport(
        program_id=program_id, seed=int(policy.metadata["seed"]), task=built.name, episodes=episodes,
        success=float(log.success.mean()), returns=float(log.returns.mean()), length=float(log.length.mean()),
        terms=dict(zip(iface.reward_terms, log.episode_terms.mean(0).tolist(), strict=True)), seconds=0.0,
    )
    if frames:
        report.gif, report.note = _gif(built, log)
    report.seconds = time.perf_counter() - start
    return report


def load_kept(run_dir: str | pathlib.Path, program_id: str, *, seed: int | None = None,
              task: str | None = None) -> tuple[Any, Any, Any]:
    """The task, the interface compiled again from ``programs/<id>.py`` and the kept policy
    of ``program_id`` (seed ``seed``, default the first kept) in ``run_dir``. task: the
    name the directory records, given by the caller: then it is built even when it is no
    registered task (the caller, not the file, names the code); another name is refused.
    Raises :class:`BadInput` (or a ProgramError) for what cannot be loaded."""
    args = argparse.Namespace(run_dir=pathlib.Path(run_dir), program_id=program_id, seed=seed, episodes=1,
                              frames=None, task=task)
    return _load(args, _plan(args))


@report_bugs
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        _plan(args)
    except BadInput as exc:
        return _fail(str(exc))
    from limen_jax.program import ProgramError

    try:
        r = roll_out(args.run_dir, args.program_id, seed=args.seed, episodes=args.episodes,
                     rollout_seed=args.rollout_seed, frames=args.frames is not None, task=args.task)
    except (BadInput, ProgramError) as exc:
        return _fail(str(exc))
    print(f"{r.program_id} seed {r.seed} on {r.task}: success {r.success:.3f} over "
          f"{r.episodes} episodes; return {r.returns:.4g}, length {r.length:.1f}")  # fmt: skip
    for name, value in r.terms.items():
        print(f"term {name}: {value:.4g} per episode")
    if args.frames is not None:
        if r.gif is None:
            print(f"no frames written: {r.note}")
        else:
            args.frames.write_bytes(r.gif)
            print(f"wrote {r.note} to {args.frames}")
    print(f"{r.seconds:.1f} s (load, check, compile, roll out)")
    if args.json:
        print(json.dumps({"program_id": r.program_id, "seed": r.seed, "task": r.task, "episodes": r.episodes,
                          "success": r.success, "return": r.returns, "terms": r.terms,
                          "seconds": round(r.seconds, 3)}))  # fmt: skip
    return 0


def _plan(args: argparse.Namespace) -> dict[str, Any]:
    """Check the command line against the disk before anything heavy is imported."""
    from limen_jax.policies import policy_dir, saved_seeds

    if not args.run_dir.is_dir():
        raise BadInput(f"{args.run_dir} is not a directory")
    try:
        seeds = saved_seeds(args.run_dir, args.program_id)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if not seeds:
        raise BadInput(f"no kept policy for {ascii(args.program_id)[:60]} in {args.run_dir}/policies")
    seed = seeds[0] if args.seed is None else args.seed
    if seed not in seeds:
        raise BadInput(f"no policy of seed {seed} for {args.program_id}; kept seeds: {', '.join(map(str, seeds))}")
    if args.episodes < 1:
        raise BadInput("--episodes must be at least 1")
    if args.frames is not None and (args.frames.suffix.lower() != ".gif" or not args.frames.parent.is_dir()):
        raise BadInput(f"--frames needs a .gif path in an existing directory, got {args.frames}")
    return {"dir": policy_dir(args.run_dir, args.program_id, seed)}


def _load(args: argparse.Namespace, plan: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The task, the interface compiled from the kept program, and the policy."""
    from limen_jax.interface import default_interface
    from limen_jax.policies import load_policy
    from limen_jax.program import compile_interface
    from limen_jax.registry import check_recorded, task_problem
    from limen_jax.run import reader
    from limen_jax.task import make

    try:
        run = _run_config(args.run_dir)
        # a search run's config names the task as the run resolved it (an entry point or a
        # family:name); the policy's metadata holds the task's own name. Either is checked
        # before it is built: a file names no code to call
        named = None
        if args.task is None and "task" in run:  # checked before anything of the run is loaded
            named = check_recorded(run["task"], str(args.run_dir / "config.json"))
        policy = load_policy(plan["dir"], root=args.run_dir)
        meta = policy.metadata
        recorded = run.get("task", meta["task"])
        if args.task is not None and args.task != recorded:
            raise ValueError(f"--task {args.task}: the policy trained on {ascii(recorded)[:80]}")
        if args.task is not None:
            name = args.task  # named by the command line: trusted as train --task was
        else:
            name = named or check_recorded(meta["task"], str(plan["dir"] / "policy.json"))
    except (OSError, ValueError, KeyError) as exc:
        raise BadInput(f"the policy in {plan['dir']} cannot be read: {exc}") from None
    try:
        task = make(name)
    except (KeyError, ImportError) as exc:  # e.g. the task's extra is not installed here
        raise BadInput(task_problem(name, exc)) from None
    params = {k: float(v) for k, v in meta.get("task_params", {}).items()}
    if params and params != {k: float(v) for k, v in dict(task.params).items()}:
        task = task.with_params(**params)
    from limen_jax.rl.rollouts import check_network

    try:
        check_network(policy, task)
    except ValueError as exc:
        raise BadInput(f"the policy in {plan['dir']} cannot be used: {exc}") from None
    mode = meta.get("mode") or _run_mode(run)
    if mode == "sparse":
        iface = default_interface(task)
    else:
        program = args.run_dir / "programs" / f"{args.program_id}.py"
        source = reader.read_text(args.run_dir, program)
        if source is None:
            raise BadInput(f"{program} is missing, a link out of the run, or larger than "
                           f"{reader.MAX_PROGRAM_BYTES >> 10} KiB")
        iface = compile_interface(source, task, mode=mode, name=args.program_id)
    if iface.obs_dim != meta["obs_dim"] or list(iface.reward_terms) != list(meta.get("reward_terms", [])):
        raise BadInput(f"programs/{args.program_id}.py is not the program this policy was trained with")
    return task, iface, policy


def _run_config(run_dir: pathlib.Path) -> dict[str, Any]:
    """The search run's config.json ({} when there is none, e.g. ``train --save-policy``);
    RunDirError (one line) for one that is a link out of the run, too large or not an object."""
    from limen_jax.run import reader

    if not reader.exists(run_dir, "config.json"):
        return {}
    config = reader.read_json(run_dir, "config.json", "the run's config")
    if not isinstance(config, dict):
        raise reader.RunDirError(f"{run_dir / 'config.json'}: not a JSON object")
    return config


def _run_mode(config: dict[str, Any]) -> str:
    """The run's program mode ("full" when it says none; sparse runs train no program)."""
    search = config.get("search")
    mode = search.get("mode", "full") if isinstance(search, dict) else "full"
    return mode if mode in ("full", "obs_only", "reward_only", "sparse") else "full"


def _gif(task: Any, log: Any) -> tuple[bytes | None, str]:
    """Episode 0 (its start state, then every step it lived) as GIF bytes and "N frames",
    or (None, why not) when the task does not render."""
    import io

    import jax
    import numpy as np
    from PIL import Image

    steps = int(np.asarray(log.length)[0]) + 1
    try:
        frames = [task.render(jax.tree.map(lambda x, t=t: x[t, 0], log.sims)) for t in range(steps)]
    except NotImplementedError as exc:
        return None, str(exc)
    images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=120, loop=0)
    return out.getvalue(), f"{len(images)} frames"


if __name__ == "__main__":
    sys.exit(main())
