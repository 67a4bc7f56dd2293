"""Ranking reward programs on demonstrations: GRACE's fitness and the ``demos`` pre-screen.

A reward program R is judged, with no RL run, by how cleanly it ranks expert transitions
above negatives (random play, partly trained learners; :mod:`limen_jax.demos`):

    A(R) = P[R(e) > R(n)] + 1/2 P[R(e) = R(n)]

over expert transitions e and negative transitions n (the area under the ROC curve of R
as an expert detector): 1.0 puts every expert transition above every negative, 0.5 is a
constant reward. A NaN or infinite reward ranks an expert transition lowest and a
negative highest. All P programs are run on all M transitions in one jitted call, with
the static unroll the batched trainer uses for a batch of interfaces
(:class:`~limen_jax.rl.env.BatchedInterface`), and ranked by sorting, never by forming
the Me x Mn pairs.

:class:`DemosEvaluation` is the evaluation kind ``demos``: its result is the accuracy,
which goes to ``record.evaluations["demos"]`` and ``record.metadata["scores"]["demos"]``
and never changes the fitness (success).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from limen_jax.search.evaluation.jobs import Budget, EvalBatch, EvalJob
from limen_jax.search.evaluation.training_kinds import EvaluationBase


def demo_rewards(interfaces: Sequence[Any], transitions: Any) -> np.ndarray:
    """R_p of every transition: float32[P, M]. transitions: a
    :class:`~limen_jax.task.Transition` with leaves [M, ...]."""
    from limen_jax.rl.env import BatchedInterface

    batch = BatchedInterface(list(interfaces))
    k = len(batch)

    @jax.jit
    def run(trans: Any) -> jax.Array:
        # every program sees the same transitions: broadcast along the candidate axis
        tile = lambda x: jnp.broadcast_to(x, (k,) + x.shape)  # noqa: E731
        return batch.reward(jax.tree.map(tile, trans.sim), tile(trans.action), jax.tree.map(tile, trans.next_sim), 1)

    return np.asarray(run(jax.tree.map(jnp.asarray, transitions)), np.float32)


@jax.jit
def _accuracy(expert_r: jax.Array, negative_r: jax.Array) -> jax.Array:
    """float32[P, Me], float32[P, Mn] -> float32[P]."""
    e = jnp.where(jnp.isfinite(expert_r), expert_r, -jnp.inf)
    n = jnp.sort(jnp.where(jnp.isfinite(negative_r), negative_r, jnp.inf), axis=-1)
    below = jax.vmap(lambda s, v: jnp.searchsorted(s, v, side="left"))(n, e)  # negatives < e
    up_to = jax.vmap(lambda s, v: jnp.searchsorted(s, v, side="right"))(n, e)  # negatives <= e
    return ((below + up_to) / 2.0).mean(-1) / n.shape[-1]


def ranking_accuracy(rewards: np.ndarray, expert: np.ndarray) -> np.ndarray:
    """A per program: rewards float32[P, M], expert bool[M] -> float32[P]."""
    rewards = np.asarray(rewards, np.float32)
    expert = np.asarray(expert, bool)
    if not expert.any() or expert.all():
        raise ValueError("ranking needs both expert and negative transitions")
    return np.asarray(_accuracy(rewards[:, expert], rewards[:, ~expert]), np.float32)


@dataclasses.dataclass(frozen=True)
class HardPair:
    """A mis-ranked pair: expert transition ``expert`` (an index into the demo set) got
    ``r_expert`` <= ``r_negative`` of negative transition ``negative``."""

    expert: int
    negative: int
    r_expert: float
    r_negative: float

    @property
    def margin(self) -> float:
        return self.r_expert - self.r_negative


def hard_pairs(rewards: np.ndarray, expert: np.ndarray, k: int) -> list[HardPair]:
    """The ``k`` mis-ranked pairs of lowest margin r(e) - r(n) (most negative first; a
    tie, margin 0, is mis-ranked too). rewards: float32[M] of one program. Only the k
    lowest experts and k highest negatives can hold them."""
    r = np.nan_to_num(np.asarray(rewards, np.float64), nan=0.0)
    e_idx, n_idx = np.nonzero(expert)[0], np.nonzero(~np.asarray(expert, bool))[0]
    low = e_idx[np.argsort(r[e_idx], kind="stable")[:k]]
    high = n_idx[np.argsort(-r[n_idx], kind="stable")[:k]]
    pairs = [HardPair(int(e), int(n), float(r[e]), float(r[n])) for e in low for n in high if r[e] <= r[n]]
    pairs.sort(key=lambda p: (p.margin, p.expert, p.negative))
    return pairs[:k]


@dataclasses.dataclass(frozen=True)
class DemoScore:
    """One program's result: accuracy A, its rewards float32[M] (for hard examples),
    and the set's sizes."""

    accuracy: float
    rewards: np.ndarray
    experts: int
    negatives: int


class DemosEvaluation(EvaluationBase):
    """The ``demos`` kind: ranking accuracy on the run's demonstrations (``ctx.demos``: a
    DemoSet, or a function returning it), every program of the job in one call. Trains
    nothing."""

    name = "demos"
    trains = False  # nothing for an evaluator to compile ahead

    def job(self, ctx: Any, interfaces: list[Any], options: dict[str, Any]) -> EvalJob:
        if ctx.demos is None:
            raise ValueError("the demos evaluation needs demonstrations: a task with a scripted expert, or --demos")
        demos = ctx.demos() if callable(ctx.demos) else ctx.demos
        return EvalJob(ctx.task, interfaces, [], Budget(0, 0, 0.0), ctx.ppo, kind=self.name, data=demos)

    def run(self, job: EvalJob, budget_s: float | None) -> EvalBatch:
        t0 = time.perf_counter()
        demos = job.data
        try:
            rewards = demo_rewards(job.interfaces, demos.transitions)
        except Exception:  # one bad program must not sink the others: each alone
            return EvalBatch([_one(i, demos) for i in job.interfaces], wall_s=time.perf_counter() - t0)
        acc = ranking_accuracy(rewards, demos.expert)
        ne = int(demos.expert.sum())
        results: list[Any] = [DemoScore(float(a), r, ne, len(demos) - ne) for a, r in zip(acc, rewards)]
        return EvalBatch(results, wall_s=time.perf_counter() - t0)

    def value(self, result: DemoScore) -> float:
        """The number a pre-screen compares with its threshold."""
        return result.accuracy

    def reason(self, result: DemoScore, threshold: float) -> str:
        """Why a pre-screen rejected the program, as the LLM is told."""
        return (f"rejected before training: the reward ranks expert transitions above non-expert ones with accuracy "
                f"{result.accuracy:.3f} (1.0: every expert transition above every other; 0.5: no better than a "
                f"constant), below the threshold {threshold:g}, on {result.experts} expert and {result.negatives} "
                f"random or learner transitions. Reward the progress an expert makes toward the goal.")

    def score(self, record: Any, result: Any, job: EvalJob) -> None:
        from limen_jax.search.faults import Rejection, describe

        if isinstance(result, BaseException):
            record.error = Rejection("demos", describe(result)).to_dict()
            return
        record.evaluations[self.name] = {"accuracy": result.accuracy, "experts": result.experts,
                                         "negatives": result.negatives}
        record.metadata.setdefault("scores", {})[self.name] = result.accuracy
        if record.stage == "rejected":  # scored, not trained: neither a rejection nor a success
            record.stage = "demos"


def _one(interface: Any, demos: Any) -> Any:
    try:
        rewards = demo_rewards([interface], demos.transitions)
    except Exception as exc:
        return exc
    ne = int(demos.expert.sum())
    return DemoScore(float(ranking_accuracy(rewards, demos.expert)[0]), rewards[0], ne, len(demos) - ne)
