"""Our paper preset against the reference's trainer, part by part, on the same inputs.

    cd LIMEN && PYTHONPATH=LIMEN LIMEN_VENV/bin/python /path/to/limen_jax/benchmarks/fidelity_parts.py

Run from a checkout of Lossfunk/LIMEN (never shipped), with a python that imports both
``limen`` and ``limen_jax`` (docs/howto/reproduce-the-paper.md: a venv made with --system-site-packages
over this project's environment). Each part is given the same inputs on both sides and
their outputs are compared; the last line is JSON, and the exit status is 1 if any
difference is beyond float32 rounding:

- environment: the reference's wrapped xminigrid env (its medium config, reset and
  ``step``) and our ``xland_medium`` from the same keys, stepped with the same actions:
  grids, agent, the published program's observation and reward, and termination;
- network: our GRU actor-critic given the reference's initial parameters (renamed,
  the GRU's matrices transposed): log-probabilities, values and carry on a sequence;
- GAE: advantages and targets on the same rewards, values and episode ends;
- one PPO update: both updates on the same rollout from the same parameters (one
  minibatch of whole sequences, Adam's first step): the change of every kernel;
- initialisation: per layer, the singular values of both sides' initial kernels
  (orthogonal layers must agree; the GRU's input matrix is Glorot-normal on both).

Whole training runs are compared by benchmarks/fidelity.py --reference.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

TOL = 1e-4  # float32 rounding of the same sums in another order, relative to the step size
PROGRAM = "examples/evolved_interfaces/medium_place_near.py"
CONFIG = "configs/medium_place_near.yaml"


def environment(steps: int = 120, envs: int = 256) -> dict[str, float]:
    """Largest differences over ``steps`` random steps of ``envs`` episodes (each compared
    until its first end, where the reference auto-resets)."""
    from limen.adapters import get_adapter
    from limen.config import Config
    from limen.interface import MDPInterface

    import limen_jax as lj
    from limen_jax.program import compile_interface

    adapter = get_adapter("xminigrid", Config.from_yaml(CONFIG))
    program = MDPInterface.from_file(PROGRAM)
    env, params = adapter.make_env(program.get_observation, program.compute_reward)
    task = lj.make("xland_medium")
    with open(PROGRAM, encoding="utf-8") as fh:
        ours = compile_interface(fh.read(), task, name="medium")
    keys = jax.random.split(jax.random.key(5), envs)
    ref_ts, our_ts = jax.vmap(env.reset, in_axes=(None, 0))(params, keys), jax.vmap(task.reset)(keys)
    ref_step, our_step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0))), jax.jit(jax.vmap(task.step))
    observe, reward = jax.jit(jax.vmap(ours.observe)), jax.jit(jax.vmap(ours.reward))
    out = {"reset_obs": float(jnp.abs(observe(our_ts.sim) - ref_ts.observation).max()), "obs": 0.0, "reward": 0.0,
           "grid_or_agent_mismatches": 0, "termination_mismatches": 0, "ended": 0}  # fmt: skip
    alive = jnp.ones(envs, bool)
    probs = jnp.array([0.35, 0.15, 0.15, 0.15, 0.15, 0.05])  # pick up and put down often
    for key in jax.random.split(jax.random.key(9), steps):
        action = jax.random.choice(key, 6, (envs,), p=probs)
        ref_next, our_next = ref_step(params, ref_ts, action), our_step(our_ts, action)
        terminated = ref_next.last() & (ref_next.discount == 0)
        out["termination_mismatches"] += int(jnp.sum(alive & (terminated != our_next.done)))
        r = jnp.abs(reward(our_ts.sim, action, our_next.sim) - ref_next.reward)
        out["reward"] = max(out["reward"], float(jnp.where(alive, r, 0.0).max()))
        going = alive & ~ref_next.last()
        o = jnp.abs(observe(our_next.sim) - ref_next.observation)
        out["obs"] = max(out["obs"], float(jnp.where(going[:, None], o, 0.0).max()))
        same = jnp.all(ref_next.state.grid == our_next.sim.grid, axis=(1, 2, 3)) & jnp.all(
            ref_next.state.agent.position == our_next.sim.agent.position, axis=1
        )
        out["grid_or_agent_mismatches"] += int(jnp.sum(going & ~same))
        out["ended"] += int(jnp.sum(alive & ref_next.last()))
        alive, ref_ts, our_ts = going, ref_next, our_next
    return out


# our kernel -> the reference's Dense layer of the same place
NAMES = {"encoder_0": "Dense_0", "encoder_1": "Dense_1", "actor_head": "Dense_2", "actor_out": "Dense_3",
         "critic_head": "Dense_4", "critic_out": "Dense_5"}  # fmt: skip


def _modules(obs_dim: int, ref_seed: int) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(our network, its initial params (seed 0), the reference's module, its initial
    params (``ref_seed``)), both at the paper preset's sizes."""
    from limen.nn import ActorCriticMLP

    from limen_jax.rl import PPOConfig
    from limen_jax.rl.networks import ActorCritic
    from limen_jax.task import Discrete

    ours = ActorCritic(PPOConfig.preset("xland_medium", "paper"), Discrete(6))
    ref = ActorCriticMLP(num_actions=6, hidden_dim=256, action_emb_dim=16, rnn_hidden_dim=512, rnn_num_layers=1,
                         head_hidden_dim=256)  # fmt: skip
    dummy = {"obs": jnp.zeros((1, 1, obs_dim)), "prev_action": jnp.zeros((1, 1), jnp.int32),
             "prev_reward": jnp.zeros((1, 1))}  # fmt: skip
    ref_p = ref.init(jax.random.key(ref_seed), dummy, ref.initialize_carry(1))["params"]
    return ours, ours.init(jax.random.key(0), obs_dim), ref, ref_p


def _networks(obs_dim: int) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(ours, reference module, our params holding the reference's initial values,
    the reference's params)."""
    ours, template, ref, ref_p = _modules(obs_dim, ref_seed=3)
    mine = dict(template["params"])
    for o, r in NAMES.items():
        mine[o] = {"kernel": ref_p[r]["kernel"], "bias": ref_p[r]["bias"]}
    # our embedding has a 7th row ("no previous action"), unused when the state carries on
    mine["action_embed"] = {"embedding": jnp.concatenate([ref_p["Embed_0"]["embedding"], jnp.zeros((1, 16))])}
    gru = ref_p["VmapRNNModel_0"]["GRU_0"]
    mine["gru"] = {"cell": {"Wi": gru["Wi"].T, "Wh": gru["Wh"].T, "bi": gru["bi"], "bn": gru["bn"]}}
    return ours, ref, {**template, "params": mine}, ref_p


def network(obs_dim: int = 102, batch: int = 4, steps: int = 20) -> dict[str, float]:
    ours, ref, params, ref_p = _networks(obs_dim)
    k = jax.random.split(jax.random.key(7), 4)
    obs, prev_r = jax.random.normal(k[0], (steps, batch, obs_dim)), jax.random.normal(k[2], (steps, batch))
    prev_a, h0 = jax.random.randint(k[1], (steps, batch), 0, 6), 0.5 * jax.random.normal(k[3], (batch, 512))
    carry, logits, value = ours.sequence(params, h0, obs, prev_a, prev_r, jnp.zeros((steps, batch), bool))
    inputs = {"obs": obs.swapaxes(0, 1), "prev_action": prev_a.swapaxes(0, 1), "prev_reward": prev_r.swapaxes(0, 1)}
    dist, ref_value, ref_carry = ref.apply({"params": ref_p}, inputs, h0[:, None])
    logp = jax.nn.log_softmax(jnp.asarray(logits)).swapaxes(0, 1) - jax.nn.log_softmax(dist.logits)
    return {"log_prob": float(jnp.abs(logp).max()), "value": float(jnp.abs(value.swapaxes(0, 1) - ref_value).max()),
            "carry": float(jnp.abs(carry - ref_carry[:, 0]).max())}  # fmt: skip


def ppo_update(obs_dim: int = 102, envs: int = 64, steps: int = 16) -> dict[str, float]:
    """Per kernel, |our step - the reference's step| / |the reference's step|."""
    from flax.training.train_state import TrainState
    from limen.train_utils import Transition, ppo_update_networks

    from limen_jax.rl import PPOConfig
    from limen_jax.rl.ppo import Batch, FlatTree
    from limen_jax.rl.ppo import ppo_update as our_update

    ours, ref, params, ref_p = _networks(obs_dim)
    k = jax.random.split(jax.random.key(11), 8)
    obs, prev_a = jax.random.normal(k[0], (steps, envs, obs_dim)), jax.random.randint(k[1], (steps, envs), 0, 6)
    prev_r, h0 = jax.random.normal(k[2], (steps, envs)), 0.3 * jax.random.normal(k[3], (envs, 512))
    _, logits, value = ours.sequence(params, h0, obs, prev_a, prev_r, jnp.zeros((steps, envs), bool))
    action = jax.random.randint(k[4], (steps, envs), 0, 6)
    logp = jnp.take_along_axis(jax.nn.log_softmax(jnp.asarray(logits)), action[..., None], -1)[..., 0]
    old_logp = logp + 0.3 * jax.random.normal(k[5], (steps, envs))  # ratios off 1: clipping takes part
    old_value = value + 0.5 * jax.random.normal(k[6], (steps, envs))
    advantage = jax.random.normal(k[7], (steps, envs))
    target = old_value + advantage
    config = PPOConfig.preset("xland_medium", "paper")
    ours_config = config.replace(minibatches=1, num_envs=envs)
    flat = FlatTree(params)
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.scale_by_adam(eps=config.adam_eps))
    p0 = flat.ravel(params)
    batch = Batch(obs=obs, first=jnp.zeros((steps, envs), bool), prev_action=prev_a, prev_reward=prev_r,
                  action=action, log_prob=old_logp, value=old_value, advantage=advantage, target=target)  # fmt: skip
    p1, _, _ = our_update(ours, optimizer, flat, ours_config, p0, optimizer.init(p0), batch, h0, jax.random.key(0),
                          jnp.float32(config.lr))  # fmt: skip
    new_ours = flat.unravel(p1)["params"]
    tx = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                     optax.inject_hyperparams(optax.adam)(learning_rate=config.lr, eps=config.adam_eps))  # fmt: skip
    state = TrainState.create(apply_fn=ref.apply, params={"params": ref_p}, tx=tx)
    tr = Transition(done=jnp.zeros((envs, steps), bool), action=action.T, value=old_value.T,
                    reward=jnp.zeros((envs, steps)), log_prob=old_logp.T, obs=obs.swapaxes(0, 1),
                    prev_action=prev_a.T, prev_reward=prev_r.T)  # fmt: skip

    def ref_update(*args: Any) -> Any:
        return ppo_update_networks(state, *args, config.clip_eps, config.vf_coef, config.ent_coef)[0]

    # the reference's update averages over a device axis: a vmap of one gives it its name
    args = jax.tree.map(lambda x: x[None], (tr, h0[:, None], advantage.T, target.T))
    new_ref = jax.tree.map(lambda x: x[0], jax.vmap(ref_update, axis_name="devices")(*args).params)["params"]
    pairs = {o: (new_ours[o]["kernel"] - params["params"][o]["kernel"], new_ref[r]["kernel"] - ref_p[r]["kernel"])
             for o, r in NAMES.items()}  # fmt: skip
    gru_new, gru_old = new_ref["VmapRNNModel_0"]["GRU_0"], ref_p["VmapRNNModel_0"]["GRU_0"]
    for m in ("Wi", "Wh"):
        ours_step = new_ours["gru"]["cell"][m] - params["params"]["gru"]["cell"][m]
        pairs[f"gru_{m}"] = (ours_step, (gru_new[m] - gru_old[m]).T)
    embed = new_ours["action_embed"]["embedding"][:6] - params["params"]["action_embed"]["embedding"][:6]
    pairs["action_embed"] = (embed, new_ref["Embed_0"]["embedding"] - ref_p["Embed_0"]["embedding"])
    return {n: float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) for n, (a, b) in pairs.items()}


def gae(steps: int = 16, envs: int = 64) -> dict[str, float]:
    """Advantages and targets of both GAEs on the same rollout (episode ends included)."""
    from limen.train_utils import Transition, calculate_gae

    from limen_jax.rl.losses import compute_gae

    k = jax.random.split(jax.random.key(13), 4)
    reward, value = jax.random.normal(k[0], (steps, envs)), jax.random.normal(k[1], (steps, envs))
    done, last = jax.random.bernoulli(k[2], 0.1, (steps, envs)), jax.random.normal(k[3], (envs,))
    zeros = jnp.zeros((steps, envs))
    tr = Transition(done=done, action=zeros, value=value, reward=reward, log_prob=zeros, obs=zeros, prev_action=zeros,
                    prev_reward=zeros)  # fmt: skip
    ref_adv, ref_target = calculate_gae(tr, last, 0.99, 0.95)
    # the paper preset treats a horizon cut as an end (bootstrap_truncation=False): one flag
    adv, target = compute_gae(reward, value, done, last, 0.99, 0.95)
    return {"advantage": float(jnp.abs(adv - ref_adv).max()), "target": float(jnp.abs(target - ref_target).max())}


def initialisation(obs_dim: int = 102) -> dict[str, list[float]]:
    """Per orthogonal kernel, [our smallest, largest, the reference's smallest, largest]
    singular value (both sides drawn from their own initialisers, seed 0)."""
    _, ours, _, ref_p = _modules(obs_dim, ref_seed=0)
    sv = lambda w: np.linalg.svd(np.asarray(w, np.float64), compute_uv=False)  # noqa: E731
    out = {}
    for o, r in {**NAMES, "gru_Wh": "gru"}.items():
        a = ours["params"]["gru"]["cell"]["Wh"] if o == "gru_Wh" else ours["params"][o]["kernel"]
        b = ref_p["VmapRNNModel_0"]["GRU_0"]["Wh"].T if o == "gru_Wh" else ref_p[r]["kernel"]
        out[o] = [round(float(x), 4) for x in (sv(a).min(), sv(a).max(), sv(b).min(), sv(b).max())]
    return out


def main() -> int:
    import importlib.util
    import pathlib

    if not (pathlib.Path(CONFIG).is_file() and pathlib.Path(PROGRAM).is_file()):
        print(f"fidelity_parts: run it from a Lossfunk/LIMEN checkout (no {CONFIG} or {PROGRAM} here)", file=sys.stderr)
        return 2
    missing = [m for m in ("limen", "distrax", "limen_jax") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"fidelity_parts: this python cannot import {', '.join(missing)}: use the reference's venv with "
              "PYTHONPATH set to the checkout (docs/howto/reproduce-the-paper.md)", file=sys.stderr)  # fmt: skip
        return 2
    results: dict[str, Any] = {"environment": environment(), "network": network(), "gae": gae(),
                               "ppo_update": ppo_update(), "initialisation": initialisation()}  # fmt: skip
    env = results["environment"]
    problems = [f"environment {k}" for k in ("reset_obs", "obs", "reward") if env[k] > 1e-6]
    problems += [f"environment {k}" for k in ("grid_or_agent_mismatches", "termination_mismatches") if env[k]]
    problems += [f"{part} {k}" for part in ("network", "gae") for k, v in results[part].items() if v > 1e-5]
    problems += [f"ppo_update {k}" for k, v in results["ppo_update"].items() if v > TOL]
    problems += [f"initialisation {k}" for k, (a, b, c, d) in results["initialisation"].items()
                 if abs(a - c) > 1e-3 or abs(b - d) > 1e-3]  # fmt: skip
    for part, values in results.items():
        print(f"{part}:")
        for name, value in values.items():
            print(f"  {name:26s} {value}")
    print("differences beyond float32 rounding: " + (", ".join(problems) if problems else "none"))
    print(json.dumps({**results, "problems": problems}))
    _record.write(__file__, {"differences beyond float32 rounding": ", ".join(problems) or "none",
                             "parts compared": ", ".join(results)})  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
