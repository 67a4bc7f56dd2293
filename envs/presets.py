"""The bundled suite's per-task facts: PPO presets and evolve budgets (DESIGN.md §4).

Each task class sets ``ppo_presets`` and ``budgets`` from here; the engine reads them
through the task protocol (``PPOConfig.preset``, ``EvolveConfig.preset_for``). PPO
presets are dicts of ``limen_jax.rl.PPOConfig`` field values.
"""

from __future__ import annotations

from typing import Any

from limen_jax.adapters.env_task import CONTINUOUS_CPU, CONTINUOUS_PAPER
from limen_jax.task import Budget

# Settings for a 2-core CPU: small, fast updates with which xland_easy and a compact
# interface learn within a few hundred thousand steps (docs/concepts/trainer.md).
XLAND_CPU: dict[str, Any] = dict(
    num_envs=256, rollout_len=16, epochs=4, minibatches=4, lr=1e-3, anneal_lr=False,
    gamma=0.99, gae_lambda=0.95, clip_eps=0.2, vf_clip=None, ent_coef=0.01, vf_coef=0.5,
    max_grad_norm=0.5, adv_norm="minibatch", normalize_obs=True, network="mlp",
    activation="tanh", actor_hidden=(64, 64), critic_hidden=(64, 64),
)  # fmt: skip

# The paper's reference (Lossfunk/LIMEN configs/*.yaml, limen/train.py, limen/nn.py;
# docs/howto/reproduce-the-paper.md lists the settings): xminigrid's recurrent PPO. Value clipping uses the
# policy clip range, no observation normalisation, Adam eps 1e-8; the GRU sees the
# previous reward and keeps its state across episode ends; a horizon cut is terminal.
XLAND_PAPER: dict[str, Any] = dict(
    num_envs=8192, rollout_len=16, epochs=1, minibatches=16, lr=1e-3, anneal_lr=True, adam_eps=1e-8,
    gamma=0.99, gae_lambda=0.95, clip_eps=0.2, vf_clip=0.2, ent_coef=0.01, vf_coef=0.5,
    max_grad_norm=0.5, adv_norm="minibatch", normalize_obs=False, network="gru",
    gru_encoder=(256, 256), gru_action_embed=16, gru_hidden=512, gru_head_hidden=256,
    feed_prev_reward=True, carry_across_episodes=True, bootstrap_truncation=False, eval_episodes=50,
)  # fmt: skip


def xland_paper(size: int) -> dict[str, Any]:
    """XLAND_PAPER for a ``size`` x ``size`` grid: the reference trains at xminigrid's
    default horizon, 3 x height x width steps (243 for 9x9, 507 for 13x13), and judges
    success at the task's own horizon (80 or 400 steps)."""
    return {**XLAND_PAPER, "train_horizon": 3 * size * size}


# Brax PPO semantics: an update holds batch_size x num_minibatches unrolls. Go1: 256 x 32
# unrolls of 20 = 163,840 steps = 4096 envs x 40 steps; 4 passes ("updates per batch").
GO1_PAPER: dict[str, Any] = {
    **CONTINUOUS_PAPER, "rollout_len": 40, "clip_eps": 0.2, "actor_hidden": (512, 256, 128),
    "critic_hidden": (512, 256, 128),
}  # fmt: skip

# Panda: 2048 envs, unroll 10, batch 1024, 8 passes; the paper does not state the
# minibatch count, we take playground's 32: 1024 x 32 unrolls of 10 = 2048 envs x 160.
PANDA_PAPER: dict[str, Any] = {
    **CONTINUOUS_PAPER, "num_envs": 2048, "rollout_len": 160, "epochs": 8, "lr": 5e-4, "clip_eps": 0.2,
    "ent_coef": 0.015,
}  # fmt: skip

# Brax's own PPO settings for its locomotion envs, and a tiny CPU setting (correctness,
# not learning: few envs, 32 evaluation episodes, since each is a full 500-1000 steps);
# the engine's generic continuous-control presets, shared with the adapters.
BRAX_PAPER: dict[str, Any] = CONTINUOUS_PAPER
MUJOCO_CPU: dict[str, Any] = CONTINUOUS_CPU


def paper_budget(short_steps: int, full_steps: int, threshold: float) -> Budget:
    """The paper's loop (30 iterations of one candidate, 3 seeds) with a task's cascade."""
    return Budget(full_steps=full_steps, short_steps=short_steps, threshold=threshold,
                  iterations=30, candidates=1, seeds=3)  # fmt: skip


def cpu_budget(full_steps: int, iterations: int, candidates: int, threshold: float = 0.0) -> Budget:
    """On a CPU, compiling a batch costs as much as training it, so the CPU presets skip
    the cascade (one stage, one compile per iteration); 2 seeds."""
    return Budget(full_steps=full_steps, threshold=threshold, iterations=iterations, candidates=candidates, seeds=2)


# The MuJoCo tasks learn on a GPU (paper budgets); their CPU preset is a tiny end-to-end
# run (a first generation and one iteration of two candidates) that exercises everything.
TINY_CPU = cpu_budget(25_600, 1, 2)
