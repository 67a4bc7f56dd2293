"""A task around any environment whose state carries ``obs``, ``reward``, ``done``,
``metrics`` and ``info`` (MuJoCo Playground's and Brax's ``State``).

The sim programs see is the environment's own state, unchanged except for two keys the
engine adds to ``state.info``: ``step_count`` (int32, control steps taken in the
episode) and ``episode_return`` (float32, the sum of the native ``reward`` so far).

Success (binary, per trajectory) comes from a task-supplied predicate ``success(sim) ->
bool[]`` evaluated on the episode's last state (at the horizon, or when the environment
terminates it). Without one, the documented default: the episode reaches the horizon
without terminating and the mean native reward per step,
``info["episode_return"] / episode_length``, is at least the task parameter
``success_reward``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from limen_jax.adapters import state_doc
from limen_jax.catalog import Catalog
from limen_jax.task import Box, Budget, Task, TaskState

SuccessFn = Callable[[Any], jax.Array]

# Generic continuous-control presets. CPU: a tiny end-to-end run (correctness, not
# learning): few envs and 32 evaluation episodes, since each is a full episode.
CONTINUOUS_CPU: dict[str, Any] = dict(
    num_envs=64, rollout_len=20, epochs=4, minibatches=4, lr=3e-4, anneal_lr=False,
    gamma=0.97, gae_lambda=0.95, clip_eps=0.2, vf_clip=None, ent_coef=0.01, vf_coef=0.5,
    max_grad_norm=1.0, adv_norm="minibatch", normalize_obs=True, network="mlp",
    activation="swish", actor_hidden=(128, 128), critic_hidden=(128, 128), eval_episodes=32,
)  # fmt: skip
# Brax's own PPO settings for its locomotion envs (brax/training/agents/ppo): batch 2048 x
# 32 minibatches of 5-step unrolls = 4096 envs x 80 steps per update, 4 passes; policy
# 4 x 32, value 5 x 256, swish.
CONTINUOUS_PAPER: dict[str, Any] = dict(
    num_envs=4096, rollout_len=80, epochs=4, minibatches=32, lr=3e-4, anneal_lr=False,
    gamma=0.97, gae_lambda=0.95, clip_eps=0.3, vf_clip=None, ent_coef=0.01, vf_coef=0.5,
    max_grad_norm=1.0, adv_norm="minibatch", normalize_obs=True, network="mlp",
    activation="swish", actor_hidden=(32, 32, 32, 32), critic_hidden=(256, 256, 256, 256, 256),
)  # fmt: skip

_CONTEXT = """\
## Environment: {title}

{summary}

**Success** (evaluated once, on the last state of the trajectory): {success}

Episode length {horizon} control steps (the same for training and evaluation).

### State (argument `state`, the environment's own state pytree)
`state.obs` is the environment's native observation and `state.reward` its native
reward for the last step; `state.done` is 1.0 when the last step ended the episode;
`state.metrics` holds the quantities the environment logs each step. The engine adds
`state.info["step_count"]` (control steps taken) and `state.info["episode_return"]`
(sum of `state.reward` so far). Every field, with its dtype and shape:
{fields}

### Actions (`action`, float32 ({act_dim},), each in [{low:g}, {high:g}])
{actions}
"""


class EnvTask(Task):
    """Base of the family adapters; subclasses set ``env_name`` and implement :meth:`load_env`.

    Class attributes a family or a user may set: ``success_fn`` (the predicate; None for
    the default rule), ``success_doc`` (its one-line description for the LLM),
    ``horizon`` (episode length; 0 for the environment's own).
    """

    family: ClassVar[str] = ""
    env_name: ClassVar[str] = ""
    horizon: ClassVar[int] = 0
    success_fn: ClassVar[SuccessFn | None] = None
    success_doc: ClassVar[str] = ""
    actions_doc: ClassVar[str] = "Each entry drives one actuator (the environment's own action scaling applies)."
    params = {"success_reward": 0.5}
    ppo_presets = {"cpu": CONTINUOUS_CPU, "paper": CONTINUOUS_PAPER}
    budgets = {
        "cpu": Budget(full_steps=25_600, iterations=1, candidates=2, seeds=2),
        "paper": Budget(full_steps=50_000_000, short_steps=5_000_000, iterations=30, candidates=1, seeds=3),
    }

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        self.env, native_horizon = self.load_env()
        self.episode_length = int(self.horizon or native_horizon)
        low, high = self.action_bounds()
        self.action_space = Box(int(self.env.action_size), low, high)
        shapes = jax.eval_shape(self.env.reset, jax.random.key(0))
        clash = {"step_count", "episode_return"} & set(shapes.info)
        if clash:
            raise ValueError(f"{self.name}: the environment's info already has {sorted(clash)}")

    # --- what a family implements -------------------------------------------------------

    def load_env(self) -> tuple[Any, int]:
        """The environment and its native episode length."""
        raise NotImplementedError

    def action_bounds(self) -> tuple[float, float]:
        return -1.0, 1.0

    def summary(self) -> str:
        """A paragraph describing the environment for the LLM."""
        paragraphs = [p.strip() for p in (type(self.env).__doc__ or "").split("\n\n")]
        text = next((p for p in paragraphs if p and not p.startswith("#")), "")
        return text or f"The {self.family} environment {self.env_name}."

    # --- dynamics -----------------------------------------------------------------------

    def start_info(self, state: Any) -> dict[str, jax.Array]:
        """Keys a subclass adds to ``state.info`` at reset (the environment's step carries
        ``info`` over, so they last the episode); none here."""
        return {}

    def reset(self, key: jax.Array) -> TaskState:
        state = self.env.reset(key)
        info = {**state.info, **self.start_info(state), "step_count": jnp.asarray(0, jnp.int32),
                "episode_return": jnp.asarray(0.0, jnp.float32)}  # fmt: skip
        false = jnp.asarray(False)
        return TaskState(sim=state.replace(info=info), done=false, success=false)

    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        sim = state.sim
        # some environments update metrics and info in place: hand them copies so that
        # `sim` (which R(s, a, s') receives as s) keeps its own
        fresh = sim.replace(metrics=dict(sim.metrics), info=dict(sim.info))
        nxt = self.env.step(fresh, jnp.asarray(action, jnp.float32))
        info = {
            **nxt.info,
            "step_count": sim.info["step_count"] + 1,
            "episode_return": sim.info["episode_return"] + jnp.asarray(nxt.reward, jnp.float32),
        }
        nxt = nxt.replace(info=info)
        # step may return weakly typed leaves where reset returns strong ones; matching them
        # keeps scan carries and jit caches stable
        nxt = jax.tree.map(lambda new, old: jax.lax.convert_element_type(new, old.dtype), nxt, sim)
        done = nxt.done > 0.5
        return TaskState(sim=nxt, done=done, success=state.success | self.succeeded(nxt))

    def is_last(self, sim: Any) -> jax.Array:
        """bool[]: this is the episode's last state (horizon reached or terminated)."""
        return (sim.info["step_count"] >= self.episode_length) | (sim.done > 0.5)

    def succeeded(self, sim: Any) -> jax.Array:
        """bool[]: the trajectory ending in ``sim`` succeeded (False before its last state)."""
        fn = type(self).success_fn
        if fn is not None:
            return self.is_last(sim) & jnp.asarray(fn(sim), bool)
        mean = sim.info["episode_return"] / self.episode_length
        at_end = (sim.info["step_count"] >= self.episode_length) & (sim.done < 0.5)
        return at_end & (mean >= self.params["success_reward"])

    # --- baselines, context, catalog --------------------------------------------------

    def default_observation(self, sim: Any) -> jax.Array:
        """The environment's native observation, flattened: float32[D]."""
        leaves = jax.tree.leaves(sim.obs)
        return jnp.concatenate([jnp.ravel(x) for x in leaves]).astype(jnp.float32)

    def sparse_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        """1.0 on the last step of a successful trajectory, else 0."""
        return self.succeeded(next_sim).astype(jnp.float32)

    def native_reward(self, sim: Any, action: jax.Array, next_sim: Any) -> jax.Array:
        """The environment's own dense reward for the transition."""
        return jnp.asarray(next_sim.reward, jnp.float32)

    def _success_text(self) -> str:
        if type(self).success_fn is not None:
            return self.success_doc or "a task-specific predicate on the last state."
        return (
            f"the episode reaches the horizon ({self.episode_length} steps) without terminating, and the "
            f"mean native reward per step, `info[\"episode_return\"] / {self.episode_length}`, is at least "
            f"{self.params['success_reward']:g}."
        )

    @property
    def context(self) -> str:
        shapes = jax.eval_shape(self.reset, jax.random.key(0)).sim
        space = self.action_space
        assert isinstance(space, Box)
        return _CONTEXT.format(
            title=f"{self.env_name} ({self.family})",
            summary=self.summary(),
            success=self._success_text(),
            horizon=self.episode_length,
            fields="\n".join(state_doc.field_lines(shapes)),
            act_dim=space.dim,
            low=space.low,
            high=space.high,
            actions=self.actions_doc,
        )

    def offline_catalog(self) -> Catalog:
        shapes = jax.eval_shape(self.reset, jax.random.key(0)).sim
        success = None
        if type(self).success_fn is None:
            success = (
                't_success = ((next_state.info["step_count"] >= HORIZON) & (next_state.done < 0.5)'
                f' & (next_state.info["episode_return"] / HORIZON >= {float(self.params["success_reward"])!r}))'
                ".astype(jnp.float32)"
            )
        return state_doc.auto_catalog(shapes, self.episode_length, success)


def subclass(base: type[EnvTask], env_name: str, *, name: str | None = None, description: str = "",
             horizon: int = 0, success: SuccessFn | None = None, success_doc: str = "",
             success_reward: float | None = None, **attrs: Any) -> type[EnvTask]:  # fmt: skip
    """A task class for one environment of a family (what ``--task family:env`` builds).

    success: the trajectory-success predicate on the last state (default: the rule in
    the module docstring); success_reward: the default rule's threshold.
    """
    task_name = name or f"{base.family}:{env_name}"
    body: dict[str, Any] = {
        "name": task_name,
        "env_name": env_name,
        "description": description or f"{base.family} environment {env_name} (adapter)",
        "horizon": int(horizon),
        "success_fn": staticmethod(success) if success is not None else None,
        "success_doc": success_doc,
        **attrs,
    }
    if success_reward is not None:
        body["params"] = {**base.params, "success_reward": float(success_reward)}
    cls_name = "".join(ch if ch.isalnum() else "_" for ch in task_name.title())
    return type(cls_name, (base,), body)
