"""The paper preset is the reference's setting (Lossfunk/LIMEN; docs/howto/reproduce-the-paper.md
lists each value): PPO numbers, step rounding per cascade stage, and train's default steps."""

import argparse

import pytest

from limen_jax.rl import PPOConfig
from limen_jax.train import _parser, _prepare

# configs/{easy_pickup,medium_place_near,hard_rule_chain}.yaml, limen/train.py, limen/nn.py
REFERENCE = dict(
    num_envs=8192, rollout_len=16, epochs=1, minibatches=16, lr=1e-3, anneal_lr=True, adam_eps=1e-8,
    clip_eps=0.2, vf_clip=0.2, gamma=0.99, gae_lambda=0.95, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
    adv_norm="minibatch", normalize_obs=False, network="gru", gru_encoder=(256, 256), gru_action_embed=16,
    gru_hidden=512, gru_head_hidden=256, feed_prev_reward=True, carry_across_episodes=True,
    bootstrap_truncation=False, eval_episodes=50, eval_deterministic=False,
)  # fmt: skip


@pytest.mark.parametrize(("task", "horizon"), [("xland_easy", 243), ("xland_medium", 243), ("xland_hard", 507)])
def test_paper_preset_is_the_references_ppo(task, horizon):
    cfg = PPOConfig.preset(task, "paper")
    assert {k: getattr(cfg, k) for k in REFERENCE} == REFERENCE
    # xminigrid's default max_steps, 3 x height x width: the reference never overrides it in training
    assert cfg.train_horizon == horizon
    assert cfg.steps_per_update == 131_072


@pytest.mark.parametrize(
    ("task", "short", "full"),
    # the reference: num_updates = total_timesteps // num_steps // num_envs (limen/train.py:40)
    [("xland_easy", (500_000, 3), (1_000_000, 7)), ("xland_medium", (1_000_000, 7), (2_000_000, 15)),
     ("xland_hard", (3_000_000, 22), (5_000_000, 38))],
)  # fmt: skip
def test_cascade_stages_round_down_to_the_references_updates(task, short, full):
    from limen_jax.registry import task_facts

    cfg, budget = PPOConfig.preset(task, "paper"), task_facts(task).budget("paper")
    assert (budget.short_steps, cfg.num_updates(budget.short_steps)) == short
    assert (budget.full_steps, cfg.num_updates(budget.full_steps)) == full


def _steps(*argv: str) -> int:
    args: argparse.Namespace = _parser().parse_args(["--default", *argv])
    _prepare(args)
    return int(args.steps)


def test_train_paper_preset_defaults_to_the_tasks_paper_steps():
    assert _steps("--task", "xland_easy", "--preset", "paper") == 1_000_000
    assert _steps("--task", "xland_medium", "--preset", "paper") == 2_000_000
    assert _steps("--task", "xland_hard", "--preset", "paper") == 5_000_000
    assert _steps("--task", "xland_medium") == 1_000_000  # cpu preset: unchanged
    assert _steps("--task", "xland_hard", "--preset", "paper", "--steps", "300000") == 300_000


def test_auto_rollout_fuses_long_runs_and_big_updates():
    """train's "auto": fused where faster steps repay the longer compile (FUSE_MIN_UPDATES
    updates, or from two updates of FUSE_MIN_UPDATE_STEPS transitions)."""
    from limen_jax.rl.batch import auto_rollout

    cpu, paper = PPOConfig.preset("xland_easy", "cpu"), PPOConfig.preset("xland_easy", "paper")
    assert (cpu.steps_per_update, paper.steps_per_update) == (4096, 131_072)
    assert [auto_rollout(cpu, u) for u in (1, 199, 200)] == ["split", "split", "fused"]
    # the paper preset's 1M steps are 7 updates: fused (measured ~6 s saved an update)
    assert [auto_rollout(paper, u) for u in (1, 2, 7)] == ["split", "fused", "fused"]
    half = paper.replace(num_envs=2048)  # 32,768 transitions an update: below the line
    assert [auto_rollout(half, u) for u in (7, 200)] == ["split", "fused"]
