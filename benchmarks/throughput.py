"""Training throughput: env steps/s inside PPO with an evolved-size interface (~150
features) vs the raw environment's random-action throughput (task step + auto-reset,
the same number of parallel environments), as a fraction of that limit.

    python benchmarks/throughput.py            # GPU defaults: 8192 envs
    python benchmarks/throughput.py --quick    # CPU: 256 envs (the CPU preset)

Both sides are timed after compilation (best of --repeats). Also printed: PPO with one
epoch per update, to show how much of the gap is the gradient work rather than the
rollout. The last line is the fraction for the preset's settings.

    python benchmarks/throughput.py --quick --terms   # scalar reward vs the same as 3 named terms

``--terms`` instead times PPO with the 147-feature interface's reward as one scalar and
as three named terms (each term's episode sum logged per update), both compiled first,
then timed alternately (best of --repeats each), split and fused rollouts.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _xland_interfaces import evolved_size, evolved_size_terms  # noqa: E402

import limen_jax as lj  # noqa: E402
from limen_jax.rl import BatchTrainer, PPOConfig  # noqa: E402
from limen_jax.task import tree_where  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402


def raw_throughput(task, num_envs: int, steps: int, repeats: int) -> float:
    """Random actions, auto-reset where an episode ends (terminated or at the horizon)."""

    def run(key):
        k0, k1 = jax.random.split(key)
        state = jax.vmap(task.reset)(jax.random.split(k0, num_envs))
        t = jnp.zeros(num_envs, jnp.int32)

        def body(carry, key):
            state, t = carry
            ka, kr = jax.random.split(key)
            actions = jax.vmap(task.action_space.sample)(jax.random.split(ka, num_envs))
            nxt = jax.vmap(task.step)(state, actions)
            end = nxt.done | (t + 1 >= task.episode_length)
            fresh = jax.vmap(task.reset)(jax.random.split(kr, num_envs))
            return (tree_where(end, fresh, nxt), jnp.where(end, 0, t + 1)), None

        (state, t), _ = jax.lax.scan(body, (state, t), jax.random.split(k1, steps))
        return state.done.sum() + t.sum()

    fn = jax.jit(run)
    jax.block_until_ready(fn(jax.random.key(0)))
    best = 0.0
    for r in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(jax.random.key(r + 1)))
        best = max(best, num_envs * steps / (time.perf_counter() - t0))
    return best


def ppo_throughput(task, config: PPOConfig, updates: int, repeats: int) -> float:
    trainer = BatchTrainer(task, [evolved_size(task)], config, 1)
    state = trainer.init([0], updates * (repeats + 1))
    state, _ = trainer.run(state, updates)  # compile + warm-up
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        state, curves = trainer.run(state, updates)
        best = max(best, updates * config.steps_per_update / (time.perf_counter() - t0))
    return best


def terms_throughput(task, config: PPOConfig, updates: int, repeats: int, rollout: str) -> dict[str, float]:
    """Steps/s of PPO with the scalar reward and with it as named terms, timed alternately."""
    runs = {}
    for name, iface in (("scalar", evolved_size(task)), ("terms", evolved_size_terms(task))):
        trainer = BatchTrainer(task, [iface], config, 1, rollout=rollout)
        state = trainer.init([0], updates * (repeats + 1))
        state, _ = trainer.run(state, updates)  # compile + warm-up
        runs[name] = [trainer, state]
    best = dict.fromkeys(runs, 0.0)
    for _ in range(repeats):
        for name, run in runs.items():
            t0 = time.perf_counter()
            run[1], _ = run[0].run(run[1], updates)
            best[name] = max(best[name], updates * config.steps_per_update / (time.perf_counter() - t0))
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--envs", type=int, default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--terms", action="store_true", help="scalar reward vs the same reward as named terms")
    _record.add_argument(p)
    args = p.parse_args()
    task = lj.make("xland_easy")
    config = PPOConfig.preset(task.name, "cpu")
    envs = args.envs or (config.num_envs if args.quick else 8192)
    config = config.replace(num_envs=envs)
    updates = 16 if args.quick else 32
    if args.terms:
        terms: dict[str, float] = {}
        for rollout in ("split", "fused"):
            best = terms_throughput(task, config, updates, args.repeats, rollout)
            print(f"PPO, 147-feature interface, {envs} envs, {rollout}: scalar reward {best['scalar']:,.0f} steps/s, "
                  f"3 named terms {best['terms']:,.0f} steps/s (ratio {best['terms'] / best['scalar']:.3f})",
                  flush=True)  # fmt: skip
            terms[f"{rollout}: 3 named terms / scalar reward"] = best["terms"] / best["scalar"]
        _record.write(__file__, terms, args, variant="terms")
        return
    raw = raw_throughput(task, envs, config.rollout_len * updates, args.repeats)
    print(f"raw env, random actions, {envs} envs: {raw:,.0f} steps/s", flush=True)
    one = ppo_throughput(task, config.replace(epochs=1), updates, args.repeats)
    print(f"PPO training, 147-feature interface, {envs} envs, 1 epoch per update: {one:,.0f} steps/s", flush=True)
    ppo = ppo_throughput(task, config, updates, args.repeats)
    print(f"PPO training, 147-feature interface, {envs} envs, {config.epochs} epochs x {config.minibatches} "
          f"minibatches (the preset): {ppo:,.0f} steps/s", flush=True)  # fmt: skip
    print(f"training throughput / raw env throughput: {ppo / raw:.2f}")
    _record.write(__file__, {
        "training throughput / raw env throughput": ppo / raw, "raw env steps/s": raw,
        "PPO steps/s, 1 epoch per update": one, "PPO steps/s, the preset": ppo, "envs": envs,
    }, args)  # fmt: skip


if __name__ == "__main__":
    main()
