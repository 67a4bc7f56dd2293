"""GAE and the clipped PPO loss: top-level pure functions on arrays."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    dones: jax.Array,
    last_value: jax.Array,
    gamma: float,
    lam: float,
    *,
    truncated: jax.Array | None = None,
    truncated_value: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimates over a rollout.

    rewards, values: float32[T, ...]; ``values[t] = V(s_t)``.
    dones: bool[T, ...], the episode terminated at step t (s_{t+1} is terminal: no
        bootstrap).
    last_value: float32[...], V of the observation after the last step.
    truncated: bool[T, ...] or None, the episode was cut by the horizon at step t
        without terminating; the target bootstraps from ``truncated_value[t]`` (V of the
        true, pre-reset s_{t+1}) and the advantage does not flow across the cut.
    truncated_value: float32[T, ...], required with ``truncated``.

    Returns (advantages, returns), both float32[T, ...]; ``returns = advantages + values``.
    """
    rewards = jnp.asarray(rewards, jnp.float32)
    values = jnp.asarray(values, jnp.float32)
    terminal = jnp.asarray(dones, bool)
    if truncated is None:
        truncated = jnp.zeros_like(terminal)
        truncated_value = jnp.zeros_like(values)
    elif truncated_value is None:
        raise ValueError("truncated_value is required with truncated")
    truncated = jnp.asarray(truncated, bool) & ~terminal
    next_values = jnp.concatenate([values[1:], jnp.asarray(last_value, jnp.float32)[None]], axis=0)
    next_values = jnp.where(truncated, jnp.asarray(truncated_value, jnp.float32), next_values)
    next_values = jnp.where(terminal, 0.0, next_values)
    deltas = rewards + gamma * next_values - values
    carry_on = (~(terminal | truncated)).astype(jnp.float32)

    def backward(adv_next: jax.Array, xs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, cont = xs
        adv = delta + gamma * lam * cont * adv_next
        return adv, adv

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, carry_on), reverse=True)
    return advantages, advantages + values


def ppo_loss(
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    advantages: jax.Array,
    value: jax.Array,
    old_value: jax.Array,
    returns: jax.Array,
    entropy: jax.Array,
    *,
    clip_eps: float,
    vf_clip: float | None,
    vf_coef: float,
    ent_coef: float,
    normalize_advantages: bool = True,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The clipped-surrogate PPO loss over one minibatch (all arrays float32[B]).

    total = -min(r A, clip(r, 1 - eps, 1 + eps) A) + vf_coef * V_loss - ent_coef * H,
    each term averaged over the batch, with r = exp(log_prob - old_log_prob) and
    V_loss = 0.5 (V - R)^2, or with ``vf_clip`` the pessimistic max of that and
    0.5 (old_V + clip(V - old_V, -vf_clip, vf_clip) - R)^2.
    ``normalize_advantages`` standardises A over the minibatch (eps 1e-8).

    Returns (total, metrics) with metrics: policy_loss, value_loss, entropy, approx_kl
    (the (r - 1) - log r estimator), clip_frac.
    """
    if normalize_advantages:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages)
    policy_loss = -surrogate.mean()
    value_err = jnp.square(value - returns)
    if vf_clip is not None:
        clipped = old_value + jnp.clip(value - old_value, -vf_clip, vf_clip)
        value_err = jnp.maximum(value_err, jnp.square(clipped - returns))
    value_loss = 0.5 * value_err.mean()
    ent = entropy.mean()
    total = policy_loss + vf_coef * value_loss - ent_coef * ent
    metrics = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": ent,
        "approx_kl": ((ratio - 1.0) - log_ratio).mean(),
        "clip_frac": (jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32).mean(),
    }
    return total, metrics
