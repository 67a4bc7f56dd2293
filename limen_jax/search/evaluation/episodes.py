"""The ``episodes`` evaluation kind: roll out each program's kept policy and log every step.

What a trajectory critic reads (the ``rda`` strategy). For each program, the policy the
``ppo`` kind trained and the loop kept (``<run>/policies/<id>/seed<k>/``, the first kept
seed; a strategy that needs them sets ``keep_policies = "all"``) runs
``options["episodes"]`` fresh episodes (default 3) through
:func:`limen_jax.rl.rollouts.rollouts`. ``record.evaluations["episodes"]`` becomes::

    {"policy_seed": int, "rollout_seed": int, "terms": [names],
     "episodes": [{"success": bool, "length": int, "return": float,
                   "sums": {term: float}, "steps": {term: [float per step]}}],
     "renderer": {"available": bool, "note": str},
     "frames": [{"episode": int, "step": int, "png": base64 str}]}

(a scalar reward is one term, "reward"; values rounded to 4 significant digits), or
``{"error": why}`` when there is no kept policy or the rollout failed (host paths scrubbed:
an error may reach a prompt). ``renderer`` says
whether the task renders frames here (XLand does; MuJoCo needs an OpenGL backend).
``options["frames"]`` (default 0) frames are rendered where it does, spread evenly over
the episodes and over each episode's states (its start state to its last): frame
``(episode e, step t)`` is the state before step t (t = length: the final state).
The run's ``evaluation`` event holds :meth:`Episodes.summary` of it (no per-step logs, a
frame count): the whole log lives in the record, in ``state.json``.

The policies travel in the job, not their paths: :meth:`Episodes.job` reads each kept
policy on the driver, where the run directory is, and puts its arrays (the network's
parameters and observation statistics, numpy) and metadata in ``job.data["policies"]``,
so that a worker on another node, which cannot read the driver's disk, rolls out the same
policy (:mod:`limen_jax.search.evaluation.remote` ships ``job.data`` as it is). A program with no
usable kept policy travels as ``{"missing": why}`` or ``{"unreadable": why}``, path-free.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from limen_jax.search.evaluation.jobs import Budget, EvalBatch, EvalJob
from limen_jax.search.evaluation.training_kinds import EvaluationBase

if TYPE_CHECKING:
    from limen_jax.search.evaluation.training_kinds import JobContext

SEED_OFFSET = 700  # rollout seed = seed * 1000 + 700: apart from training (0..) and retrain (500..)


def _r4(x: float) -> float:
    return float(f"{float(x):.4g}")


def episode_log(task: Any, interface: Any, policy: Any, seed: int, episodes: int,
                frames: int = 0) -> dict[str, Any]:
    """Roll out ``policy`` (a :class:`~limen_jax.rl.policy.Policy`, or the directory it is
    saved in) on ``episodes`` episodes, rendering ``frames`` frames where the task renders
    (see the module)."""
    import numpy as np

    from limen_jax.policies import load_policy
    from limen_jax.rl.rollouts import rollouts

    if isinstance(policy, (str, Path)):
        policy = load_policy(policy)
    view = renderer(task)
    log = rollouts(task, interface, policy, seed, episodes, keep_sims=episodes if frames and view["available"] else 0)
    names = list(interface.reward_terms) or ["reward"]
    steps = np.asarray(log.terms) if interface.reward_terms else np.asarray(log.reward)[..., None]  # [T, E, M]
    length, success = np.asarray(log.length), np.asarray(log.success)
    out = []
    for e in range(episodes):
        n = int(length[e])
        out.append({
            "success": bool(success[e]), "length": n, "return": _r4(steps[:n, e].sum()),
            "sums": {name: _r4(steps[:n, e, m].sum()) for m, name in enumerate(names)},
            "steps": {name: [_r4(x) for x in steps[:n, e, m]] for m, name in enumerate(names)},
        })
    shots = _frames(task, log.sims, length, frames) if log.sims is not None else []
    return {"policy_seed": int(policy.metadata["seed"]), "rollout_seed": int(seed), "terms": names,
            "episodes": out, "renderer": view, "frames": shots}


def frame_steps(lengths: Any, frames: int) -> list[tuple[int, int]]:
    """(episode, step) pairs of ``frames`` frames: episode e gets frames // E (the first
    frames % E episodes one more), at evenly spaced states 0..length[e], distinct."""
    import numpy as np

    count = len(lengths)
    out = []
    for e, n in enumerate(lengths):
        k = frames // count + (e < frames % count)
        if k:
            out += [(e, int(t)) for t in sorted({round(x) for x in np.linspace(0, int(n), k)})]
    return out


def _frames(task: Any, sims: Any, lengths: Any, frames: int) -> list[dict[str, Any]]:
    """The frames :func:`frame_steps` picks, rendered and PNG-encoded (base64)."""
    import base64
    import io

    import jax
    import numpy as np
    from PIL import Image

    out = []
    for e, t in frame_steps(list(np.asarray(lengths)), frames):
        image = np.asarray(task.render(jax.tree.map(lambda x, e=e, t=t: x[t, e], sims)), np.uint8)
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, format="PNG", optimize=True)
        out.append({"episode": e, "step": t, "png": base64.b64encode(buf.getvalue()).decode("ascii")})
    return out


def renderer(task: Any) -> dict[str, Any]:
    """Whether ``task`` renders a frame of its start state here, and if not, why not (the
    critic's prompt quotes it: host paths, e.g. of a GL library, scrubbed)."""
    import jax

    from limen_jax.program.errors import scrub_paths

    try:
        task.render(task.reset(jax.random.key(0)).sim)
    except NotImplementedError as exc:
        return {"available": False, "note": scrub_paths(str(exc))}
    return {"available": True, "note": f"task {task.name!r} renders frames"}


def kept_policy(run_path: str, program_id: str) -> dict[str, Any]:
    """What travels of ``program_id``'s kept policy (its first kept seed): ``{"arrays":
    numpy pytree, "metadata": dict}``, read here from ``<run_path>/policies/``; else
    ``{"missing": why}`` (none kept) or ``{"unreadable": why}``, with no host path."""
    import jax
    import numpy as np

    from limen_jax.policies import load_policy, policy_dir, saved_seeds
    from limen_jax.program.errors import exception_summary

    try:
        seeds = saved_seeds(run_path, program_id) if run_path else []
    except ValueError:  # a name that is no program id (the task default)
        seeds = []
    if not seeds:
        return {"missing": f"no kept policy for {program_id}: it was not trained at the full budget, or the run "
                           "keeps no policies (--keep-policies all)"}
    try:
        policy = load_policy(policy_dir(run_path, program_id, seeds[0]))
    except Exception as exc:  # a damaged checkpoint: that program's error, not the batch's
        return {"unreadable": f"the kept policy of {program_id} (seed {seeds[0]}) could not be read: "
                              f"{exception_summary(exc)}"}
    return {"arrays": jax.tree.map(np.asarray, policy.arrays()), "metadata": dict(policy.metadata)}


def policy_from_data(entry: dict[str, Any]) -> Any:
    """The :class:`~limen_jax.rl.policy.Policy` that :func:`kept_policy` packed."""
    from limen_jax.rl.normalize import ObsStats
    from limen_jax.rl.policy import Policy

    arrays = entry["arrays"]
    stats = arrays["obs_stats"]
    return Policy(arrays["params"], ObsStats(stats["mean"], stats["var"], stats["count"]), dict(entry["metadata"]))


class Episodes(EvaluationBase):
    """Roll out kept policies; the logs go to ``record.evaluations["episodes"]``."""

    name = "episodes"
    DEFAULT_EPISODES = 3

    def job(self, ctx: JobContext, interfaces: list[Any], options: dict[str, Any]) -> EvalJob:
        n, frames = int(options.get("episodes", self.DEFAULT_EPISODES)), int(options.get("frames", 0))
        if n < 1 or frames < 0:
            raise ValueError(f"episodes: episodes must be >= 1 and frames >= 0, got {n} and {frames}")
        policies = [kept_policy(ctx.run_path, iface.name) for iface in interfaces]
        return EvalJob(ctx.task, interfaces, [ctx.seed * 1000 + SEED_OFFSET], Budget(0, 0, 0.0), ctx.ppo,
                       kind=self.name, options={"episodes": n, "frames": frames}, data={"policies": policies})

    def run(self, job: EvalJob, budget_s: float | None) -> EvalBatch:
        t0 = time.perf_counter()
        results: list[Any] = []
        for iface, entry in zip(job.interfaces, job.data["policies"], strict=True):
            if "arrays" not in entry:
                results.append(FileNotFoundError(entry["missing"]) if "missing" in entry
                               else RuntimeError(entry.get("unreadable", "no kept policy")))
                continue
            try:
                results.append(episode_log(job.task, iface, policy_from_data(entry), job.seeds[0],
                                           job.options["episodes"], job.options["frames"]))
            except Exception as exc:  # one program's rollout failing must not sink the others
                results.append(exc)
        return EvalBatch(results, wall_s=time.perf_counter() - t0)

    def score(self, record: Any, result: Any, job: EvalJob) -> None:
        from limen_jax.program.errors import exception_summary

        if isinstance(result, BaseException):  # scrubbed: the critic's note may quote it
            record.evaluations[self.name] = {"error": exception_summary(result)}
        else:
            record.evaluations[self.name] = result

    def summary(self, evaluation: dict[str, Any]) -> dict[str, Any]:
        """What the event log carries of an evaluation: each episode's outcome and term
        sums, and how many frames there are. The per-step logs and the frames (tens of
        KB a program) stay in the record, kept in ``state.json``, where the critic reads
        them."""
        if "episodes" not in evaluation:  # an error
            return evaluation
        rest = {k: v for k, v in evaluation.items() if k not in ("episodes", "frames")}
        return {**rest, "episodes": [{k: v for k, v in ep.items() if k != "steps"} for ep in evaluation["episodes"]],
                "frames": len(evaluation["frames"])}
