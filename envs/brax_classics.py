"""Brax locomotion classics as tasks: ant, humanoid, hopper, walker2d, halfcheetah.

The reward-only search setting of Eureka, RF-Agent, FORGE and GRACE's MuJoCo experiments.
Each task wraps ``brax.envs.get_environment(name, backend=...)`` without Brax's training
wrappers (the engine handles horizons and auto-reset). The sim that programs see is
Brax's own ``State`` (``state.pipeline_state.q``, ``.qd``, ``.x.pos``, ``state.obs``,
``state.metrics``, ...), so reward programs written against Brax run unchanged; three
keys are added to ``state.info``: ``step_count``, ``episode_return`` (the engine's Brax
adapter, :mod:`limen_jax.adapters.brax_env`, which loads and steps these tasks) and
``start_x``.

Success (binary, per trajectory, evaluated once at the end): the agent survives all
1000 steps (never "unhealthy") and its torso moved forward (+x) by at least
``success_velocity`` x 1000 x dt metres, i.e. its mean forward speed over the episode
reached ``success_velocity`` m/s (a task parameter). The native Brax reward is the
baseline for reward-only comparisons: :meth:`BraxTask.native_reward` (and
``next_state.reward``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from limen_envs import brax_catalog
from limen_envs.presets import BRAX_PAPER, MUJOCO_CPU, TINY_CPU, paper_budget

from limen_jax.adapters.brax_env import BraxEnvTask
from limen_jax.catalog import Catalog

# Physics backend per task: the faster one on a CPU (docs/reference/tasks.md): MJX (impl "jax") for
# the 3-D ant and humanoid; "generalized" for the planar ones, where MJX's default solver
# settings are slower.
MJX, GENERALIZED = "mjx", "generalized"

_CONTEXT = """\
## Environment: Brax {title} ({backend} backend)

{summary}

**Success** (evaluated once, at the end of the trajectory): the agent survives all
{horizon} steps{healthy} and its torso has moved forward (+x) by at least
{distance:g} m, i.e. its mean forward speed over the episode is at least
{velocity:g} m/s (control step dt = {dt:g} s, so {horizon} steps = {seconds:g} s).

### State (argument `state`, a Brax `State`)
- `state.pipeline_state.q`: float32 ({nq},): generalized positions. {q_desc}
- `state.pipeline_state.qd`: float32 ({nv},): generalized velocities. {qd_desc}
- `state.pipeline_state.x.pos`: float32 ({nb}, 3): world position of each body;
  body 0 is the torso. `state.pipeline_state.x.rot`: float32 ({nb}, 4): orientation
  quaternions (w, x, y, z).
- `state.pipeline_state.xd.vel` / `.xd.ang`: float32 ({nb}, 3): world linear / angular
  velocity of each body.
- `state.obs`: float32 ({obs_dim},): Brax's native observation (q without the x{y}
  position, then qd).
- `state.reward`: float32 (): Brax's native reward of the last step ({native}).
- `state.done`: float32 (): 1.0 when the last step ended the episode.
- `state.metrics`: dict of float32 () scalars computed by Brax each step: {metrics}.
- `state.info["step_count"]`: int32 (): control steps taken in this episode.
- `state.info["episode_return"]`: float32 (): the sum of `state.reward` so far.
- `state.info["start_x"]`: float32 (): the torso's x at the start of the episode.

### Actions (`action`, float32 ({act_dim},), each in [-1, 1])
{actions}
"""


class BraxTask(BraxEnvTask):
    """A Brax locomotion env as a task; subclasses set ``env_name`` and the context text.

    The engine's Brax adapter loads and steps the environment (``step_count`` and
    ``episode_return`` in ``state.info``); this adds ``start_x``, the success rule, the
    context, the catalog and the presets."""

    title = ""
    overview = ""
    healthy = ""  # when the episode ends early, as a clause after "survives all N steps"
    q_desc = ""
    qd_desc = ""
    actions = ""
    native = ""
    backend = GENERALIZED
    horizon = 1000
    params = {"success_velocity": 1.0}
    ppo_presets = {"cpu": MUJOCO_CPU, "paper": BRAX_PAPER}
    # Brax's published PPO budget for its locomotion envs (50M steps)
    budgets = {"paper": paper_budget(5_000_000, 50_000_000, 0.0), "cpu": TINY_CPU}

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        self.dt = float(self.env.dt)
        self.success_distance = float(self.params["success_velocity"]) * self.episode_length * self.dt

    def start_info(self, state: Any) -> dict[str, jax.Array]:
        return {"start_x": jnp.asarray(state.pipeline_state.x.pos[0, 0], jnp.float32)}

    def forward_distance(self, sim: Any) -> jax.Array:
        """Torso x displacement since the start of the episode (m): float32[]."""
        return sim.pipeline_state.x.pos[0, 0] - sim.info["start_x"]

    def succeeded(self, sim: Any) -> jax.Array:
        """bool[]: survived the whole horizon and moved ``success_distance`` forward."""
        at_end = sim.info["step_count"] >= self.episode_length
        return at_end & (sim.done < 0.5) & (self.forward_distance(sim) >= self.success_distance)

    def offline_catalog(self) -> Catalog:
        return brax_catalog.catalog(round(self.dt, 6), self.episode_length, float(self.params["success_velocity"]))

    @property
    def context(self) -> str:
        shapes = jax.eval_shape(self.reset, jax.random.key(0)).sim
        ps = shapes.pipeline_state
        return _CONTEXT.format(
            title=self.title,
            backend=self.backend,
            summary=self.overview,
            horizon=self.episode_length,
            healthy=self.healthy,
            distance=round(self.success_distance, 3),
            velocity=self.params["success_velocity"],
            dt=round(self.dt, 6),
            seconds=round(self.episode_length * self.dt, 3),
            nq=ps.q.shape[0],
            nv=ps.qd.shape[0],
            nb=ps.x.pos.shape[0],
            q_desc=self.q_desc,
            qd_desc=self.qd_desc,
            obs_dim=shapes.obs.shape[0],
            y="" if self.env_name in ("hopper", "walker2d", "halfcheetah") else ", y",
            native=self.native,
            metrics=", ".join(f"`{k}`" for k in sorted(shapes.metrics)),
            act_dim=int(self.env.action_size),
            actions=self.actions,
        )


class Ant(BraxTask):
    """Brax ant: run forward (+x)."""

    name = "ant"
    description = "Brax ant (quadruped, 8 torques): run forward at >= 1 m/s mean over 1000 steps"
    env_name = "ant"
    backend = MJX
    title = "Ant"
    overview = "A four-legged ant (torso with a free joint, 4 legs of 2 hinges) must run in +x."
    healthy = " (it is unhealthy, and the episode ends, when the torso's z leaves [0.2, 1.0])"
    q_desc = "[0:3] torso position, [3:7] torso quaternion (w, x, y, z), [7:15] the 8 hinge angles."
    qd_desc = "[0:3] torso linear velocity, [3:6] torso angular velocity, [6:14] hinge velocities."
    actions = "Torques on the 8 hinges: (hip, ankle) of front-left, front-right, back-left, back-right legs."
    native = "forward velocity + 1 survive bonus - 0.5 sum(action^2)"


class Humanoid(BraxTask):
    """Brax humanoid: walk forward (+x)."""

    name = "humanoid"
    description = "Brax humanoid (17 torques): walk forward at >= 1 m/s mean over 1000 steps"
    env_name = "humanoid"
    backend = MJX
    title = "Humanoid"
    overview = "A 3-D humanoid (torso with a free joint, abdomen, arms and legs) must walk in +x."
    healthy = " (it is unhealthy, and the episode ends, when the torso's z leaves [1.0, 2.0])"
    q_desc = "[0:3] torso position, [3:7] torso quaternion (w, x, y, z), [7:24] the 17 hinge angles."
    qd_desc = "[0:3] torso linear velocity, [3:6] torso angular velocity, [6:23] hinge velocities."
    actions = (
        "Torques on the 17 hinges: abdomen (y, z, x), right hip (x, z, y), right knee, left hip\n"
        "(x, z, y), left knee, right shoulder (2), right elbow, left shoulder (2), left elbow."
    )
    native = "1.25 x centre-of-mass forward velocity + 5 alive bonus - 0.1 sum(action^2)"


class Hopper(BraxTask):
    """Brax hopper: hop forward (+x)."""

    name = "hopper"
    description = "Brax hopper (planar one-leg, 3 torques): hop forward at >= 1 m/s mean over 1000 steps"
    env_name = "hopper"
    title = "Hopper"
    overview = "A planar one-legged hopper (torso, thigh, leg, foot) must hop in +x."
    healthy = (
        " (it is unhealthy, and the episode ends, when the torso's height drops below 0.7,\n"
        "its pitch leaves [-0.2, 0.2] rad, or any other q/qd leaves [-100, 100])"
    )
    q_desc = "[0] torso x, [1] torso z, [2] torso pitch (rad), [3:6] thigh, leg, foot hinge angles."
    qd_desc = "[0] x velocity, [1] z velocity, [2] pitch rate, [3:6] hinge velocities."
    actions = "Torques on the thigh, leg and foot hinges."
    native = "forward velocity + 1 healthy bonus - 0.001 sum(action^2)"


class Walker2d(BraxTask):
    """Brax walker2d: walk forward (+x)."""

    name = "walker2d"
    description = "Brax walker2d (planar biped, 6 torques): walk forward at >= 1 m/s mean over 1000 steps"
    env_name = "walker2d"
    title = "Walker2d"
    overview = "A planar biped (torso, two legs of thigh, leg, foot) must walk in +x."
    healthy = (
        " (it is unhealthy, and the episode ends, when the torso's height leaves\n"
        "[0.8, 2.0] or its pitch leaves [-1, 1] rad)"
    )
    q_desc = (
        "[0] torso x, [1] torso z, [2] torso pitch (rad), [3:6] right thigh, leg, foot, "
        "[6:9] left thigh, leg, foot hinge angles."
    )
    qd_desc = "[0] x velocity, [1] z velocity, [2] pitch rate, [3:9] hinge velocities."
    actions = "Torques on the right thigh, leg, foot and left thigh, leg, foot hinges."
    native = "forward velocity + 1 healthy bonus - 0.001 sum(action^2)"


class Halfcheetah(BraxTask):
    """Brax halfcheetah: run forward (+x); it never terminates early."""

    name = "halfcheetah"
    description = "Brax halfcheetah (planar, 6 torques): run forward at >= 2 m/s mean over 1000 steps"
    env_name = "halfcheetah"
    title = "HalfCheetah"
    overview = "A planar two-legged cheetah must run in +x. It cannot fall: episodes never end early."
    healthy = ""
    params = {"success_velocity": 2.0}
    q_desc = (
        "[0] torso x, [1] torso z, [2] torso pitch (rad), [3:6] back thigh, shin, foot, "
        "[6:9] front thigh, shin, foot hinge angles."
    )
    qd_desc = "[0] x velocity, [1] z velocity, [2] pitch rate, [3:9] hinge velocities."
    actions = "Torques on the back thigh, shin, foot and front thigh, shin, foot hinges."
    native = "forward velocity - 0.1 sum(action^2)"
