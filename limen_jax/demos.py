"""Demonstrations: expert and negative transitions a reward program is ranked on.

A :class:`DemoSet` holds M transitions (s, a, s') of the task's simulator, stacked (every
leaf has a leading axis M), each tagged with where it came from: ``expert`` (the task's
scripted expert, :meth:`Task.expert_action`, or a user's own file), ``random`` (uniform
random actions) or ``learner`` (a policy trained during the search, added as negatives
round by round). It lives in a run directory as ``demos.npz``: the simulator leaves in
``jax.tree`` order (``sim/<i>``, ``next_sim/<i>``) beside ``action`` and the tags, so
a user can supply their own set (``--demos path``) built on the same task.

Rollouts here are pure JAX: ``E`` episodes side by side for the task's horizon in one
jitted scan, only each environment's first episode kept.

A task with no scripted expert (the MuJoCo and Brax tasks) gets its set from a trained
policy (:func:`policy_demos`): train the reference interface and keep its policy, then
roll it out; an earlier, partly trained policy adds ``learner`` negatives::

    python -m limen_jax.train --task go1_push --interface envs/interfaces/go1_push.py --seeds 1 \
        --preset paper --steps 25000000 --save-policy ref/
    python -m limen_jax.demos --from-policy ref/ go1_push --episodes 16 --random 16 \
        [--negatives-from early/ go1_push] [--stride 5] --out go1_demos.npz
    python -m limen_jax.evolve --task go1_push --strategy grace --demos go1_demos.npz

Bad input to the command: one line on stderr, exit status 2, nothing written.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from limen_jax.cli_errors import report_bugs
from limen_jax.task import Discrete, Task, Transition, tree_where

SOURCES = ("expert", "random", "learner")
FILENAME = "demos.npz"
PolicyFn = Callable[[Any, jax.Array], jax.Array]  # (sim, key) -> action


def has_expert(task: Task) -> bool:
    """Whether the task offers a scripted expert (overrides :meth:`Task.expert_action`)."""
    return type(task).expert_action is not Task.expert_action


@dataclasses.dataclass(frozen=True)
class Episodes:
    """E episodes of T steps, as a rollout returns them (numpy).

    transitions: leaves [T, E, ...]. alive: bool[T, E], the step belongs to the episode.
    success: bool[E], the episode reached the goal. length: int32[E].
    """

    transitions: Transition
    alive: np.ndarray
    success: np.ndarray
    length: np.ndarray


def rollout(task: Task, policy: PolicyFn, key: jax.Array, episodes: int) -> Episodes:
    """``episodes`` fresh episodes of ``policy`` (a pure function of one sim and a key)."""
    fn = _rollout_fn(task, policy, int(episodes))
    trans, alive, success, length = jax.device_get(jax.tree.map(_plain, fn(key)))
    return Episodes(trans, np.asarray(alive), np.asarray(success), np.asarray(length))


def _rollout_fn(task: Task, policy: PolicyFn, episodes: int) -> Any:
    def run(key: jax.Array) -> Any:
        k_reset, k_act = jax.random.split(key)
        start = jax.vmap(task.reset)(jax.random.split(k_reset, episodes))

        def step(carry: Any, keys: jax.Array) -> Any:
            state, ended, length = carry
            actions = jax.vmap(policy)(state.sim, keys)
            nxt = jax.vmap(task.step)(state, actions)
            alive = ~ended
            done = nxt.done | (length + 1 >= task.episode_length)
            seen = Transition(sim=state.sim, action=actions, next_sim=nxt.sim)
            keep = tree_where(ended, state, nxt)
            return (keep, ended | done, length + alive.astype(jnp.int32)), (seen, alive)

        keys = jax.random.split(k_act, (task.episode_length, episodes))
        zeros = jnp.zeros((episodes,), jnp.int32)
        (last, _, length), (seen, alive) = jax.lax.scan(step, (start, jnp.zeros((episodes,), bool), zeros), keys)
        return seen, alive, last.success, length

    return jax.jit(run)


def _plain(x: jax.Array) -> jax.Array:
    """A typed PRNG key leaf (xminigrid's ``state.key``) as its raw uint32 data: numpy
    and npz hold no key dtype; programs never read it."""
    return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x


def random_policy(task: Task) -> PolicyFn:
    """Uniform random actions from the task's action space."""
    return lambda sim, key: task.action_space.sample(key)


def expert_policy(task: Task) -> PolicyFn:
    return task.expert_action


@dataclasses.dataclass(frozen=True)
class DemoSet:
    """M tagged transitions.

    transitions: leaves [M, ...] (numpy). source: str[M], one of SOURCES. round:
    int32[M], the search round that added it (0 for the initial set). episode: int32[M],
    the episode within its (source, round). step: int32[M], the step within its episode.
    """

    transitions: Transition
    source: np.ndarray
    round: np.ndarray
    episode: np.ndarray
    step: np.ndarray

    def __len__(self) -> int:
        return int(self.source.shape[0])

    @property
    def expert(self) -> np.ndarray:
        """bool[M], the transition is an expert's."""
        return np.asarray(self.source == "expert")

    def counts(self) -> dict[str, int]:
        return {s: int((self.source == s).sum()) for s in SOURCES if (self.source == s).any()}

    def extend(self, other: DemoSet) -> DemoSet:
        cat = lambda a, b: np.concatenate([np.asarray(a), np.asarray(b)])  # noqa: E731
        return DemoSet(jax.tree.map(cat, self.transitions, other.transitions), cat(self.source, other.source),
                       cat(self.round, other.round), cat(self.episode, other.episode), cat(self.step, other.step))

    def save(self, path: str | Path) -> Path:
        """Write to ``path`` (.npz) atomically."""
        path = Path(path)
        arrays: dict[str, np.ndarray] = {"action": np.asarray(self.transitions.action)}
        for name in ("sim", "next_sim"):
            for i, leaf in enumerate(jax.tree.leaves(getattr(self.transitions, name))):
                arrays[f"{name}/{i}"] = np.asarray(leaf)
        arrays.update(source=self.source.astype(str), round=self.round, episode=self.episode, step=self.step)
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(buf.getvalue())
        tmp.replace(path)
        return path


def without(demos: DemoSet, source: str, round: int) -> DemoSet:
    """``demos`` less the transitions of ``source`` added in ``round``."""
    keep = ~((demos.source == source) & (demos.round == round))
    pick = lambda x: np.asarray(x)[keep]  # noqa: E731
    return DemoSet(jax.tree.map(pick, demos.transitions), demos.source[keep], demos.round[keep],
                   demos.episode[keep], demos.step[keep])


MAX_BYTES = 8 * 2**30  # of all arrays of a demonstration set together (a long MuJoCo set is a few GB)
_OPTIONAL = ("round", "episode", "step")  # int[M] tags; 0 when absent


def load_demos(path: str | Path, task: Task, max_bytes: int = MAX_BYTES) -> DemoSet:
    """Read a set :meth:`DemoSet.save` wrote (or a user built the same way) for ``task``:
    the simulator leaves are put back into the task's state structure.

    The file is untrusted: everything is checked from the members' headers before any
    array is inflated (:mod:`limen_jax.npz`), then each array is read on its own and its
    values checked. Raises ValueError, one line naming the file and what is wrong with it,
    for a missing file, one that is not an npz, an array holding Python objects, a missing
    array, arrays whose shapes do not fit the task (each ``sim/<i>`` and ``next_sim/<i>``
    is [M, *leaf shape], ``action`` is [M, *action shape], ``source`` is str[M], ``round``,
    ``episode`` and ``step`` int[M] when given), dtypes of another kind than the task's
    (an integer leaf as integers, a float one as floats), more than ``max_bytes`` in all,
    integers that do not fit the task's dtype, or actions outside the task's action space
    (an index outside [0, n), a vector outside [low, high] or not finite)."""
    from limen_jax import npz

    path = Path(path)
    heads = npz.headers(path)
    sim = jax.eval_shape(lambda k: jax.tree.map(_plain, task.reset(k).sim), jax.random.key(0))
    treedef: Any = jax.tree.structure(sim)
    space = task.action_space
    action_dtype = np.dtype(np.int32 if isinstance(space, Discrete) else np.float32)
    want: dict[str, tuple[tuple[int, ...], np.dtype | None]] = {"action": (tuple(space.shape), action_dtype),
                                                                "source": ((), None)}
    for name in ("sim", "next_sim"):
        want.update({f"{name}/{i}": (tuple(leaf.shape), np.dtype(leaf.dtype))
                     for i, leaf in enumerate(jax.tree.leaves(sim))})
    extra = [k for k in heads if k.partition("/")[0] in ("sim", "next_sim") and k not in want]
    if extra:
        raise ValueError(f"{path}: array {extra[0]} is beyond the {treedef.num_leaves} simulator leaves of task "
                         f"{task.name!r}: a set of another task?")
    missing = [k for k in want if k not in heads]
    if missing:
        raise ValueError(f"{path}: no array {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} "
                         f"(a demonstration set of task {task.name!r} holds {treedef.num_leaves} sim/<i> and "
                         f"next_sim/<i> leaves, action and source, as python -m limen_jax.demos writes them)")
    source = heads["source"]
    if len(source.shape) != 1:
        raise ValueError(f"{path}: array source has shape {source.shape}, needs (M,): one tag a transition")
    if source.dtype.kind not in "US" or source.dtype.itemsize > 256:
        raise ValueError(f"{path}: array source has dtype {source.dtype}, needs strings (one of {list(SOURCES)})")
    m = source.shape[0]
    want.update({k: ((), np.dtype(np.int32)) for k in _OPTIONAL if k in heads})
    for key, (shape, dtype) in want.items():
        got = heads[key]
        if got.shape != (m, *shape):
            raise ValueError(f"{path}: array {key} has shape {got.shape}, task {task.name!r} needs {(m, *shape)} "
                             f"(M={m} transitions)")
        if dtype is not None and not _same_kind(got.dtype, dtype):
            raise ValueError(f"{path}: array {key} has dtype {got.dtype}, task {task.name!r} needs {dtype} "
                             f"({_KINDS[dtype.kind]})")
    total = sum(heads[k].nbytes for k in want)
    if total > max_bytes:
        raise ValueError(f"{path}: its arrays hold {total / 2**30:.1f} GiB, more than the {max_bytes / 2**30:g} GiB "
                         "a demonstration set may (limen_jax.demos.MAX_BYTES)")
    arrays: dict[str, Any] = {k: _checked(path, k, npz.read(path, k, heads[k]), dtype)
                              for k, (_, dtype) in want.items()}
    tags = arrays["source"].astype(str)
    unknown = sorted(set(tags.tolist()) - set(SOURCES))
    if unknown:
        raise ValueError(f"{path}: unknown sources {[u[:20] for u in unknown[:4]]}; expected {list(SOURCES)}")
    if not (tags == "expert").any() or (tags == "expert").all():
        raise ValueError(f"{path}: needs both expert and negative transitions")
    action = arrays["action"]
    if isinstance(space, Discrete):
        outside = (action < 0) | (action >= space.n)
    else:
        outside = ~np.isfinite(action) | (action < space.low) | (action > space.high)
    if outside.any():
        where = int(np.argwhere(outside)[0][0])
        raise ValueError(f"{path}: {int(outside.sum())} actions are outside the task's action space {space} "
                         f"(the first at transition {where}: {action[where].tolist()})")
    sims = [jax.tree.unflatten(treedef, [arrays[f"{name}/{i}"] for i in range(treedef.num_leaves)])
            for name in ("sim", "next_sim")]
    get = lambda k: arrays[k] if k in arrays else np.zeros(m, np.int32)  # noqa: E731
    return DemoSet(Transition(sim=sims[0], action=action, next_sim=sims[1]), tags,
                   get("round"), get("episode"), get("step"))


_KINDS = {"b": "booleans", "i": "integers", "u": "integers", "f": "floats", "c": "complex numbers"}


def _same_kind(got: np.dtype, want: np.dtype) -> bool:
    """Whether a file's dtype can stand for the task's: bool for bool, any integer type for
    an integer one (values checked on reading), any float type for a float one."""
    kinds = {"b": "b", "i": "iu", "u": "iu", "f": "f", "c": "c"}
    return got.kind in kinds.get(want.kind, want.kind) and got.isnative


def _checked(path: Path, key: str, array: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """``array`` in the task's ``dtype``; ValueError when its integers do not fit it."""
    if dtype is None:
        return array
    if dtype.kind in "iu" and array.size:
        info = np.iinfo(dtype)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise ValueError(f"{path}: array {key} holds {low if low < info.min else high}, outside the task's "
                             f"{dtype} range")
    return array.astype(dtype, copy=False)


def from_episodes(ep: Episodes, source: str, round: int = 0, stride: int = 1) -> DemoSet:
    """The alive transitions of ``ep``, episode by episode, tagged; with ``stride`` k only
    every k-th step of each episode (steps 0, k, 2k, ...)."""
    t_idx, e_idx = np.nonzero(ep.alive & (np.arange(ep.alive.shape[0]) % stride == 0)[:, None])
    order = np.lexsort((t_idx, e_idx))
    t_idx, e_idx = t_idx[order], e_idx[order]
    trans = jax.tree.map(lambda x: np.asarray(x)[t_idx, e_idx], ep.transitions)
    m = len(t_idx)
    return DemoSet(trans, np.full(m, source), np.full(m, round, np.int32), e_idx.astype(np.int32),
                   t_idx.astype(np.int32))


def build_demos(task: Task, seed: int, experts: int = 16, negatives: int = 16) -> DemoSet:
    """The initial set: ``experts`` episodes of the task's expert (which must succeed
    in each) and ``negatives`` episodes of random play."""
    if not has_expert(task):
        raise ValueError(f"task {task.name!r} has no scripted expert (Task.expert_action); supply --demos PATH "
                         "(python -m limen_jax.demos --from-policy writes one from a trained policy)")
    k_exp, k_neg = jax.random.split(jax.random.key(seed))
    ep = rollout(task, expert_policy(task), k_exp, experts)
    if not ep.success.all():
        raise RuntimeError(f"{task.name}: the expert failed {int((~ep.success).sum())} of {experts} episodes")
    neg = rollout(task, random_policy(task), k_neg, negatives)
    return from_episodes(ep, "expert").extend(from_episodes(neg, "random"))


def learner_rollout(task: Task, interface: Any, policy: Any, key: jax.Array, episodes: int) -> Episodes:
    """``episodes`` fresh episodes of a trained policy (:class:`~limen_jax.rl.policy.Policy`)
    acting through the interface it trained with, as the final evaluation acts (sampled
    actions, or the mode with ``eval_deterministic``); every transition kept."""
    from limen_jax.rl.normalize import normalize
    from limen_jax.rl.rollouts import network_of

    config, net = network_of(policy, task)
    width, obs_dim = int(policy.metadata["width"]), int(interface.obs_dim)
    mask = jnp.arange(width) < obs_dim

    def observe(sim: Any) -> jax.Array:
        obs = jax.vmap(lambda s: jnp.asarray(interface.observe(s), jnp.float32).reshape(-1))(sim)
        return jnp.pad(obs, [(0, 0), (0, width - obs_dim)])

    @jax.jit
    def run(params: Any, stats: Any, key: jax.Array) -> Any:
        k_reset, k_act = jax.random.split(key)
        start = jax.vmap(task.reset)(jax.random.split(k_reset, episodes))

        def step(carry: Any, key: jax.Array) -> Any:
            ts, h, prev_action, prev_reward, ended, length, t = carry
            obs = normalize(stats, observe(ts.sim), mask, config.obs_clip, config.normalize_obs)
            h, dist, _ = net.step(params, h, obs, prev_action, prev_reward, jnp.full((episodes,), t == 0))
            raw = net.dist.mode(dist) if config.eval_deterministic else net.dist.sample(key, dist)
            action = net.dist.to_env(raw)
            nxt = jax.vmap(task.step)(ts, action)
            alive = ~ended
            done = nxt.done | (t + 1 >= task.episode_length)
            keep = tree_where(ended, ts, nxt)
            seen = Transition(sim=ts.sim, action=action, next_sim=nxt.sim)
            zeros = jnp.zeros((episodes,), jnp.float32)
            return (keep, h, raw, zeros, ended | done, length + alive.astype(jnp.int32), t + 1), (seen, alive)

        carry = (start, net.initial_carry(episodes), net.dummy_action((episodes,)), jnp.zeros((episodes,)),
                 jnp.zeros((episodes,), bool), jnp.zeros((episodes,), jnp.int32), jnp.asarray(0))
        last, (seen, alive) = jax.lax.scan(step, carry, jax.random.split(k_act, task.episode_length))
        return seen, alive, last[0].success, last[5]

    trans, alive, success, length = jax.device_get(jax.tree.map(_plain, run(policy.params, policy.obs_stats, key)))
    return Episodes(trans, np.asarray(alive), np.asarray(success), np.asarray(length))


def policy_demos(task: Task, expert: tuple[Any, Any], key: jax.Array, episodes: int, *, random: int,
                 learners: Sequence[tuple[Any, Any]] = (), all_episodes: bool = False,
                 stride: int = 1) -> tuple[DemoSet, int]:
    """A set for a task with no scripted expert, from trained policies.

    expert: (interface, :class:`~limen_jax.rl.policy.Policy`) of a well trained policy
    (the reference interface's); its ``episodes`` episodes are the expert transitions,
    only the successful ones unless ``all_episodes``. Negatives: ``random`` episodes of
    random play, and ``episodes`` episodes of each (interface, policy) of ``learners``
    (early checkpoints), tagged ``learner``. ``stride`` keeps every k-th step (see
    :func:`from_episodes`). Returns the set and how many expert episodes succeeded."""
    keys = jax.random.split(key, 2 + len(learners))
    ep = learner_rollout(task, *expert, keys[0], episodes)
    won = int(ep.success.sum())
    if not all_episodes:
        ep = dataclasses.replace(ep, alive=ep.alive & ep.success[None, :])
    out = from_episodes(ep, "expert", stride=stride)
    if random:
        out = out.extend(from_episodes(rollout(task, random_policy(task), keys[1], random), "random", stride=stride))
    for n, (k, (iface, policy)) in enumerate(zip(keys[2:], learners)):
        more = from_episodes(learner_rollout(task, iface, policy, k, episodes), "learner", stride=stride)
        out = out.extend(dataclasses.replace(more, episode=more.episode + n * episodes))  # one id per episode
    return out, won


# --- CLI: python -m limen_jax.demos ---------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m limen_jax.demos",
        description="Write a demonstration set (.npz, for --demos) from a kept policy: its rollouts are the expert "
                    "transitions, random play and earlier policies the negatives.")
    p.add_argument("--from-policy", nargs=2, required=True, metavar=("RUN_DIR", "PROGRAM_ID"),
                   help="the expert: a kept policy (a run's --keep-policies, or python -m limen_jax.train "
                        "--save-policy RUN_DIR with the task's reference interface)")
    p.add_argument("--out", type=Path, required=True, help="the .npz to write")
    p.add_argument("--task", help="the task the set is for; must be the policy's (default: the policy's)")
    p.add_argument("--seed", type=int, help="which training seed's policy (default: the first kept)")
    p.add_argument("--episodes", type=int, default=16, help="episodes of the expert (and of each earlier policy)")
    p.add_argument("--random", type=int, default=16, help="episodes of uniform random play (negatives)")
    p.add_argument("--negatives-from", nargs=2, action="append", default=[], metavar=("RUN_DIR", "PROGRAM_ID"),
                   help="an earlier (partly trained) policy whose rollouts are negatives; repeatable")
    p.add_argument("--all-episodes", action="store_true",
                   help="keep the expert's failed episodes too (default: only its successful ones)")
    p.add_argument("--stride", type=int, default=1,
                   help="keep every k-th step of each episode (long MuJoCo episodes hold ~10-20 KB per state)")
    p.add_argument("--rollout-seed", type=int, default=0, help="seed of the episodes' start states and actions")
    return p


@report_bugs
def main(argv: list[str] | None = None) -> int:
    from limen_jax.program import ProgramError
    from limen_jax.rollout import BadInput

    args = _parser().parse_args(argv)
    try:
        return _write(args)
    except (BadInput, ProgramError, ValueError) as exc:
        print(f"demos: {exc}", file=sys.stderr)
        return 2


def _write(args: argparse.Namespace) -> int:
    from limen_jax.rollout import BadInput, load_kept

    if args.out.suffix != ".npz" or not args.out.parent.is_dir():
        raise BadInput(f"--out needs a .npz path in an existing directory, got {args.out}")
    if args.episodes < 1 or args.random < 0 or args.stride < 1:
        raise BadInput("--episodes and --stride must be at least 1, --random at least 0")
    if not args.random and not args.negatives_from:
        raise BadInput("no negatives: give --random N > 0 or --negatives-from RUN_DIR PROGRAM_ID")
    task, iface, policy = load_kept(*args.from_policy, seed=args.seed)
    if args.task:
        from limen_jax.registry import task_problem
        from limen_jax.task import make

        try:
            named = make(args.task).name
        except (KeyError, ImportError, ValueError) as exc:
            raise BadInput(task_problem(args.task, exc)) from None
        if named != task.name:
            raise BadInput(f"--task {args.task}: the policy in {args.from_policy[0]} was trained on {task.name!r}")
    learners = []
    for run_dir, pid in args.negatives_from:
        l_task, l_iface, l_policy = load_kept(run_dir, pid)
        if l_task.name != task.name:
            raise BadInput(f"--negatives-from {run_dir} {pid}: trained on {l_task.name!r}, not {task.name!r}")
        learners.append((l_iface, l_policy))
    start = time.perf_counter()
    data, won = policy_demos(task, (iface, policy), jax.random.key(args.rollout_seed), args.episodes,
                             random=args.random, learners=learners, all_episodes=args.all_episodes,
                             stride=args.stride)
    if not data.expert.any():
        raise BadInput(f"the policy {args.from_policy[1]} succeeded in 0 of {args.episodes} episodes: train it "
                       "longer, or keep its failed episodes with --all-episodes")
    data.save(args.out)
    seed = int(policy.metadata["seed"])
    print(f"{args.from_policy[1]} seed {seed} on {task.name}: {won} of {args.episodes} episodes succeeded; "
          f"{', '.join(f'{k} {v}' for k, v in data.counts().items())} transitions "
          f"({time.perf_counter() - start:.1f} s)")
    print(f"wrote {args.out}: rank reward programs on it with --demos {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
