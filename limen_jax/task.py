"""The task protocol and registry.

A task is a simulator plus a trajectory-level success signal. Interface programs see
only ``TaskState.sim`` (the simulator's own state pytree, with its own field names:
``state.grid`` for XLand, ``state.data.qpos`` / ``state.info["gravity"]`` for MJX);
the engine handles horizons, auto-reset and the interface injection.

A third-party task is one class implementing :class:`Task` and one line::

    limen_jax.register("my_task", MyTask)

after which ``--task my_task`` works everywhere (or pass ``--task my_pkg.my_mod:MyTask``
without registering).
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from limen_jax.catalog import Catalog

PyTree = Any


@dataclasses.dataclass(frozen=True)
class Discrete:
    """``n`` discrete actions; actions are int32 scalars in [0, n)."""

    n: int

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, self.n, dtype=jnp.int32)


@dataclasses.dataclass(frozen=True)
class Box:
    """Continuous actions: float32 vectors of length ``dim`` in [low, high]."""

    dim: int
    low: float = -1.0
    high: float = 1.0

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.dim,)

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.uniform(key, (self.dim,), jnp.float32, self.low, self.high)


ActionSpace = Discrete | Box


class TaskState(struct.PyTreeNode):
    """State of one environment of a task.

    sim: the raw simulator state; the only thing interface programs see.
    done: bool[], the episode terminated at the last step (goal reached or failure).
    success: bool[], trajectory success so far; read when the episode ends (by
        termination or at the horizon).
    """

    sim: PyTree
    done: jax.Array
    success: jax.Array


class Transition(struct.PyTreeNode):
    """A batch of real transitions (s, a, s'), leading axis N on every leaf."""

    sim: PyTree
    action: jax.Array
    next_sim: PyTree


class Task(abc.ABC):
    """What the engine needs from a task. Every method is pure and jit-able.

    Subclasses set ``name``, ``description`` (one line), ``episode_length`` (the single
    horizon used for training and evaluation) and ``action_space``, and may declare
    perturbable parameters in ``params`` (e.g. ``{"push_force": 1.0}``), which
    :meth:`with_params` overrides.
    """

    name: str = ""
    description: str = ""
    episode_length: int = 0
    action_space: ActionSpace = Discrete(1)
    params: dict[str, float] = {}

    def __init__(self, **params: float) -> None:
        unknown = set(params) - set(self.params)
        if unknown:
            raise ValueError(f"{self.name}: unknown task parameters {sorted(unknown)}; known: {sorted(self.params)}")
        self.params = {**type(self).params, **params}

    def with_params(self, **params: float) -> Task:
        """A copy of this task with some parameters overridden (robustness sweeps)."""
        return type(self)(**{**self.params, **params})

    @abc.abstractmethod
    def reset(self, key: jax.Array) -> TaskState:
        """A fresh episode; positions and other randomised elements drawn from ``key``."""

    @abc.abstractmethod
    def step(self, state: TaskState, action: jax.Array) -> TaskState:
        """One control step. Randomness, where needed, lives in the sim state's own key."""

    @abc.abstractmethod
    def default_observation(self, sim: PyTree) -> jax.Array:
        """The baseline observation (raw state flattened): float32[D]."""

    @abc.abstractmethod
    def sparse_reward(self, sim: PyTree, action: jax.Array, next_sim: PyTree) -> jax.Array:
        """The paper's "Sparse" baseline reward: float32[], 1 on the success transition."""

    @property
    @abc.abstractmethod
    def context(self) -> str:
        """Markdown for the LLM: the task, the state fields, the actions (paper App. C)."""

    def offline_catalog(self) -> Catalog | None:
        """Features and reward terms for the offline mutator; None if the task has none."""
        return None

    def sample_transitions(self, key: jax.Array, num: int, horizon: int | None = None) -> Transition:
        """``num`` real transitions (s, a, s') from random-action rollouts.

        ``num`` environments run ``horizon`` steps (default min(episode_length, 64)),
        auto-resetting when an episode ends; of all ``num * horizon`` transitions, a
        quarter of the sample is reserved for episode-ending ones (goal reached or
        failure) when the rollouts produced any, so a reward paid on success is not
        judged constant just because random play rarely succeeds; the rest are drawn
        uniformly, covering early and late states.
        """
        horizon = int(horizon or min(self.episode_length, 64))
        k_reset, k_act, k_again, k_pick = jax.random.split(key, 4)
        states = jax.vmap(self.reset)(jax.random.split(k_reset, num))

        def advance(
            states: TaskState, keys: tuple[jax.Array, jax.Array]
        ) -> tuple[TaskState, tuple[Transition, jax.Array]]:
            akeys, rkeys = keys
            actions = jax.vmap(self.action_space.sample)(akeys)
            nxt = jax.vmap(self.step)(states, actions)
            seen = Transition(sim=states.sim, action=actions, next_sim=nxt.sim)
            fresh = jax.vmap(self.reset)(rkeys)
            return _where(nxt.done, fresh, nxt), (seen, nxt.done)

        keys = (jax.random.split(k_act, (horizon, num)), jax.random.split(k_again, (horizon, num)))
        _, (seen, done) = jax.lax.scan(advance, states, keys)
        # explicit sizes: MJX data has zero-size leaves (e.g. no contacts), which -1 cannot infer
        flat = jax.tree.map(lambda x: x.reshape((num * horizon,) + x.shape[2:]), seen)
        k_a, k_b = jax.random.split(k_pick)
        n_end = num // 4
        _, ends = jax.lax.top_k(jax.random.uniform(k_a, (num * horizon,)) + 2.0 * done.reshape(-1), n_end)
        rest = jax.random.choice(k_b, num * horizon, (num - n_end,), replace=False)
        idx = jnp.concatenate([ends, rest])
        return jax.tree.map(lambda x: x[idx], flat)


def _where(pred: jax.Array, a: PyTree, b: PyTree) -> PyTree:
    """Per-environment select over a batched pytree: pred bool[N], leaves [N, ...]."""

    def sel(x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.where(pred.reshape(pred.shape + (1,) * (x.ndim - pred.ndim)), x, y)

    return jax.tree.map(sel, a, b)


# --- registry -------------------------------------------------------------------------

TaskFactory = Callable[..., Task]

# Bundled tasks are registered by import path so that `import limen_jax` stays fast and
# the MuJoCo stack is imported only by those who use it.
_REGISTRY: dict[str, TaskFactory | str] = {
    "xland_easy": "limen_envs.xland:XLandEasy",
    "xland_medium": "limen_envs.xland:XLandMedium",
    "xland_hard": "limen_envs.xland:XLandHard",
    "go1_push": "limen_envs.go1_push:Go1Push",
    "panda_track": "limen_envs.panda_track:PandaTrack",
    "ant": "limen_envs.brax_classics:Ant",
    "humanoid": "limen_envs.brax_classics:Humanoid",
    "hopper": "limen_envs.brax_classics:Hopper",
    "walker2d": "limen_envs.brax_classics:Walker2d",
    "halfcheetah": "limen_envs.brax_classics:Halfcheetah",
}


def register(name: str, factory: TaskFactory | str, *, overwrite: bool = False) -> None:
    """Register a task factory (a Task subclass, a callable, or "module:attr")."""
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"task {name!r} is already registered")
    _REGISTRY[name] = factory


def registered_tasks() -> list[str]:
    return sorted(_REGISTRY)


def _resolve(ref: TaskFactory | str) -> TaskFactory:
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def make(name: str, **params: float) -> Task:
    """Build a task by registered name, or by ``"package.module:Class"``."""
    if name in _REGISTRY:
        factory = _resolve(_REGISTRY[name])
    elif ":" in name:
        factory = _resolve(name)
    else:
        raise KeyError(f"unknown task {name!r}; registered: {', '.join(registered_tasks())}")
    return factory(**params)


def describe(name: str) -> str:
    """The one-line description of a registered task, without building it."""
    factory = _resolve(_REGISTRY[name])
    return str(getattr(factory, "description", "") or (factory.__doc__ or "").strip().splitlines()[0])
