"""PPO hyperparameters: one frozen config; presets (paper and CPU) come from the task.

Every number of DESIGN.md §4 is a field here. ``PPOConfig.preset(task, "paper")``
returns the values the task declares (``Task.ppo_presets``) for the paper's setting;
``"cpu"`` its settings for a small CPU (a laptop's cores).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from limen_jax.fields import coerce_fields

Network = Literal["mlp", "gru"]
AdvNorm = Literal["minibatch", "batch", "none"]


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters. Steps are environment steps of one (candidate, seed) run.

    An update collects ``num_envs x rollout_len`` transitions, then runs ``epochs``
    passes of ``minibatches`` gradient steps over them. The MLP splits the flattened
    transitions into minibatches; the GRU splits the environments (whole sequences).
    """

    num_envs: int = 256
    rollout_len: int = 16
    epochs: int = 4
    minibatches: int = 4
    lr: float = 1e-3
    anneal_lr: bool = False
    adam_eps: float = 1e-5
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    vf_clip: float | None = None  # clip range of the value update; None = plain MSE
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    adv_norm: AdvNorm = "minibatch"
    normalize_obs: bool = True
    obs_clip: float = 10.0  # normalised observations are clipped to [-obs_clip, obs_clip]
    network: Network = "mlp"
    activation: str = "tanh"  # tanh | relu | swish (MLP trunks)
    actor_hidden: tuple[int, ...] = (64, 64)
    critic_hidden: tuple[int, ...] = (64, 64)
    # GRU actor-critic (paper App. A): obs encoder, previous-action embedding, GRU, heads.
    gru_encoder: tuple[int, ...] = (256, 256)
    gru_action_embed: int = 16
    gru_hidden: int = 512
    gru_head_hidden: int = 256
    feed_prev_reward: bool = False  # off: it leaks the evolved reward into the observation
    # On: the GRU state, previous action and previous reward run on across episode ends
    # in training (xland-minigrid's recurrent PPO, the paper's reference); each
    # evaluation episode still starts from zeros. Off: all three restart with each episode.
    carry_across_episodes: bool = False
    # Training episodes are cut after this many steps; None: the task's episode_length.
    # Success is always judged at episode_length (an episode that succeeds later fails).
    train_horizon: int | None = None
    # On: a horizon cut bootstraps from V of the true next state; off: it is treated as
    # terminal (the paper's reference, whose GAE stops at every episode end).
    bootstrap_truncation: bool = True
    # Fresh episode starts drawn per rollout, as a multiple of num_envs, handed out in
    # order to the envs whose episode ends (wrapping around if more end); 0 = reset
    # every env at every step (exact, but resets dominate the cost of some simulators).
    reset_pool: int = 2
    eval_episodes: int = 128
    eval_deterministic: bool = False  # False: sample actions, as the paper measures success

    def __post_init__(self) -> None:
        coerce_fields(PPOConfig, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        if self.network not in ("mlp", "gru"):
            raise ValueError(f"network must be 'mlp' or 'gru', got {self.network!r}")
        if self.adv_norm not in ("minibatch", "batch", "none"):
            raise ValueError(f"adv_norm must be minibatch, batch or none, got {self.adv_norm!r}")
        if self.activation not in ("tanh", "relu", "swish"):
            raise ValueError(f"activation must be tanh, relu or swish, got {self.activation!r}")
        for name in ("num_envs", "rollout_len", "epochs", "minibatches", "eval_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.train_horizon is not None and self.train_horizon < 1:
            raise ValueError("train_horizon must be >= 1 (or None: the task's episode_length)")
        if self.reset_pool < 0:
            raise ValueError("reset_pool must be >= 0")
        split = self.num_envs if self.network == "gru" else self.num_envs * self.rollout_len
        if split % self.minibatches:
            unit = "num_envs" if self.network == "gru" else "num_envs * rollout_len"
            raise ValueError(f"{unit} = {split} is not divisible by minibatches = {self.minibatches}")

    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.rollout_len

    def num_updates(self, total_steps: int) -> int:
        """Updates that fit in ``total_steps`` env steps (at least one)."""
        return max(1, int(total_steps) // self.steps_per_update)

    def replace(self, **changes: Any) -> PPOConfig:
        """A copy with some fields changed; unknown fields and values of the wrong type
        (``lr="3e-4"``, ``num_envs=256.5``) are an error; ints become floats and lists
        tuples where the field says so."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown PPOConfig fields {sorted(unknown)}")
        return dataclasses.replace(self, **coerce_fields(PPOConfig, changes))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PPOConfig:
        """Build from a plain dict (e.g. a run config); unknown keys are an error."""
        return cls().replace(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def preset(cls, task_name: str, kind: str = "cpu") -> PPOConfig:
        """The task's preset: "paper" (DESIGN.md §4), "gpu" (the paper's unless the task declares
        one), "cpu" (a small CPU) or "quick" (the cpu one unless the task declares one), from
        ``Task.ppo_presets``."""
        if kind not in ("cpu", "quick", "paper", "gpu"):
            raise ValueError(f"preset kind must be 'cpu', 'quick', 'paper' or 'gpu', got {kind!r}")
        from limen_jax.registry import task_facts

        facts = task_facts(task_name)  # None for an unknown name: PPOConfig's defaults
        return cls.from_dict(facts.ppo_preset(kind) if facts is not None else {})
