"""The interface wrapper: R on the true transition, horizons, episode records, reset pool."""

import jax
import jax.numpy as jnp
import numpy as np
from interfaces import xland_easy_goal_bonus
from toy_tasks import Corridor

import limen_jax as lj
from limen_jax.interface import default_interface
from limen_jax.rl.env import EnvState, ResetPool, rollout, take_fresh


def test_goal_only_reward_reaches_the_learner_xland_easy():
    """A reward paid only on the goal transition must survive the auto-reset: computing R
    on the post-reset state would drop every terminal bonus while success looks fine."""
    task = lj.make("xland_easy")
    iface = xland_easy_goal_bonus(task)

    def policy(key, obs):
        return jax.random.randint(key, (obs.shape[0],), 0, 6)

    _, info = jax.jit(lambda k: rollout(task, iface, policy, k, num_envs=64, num_steps=240))(jax.random.key(0))
    end = np.asarray(info.episode_end)
    success = np.asarray(info.episode_success) & end
    ret = np.asarray(info.episode_return)
    assert success.sum() >= 10  # a random policy succeeds ~15-20% of the time
    np.testing.assert_array_equal(ret[success], 10.0)  # each successful episode's return = the bonus
    np.testing.assert_array_equal(ret[end & ~success], 0.0)
    # the bonus is paid on the very step the episode ends, and nowhere else
    reward = np.asarray(info.reward)
    np.testing.assert_array_equal(reward[success], 10.0)
    assert reward.sum() == 10.0 * success.sum()
    assert np.all(np.asarray(info.terminated)[success])


def test_horizon_truncates_and_resets():
    task = Corridor()
    iface = default_interface(task)
    stay = lambda key, obs: jnp.ones(obs.shape[0], jnp.int32)  # noqa: E731
    state, info = rollout(task, iface, stay, jax.random.key(0), num_envs=4, num_steps=40)
    trunc = np.asarray(info.truncated)
    # never reaches a goal: cut at steps 16 and 32 (1-based), i.e. indices 15 and 31
    assert np.all(trunc[[15, 31]]) and trunc.sum() == 8
    assert not np.asarray(info.terminated).any() and not np.asarray(info.episode_success).any()
    np.testing.assert_array_equal(np.asarray(info.episode_length)[15], 16)
    np.testing.assert_array_equal(np.asarray(state.t), 40 - 32)
    # next_obs is the true pre-reset observation; the state's obs is the fresh one
    np.testing.assert_allclose(np.asarray(info.next_obs)[15][:, 0], 0.5)


def test_termination_records_success_and_length():
    task = Corridor()
    iface = default_interface(task)

    def toward_goal(key, obs):  # obs = [pos, goal] scaled to [0, 1]
        return jnp.where(obs[:, 1] > 0.5, 2, 0).astype(jnp.int32)

    _, info = rollout(task, iface, toward_goal, jax.random.key(1), num_envs=8, num_steps=12)
    end = np.asarray(info.episode_end)
    # 5 steps from the middle to either end, every episode
    assert np.all(end[[4, 9]]) and end.sum() == 16
    assert np.all(np.asarray(info.episode_success)[end]) and np.all(np.asarray(info.terminated)[end])
    np.testing.assert_array_equal(np.asarray(info.episode_return)[end], 1.0)
    np.testing.assert_array_equal(np.asarray(info.episode_length)[end], 5)


def test_take_fresh_hands_out_pool_entries_in_order():
    pool_t = jnp.arange(6, dtype=jnp.int32)
    states = EnvState(task=None, obs=jnp.zeros((6, 1)), t=pool_t, ep_return=jnp.zeros(6))
    pool = ResetPool(states, jnp.asarray(4, jnp.int32))
    fresh, pool = take_fresh(pool, jnp.array([True, False, True, True]))
    # ending envs 0, 2, 3 get entries 4, 5, 0 (wrapping); the pointer moves by 3
    np.testing.assert_array_equal(np.asarray(fresh.t)[[0, 2, 3]], [4, 5, 0])
    assert int(pool.next) == 1
