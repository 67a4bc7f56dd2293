"""The task protocol: what the engine needs from a task, and the facts a task owns.

A task is a simulator plus a trajectory-level success signal. Interface programs see
only ``TaskState.sim`` (the simulator's own state pytree, with its own field names);
the engine handles horizons, auto-reset and the interface injection.

Besides its dynamics, a task owns every per-task fact the engine uses: its PPO presets
(:attr:`Task.ppo_presets`), its evolve budgets and cascade threshold
(:attr:`Task.budgets`), its offline catalog (:meth:`Task.offline_catalog`) and the
markdown the LLM is given (:attr:`Task.context`). Tasks are found by name through
:mod:`limen_jax.registry` (entry points of the group ``limen_jax.tasks``, explicit
:func:`register` calls, adapter families such as ``playground:<EnvName>``, or
``package.module:Class``).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from limen_jax.registry import describe, families, make, note_task, register, register_family, registered_tasks

if TYPE_CHECKING:  # the offline mutator's data: loaded by the search, never by training
    from limen_jax.catalog import Catalog

__all__ = [
    "GPU_CANDIDATES", "GPU_ITERATIONS", "PRESETS", "ActionSpace", "Box", "Budget", "DEFAULT_BUDGETS", "Discrete",
    "Task", "TaskState", "Transition",
    "describe", "families", "make", "register", "register_family", "registered_tasks",
]  # fmt: skip

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


@dataclasses.dataclass(frozen=True)
class Budget:
    """One evolve preset's budget for a task (what ``EvolveConfig.preset_for`` reads).

    full_steps / short_steps: environment steps of the full multi-seed run and of the
        short single-seed cascade run (0: no cascade, one stage).
    threshold: the short run's success threshold for promotion to the full run.
    iterations: mutation rounds after the first generation; candidates: children per
        iteration (trained together); seeds: seeds of the full run.
    """

    full_steps: int
    iterations: int
    candidates: int
    seeds: int
    short_steps: int = 0
    threshold: float = 0.0

    def summary(self) -> str:
        """One line, as ``--help`` and ``python -m limen_jax.tasks --budgets`` show it."""
        steps = (f"{self.short_steps:,} short (threshold {self.threshold:g}) / {self.full_steps:,} full steps"
                 if self.short_steps else f"{self.full_steps:,} steps, no short run")
        plural = "s" if self.candidates != 1 else ""
        return f"{self.iterations} iterations of {self.candidates} candidate{plural}, {self.seeds} seeds, {steps}"


# What a task that declares nothing gets: the paper's loop shape with a generic budget,
# and on a CPU a small smoke run (one stage, two rounds of two candidates).
DEFAULT_BUDGETS: Mapping[str, Budget] = {
    "paper": Budget(full_steps=2_000_000, short_steps=1_000_000, threshold=0.02, iterations=30, candidates=1, seeds=3),
    "cpu": Budget(full_steps=16_000, iterations=2, candidates=2, seeds=2),
}
# "gpu": the paper's PPO settings and cascade, with 8 candidates per batch (the paper's one
# leaves the batched trainer idle): 10 iterations x 8 = 80 programs in 10 batches, against
# the paper's 30 programs in 30. 8 x 3 seeds x 8,192 envs is the batch benchmarks/gpu.py
# measures (peak memory included) on an 80 GB GPU.
GPU_CANDIDATES, GPU_ITERATIONS = 8, 10
# "quick": a first look on a CPU in a couple of minutes; a task that declares none gets its cpu budget
PRESETS = ("cpu", "quick", "paper", "gpu")


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

    Facts, read from the class without building the task (class attributes):

    ppo_presets: ``{"cpu": {...}, "paper": {...}}``, each a dict of
        ``limen_jax.rl.PPOConfig`` field values (what ``PPOConfig.preset`` returns); a
        missing kind means PPOConfig's defaults ("gpu" falls back to "paper").
    budgets: ``{"cpu": Budget, "paper": Budget}``; a missing kind means
        :data:`DEFAULT_BUDGETS`; a missing "gpu" is the task's paper budget with
        ``GPU_CANDIDATES`` candidates over ``GPU_ITERATIONS`` iterations.
    reward_ast_bin_width: the width, in AST nodes, of the archive's reward-size bins
        (``limen_jax.archive.GridSpec``; 20 bins, the last open-ended). The default 25
        spans 0-474 nodes; a task whose reward programs are larger declares a wider bin
        so they spread over the axis instead of piling into the open-ended last bin.
    """

    name: str = ""
    description: str = ""
    episode_length: int = 0
    action_space: ActionSpace = Discrete(1)
    params: dict[str, float] = {}
    ppo_presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    budgets: ClassVar[Mapping[str, Budget]] = DEFAULT_BUDGETS
    reward_ast_bin_width: ClassVar[int] = 25

    def __init__(self, **params: float) -> None:
        unknown = set(params) - set(self.params)
        if unknown:
            raise ValueError(f"{self.name}: unknown task parameters {sorted(unknown)}; known: {sorted(self.params)}")
        self.params = {**type(self).params, **params}
        # a task built directly (not by name) still has its facts found by its name
        note_task(self.name, type(self))

    @classmethod
    def ppo_preset(cls, kind: str) -> dict[str, Any]:
        """PPOConfig field values of preset ``kind`` ("cpu", "quick", "paper" or "gpu")."""
        if kind == "gpu" and "gpu" not in cls.ppo_presets:
            kind = "paper"
        if kind == "quick" and "quick" not in cls.ppo_presets:
            kind = "cpu"
        return dict(cls.ppo_presets.get(kind, {}))

    @classmethod
    def budget(cls, kind: str) -> Budget:
        """The evolve budget of preset ``kind`` ("cpu", "quick", "paper" or "gpu")."""
        if kind not in PRESETS:
            raise ValueError(f"unknown preset {kind!r}; expected one of {', '.join(PRESETS)}")
        if kind == "gpu" and "gpu" not in cls.budgets:
            return dataclasses.replace(cls.budget("paper"), candidates=GPU_CANDIDATES, iterations=GPU_ITERATIONS)
        if kind == "quick" and "quick" not in cls.budgets:
            kind = "cpu"
        return cls.budgets[kind] if kind in cls.budgets else DEFAULT_BUDGETS[kind]

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

    def render(self, sim: PyTree) -> Any:
        """One frame of one (unbatched) simulator state, an RGB ``uint8[H, W, 3]`` numpy
        array, on the host (``python -m limen_jax.rollout --frames``). Raises
        NotImplementedError, saying why, when the task cannot render (the default)."""
        raise NotImplementedError(f"task {self.name!r} does not render frames")

    def expert_action(self, sim: PyTree, key: jax.Array) -> jax.Array:
        """Optional: a scripted expert's action in one (unbatched) simulator state, pure
        JAX (vmapped over episodes). Its rollouts are the expert demonstrations that
        reward programs are ranked on (:mod:`limen_jax.demos`: ``--prescreen demos``,
        ``--strategy grace``). Raises NotImplementedError when the task has none (the
        default); such a task takes demonstrations from a file (``--demos PATH``)."""
        raise NotImplementedError(f"task {self.name!r} has no scripted expert")

    def describe_state(self, sim: PyTree) -> str:
        """One line on one (unbatched) simulator state, on the host, for prompts that show
        the LLM recorded transitions (GRACE's mis-ranked examples). The default lists
        the state's small leaves (at most 8 numbers each) by path; a task overrides it
        with what matters."""
        parts = []
        for path, leaf in jax.tree_util.tree_leaves_with_path(sim):
            if jnp.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key):
                continue
            x = np.asarray(leaf)
            if x.size <= 8:
                shown = np.array2string(x.reshape(-1), precision=3, separator=", ") if x.ndim else f"{x.item():.4g}"
                parts.append(f"{jax.tree_util.keystr(path).lstrip('.')}={shown}")
        return "; ".join(parts)

    def scripted_action(self, policy: jax.Array, t: jax.Array) -> jax.Array:
        """The action scripted policy ``policy`` (int32[], any value) takes at step ``t``
        (int32[], counted from the start of the rollout); an action of the action space.

        The checker rolls these out, one policy per environment, to test programs on
        states random play rarely reaches (an agent pressed against a far wall, an arm
        at a joint limit). Override it to steer into the task's own extreme states. The
        default is task-agnostic. Discrete(n): policy p (mod 2n) repeats action p for
        p < n, else cycles through the actions two steps each, starting at p mod n.
        Box(dim): policy p (mod 3 + 2 dim) is the zero action (clipped into the box),
        every dimension at ``high``, every dimension at ``low``, then dimension i alone
        at ``high`` (p = 3 + 2i) or at ``low`` (p = 4 + 2i).
        """
        space = self.action_space
        if isinstance(space, Discrete):
            p = policy % (2 * space.n)
            return jnp.where(p < space.n, p, (t // 2 + p) % space.n).astype(jnp.int32)
        p = policy % (3 + 2 * space.dim)
        lone = jnp.arange(space.dim) == (p - 3) // 2
        extreme = jnp.where((p - 3) % 2 == 0, space.high, space.low)
        action = jnp.where(lone, extreme, jnp.clip(0.0, space.low, space.high))
        action = jnp.where(p == 1, space.high, jnp.where(p == 2, space.low, action))
        return jnp.where(p == 0, jnp.clip(0.0, space.low, space.high), action).astype(jnp.float32)

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
            return tree_where(nxt.done, fresh, nxt), (seen, nxt.done)

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


def tree_where(pred: jax.Array, a: PyTree, b: PyTree) -> PyTree:
    """Per-environment select over batched pytrees: ``a``'s leaf where pred, else ``b``'s;
    pred bool[N], leaves [N, ...]."""

    def sel(x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.where(pred.reshape(pred.shape + (1,) * (x.ndim - pred.ndim)), x, y)

    return jax.tree.map(sel, a, b)


