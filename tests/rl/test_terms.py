"""Reward terms through the trainer: term curves, evaluation sums, scalar batches exactly
as before; trained policies kept with orbax and rolled out."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from interfaces import corridor_interfaces, corridor_obs7
from toy_tasks import Corridor

from limen_jax.interface import Interface
from limen_jax.policies import keep_policies, load_policy, policy_dir, save_policy, saved_seeds
from limen_jax.rl import PPOConfig, run_cascade, train_batch
from limen_jax.rl.rollouts import rollouts

CFG = PPOConfig(num_envs=32, rollout_len=16, epochs=4, minibatches=4, lr=3e-3, eval_episodes=64)
IFACES = corridor_interfaces()


def _terms(sim, action, next_sim):
    return jnp.stack([(next_sim.pos == next_sim.goal).astype(jnp.float32), 0.1 * (action == 1).astype(jnp.float32)])


# a trusted stand-in for a checked dict program: terms (goal, stay), reward their sum
TERMS = Interface(corridor_obs7, lambda s, a, s2: _terms(s, a, s2).sum(), 7, 1, "", "terms7",
                  reward_terms=("goal", "stay"), terms=_terms)  # fmt: skip


def test_a_scalar_batch_trains_exactly_as_before_terms():
    # Recorded at bc8872b (before reward terms) with this batch, seeds and budget.
    r = train_batch(Corridor(), [IFACES["obs7"], IFACES["blind"]], seeds=[1, 2], total_steps=3 * CFG.steps_per_update,
                    config=CFG, rollout="split")  # fmt: skip
    assert not any(n.startswith("reward/") for n in r.curves) and r.eval_terms is None
    assert r.success.tolist() == [[0.875, 0.78125], [0.03125, 0.0]]
    assert r.final_return.tolist() == [[0.875, 0.78125], [11.109375, 12.09375]]
    assert r.curves["return"].tolist() == [
        [[0.125, 0.4375, 0.6285714507102966], [0.09375, 0.25, 0.4285714328289032]],
        [[5.4375, 6.34375, 10.125], [4.84375, 7.71875, 10.28125]],
    ]
    # The loss is a float32 mean whose last bits differ between machines (XLA compiles for the
    # host CPU: an AVX-512 AMD EPYC gave values 2e-7 apart from the recorded ones, with the
    # sampled actions, successes and returns above identical).
    np.testing.assert_allclose(r.curves["policy_loss"][0], [
        [-0.033998552709817886, -0.046862415969371796, -0.038085781037807465],
        [-0.021945683285593987, -0.03169345110654831, -0.03231770172715187],
    ], rtol=1e-5)  # fmt: skip


@pytest.fixture(scope="module")
def mixed():
    """A scalar and a term program trained together, fused (the padded term slots)."""
    return train_batch(Corridor(), [IFACES["obs7"], TERMS], seeds=[1, 2], total_steps=4 * CFG.steps_per_update,
                       config=CFG, rollout="fused", return_policies=True)  # fmt: skip


def test_term_curves_and_evaluation_sums(mixed):
    assert mixed.term_names == [(), ("goal", "stay")]
    goal, stay = mixed.curves["reward/goal"], mixed.curves["reward/stay"]
    assert goal.shape == (2, 2, 4) and np.isnan(goal[0]).all() and np.isnan(stay[0]).all()
    # the terms' episode sums add up to the episode return, update by update
    np.testing.assert_allclose(goal[1] + stay[1], mixed.curves["return"][1], rtol=1e-5)
    # a goal is paid once per successful episode: the goal term's sum is the success rate
    np.testing.assert_allclose(goal[1], mixed.curves["success"][1], rtol=1e-6)
    ev = mixed.eval_terms_of(1)
    np.testing.assert_allclose(ev["goal"], mixed.success[1], rtol=1e-6)
    np.testing.assert_allclose(ev["goal"] + ev["stay"], mixed.final_return[1], rtol=1e-5)
    assert mixed.eval_terms_of(0) == {} and set(mixed.curves_of(0)) == set(mixed.curves_of(1)) - {
        "reward/goal", "reward/stay"}  # fmt: skip


def test_cascade_results_carry_own_terms_and_policies_when_asked():
    kw = dict(config=CFG, short_steps=CFG.steps_per_update, full_steps=2 * CFG.steps_per_update, seeds=[1, 2])
    scalar, terms = run_cascade(Corridor(), [IFACES["obs7"], TERMS], **kw, threshold=0.0, return_policies=True)
    assert scalar.reward_terms == () and scalar.eval_terms == {} and not any(k.startswith("reward/")
                                                                              for k in scalar.curves)  # fmt: skip
    assert terms.reward_terms == ("goal", "stay") and set(terms.eval_terms) == {"goal", "stay"}
    assert terms.curves["reward/goal"].shape == (2,) and terms.curves_per_seed["reward/goal"].shape == (2, 2)
    assert terms.eval_terms["goal"] == pytest.approx(terms.success, abs=1e-6)
    assert [p.metadata["seed"] for p in terms.policies] == [1, 2]
    assert terms.policies[0].metadata["updates"] == 2 and terms.policies[0].metadata["reward_terms"] == ["goal", "stay"]
    (gated,) = run_cascade(Corridor(), [TERMS], **kw, threshold=2.0, return_policies=True)
    assert gated.stage == "short" and gated.policies is None  # never trained to the full budget
    (plain,) = run_cascade(Corridor(), [TERMS], **kw, threshold=0.0)
    assert plain.policies is None


def test_policies_reload_bit_exactly_and_roll_out(mixed, tmp_path):
    policy = mixed.policies[1][0]
    path = save_policy(tmp_path / "p", policy.params, policy.obs_stats, policy.metadata)
    back = load_policy(path)
    assert back.metadata == {**policy.metadata, "ppo": back.metadata["ppo"]}
    leaves, back_leaves = jax.tree.leaves(policy.arrays()), jax.tree.leaves(back.arrays())
    assert jax.tree.structure(policy.arrays()) == jax.tree.structure(back.arrays())
    for a, b in zip(leaves, back_leaves, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

    log = rollouts(Corridor(), TERMS, back, seed=0, episodes=64)
    assert log.terms.shape == (16, 64, 2)
    np.testing.assert_allclose(np.asarray(log.reward), np.asarray(log.terms).sum(-1), rtol=1e-6)
    # an episode is alive up to and including its last step, and pays the goal once if it succeeds
    alive = np.asarray(log.alive)
    np.testing.assert_array_equal(alive.sum(0), np.asarray(log.length))
    np.testing.assert_array_equal(log.episode_terms[:, 0], np.asarray(log.success, np.float32))
    assert (np.asarray(log.length)[~np.asarray(log.success)] == 16).all()
    # the policy succeeds in the rollouts about as often as in the trainer's evaluation
    assert abs(float(np.asarray(log.success).mean()) - float(mixed.success[1, 0])) < 0.25
    with pytest.raises(ValueError, match="observation features"):
        rollouts(Corridor(), IFACES["obs300"], back, seed=0, episodes=4)


def test_keep_policies_all_best_none(mixed, tmp_path):
    from limen_jax.rl.cascade import CascadeResult

    def result(k, success):
        return CascadeResult(name=f"c{k}", stage="full", passed=True, short_success=0.0, success_per_seed=np.zeros(2),
                             success=success, final_return=0.0, curves={}, curves_per_seed={}, steps=0,
                             policies=mixed.policies[k])  # fmt: skip

    pairs = [("it0001-c00", result(0, 0.5)), ("it0001-c01", result(1, 0.75)),
             ("it0001-c02", CascadeResult("x", "short", False, 0.0, np.zeros(1), 0.9, 0.0, {}, {}, 0))]  # fmt: skip
    assert keep_policies(tmp_path / "none", pairs, "none") == []
    best = keep_policies(tmp_path / "best", pairs, "best")
    assert best == [policy_dir(tmp_path / "best", "it0001-c01", s).absolute() for s in (1, 2)]
    assert load_policy(best[0]).metadata["program_id"] == "it0001-c01"
    everything = keep_policies(tmp_path / "all", pairs, "all")
    assert len(everything) == 4 and saved_seeds(tmp_path / "all", "it0001-c00") == [1, 2]
    assert saved_seeds(tmp_path / "all", "it0001-c02") == []  # a short-stage program has none
    with pytest.raises(ValueError, match="which must be"):
        keep_policies(tmp_path, pairs, "some")
    with pytest.raises(ValueError, match="not a program id"):
        policy_dir(tmp_path, "../escape", 0)
