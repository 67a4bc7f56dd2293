"""The Ray evaluator on a local Ray cluster that the tests start (2 CPUs, 2 actors, loopback
only): a search through it leaves the run directory the in-process evaluator leaves, with
an actor's process killed mid-batch; a failure raised in an actor classifies as in this
process; interfaces travel as artifacts. Skipped when Ray is not installed (``.[ray]``)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_evolve import summary, toy_config
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax.interface import Interface, default_interface, placeholder_interface
from limen_jax.program import compile_interface
from limen_jax.rl import PPOConfig
from limen_jax.search.evaluations import register_evaluation
from limen_jax.search.evaluator import InProcessEvaluator
from limen_jax.search.faults import is_engine_error
from limen_jax.search.jobs import Budget, EvalJob
from limen_jax.search.remote import job_from_wire, job_to_wire

ray = pytest.importorskip("ray")

PROGRAM = """import jax.numpy as jnp

def get_observation(state):
    return jnp.array([jnp.sign(state.goal - state.pos), state.step_num / 16.0], dtype=jnp.float32)

def compute_reward(state, action, next_state):
    return {"goal": (next_state.pos == next_state.goal).astype(jnp.float32),
            "approach": (jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)) * 0.1}
"""


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def evaluator(cluster):
    from limen_jax.search.ray_evaluator import RayEvaluator

    ev = RayEvaluator(actors=2)
    yield ev
    ev.close()


def scores(run_dir):
    """The run's score events without their times (the event's, the training's), in order."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    out = [{k: v for k, v in e.items() if k != "time"} for e in events if e["event"] == "score"]
    for e in out:
        e["metadata"].pop("train_wall_s")
    return out


def files(run_dir):
    """The run directory's files, less the names orbax draws at random for a policy's arrays."""
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and "arrays" not in p.parts)


def test_a_search_through_ray_with_an_actor_killed_mid_batch_leaves_the_same_run(evaluator, tmp_path):
    pids = [ray.get(a.pid.remote()) for a in evaluator.actors]
    killed: list[int] = []

    def kill_the_busy_actor():  # once a batch is in flight, kill -9 the process training it
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            busy = [i for i in range(len(pids)) if i not in evaluator._free]
            if busy:
                time.sleep(0.3)  # into the batch
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.02)

    killer = threading.Thread(target=kill_the_busy_actor, daemon=True)
    killer.start()
    by_ray = lj.evolve("toy_corridor", toy_config(), run_dir=tmp_path / "ray", verbose=False, evaluator=evaluator)
    killer.join()
    here = lj.evolve("toy_corridor", toy_config(), run_dir=tmp_path / "here", verbose=False)

    assert killed, "no batch was in flight to kill"
    assert ray.get(evaluator.actors[killed[0]].pid.remote()) != pids[killed[0]]  # restarted
    assert summary(by_ray) == summary(here)
    assert scores(tmp_path / "ray") == scores(tmp_path / "here")  # every program scored once, as here
    assert files(tmp_path / "ray") == files(tmp_path / "here")


class Failing:
    """An evaluation kind that fails as its seed says: the engine's fault (memory, XLA
    runtime) or the program's (anything else). The actor imports it by reference."""

    name = "failing_for_test"

    def job(self, ctx, interfaces, options):  # pragma: no cover - jobs are built by hand here
        raise NotImplementedError

    def run(self, job, budget_s):
        seed = job.seeds[0]
        if seed == 1:
            raise MemoryError("out of memory, on purpose")
        if seed == 2:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: on purpose")
        raise ValueError("the program's fault, on purpose")

    def score(self, record, result, job):  # pragma: no cover
        pass


def test_a_failure_in_an_actor_classifies_as_in_this_process(evaluator):
    register_evaluation(Failing())
    task = ToyCorridor()
    here = InProcessEvaluator()
    jobs = [(EvalJob(task, [default_interface(task)], [seed], Budget(64, 64, 0.0), PPOConfig(), kind=Failing.name),
             engine) for seed, engine in ((1, True), (2, True), (3, False))]  # fmt: skip
    remote = [evaluator.submit(job) for job, _ in jobs]  # in flight together: a second actor starts
    for (job, engine), future in zip(jobs, remote):
        local = here.submit(job).exception(timeout=60)
        got = future.exception(timeout=120)
        assert isinstance(got, ray.exceptions.RayTaskError)  # a real Ray failure ...
        assert isinstance(got, type(local))  # ... that subclasses its cause
        assert is_engine_error(got) == is_engine_error(local) == engine
    assert len(evaluator.actors) == 2


def test_interfaces_travel_as_artifacts_and_come_back_the_same():
    task = ToyCorridor()
    sample = task.sample_transitions(jax.random.key(1), num=8)
    for mode in ("full", "obs_only", "reward_only"):
        iface = compile_interface(PROGRAM, task, mode=mode, name=f"p-{mode}")
        job = EvalJob(task, [iface, default_interface(task), placeholder_interface(3)], [0], Budget(64, 64, 0.0),
                      PPOConfig())
        wire = job_to_wire(job)
        assert "def get_observation" not in repr(wire)  # artifacts, never the source
        back = job_from_wire(wire, ToyCorridor())
        got = back.interfaces[0]
        assert (got.obs_dim, got.reward_terms, got.name) == (iface.obs_dim, iface.reward_terms, iface.name)
        obs = jax.vmap(iface.observe)(sample.sim)
        np.testing.assert_array_equal(jax.vmap(got.observe)(sample.sim), obs)
        r = jax.vmap(iface.reward)(sample.sim, sample.action, sample.next_sim)
        np.testing.assert_array_equal(jax.vmap(got.reward)(sample.sim, sample.action, sample.next_sim), r)
        assert back.interfaces[1].name == default_interface(task).name
        assert back.interfaces[2].obs_dim == 3


def test_an_interface_with_no_artifacts_cannot_travel():
    task = ToyCorridor()
    plain = Interface(lambda s: jnp.zeros(1), lambda s, a, s2: jnp.zeros(()), 1, name="python")
    with pytest.raises(ValueError, match="no exported artifacts"):
        job_to_wire(EvalJob(task, [plain], [0], Budget(64, 64, 0.0), PPOConfig()))
