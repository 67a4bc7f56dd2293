"""Evaluation scores each environment's first episode, across rollout chunks."""

import jax.numpy as jnp
import numpy as np

from limen_jax.rl.evaluate import Score, eval_tally


def _chunk(end, success, ret, length=None):
    """Per-step records of one slot (K = S = 1), given time-major [T, N] -> [1, 1, T, N];
    ``length`` (episode lengths where they end) defaults to 1."""
    lead = lambda x: jnp.asarray(x)[None, None]  # noqa: E731
    end = np.asarray(end, bool)
    length = np.ones(end.shape) if length is None else np.asarray(length)
    return {"end": lead(end), "ep_success": lead(np.where(end, success, 0.0).astype(np.float32)),
            "ep_return": lead(np.where(end, ret, 0.0).astype(np.float32)),
            "ep_length": lead(np.where(end, length, 0.0).astype(np.float32))}  # fmt: skip


def test_only_the_first_episode_of_each_environment_counts():
    # 4 envs, two chunks of 2 steps. env 0: succeeds at step 1, then fails at step 3 (its
    # second episode: ignored). env 1: never ends (no success, return 0). env 2: fails at
    # step 2 with return 5. env 3: succeeds at step 3 with return 2.
    first = _chunk(end=[[0, 0, 0, 0], [1, 0, 0, 0]], success=[[0, 0, 0, 0], [1, 0, 0, 0]],
                   ret=[[0, 0, 0, 0], [7, 0, 0, 0]])  # fmt: skip
    second = _chunk(end=[[0, 0, 1, 0], [1, 0, 0, 1]], success=[[0, 0, 0, 0], [0, 0, 0, 1]],
                    ret=[[0, 0, 5, 0], [9, 0, 0, 2]])  # fmt: skip
    score = Score(jnp.ones((1, 1, 4), bool), jnp.zeros((1, 1, 4), bool), jnp.zeros((1, 1, 4), jnp.float32))
    score = eval_tally(eval_tally(score, first), second)
    assert score.alive[0, 0].tolist() == [False, True, False, False]
    assert score.success[0, 0].tolist() == [True, False, False, True]
    assert score.returns[0, 0].tolist() == [7.0, 0.0, 5.0, 2.0]


def test_a_success_after_the_limit_is_a_failure():
    # training horizon longer than the task's (the paper preset trains 243-step episodes,
    # judges at 80): env 0 succeeds at step 80, env 1 at step 81, env 2 fails at step 12
    chunk = _chunk(end=[[1, 1, 1]], success=[[1, 1, 0]], ret=[[1, 1, 0]], length=[[80, 81, 12]])
    empty = Score(jnp.ones((1, 1, 3), bool), jnp.zeros((1, 1, 3), bool), jnp.zeros((1, 1, 3), jnp.float32))
    assert eval_tally(empty, chunk, limit=80).success[0, 0].tolist() == [True, False, False]
    assert eval_tally(empty, chunk).success[0, 0].tolist() == [True, True, False]
