"""Networks: padding the input layers changes nothing; distributions are consistent."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from limen_jax.rl.config import PPOConfig
from limen_jax.rl.networks import ActorCritic, Categorical, TanhGaussian
from limen_jax.task import Box, Discrete

TINY_GRU = dict(network="gru", gru_encoder=(16, 16), gru_action_embed=4, gru_hidden=8, gru_head_hidden=16,
                num_envs=8, minibatches=2)  # fmt: skip


@pytest.mark.parametrize("overrides", [{}, TINY_GRU])
@pytest.mark.parametrize("space", [Discrete(4), Box(2)])
def test_padded_network_computes_the_same(overrides, space):
    net = ActorCritic(PPOConfig(**overrides), space)
    params = net.init(jax.random.key(0), 5)
    padded = net.init_padded(jax.random.key(0), 12, jnp.asarray(5))  # what the trainer runs
    obs = jax.random.normal(jax.random.key(1), (3, 4, 5))
    obs_pad = jnp.pad(obs, ((0, 0), (0, 0), (0, 7)))
    first = jnp.zeros((3, 4), bool).at[0].set(True)
    act = net.dummy_action((3, 4))
    carry = net.initial_carry(4)
    a = net.sequence(params, carry, obs, act, jnp.zeros((3, 4)), first)
    b = net.sequence(padded, carry, obs_pad, act, jnp.zeros((3, 4)), first)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    # one step equals the first step of a sequence
    _, d1, v1 = net.step(params, carry, obs[0], act[0], jnp.zeros(4), first[0])
    np.testing.assert_allclose(d1, a[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v1, a[2][0], rtol=1e-5, atol=1e-6)


def test_gru_state_resets_at_episode_start():
    net = ActorCritic(PPOConfig(**TINY_GRU), Discrete(3))
    params = net.init(jax.random.key(0), 4)
    obs = jax.random.normal(jax.random.key(1), (2, 1, 4))
    act = jnp.array([[1], [2]])
    first = jnp.array([[True], [True]])
    _, _, v_seq = net.sequence(params, net.initial_carry(1), obs, act, jnp.zeros((2, 1)), first)
    _, _, v_alone = net.sequence(params, net.initial_carry(1), obs[1:], act[1:], jnp.zeros((1, 1)), first[1:])
    np.testing.assert_allclose(v_seq[1], v_alone[0], rtol=1e-6)


def test_categorical():
    d = Categorical(3)
    logits = jnp.log(jnp.array([[0.2, 0.3, 0.5]]))
    assert float(d.log_prob(logits, jnp.array([2]))[0]) == pytest.approx(np.log(0.5), abs=1e-6)
    h = -(0.2 * np.log(0.2) + 0.3 * np.log(0.3) + 0.5 * np.log(0.5))
    assert float(d.entropy(logits)[0]) == pytest.approx(h, abs=1e-6)
    samples = d.sample(jax.random.key(0), jnp.broadcast_to(logits, (20000, 3)))
    np.testing.assert_allclose(np.bincount(np.asarray(samples), minlength=3) / 20000, [0.2, 0.3, 0.5], atol=0.02)


def test_tanh_gaussian_log_prob_is_a_density_over_actions():
    d = TanhGaussian(1, -1.0, 1.0)
    params = jnp.array([[0.3, 0.5]])
    # integrate exp(log p(u)) over u (density of the pre-tanh sample times the Jacobian
    # term) by changing variables back to actions a = tanh(u): the mass must be 1
    a = jnp.linspace(-0.999, 0.999, 20001)
    u = jnp.arctanh(a)[:, None]
    dens = jnp.exp(d.log_prob(jnp.broadcast_to(params, (a.shape[0], 2)), u))
    assert float(jnp.trapezoid(dens, a)) == pytest.approx(1.0, abs=2e-3)
    env = d.to_env(d.sample(jax.random.key(0), jnp.broadcast_to(params, (1000, 2))))
    assert env.shape == (1000, 1) and float(jnp.abs(env).max()) <= 1.0
    assert TanhGaussian(2, 0.0, 4.0).to_env(jnp.zeros(2)).tolist() == [2.0, 2.0]


def test_padded_init_depends_on_the_candidate_not_on_the_width():
    net = ActorCritic(PPOConfig(actor_hidden=(16,), critic_hidden=(16,)), Discrete(3))
    init = jax.jit(net.init_padded, static_argnums=1)
    a = init(jax.random.key(0), 32, jnp.asarray(5))
    b = init(jax.random.key(0), 64, jnp.asarray(5))
    for layer in ("actor_0", "critic_0"):
        ka, kb = np.asarray(a["params"][layer]["kernel"]), np.asarray(b["params"][layer]["kernel"])
        assert ka.shape == (32, 16) and kb.shape == (64, 16)
        np.testing.assert_allclose(ka[:5], kb[:5], rtol=1e-5, atol=1e-6)
        assert np.abs(ka[5:]).max() == 0.0 and np.abs(kb[5:]).max() == 0.0
        # 5 rows of 16 features: orthogonal rows, scaled by sqrt(2)
        np.testing.assert_allclose(ka[:5] @ ka[:5].T, 2.0 * np.eye(5), atol=1e-4)
    np.testing.assert_array_equal(a["params"]["actor_out"]["kernel"], b["params"]["actor_out"]["kernel"])
    # that rests on threefry's counter being the flat index; without it, a clear refusal
    with jax.threefry_partitionable(False), pytest.raises(RuntimeError, match="jax_threefry_partitionable"):
        net.init_padded(jax.random.key(0), 32, jnp.asarray(5))


@pytest.mark.parametrize("overrides", [{}, TINY_GRU])
def test_every_dense_kernel_is_orthogonal_at_its_scale(overrides):
    net = ActorCritic(PPOConfig(**overrides), Discrete(3))
    params = net.init(jax.random.key(3), 5)["params"]
    scales = net.module.kernel_scales()
    assert set(scales) <= set(params)
    for name, layer in params.items():  # a Dense layer left out of kernel_scales stays 0
        assert "kernel" not in layer or np.abs(np.asarray(layer["kernel"])).max() > 0, name
    for name, scale in scales.items():
        k = np.asarray(params[name]["kernel"], np.float64) / scale
        gram = k.T @ k if k.shape[0] >= k.shape[1] else k @ k.T
        np.testing.assert_allclose(gram, np.eye(min(k.shape)), atol=1e-4, err_msg=name)
    # no two layers share a draw
    firsts = {float(params[name]["kernel"][0, 0]) / scales[name] for name in scales}
    assert len(firsts) == len(scales)


def _reference_step(p, h, obs, prev_action, prev_reward):
    """One step of the reference's actor-critic (Lossfunk/LIMEN limen/nn.py), in numpy on
    our parameters: encoder Dense-ReLU-Dense-ReLU, action embedding, previous reward, the
    stacked GRU, heads Dense-tanh-Dense. Returns (h', logits, value)."""
    dense = lambda x, name: x @ np.asarray(p[name]["kernel"]) + np.asarray(p[name]["bias"])  # noqa: E731
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    sig = lambda x: 1.0 / (1.0 + np.exp(-x))  # noqa: E731
    x = relu(dense(relu(dense(obs, "encoder_0")), "encoder_1"))
    emb = np.asarray(p["action_embed"]["embedding"])[prev_action]
    x = np.concatenate([x, emb, prev_reward[:, None]], -1)
    c = {k: np.asarray(v) for k, v in p["gru"]["cell"].items()}
    i_r, i_z, i_n = np.split(x @ c["Wi"] + c["bi"], 3, -1)
    h_r, h_z, h_n = np.split(h @ c["Wh"], 3, -1)
    r, z = sig(i_r + h_r), sig(i_z + h_z)
    h = (1 - z) * np.tanh(i_n + r * (h_n + c["bn"])) + z * h
    logits = dense(np.tanh(dense(h, "actor_head")), "actor_out")
    value = dense(np.tanh(dense(h, "critic_head")), "critic_out")[:, 0]
    return h, logits, value


def test_gru_network_is_the_references_forward_pass():
    # biases drawn at random too, so every one of them is checked
    cfg = PPOConfig(**TINY_GRU, feed_prev_reward=True, carry_across_episodes=True)
    net = ActorCritic(cfg, Discrete(3))
    params = net.init(jax.random.key(0), 5)
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    params = jax.tree.unflatten(tree, [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])
    obs = np.asarray(jax.random.normal(jax.random.key(2), (2, 4, 5)))
    act = np.array([[0, 2, 1, 1], [2, 0, 0, 1]])
    rew = np.array([[0.0, 1.5, -0.5, 0.0], [2.0, 0.0, 0.0, 0.25]], np.float32)
    h = np.asarray(jax.random.normal(jax.random.key(3), (4, 8)))
    first = jnp.ones((2, 4), bool)  # ignored: the state runs on across episode starts
    h_seq, logits, value = net.sequence(params, jnp.asarray(h), jnp.asarray(obs), jnp.asarray(act), jnp.asarray(rew),
                                        first)  # fmt: skip
    p = params["params"]
    for t in range(2):
        h, ref_logits, ref_value = _reference_step(p, h, obs[t], act[t], rew[t])
        np.testing.assert_allclose(logits[t], ref_logits, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(value[t], ref_value, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h_seq, h, rtol=1e-4, atol=1e-5)


def test_gru_cell_initialisation_is_the_references():
    # xland-minigrid's GRU: Wi Glorot-normal over the stacked [in, 3H] matrix, Wh with
    # orthonormal rows over the stacked [H, 3H] matrix, biases 0; heads orthogonal x 2
    sizes = {"gru_encoder": (96, 96), "gru_action_embed": 3, "gru_hidden": 64, "feed_prev_reward": True}
    cfg = PPOConfig(**{**TINY_GRU, **sizes})
    net = ActorCritic(cfg, Discrete(3))
    p = net.init(jax.random.key(0), 5)["params"]
    cell = p["gru"]["cell"]
    wi, wh = np.asarray(cell["Wi"], np.float64), np.asarray(cell["Wh"], np.float64)
    assert wi.shape == (100, 192) and wh.shape == (64, 192)
    assert wi.std() == pytest.approx(np.sqrt(2.0 / (100 + 192)), rel=0.03)
    np.testing.assert_allclose(wh @ wh.T, np.eye(64), atol=1e-4)
    assert float(np.abs(np.asarray(cell["bi"])).max()) == 0.0 and float(np.abs(np.asarray(cell["bn"])).max()) == 0.0
    root2 = pytest.approx(np.sqrt(2))
    assert net.module.kernel_scales() == {"encoder_0": root2, "encoder_1": root2, "actor_head": 2.0,
                                          "critic_head": 2.0, "actor_out": 0.01, "critic_out": 1.0}  # fmt: skip
