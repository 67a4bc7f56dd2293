"""The reward reaches the learner on the true transition; the reset pool."""

import jax.numpy as jnp
import numpy as np
import pytest
from interfaces import xland_easy_goal_bonus

import limen_jax as lj
from limen_jax.rl import PPOConfig, train_batch
from limen_jax.rl.env import EnvState, ResetPool, take_fresh


@pytest.mark.parametrize("rollout", ["split", "fused"])
def test_goal_only_reward_reaches_the_learner_xland_easy(rollout):
    """A reward paid only on the goal transition must survive the auto-reset: computing R
    on the post-reset state would drop every terminal bonus while success looks fine. Per
    update, the mean return of the episodes that ended is then exactly 10 x their success
    rate (each successful episode returns the bonus, every other one 0)."""
    task = lj.make("xland_easy")
    cfg = PPOConfig.preset("xland_easy", "cpu").replace(num_envs=64, rollout_len=64, eval_episodes=16)
    r = train_batch(task, [xland_easy_goal_bonus(task)], seeds=[0], total_steps=4 * cfg.steps_per_update,
                    config=cfg, rollout=rollout)
    success, ret = r.curves["success"][0, 0], r.curves["return"][0, 0]
    assert np.nansum(success) > 0  # random play finds the goal now and then
    np.testing.assert_allclose(ret, 10.0 * success, rtol=1e-6)


def test_take_fresh_hands_out_pool_entries_in_order():
    pool_t = jnp.arange(6, dtype=jnp.int32)
    states = EnvState(task=None, obs=jnp.zeros((6, 1)), t=pool_t, ep_return=jnp.zeros(6))
    pool = ResetPool(states, jnp.asarray(4, jnp.int32))
    fresh, pool = take_fresh(pool, jnp.array([True, False, True, True]))
    # ending envs 0, 2, 3 get entries 4, 5, 0 (wrapping); the pointer moves by 3
    np.testing.assert_array_equal(np.asarray(fresh.t)[[0, 2, 3]], [4, 5, 0])
    assert int(pool.next) == 1
