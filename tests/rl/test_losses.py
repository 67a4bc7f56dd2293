"""GAE and the PPO loss on tiny inputs with hand-derived values; jit and vmap == eager."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from limen_jax.rl.losses import compute_gae, ppo_loss

R = jnp.array([1.0, 0.0, 2.0])
V = jnp.array([0.5, 1.0, 1.5])
F = jnp.array([False, False, False])
G, L = 0.9, 0.8  # gamma * lambda = 0.72


def test_gae_no_episode_end():
    # deltas: 1 + .9*1 - .5 = 1.4; 0 + .9*1.5 - 1 = .35; 2 + .9*2 - 1.5 = 2.3
    adv, ret = compute_gae(R, V, F, jnp.asarray(2.0), G, L)
    expected = [1.4 + 0.72 * (0.35 + 0.72 * 2.3), 0.35 + 0.72 * 2.3, 2.3]
    np.testing.assert_allclose(adv, expected, rtol=1e-6)
    np.testing.assert_allclose(ret, np.asarray(expected) + np.asarray(V), rtol=1e-6)


def test_gae_termination_cuts_bootstrap_and_propagation():
    adv, _ = compute_gae(R, V, jnp.array([False, True, False]), jnp.asarray(2.0), G, L)
    # step 1 is terminal: delta = 0 - 1 = -1, and step 2's advantage does not flow back
    np.testing.assert_allclose(adv, [1.4 + 0.72 * -1.0, -1.0, 2.3], rtol=1e-6)


def test_gae_truncation_bootstraps_from_true_next_value():
    trunc = jnp.array([False, True, False])
    tv = jnp.array([0.0, 3.0, 0.0])
    adv, _ = compute_gae(R, V, F, jnp.asarray(2.0), G, L, truncated=trunc, truncated_value=tv)
    # step 1 cut by the horizon: delta = 0 + .9 * V(true s_2) - 1 = 1.7, no flow across
    np.testing.assert_allclose(adv, [1.4 + 0.72 * 1.7, 1.7, 2.3], rtol=1e-6)


def test_gae_terminal_wins_over_truncation():
    both = jnp.array([False, True, False])
    adv, _ = compute_gae(R, V, both, jnp.asarray(2.0), G, L, truncated=both, truncated_value=jnp.full(3, 3.0))
    np.testing.assert_allclose(adv, [1.4 - 0.72, -1.0, 2.3], rtol=1e-6)


def test_gae_requires_truncated_value():
    with pytest.raises(ValueError):
        compute_gae(R, V, F, jnp.asarray(2.0), G, L, truncated=F)


def test_gae_jit_and_vmap_match_eager():
    key = jax.random.key(0)
    r = jax.random.normal(key, (7, 5))
    v = jax.random.normal(jax.random.fold_in(key, 1), (7, 5))
    d = jax.random.bernoulli(jax.random.fold_in(key, 2), 0.2, (7, 5))
    t = jax.random.bernoulli(jax.random.fold_in(key, 3), 0.2, (7, 5))
    tv = jax.random.normal(jax.random.fold_in(key, 4), (7, 5))
    last = jnp.arange(5.0)
    eager = compute_gae(r, v, d, last, 0.99, 0.95, truncated=t, truncated_value=tv)
    jitted = jax.jit(compute_gae, static_argnums=(4, 5))(r, v, d, last, 0.99, 0.95, truncated=t, truncated_value=tv)
    # vmap over the batch column, one column at a time
    col = jax.vmap(
        lambda r, v, d, last, t, tv: compute_gae(r, v, d, last, 0.99, 0.95, truncated=t, truncated_value=tv),
        in_axes=(1, 1, 1, 0, 1, 1),
        out_axes=1,
    )(r, v, d, last, t, tv)
    for a, b, c in zip(eager, jitted, col, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)


LOSS_ARGS = dict(
    log_prob=jnp.array([0.0, math.log(1.5)]),
    old_log_prob=jnp.array([0.0, 0.0]),
    advantages=jnp.array([3.0, 1.0]),  # standardised: [1, -1]
    value=jnp.array([1.0, 2.0]),
    old_value=jnp.array([0.5, 2.5]),
    returns=jnp.array([2.0, 2.0]),
    entropy=jnp.array([0.5, 1.5]),
)
HYPER = dict(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01)


def test_ppo_loss_hand_derived():
    total, m = ppo_loss(**LOSS_ARGS, vf_clip=0.2, **HYPER)
    # ratio [1, 1.5]; A [1, -1]: surrogates min(1, 1) = 1 and min(-1.5, -1.2) = -1.5
    assert m["policy_loss"] == pytest.approx(0.25, abs=1e-6)
    # value errors [1, 0]; clipped values [0.7, 2.3] give [1.69, 0.09]; max -> mean .89
    assert m["value_loss"] == pytest.approx(0.5 * 0.89, abs=1e-6)
    assert m["entropy"] == pytest.approx(1.0)
    assert m["approx_kl"] == pytest.approx(0.5 * (0.5 - math.log(1.5)), abs=1e-6)
    assert m["clip_frac"] == pytest.approx(0.5)
    assert total == pytest.approx(0.25 + 0.5 * 0.445 - 0.01, abs=1e-6)


def test_ppo_loss_without_value_clip_and_raw_advantages():
    total, m = ppo_loss(**LOSS_ARGS, vf_clip=None, normalize_advantages=False, **HYPER)
    # A [3, 1]: surrogates min(3, 3) = 3 and min(1.5, 1.2) = 1.2
    assert m["policy_loss"] == pytest.approx(-(3.0 + 1.2) / 2, abs=1e-6)
    assert m["value_loss"] == pytest.approx(0.5 * 0.5, abs=1e-6)
    assert total == pytest.approx(-2.1 + 0.125 - 0.01, abs=1e-6)


def test_ppo_loss_jit_matches_eager():
    eager = ppo_loss(**LOSS_ARGS, vf_clip=0.2, **HYPER)
    jitted = jax.jit(lambda a: ppo_loss(**a, vf_clip=0.2, **HYPER))(LOSS_ARGS)
    np.testing.assert_allclose(eager[0], jitted[0], rtol=1e-6)
    for k in eager[1]:
        np.testing.assert_allclose(eager[1][k], jitted[1][k], rtol=1e-6, atol=1e-7)


def test_ppo_loss_gradient_is_clipped_outside_the_trust_region():
    # a sample whose ratio is past 1 + eps with positive advantage contributes no gradient
    def policy(lp):
        return ppo_loss(lp, jnp.zeros(2), jnp.array([1.0, 1.0]), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2),
                        jnp.zeros(2), vf_clip=None, normalize_advantages=False, **HYPER)[0]  # fmt: skip

    g = jax.grad(policy)(jnp.array([0.0, math.log(1.5)]))
    assert g[0] == pytest.approx(-0.5) and g[1] == 0.0
