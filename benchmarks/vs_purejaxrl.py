"""Our PPO vs a PureJaxRL-style single run written here, same task, interface, steps
and network: wall time and final success side by side.

The baseline follows PureJaxRL's ``make_train(config)`` closure (ppo.py): one jitted
function for one seed, auto-reset by a select on every step, the value loss clipped,
no observation normalisation, and episode ends at the horizon treated as terminal (no
bootstrap). Its interface reward is computed on the true transition, as ours is, and
its hyperparameters are ours (CPU preset): 2x64 tanh actor and critic, 256 envs x 16
steps, 4 epochs x 4 minibatches, Adam 1e-3, clip 0.2, gamma 0.99, lambda 0.95.
Both are evaluated the same way (fresh episodes at the horizon, sampled actions).

    python benchmarks/vs_purejaxrl.py            # GPU: 1M steps, 3 seeds each
    python benchmarks/vs_purejaxrl.py --quick    # CPU: 250k steps, 1 seed

Ours runs its fused rollout by default: like the closure, one run's steps compiled with
its program inside. ``--rollout split`` runs the path a search uses (the steps compiled
once per shape for every program, the programs' kernel apart), and ``--rollout auto``
what ``train_batch`` picks for this length (split under ``FUSE_MIN_UPDATES`` updates:
with a warm compile cache a new program then compiles only its kernel).

Prints the compile and running ratios; the last line is the wall-time ratio
(baseline / ours).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # flax's orthogonal init calls LAPACK
os.environ["LIMEN_JAX_XLA_CACHE"] = "off"

import argparse  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from _xland_interfaces import candidate  # noqa: E402

import limen_jax as lj  # noqa: E402
from limen_jax.rl import PPOConfig, train_batch  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402


class ActorCritic(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        orth = nn.initializers.orthogonal
        a = nn.tanh(nn.Dense(64, kernel_init=orth(np.sqrt(2)))(x))
        a = nn.tanh(nn.Dense(64, kernel_init=orth(np.sqrt(2)))(a))
        logits = nn.Dense(self.action_dim, kernel_init=orth(0.01))(a)
        c = nn.tanh(nn.Dense(64, kernel_init=orth(np.sqrt(2)))(x))
        c = nn.tanh(nn.Dense(64, kernel_init=orth(np.sqrt(2)))(c))
        return logits, nn.Dense(1, kernel_init=orth(1.0))(c)[:, 0]


def _where(pred, a, b):
    return jax.tree.map(lambda x, y: jnp.where(pred.reshape(pred.shape + (1,) * (x.ndim - 1)), x, y), a, b)


def make_train(config: dict[str, Any], task, iface):
    n_envs, n_steps = config["NUM_ENVS"], config["NUM_STEPS"]
    n_updates = config["TOTAL_TIMESTEPS"] // n_steps // n_envs
    mb_size = n_envs * n_steps // config["NUM_MINIBATCHES"]
    network = ActorCritic(task.action_space.n)
    observe = jax.vmap(iface.observe)
    reward_fn = jax.vmap(iface.reward)

    def env_reset(key):
        s = jax.vmap(task.reset)(jax.random.split(key, n_envs))
        return (s, jnp.zeros(n_envs, jnp.int32)), observe(s.sim)

    def env_step(key, env_state, action):
        s, t = env_state
        nxt = jax.vmap(task.step)(s, action)
        reward = reward_fn(s.sim, action, nxt.sim)
        done = nxt.done | (t + 1 >= task.episode_length)
        fresh = jax.vmap(task.reset)(jax.random.split(key, n_envs))
        s2 = _where(done, fresh, nxt)
        info = {"success": nxt.success, "done": done}
        return (s2, jnp.where(done, 0, t + 1)), observe(s2.sim), reward, done, info

    def train(rng):
        rng, k_init, k_env = jax.random.split(rng, 3)
        params = network.init(k_init, jnp.zeros((1, iface.obs_dim)))
        tx = optax.chain(optax.clip_by_global_norm(config["MAX_GRAD_NORM"]), optax.adam(config["LR"], eps=1e-5))
        opt_state = tx.init(params)
        env_state, obs = env_reset(k_env)

        def _update_step(runner_state, unused):
            def _env_step(runner_state, unused):
                params, opt_state, env_state, last_obs, rng = runner_state
                rng, k_act, k_step = jax.random.split(rng, 3)
                logits, value = network.apply(params, last_obs)
                action = jax.random.categorical(k_act, logits)
                log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], 1)[:, 0]
                env_state, obs, reward, done, info = env_step(k_step, env_state, action)
                transition = (done, action, value, reward, log_prob, last_obs, info)
                return (params, opt_state, env_state, obs, rng), transition

            runner_state, traj = jax.lax.scan(_env_step, runner_state, None, n_steps)
            params, opt_state, env_state, last_obs, rng = runner_state
            done, action, value, reward, log_prob, obs, info = traj
            _, last_val = network.apply(params, last_obs)

            def _gae(gae_and_next, x):
                gae, next_value = gae_and_next
                d, v, r = x
                delta = r + config["GAMMA"] * next_value * (1 - d) - v
                gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - d) * gae
                return (gae, v), gae

            _, adv = jax.lax.scan(_gae, (jnp.zeros_like(last_val), last_val), (done, value, reward), reverse=True)
            targets = adv + value

            def _update_epoch(update_state, unused):
                def _update_minibatch(train_state, batch):
                    params, opt_state = train_state
                    b_obs, b_act, b_logp, b_val, b_adv, b_tgt = batch

                    def _loss_fn(params):
                        logits, v = network.apply(params, b_obs)
                        logp_all = jax.nn.log_softmax(logits)
                        logp = jnp.take_along_axis(logp_all, b_act[:, None], 1)[:, 0]
                        v_clip = b_val + (v - b_val).clip(-config["CLIP_EPS"], config["CLIP_EPS"])
                        v_loss = 0.5 * jnp.maximum(jnp.square(v - b_tgt), jnp.square(v_clip - b_tgt)).mean()
                        ratio = jnp.exp(logp - b_logp)
                        a = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)
                        eps = config["CLIP_EPS"]
                        pg = -jnp.minimum(ratio * a, jnp.clip(ratio, 1 - eps, 1 + eps) * a)
                        ent = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
                        return pg.mean() + config["VF_COEF"] * v_loss - config["ENT_COEF"] * ent

                    grads = jax.grad(_loss_fn)(params)
                    updates, opt_state = tx.update(grads, opt_state, params)
                    return (optax.apply_updates(params, updates), opt_state), None

                params, opt_state, rng = update_state
                rng, k = jax.random.split(rng)
                batch = (obs, action, log_prob, value, adv, targets)
                batch = jax.tree.map(lambda x: x.reshape((n_steps * n_envs,) + x.shape[2:]), batch)
                perm = jax.random.permutation(k, n_steps * n_envs)
                batch = jax.tree.map(lambda x: x[perm].reshape((-1, mb_size) + x.shape[1:]), batch)
                (params, opt_state), _ = jax.lax.scan(_update_minibatch, (params, opt_state), batch)
                return (params, opt_state, rng), None

            (params, opt_state, rng), _ = jax.lax.scan(_update_epoch, (params, opt_state, rng), None,
                                                       config["UPDATE_EPOCHS"])  # fmt: skip
            ended = info["done"]
            success = (info["success"] * ended).sum() / jnp.maximum(ended.sum(), 1)
            return (params, opt_state, env_state, last_obs, rng), success

        runner_state = (params, opt_state, env_state, obs, rng)
        runner_state, success = jax.lax.scan(_update_step, runner_state, None, n_updates)
        return runner_state[0], success

    return train


def evaluate(task, iface, params, key, episodes: int = 128) -> float:
    """Fresh episodes at the training horizon, sampled actions (the protocol ours uses)."""
    network = ActorCritic(task.action_space.n)
    k0, k1 = jax.random.split(key)
    s = jax.vmap(task.reset)(jax.random.split(k0, episodes))

    def body(carry, key):
        s, alive, success = carry
        logits, _ = network.apply(params, jax.vmap(iface.observe)(s.sim))
        nxt = jax.vmap(task.step)(s, jax.random.categorical(key, logits))
        success = jnp.where(alive & nxt.done, True, success)
        return (nxt, alive & ~nxt.done, success), None

    init = (s, jnp.ones(episodes, bool), jnp.zeros(episodes, bool))
    (_, _, success), _ = jax.lax.scan(body, init, jax.random.split(k1, task.episode_length))
    return success.mean()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--rollout", default="fused", choices=["auto", "split", "fused"], help="our trainer's rollout path")
    _record.add_argument(p)
    args = p.parse_args()
    steps = args.steps or (250_000 if args.quick else 1_000_000)
    seeds = args.seeds or (1 if args.quick else 3)
    task = lj.make("xland_easy")
    iface = candidate(task, ("compact",), 0.1, 0.0, name="compact_17")
    cfg = PPOConfig.preset(task.name, "cpu")
    pj = {"NUM_ENVS": cfg.num_envs, "NUM_STEPS": cfg.rollout_len, "TOTAL_TIMESTEPS": steps,
          "UPDATE_EPOCHS": cfg.epochs, "NUM_MINIBATCHES": cfg.minibatches, "LR": cfg.lr, "GAMMA": cfg.gamma,
          "GAE_LAMBDA": cfg.gae_lambda, "CLIP_EPS": cfg.clip_eps, "ENT_COEF": cfg.ent_coef,
          "VF_COEF": cfg.vf_coef, "MAX_GRAD_NORM": cfg.max_grad_norm}  # fmt: skip

    t0 = time.perf_counter()
    train = jax.jit(make_train(pj, task, iface)).lower(jax.random.key(0)).compile()
    eval_fn = jax.jit(lambda p, k: evaluate(task, iface, p, k))
    base_compile = time.perf_counter() - t0
    base_success = []
    for seed in range(seeds):  # PureJaxRL style: one run per seed, reusing the compiled function
        params, _ = jax.block_until_ready(train(jax.random.key(seed)))
        if seed == 0:
            t1 = time.perf_counter()
            eval_fn = eval_fn.lower(params, jax.random.key(0)).compile()
            base_compile += time.perf_counter() - t1
        base_success.append(float(eval_fn(params, jax.random.key(1000 + seed))))
    base_wall = time.perf_counter() - t0
    print(f"PureJaxRL-style: {base_wall:6.1f} s for {seeds} seed(s) x {steps:,} steps ({base_compile:.1f} s "
          f"compiling, {base_wall - base_compile:.1f} s running); success {np.mean(base_success):.3f} "
          f"{np.round(base_success, 3).tolist()}", flush=True)  # fmt: skip

    t0 = time.perf_counter()
    ours = train_batch(task, [iface], seeds=seeds, total_steps=steps, config=cfg, rollout=args.rollout)
    ours_wall = time.perf_counter() - t0
    print(f"limen_jax PPO ({args.rollout} rollout): {ours_wall:6.1f} s for {seeds} seed(s) x {ours.steps:,} steps "
          f"({ours.compile_s:.1f} s compiling, {ours_wall - ours.compile_s:.1f} s running); "
          f"success {ours.success_mean[0]:.3f} "
          f"{np.round(ours.success[0], 3).tolist()}", flush=True)  # fmt: skip
    ours_running = ours_wall - ours.compile_s
    print(f"ratios baseline / ours: compile {base_compile / ours.compile_s:.2f}, "
          f"running {(base_wall - base_compile) / ours_running:.2f} (>= 1.0 wanted for both)")  # fmt: skip
    print(f"wall time baseline / ours: {base_wall / ours_wall:.2f}")
    _record.write(__file__, {
        "wall time baseline / ours": base_wall / ours_wall, "compile baseline / ours": base_compile / ours.compile_s,
        "running baseline / ours": (base_wall - base_compile) / ours_running,
        "baseline wall (s)": base_wall, "baseline compile (s)": base_compile, "ours wall (s)": ours_wall,
        "ours compile (s)": ours.compile_s, "baseline success": float(np.mean(base_success)),
        "ours success": float(ours.success_mean[0]), "seeds x steps": f"{seeds} x {steps:,}", "rollout": args.rollout,
    }, args)  # fmt: skip


if __name__ == "__main__":
    main()
