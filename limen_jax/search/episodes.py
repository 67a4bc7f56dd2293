"""The ``episodes`` evaluation kind: roll out each program's kept policy and log every step.

What a trajectory critic reads (the ``rda`` strategy). For each program, the policy the
``ppo`` kind trained and the loop kept (``<run>/policies/<id>/seed<k>/``, the first kept
seed; a strategy that needs them sets ``keep_policies = "all"``) runs
``options["episodes"]`` fresh episodes (default 3) through
:func:`limen_jax.rl.rollouts.rollouts`. ``record.evaluations["episodes"]`` becomes::

    {"policy_seed": int, "rollout_seed": int, "terms": [names],
     "episodes": [{"success": bool, "length": int, "return": float,
                   "sums": {term: float}, "steps": {term: [float per step]}}],
     "renderer": {"available": bool, "note": str}}

(a scalar reward is one term, "reward"; values rounded to 4 significant digits), or
``{"error": why}`` when there is no kept policy or the rollout failed. ``renderer`` says
whether the task can render frames here (XLand can; MuJoCo needs an OpenGL backend);
frames themselves are not kept.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from limen_jax.search.faults import describe
from limen_jax.search.jobs import Budget, EvalBatch, EvalJob

if TYPE_CHECKING:
    from limen_jax.search.evaluations import JobContext

SEED_OFFSET = 700  # rollout seed = seed * 1000 + 700: apart from training (0..) and retrain (500..)


def _r4(x: float) -> float:
    return float(f"{float(x):.4g}")


def episode_log(task: Any, interface: Any, policy_dir: str, seed: int, episodes: int) -> dict[str, Any]:
    """Roll out the policy saved in ``policy_dir`` on ``episodes`` episodes (see the module)."""
    import numpy as np

    from limen_jax.policies import load_policy
    from limen_jax.rl.rollouts import rollouts

    policy = load_policy(policy_dir)
    log = rollouts(task, interface, policy, seed, episodes)
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
    return {"policy_seed": int(policy.metadata["seed"]), "rollout_seed": int(seed), "terms": names,
            "episodes": out, "renderer": renderer(task)}


def renderer(task: Any) -> dict[str, Any]:
    """Whether ``task`` renders a frame of its start state here, and if not, why not."""
    import jax

    try:
        task.render(task.reset(jax.random.key(0)).sim)
    except NotImplementedError as exc:
        return {"available": False, "note": str(exc)}
    return {"available": True, "note": f"task {task.name!r} renders frames"}


class Episodes:
    """Roll out kept policies; the logs go to ``record.evaluations["episodes"]``."""

    name = "episodes"
    DEFAULT_EPISODES = 3

    def job(self, ctx: JobContext, interfaces: list[Any], options: dict[str, Any]) -> EvalJob:
        from limen_jax.policies import policy_dir, saved_seeds

        n = int(options.get("episodes", self.DEFAULT_EPISODES))
        if n < 1:
            raise ValueError(f"episodes: episodes must be >= 1, got {n}")
        dirs = []
        for iface in interfaces:
            try:
                seeds = saved_seeds(ctx.run_path, iface.name) if ctx.run_path else []
            except ValueError:  # a name that is no program id (the task default)
                seeds = []
            dirs.append(str(policy_dir(ctx.run_path, iface.name, seeds[0])) if seeds else "")
        return EvalJob(ctx.task, interfaces, [ctx.seed * 1000 + SEED_OFFSET], Budget(0, 0, 0.0), ctx.ppo,
                       kind=self.name, options={"episodes": n, "policies": dirs})

    def run(self, job: EvalJob, budget_s: float | None) -> EvalBatch:
        t0 = time.perf_counter()
        results: list[Any] = []
        for iface, directory in zip(job.interfaces, job.options["policies"], strict=True):
            if not directory:
                results.append(FileNotFoundError(
                    f"no kept policy for {iface.name}: it was not trained at the full budget, or the run "
                    "keeps no policies (--keep-policies all)"))
                continue
            try:
                results.append(episode_log(job.task, iface, directory, job.seeds[0], job.options["episodes"]))
            except Exception as exc:  # one program's rollout failing must not sink the others
                results.append(exc)
        return EvalBatch(results, wall_s=time.perf_counter() - t0)

    def score(self, record: Any, result: Any, job: EvalJob) -> None:
        if isinstance(result, BaseException):
            record.evaluations[self.name] = {"error": describe(result)}
        else:
            record.evaluations[self.name] = result
