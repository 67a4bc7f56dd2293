"""Actor-critic networks and action distributions.

``ActorCritic`` gives the trainer one shape of API for both networks: a per-step call
(acting in the rollout) and a per-sequence call (the loss), each with a recurrent carry
(empty for the MLP). Parameters are initialised at the batch's width with the input
layers' rows past a candidate's own ``obs_dim`` exactly 0 (:meth:`ActorCritic.init_padded`):
padded inputs are always 0, so those rows get zero gradients, stay 0 under Adam, and
the padded network computes exactly what the unpadded one does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from limen_jax.rl.config import PPOConfig
from limen_jax.task import ActionSpace, Box, Discrete

PyTree = Any

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "swish": nn.swish}


# --- action distributions ----------------------------------------------------------------


class Categorical:
    """Discrete actions. Raw action = env action = int32 index."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.param_dim = n
        self.raw_shape: tuple[int, ...] = ()
        self.raw_dtype = jnp.int32

    def sample(self, key: jax.Array, logits: jax.Array) -> jax.Array:
        return jax.random.categorical(key, logits).astype(jnp.int32)

    def mode(self, logits: jax.Array) -> jax.Array:
        return jnp.argmax(logits, -1).astype(jnp.int32)

    def log_prob(self, logits: jax.Array, raw: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(logits)
        return jnp.take_along_axis(logp, raw[..., None].astype(jnp.int32), -1)[..., 0]

    def entropy(self, logits: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(logits)
        return -(jnp.exp(logp) * logp).sum(-1)

    def to_env(self, raw: jax.Array) -> jax.Array:
        return raw


class TanhGaussian:
    """Continuous actions: u ~ N(loc, softplus(s) + 1e-3), action = tanh(u) scaled to [low, high].

    The raw action u is stored so log-probabilities are exact (with the tanh Jacobian;
    the affine rescale adds a constant that cancels in PPO's ratio). The entropy is the
    Gaussian's (the tanh-squashed entropy has no closed form).
    """

    def __init__(self, dim: int, low: float, high: float) -> None:
        self.dim, self.low, self.high = dim, low, high
        self.param_dim = 2 * dim
        self.raw_shape = (dim,)
        self.raw_dtype = jnp.float32

    def _split(self, params: jax.Array) -> tuple[jax.Array, jax.Array]:
        loc, s = jnp.split(params, 2, axis=-1)
        return loc, jax.nn.softplus(s) + 1e-3

    def sample(self, key: jax.Array, params: jax.Array) -> jax.Array:
        loc, scale = self._split(params)
        return loc + scale * jax.random.normal(key, loc.shape, jnp.float32)

    def mode(self, params: jax.Array) -> jax.Array:
        return self._split(params)[0]

    def log_prob(self, params: jax.Array, raw: jax.Array) -> jax.Array:
        loc, scale = self._split(params)
        normal = -0.5 * jnp.square((raw - loc) / scale) - jnp.log(scale) - 0.5 * jnp.log(2 * jnp.pi)
        # log(1 - tanh(u)^2), written stably
        log_det = 2.0 * (jnp.log(2.0) - raw - jax.nn.softplus(-2.0 * raw))
        return (normal - log_det).sum(-1)

    def entropy(self, params: jax.Array) -> jax.Array:
        _, scale = self._split(params)
        return (0.5 + 0.5 * jnp.log(2 * jnp.pi) + jnp.log(scale)).sum(-1)

    def to_env(self, raw: jax.Array) -> jax.Array:
        return self.low + 0.5 * (jnp.tanh(raw) + 1.0) * (self.high - self.low)


def make_distribution(space: ActionSpace) -> Categorical | TanhGaussian:
    if isinstance(space, Discrete):
        return Categorical(space.n)
    if isinstance(space, Box):
        return TanhGaussian(space.dim, space.low, space.high)
    raise TypeError(f"unsupported action space {space!r}")


# --- modules ---------------------------------------------------------------------------


def orthogonal(scale: float = 1.0, iterations: int = 80) -> Callable[..., jax.Array]:
    """Orthogonal initialiser without LAPACK: the polar factor of a Gaussian matrix
    (Haar-distributed, like QR with sign correction), by Newton-Schulz iterations.

    flax's ``orthogonal`` calls LAPACK's QR, which under jit and vmap on a CPU can
    deadlock between XLA's and OpenBLAS's thread pools (seen here); matmuls cannot.
    """

    def init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> jax.Array:
        rows, cols = int(shape[0]), int(np.prod(shape[1:]))
        tall = (max(rows, cols), min(rows, cols))
        x = jax.random.normal(key, tall, jnp.float32)
        x = x / jnp.linalg.norm(x)

        def step(_: int, x: jax.Array) -> jax.Array:
            return 1.5 * x - 0.5 * x @ (x.T @ x)

        q = jax.lax.fori_loop(0, iterations, step, x)
        if rows < cols:
            q = q.T
        return (scale * q).reshape(tuple(shape)).astype(dtype)

    return init


def _polar(x: jax.Array, iterations: int = 80) -> jax.Array:
    """The polar factor of ``x`` (float32[R, C]) by Newton-Schulz; zero rows stay zero."""
    x = x / jnp.linalg.norm(x)

    def step(_: int, x: jax.Array) -> jax.Array:
        if x.shape[0] >= x.shape[1]:
            return 1.5 * x - 0.5 * x @ (x.T @ x)
        return 1.5 * x - 0.5 * (x @ x.T) @ x

    return jax.lax.fori_loop(0, iterations, step, x)


def _dense(features: int, name: str) -> nn.Dense:
    # The kernel is drawn after flax's init, with every other Dense kernel's
    # (ActorCritic.init_padded); its scale is in the module's kernel_scales().
    return nn.Dense(features, kernel_init=nn.initializers.zeros, name=name)


class MLPActorCritic(nn.Module):
    """Separate actor and critic MLPs: obs float32[..., D] -> (dist params, value)."""

    param_dim: int
    actor_hidden: Sequence[int]
    critic_hidden: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        act = _ACTIVATIONS[self.activation]
        x = obs
        for i, h in enumerate(self.actor_hidden):
            x = act(_dense(h, f"actor_{i}")(x))
        dist = _dense(self.param_dim, "actor_out")(x)
        v = obs
        for i, h in enumerate(self.critic_hidden):
            v = act(_dense(h, f"critic_{i}")(v))
        value = _dense(1, "critic_out")(v)[..., 0]
        return dist, value

    def kernel_scales(self) -> dict[str, float]:
        """The orthogonal scale of each Dense layer's kernel (PureJaxRL's choices)."""
        hidden = [f"actor_{i}" for i in range(len(self.actor_hidden))]
        hidden += [f"critic_{i}" for i in range(len(self.critic_hidden))]
        return {**dict.fromkeys(hidden, float(np.sqrt(2))), "actor_out": 0.01, "critic_out": 1.0}


class GRUCell(nn.Module):
    """A GRU cell with its three gates' weights stacked, as xland-minigrid's (the paper's
    reference): x float32[B, I], h float32[B, H] -> h' float32[B, H].

    r = sigmoid(x Wi_r + bi_r + h Wh_r), z = sigmoid(x Wi_z + bi_z + h Wh_z),
    n = tanh(x Wi_n + bi_n + r (h Wh_n + bn)), h' = (1 - z) n + z h.
    Wi float32[I, 3H] is Glorot-normal over the stacked matrix, Wh float32[H, 3H] has
    orthonormal rows (the stacked matrix is orthogonal, not each gate's block); biases 0.
    """

    hidden: int

    @nn.compact
    def __call__(self, h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        H = self.hidden
        wi = self.param("Wi", nn.initializers.glorot_normal(), (x.shape[-1], 3 * H), jnp.float32)
        wh = self.param("Wh", orthogonal(), (H, 3 * H), jnp.float32)
        bi = self.param("bi", nn.initializers.zeros, (3 * H,), jnp.float32)
        bn = self.param("bn", nn.initializers.zeros, (H,), jnp.float32)
        ir, iz, i_n = jnp.split(x @ wi + bi, 3, axis=-1)
        hr, hz, h_n = jnp.split(h @ wh, 3, axis=-1)
        r = nn.sigmoid(ir + hr)
        z = nn.sigmoid(iz + hz)
        n = nn.tanh(i_n + r * (h_n + bn))
        h = (1.0 - z) * n + z * h
        return h, h


class _ScannedGRU(nn.Module):
    """A GRU over time (axis 0) whose state is zeroed where ``first`` marks an episode start."""

    hidden: int

    @functools.partial(nn.scan, variable_broadcast="params", split_rngs={"params": False}, in_axes=0, out_axes=0)
    @nn.compact
    def __call__(self, carry: jax.Array, xs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        inputs, first = xs
        carry = jnp.where(first[..., None], 0.0, carry)
        return GRUCell(self.hidden, name="cell")(carry, inputs)


class GRUActorCritic(nn.Module):
    """Paper App. A, as its reference code builds it: obs encoder (Dense-ReLU per layer),
    previous-action embedding (and optionally the previous reward), GRU, actor and critic
    heads (Dense-tanh-Dense). Inputs are time-major [T, B, ...].

    ``carry_across_episodes``: ignore ``first``, so the GRU state, previous action and
    reward run on across episode ends (the reference's training); the caller starts an
    evaluation episode from zeros (action index 0, as the reference does)."""

    param_dim: int
    num_actions: int | None  # None for continuous actions (the previous action is a vector)
    encoder: Sequence[int]
    action_embed: int
    hidden: int
    head_hidden: int
    feed_prev_reward: bool = False
    carry_across_episodes: bool = False

    @nn.compact
    def __call__(
        self,
        carry: jax.Array,
        obs: jax.Array,
        prev_action: jax.Array,
        prev_reward: jax.Array,
        first: jax.Array,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        if self.carry_across_episodes:
            first = jnp.zeros_like(first)
        x = obs
        for i, h in enumerate(self.encoder):
            x = nn.relu(_dense(h, f"encoder_{i}")(x))
        if self.num_actions is not None:
            # index num_actions means "no previous action" (episode start)
            a = jnp.where(first, self.num_actions, prev_action)
            emb = nn.Embed(self.num_actions + 1, self.action_embed, name="action_embed")(a)
        else:
            a = jnp.where(first[..., None], 0.0, prev_action)
            emb = nn.Dense(self.action_embed, name="action_embed")(a)
        parts = [x, emb]
        if self.feed_prev_reward:
            parts.append(jnp.where(first, 0.0, prev_reward)[..., None])
        carry, y = _ScannedGRU(self.hidden, name="gru")(carry, (jnp.concatenate(parts, -1), first))
        pi = nn.tanh(_dense(self.head_hidden, "actor_head")(y))
        dist = _dense(self.param_dim, "actor_out")(pi)
        v = nn.tanh(_dense(self.head_hidden, "critic_head")(y))
        value = _dense(1, "critic_out")(v)[..., 0]
        return carry, dist, value

    def kernel_scales(self) -> dict[str, float]:
        """The orthogonal scale of each Dense layer's kernel drawn by ActorCritic.init_padded
        (the GRU cell and a continuous action's embedding keep their own initialisers):
        the reference's, sqrt(2) for the encoder, 2 for both heads' hidden layers."""
        encoder = dict.fromkeys((f"encoder_{i}" for i in range(len(self.encoder))), float(np.sqrt(2)))
        return {**encoder, "actor_head": 2.0, "critic_head": 2.0, "actor_out": 0.01, "critic_out": 1.0}


# --- the trainer-facing wrapper ----------------------------------------------------------


class ActorCritic:
    """The network the trainer uses, MLP or GRU, behind one API.

    carry: float32[B, H] (H = 0 for the MLP). obs: float32[B, D] per step or [T, B, D]
    per sequence. prev_action: the raw previous action (int32[B] or float32[B, A]),
    prev_reward: float32[B], first: bool[B] (this observation starts an episode).
    """

    def __init__(self, config: PPOConfig, space: ActionSpace) -> None:
        self.dist = make_distribution(space)
        self.recurrent = config.network == "gru"
        if self.recurrent:
            self.module: MLPActorCritic | GRUActorCritic = GRUActorCritic(
                param_dim=self.dist.param_dim,
                num_actions=space.n if isinstance(space, Discrete) else None,
                encoder=config.gru_encoder,
                action_embed=config.gru_action_embed,
                hidden=config.gru_hidden,
                head_hidden=config.gru_head_hidden,
                feed_prev_reward=config.feed_prev_reward,
                carry_across_episodes=config.carry_across_episodes,
            )
            self.carry_dim = config.gru_hidden
            self.input_layers: tuple[str, ...] = ("encoder_0",)
        else:
            self.module = MLPActorCritic(
                self.dist.param_dim, config.actor_hidden, config.critic_hidden, config.activation
            )
            self.carry_dim = 0
            self.input_layers = ("actor_0", "critic_0")
        self._space = space

    def initial_carry(self, batch: int) -> jax.Array:
        return jnp.zeros((batch, self.carry_dim), jnp.float32)

    def dummy_action(self, batch: tuple[int, ...]) -> jax.Array:
        return jnp.zeros(batch + self.dist.raw_shape, self.dist.raw_dtype)

    def init(self, key: jax.Array, obs_dim: int) -> PyTree:
        """Parameters for observations of length ``obs_dim`` (a candidate's own size)."""
        return self.init_padded(key, obs_dim, jnp.asarray(obs_dim, jnp.int32))

    def init_padded(self, key: jax.Array, width: int, obs_dim: jax.Array) -> PyTree:
        """Parameters for a candidate of ``obs_dim`` features padded to ``width`` inputs.

        ``obs_dim`` (int32[]) is a traced value, so one compiled program initialises any
        batch of candidates of that width: the compiled code never depends on the programs.

        Every Dense kernel of ``kernel_scales()`` is orthogonal times its scale: the polar
        factor of a Gaussian matrix. The Gaussians of all those layers come from one draw
        (one key per layer, vmapped), not one draw per layer: each draw is a separate
        threefry loop for XLA to compile. The input layers' kernels are
        orthogonal over the first ``obs_dim`` rows and exactly 0 past them. A kernel's
        entries are its draw's first ``rows x cols`` values in row-major order, and
        threefry's counter is the flat index (``jax_threefry_partitionable``, on by
        default), so row i does not depend on ``width``: a candidate starts the same in
        any batch (tests/rl/test_networks.py).
        """
        if not jax.config.jax_threefry_partitionable:  # type: ignore[attr-defined]  # a flag, set at run time
            raise RuntimeError(
                "limen_jax draws its initial parameters with jax_threefry_partitionable=True "
                "(JAX's default): without it a padded candidate's first parameters would depend "
                "on its batch's width. Leave the flag at its default."
            )
        scales = self.module.kernel_scales()
        names = sorted(scales)
        keys = jax.random.split(key, len(names) + 1)
        params = self._flax_init(keys[0], width)
        inner = dict(params["params"])
        shapes = [inner[name]["kernel"].shape for name in names]
        size = max(rows * cols for rows, cols in shapes)
        draws = jax.vmap(lambda k: jax.random.normal(k, (size,), jnp.float32))(keys[1:])
        for draw, name, (rows, cols) in zip(draws, names, shapes, strict=True):
            x = draw[: rows * cols].reshape(rows, cols)
            if name in self.input_layers:
                x = jnp.where((jnp.arange(rows) < obs_dim)[:, None], x, 0.0)
            inner[name] = {**inner[name], "kernel": scales[name] * _polar(x)}
        return {**params, "params": inner}

    def _flax_init(self, key: jax.Array, width: int) -> PyTree:
        """flax's parameters for ``width`` inputs; the kernels of ``kernel_scales()`` are 0."""
        obs = jnp.zeros((1, 1, width), jnp.float32)
        if not self.recurrent:
            return self.module.init(key, obs)
        first = jnp.ones((1, 1), bool)
        act = self.dummy_action((1, 1))
        return self.module.init(key, self.initial_carry(1), obs, act, jnp.zeros((1, 1)), first)

    def sequence(
        self,
        params: PyTree,
        carry: jax.Array,
        obs: jax.Array,
        prev_action: jax.Array,
        prev_reward: jax.Array,
        first: jax.Array,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Time-major [T, B, ...] inputs -> (final carry, dist params [T, B, P], value [T, B])."""
        if not self.recurrent:
            mlp: Any = self.module.apply(params, obs)
            return carry, mlp[0], mlp[1]
        out: Any = self.module.apply(params, carry, obs, prev_action, prev_reward, first)
        return out[0], out[1], out[2]

    def step(
        self,
        params: PyTree,
        carry: jax.Array,
        obs: jax.Array,
        prev_action: jax.Array,
        prev_reward: jax.Array,
        first: jax.Array,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """One step for a batch [B, ...] -> (carry, dist params [B, P], value [B])."""
        carry, dist, value = self.sequence(params, carry, obs[None], prev_action[None], prev_reward[None], first[None])
        return carry, dist[0], value[0]
