"""One PPO update of one slot: epochs x minibatches of the clipped loss over a rollout."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from limen_jax.rl.config import PPOConfig
from limen_jax.rl.losses import ppo_loss
from limen_jax.rl.networks import ActorCritic

PyTree = Any


class Batch(struct.PyTreeNode):
    """One rollout of one slot, time-major [T, N, ...]; ``obs`` is what the network saw."""

    obs: jax.Array
    first: jax.Array
    prev_action: jax.Array
    prev_reward: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    advantage: jax.Array
    target: jax.Array


class FlatTree:
    """Ravel a pytree of float32 arrays with a fixed structure into one vector and back."""

    def __init__(self, template: PyTree) -> None:
        leaves, self.treedef = jax.tree.flatten(template)
        self.shapes = [tuple(x.shape) for x in leaves]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.size = int(sum(self.sizes))

    def ravel(self, tree: PyTree) -> jax.Array:
        leaves = jax.tree.leaves(tree)
        return jnp.concatenate([jnp.ravel(x).astype(jnp.float32) for x in leaves])

    def unravel(self, flat: jax.Array) -> PyTree:
        offsets = np.cumsum([0] + self.sizes)
        leaves = [flat[a:b].reshape(s) for a, b, s in zip(offsets[:-1], offsets[1:], self.shapes, strict=True)]
        return jax.tree.unflatten(self.treedef, leaves)


def shuffle(key: jax.Array, n: int) -> jax.Array:
    """A uniformly random permutation of range(n), int32[n], for n < 2**31. The same idea
    as ``jax.random.permutation`` at a fraction of its cost on a CPU, where XLA sorts
    (key, index) pairs slowly and one uint32 array quickly: each round sorts random bits
    with the index packed into their low ``b = bit_length(n - 1)`` bits (ties keep index
    order, as in a stable sort), and like JAX it draws rounds until ``n**3`` keys' worth of
    randomness is spent: ``ceil(3b / (32 - b))`` rounds, 2 for n = 4096."""
    b = max(1, (n - 1).bit_length())
    index = jnp.arange(n, dtype=jnp.uint32)
    low = jnp.uint32((1 << b) - 1)
    perm = index
    for k in jax.random.split(key, -(-3 * b // (32 - b))):
        order = jnp.sort((jax.random.bits(k, (n,), jnp.uint32) & ~low) | index) & low
        perm = perm.at[order].get(mode="promise_in_bounds")
    return perm.astype(jnp.int32)


def ppo_update(
    net: ActorCritic,
    optimizer: optax.GradientTransformation,
    flat: FlatTree,
    cfg: PPOConfig,
    params: jax.Array,
    opt_state: PyTree,
    batch: Batch,
    carry0: jax.Array,
    key: jax.Array,
    lr: jax.Array,
) -> tuple[jax.Array, PyTree, dict[str, jax.Array]]:
    """Epochs x minibatches of PPO on one slot's rollout (``batch`` leaves [T, N, ...]).

    params: float32[P], the flat parameters; carry0: float32[N, H], the recurrent state at
    the rollout's start. The MLP shuffles the T x N transitions; the GRU shuffles the N
    sequences and recomputes hidden states from ``carry0``. Returns (params, opt_state,
    loss statistics averaged over the minibatches).
    """
    T, N = batch.value.shape
    if cfg.adv_norm == "batch":
        a = batch.advantage
        batch = batch.replace(advantage=(a - a.mean()) / (a.std() + 1e-8))
    if not net.recurrent:
        # the MLP sees independent transitions: one "sequence" of T x N samples
        batch = jax.tree.map(lambda x: x.reshape((1, T * N) + x.shape[2:]), batch)
        carry0 = jnp.zeros((T * N, 0), jnp.float32)
    width = batch.value.shape[1]
    M = cfg.minibatches

    def loss_fn(p: PyTree, mb: Batch, h0: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        _, dist, value = net.sequence(p, h0, mb.obs, mb.prev_action, mb.prev_reward, mb.first)
        log_prob = net.dist.log_prob(dist, mb.action)
        return ppo_loss(
            log_prob.ravel(), mb.log_prob.ravel(), mb.advantage.ravel(), value.ravel(),
            mb.value.ravel(), mb.target.ravel(), net.dist.entropy(dist).ravel(),
            clip_eps=cfg.clip_eps, vf_clip=cfg.vf_clip, vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef,
            normalize_advantages=cfg.adv_norm == "minibatch",
        )  # fmt: skip

    grad_fn = jax.grad(loss_fn, has_aux=True)

    def minibatch(carry: tuple[jax.Array, PyTree], idx: jax.Array) -> tuple[Any, Any]:
        # gather this minibatch's samples (int32[width // M]) here, not a whole shuffled
        # copy of the rollout per epoch that is then sliced: one copy of the data, not two
        p, o = carry
        take = lambda x: x.at[:, idx].get(mode="promise_in_bounds")  # noqa: E731
        mb = (jax.tree.map(take, batch), carry0.at[idx].get(mode="promise_in_bounds"))
        grads, metrics = grad_fn(flat.unravel(p), *mb)
        updates, o = optimizer.update(flat.ravel(grads), o, p)
        return (p - lr * updates, o), metrics

    def epoch(carry: tuple[jax.Array, PyTree], k: jax.Array) -> tuple[Any, Any]:
        return jax.lax.scan(minibatch, carry, shuffle(k, width).reshape(M, width // M))

    (params, opt_state), metrics = jax.lax.scan(epoch, (params, opt_state), jax.random.split(key, cfg.epochs))
    return params, opt_state, jax.tree.map(jnp.mean, metrics)
