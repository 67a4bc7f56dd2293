"""The Ray evaluator on a local Ray cluster that the tests start (2 CPUs, 2 actors, loopback
only): a search through it leaves the run directory the in-process evaluator leaves, with
an actor's process killed mid-batch; a failure raised in an actor classifies as in this
process; interfaces travel as artifacts; the ``episodes`` kind rolls out kept policies
that travel in the job (the run's policies/ deleted before the actor runs it) and the
``demos`` kind ranks as in this process. Skipped when Ray is not installed (``.[ray]``)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_runs import cli_env
from test_evolve import TINY_PPO, summary, toy_config
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax import demos
from limen_jax.archive import ProgramRecord
from limen_jax.interface import Interface, default_interface, placeholder_interface
from limen_jax.policies import keep_policies, policy_dir
from limen_jax.program import compile_interface
from limen_jax.rl import PPOConfig
from limen_jax.search.evaluation.episodes import episode_log
from limen_jax.search.evaluation.evaluator import InProcessEvaluator
from limen_jax.search.evaluation.jobs import Budget, EvalBatch, EvalJob, merge_batches, split_job
from limen_jax.search.evaluation.kind_registry import JobContext, evaluation_kind, register_evaluation
from limen_jax.search.evaluation.remote import job_from_wire, job_to_wire
from limen_jax.search.faults import is_engine_error
from limen_jax.search.strategies import rda_text

ray = pytest.importorskip("ray")

PROGRAM = """import jax.numpy as jnp

def get_observation(state):
    return jnp.array([jnp.sign(state.goal - state.pos), state.step_num / 16.0], dtype=jnp.float32)

def compute_reward(state, action, next_state):
    return {"goal": (next_state.pos == next_state.goal).astype(jnp.float32),
            "approach": (jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)) * 0.1}
"""


def test_the_evolve_cli_runs_a_search_through_ray_end_to_end(tmp_path):
    """First in this module: the CLI starts its own local Ray before the tests' cluster exists."""
    run, cfg = tmp_path / "run", tmp_path / "toy.json"
    cfg.write_text(json.dumps(toy_config()))  # 2 from scratch + 1 iteration x 2 children, tiny PPO
    cmd = [sys.executable, "-m", "limen_jax.evolve", "--task", "toy_corridor", "--config", str(cfg),
           "--evaluator", "ray", "--ray-actors", "2", "--run-dir", str(run)]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads((run / "state.json").read_text())
    records = state["archive"]["programs"]
    assert len(records) == 4 and all(r["success"] is not None for r in records)
    log = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in log].count("score") == 4 and log[-1]["event"] == "run_end"
    assert log[-1]["complete"] is True
    with pytest.raises(subprocess.CalledProcessError) as bad:  # a Ray flag without --evaluator ray
        subprocess.run([*cmd[:7], "--ray-actors", "2", "--run-dir", str(tmp_path / "no")], cwd=tmp_path,
                       env=cli_env(), capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert bad.value.returncode == 2 and "--ray-address and --ray-actors need --evaluator ray" in bad.value.stderr
    assert not (tmp_path / "no").exists()


@pytest.fixture(scope="module")
def cluster():
    from limen_jax.search.evaluation.ray_evaluator import start_ray

    start_ray(ray, dict(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False))
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def evaluator(cluster):
    from limen_jax.search.evaluation.ray_evaluator import RayEvaluator

    ev = RayEvaluator(actors=2, split=True)  # as on GPUs: batches split over the actors
    yield ev
    ev.close()


def scores(run_dir):
    """The run's score events without their times (the event's, the training's), in order,
    and their curves apart."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    out = [{k: v for k, v in e.items() if k != "time"} for e in events if e["event"] == "score"]
    for e in out:
        e["metadata"].pop("train_wall_s")
    return out, [e.pop("curves") for e in out]


def same_curves(a, b):
    """The curves of two runs agree to float32 rounding: a batch split over the actors trains
    its parts at a narrower width, and XLA's reduction order follows the width."""
    assert [sorted(c) for c in a] == [sorted(c) for c in b]
    for x, y in zip(a, b):
        for name in x:
            np.testing.assert_allclose(x[name], y[name], rtol=1e-4, atol=1e-6, err_msg=name)


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
    (ray_scores, ray_curves), (here_scores, here_curves) = scores(tmp_path / "ray"), scores(tmp_path / "here")
    assert ray_scores == here_scores  # every program scored once, as here, with the same successes
    same_curves(ray_curves, here_curves)
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


class Where:
    """A kind that splits, and answers each interface with the process that ran it."""

    name = "where_for_test"
    splits = True

    def job(self, ctx, interfaces, options):  # pragma: no cover - jobs are built by hand here
        raise NotImplementedError

    def run(self, job, budget_s):
        time.sleep(0.5)  # long enough for both parts to be in flight together
        return EvalBatch([(os.getpid(), iface.name) for iface in job.interfaces], wall_s=0.5)

    def score(self, record, result, job):  # pragma: no cover
        pass


def test_one_batch_is_split_over_the_actors_and_trains_as_in_one_piece(evaluator):
    register_evaluation(Where())
    task = ToyCorridor()
    ifaces = [compile_interface(PROGRAM.replace("* 0.1", f"* 0.{k}"), task, name=f"p{k}") for k in (1, 2, 3)]
    where = evaluator.submit(EvalJob(task, ifaces, [0], Budget(64, 64, 0.0), PPOConfig(), pad_to=3,
                                     kind=Where.name)).result(timeout=120)  # fmt: skip
    pids = {ray.get(a.pid.remote()) for a in evaluator.actors}
    # parts of 2 and 1 candidates, on the two actors, joined in order
    assert [name for _, name in where.results] == ["p1", "p2", "p3"]
    (a, b, c) = (pid for pid, _ in where.results)
    assert a == b != c and {a, c} == pids
    # a real training job: the joined answer is the one-piece answer, slot for slot
    job = EvalJob(task, ifaces, [0, 1], Budget(512, 2048, 0.0), PPOConfig.from_dict(TINY_PPO), pad_to=3)
    split = evaluator.submit(job).result(timeout=300)
    whole = InProcessEvaluator().submit(job).result(timeout=300)
    assert [r.success_per_seed.tolist() for r in split.results] == [r.success_per_seed.tolist() for r in whole.results]
    np.testing.assert_allclose([r.final_return for r in split.results], [r.final_return for r in whole.results],
                               rtol=1e-5)
    assert len({round(r.final_return, 3) for r in whole.results}) == 3  # three different programs
    same_curves([r.curves for r in split.results], [r.curves for r in whole.results])


def test_a_local_ray_on_cpus_sends_whole_batches_unless_told(cluster):
    from limen_jax.search.evaluation.ray_evaluator import RayEvaluator

    for split, expected in ((None, False), (True, True), (False, False)):
        ev = RayEvaluator(actors=2, split=split)
        try:
            assert ev.split is expected
        finally:
            ev.close()


def test_split_job_gives_contiguous_even_parts_padded_to_their_share():
    task = ToyCorridor()
    ifaces = [placeholder_interface(k + 1) for k in range(5)]
    job = EvalJob(task, ifaces, [0], Budget(64, 64, 0.0), PPOConfig(), pad_to=6)
    parts = split_job(job, 2)
    assert [[i.obs_dim for i in p.interfaces] for p in parts] == [[1, 2, 3], [4, 5]]
    assert [p.pad_to for p in parts] == [3, 3]
    assert [len(p.interfaces) for p in split_job(job, 8)] == [1] * 5  # never an empty part
    merged = merge_batches([EvalBatch([1, 2, 3], None, 4.0, 10.0, 1.0, None),
                            EvalBatch([4, 5], "split: x", 6.0, 9.0, 2.0, 0.5)])
    assert (merged.results, merged.batch_error, merged.wall_s, merged.finished_at, merged.compile_s,
            merged.eval_s) == ([1, 2, 3, 4, 5], "split: x", 6.0, 10.0, 2.0, 0.5)  # fmt: skip


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


def test_an_episodes_job_runs_on_an_actor_that_cannot_read_the_drivers_run_directory(evaluator, tmp_path):
    """On a cluster with no shared filesystem an actor cannot read <run>/policies/: the job
    carries the kept policy itself. Here the driver deletes policies/ once the job is built,
    and the actor's rollout log is the one read from disk before, and the in-process one."""
    task, ppo = ToyCorridor(), PPOConfig.from_dict(TINY_PPO)
    iface = compile_interface(PROGRAM, task, name="it0001-c00")
    train = EvalJob(task, [iface], [0, 1], Budget(2048, 2048, 0.0), ppo, return_policies=True)
    (trained,) = InProcessEvaluator().submit(train).result(timeout=300).results
    run = tmp_path / "run"
    assert len(keep_policies(run, [(iface.name, trained)], "all")) == 2
    ctx = JobContext(task, ppo, 0, 2, Budget(2048, 2048, 0.0), run_path=str(run))
    job = evaluation_kind("episodes").job(ctx, [iface, default_interface(task)], {"episodes": 4})
    from_disk = episode_log(task, iface, policy_dir(run, iface.name, 0), job.seeds[0], 4)
    shutil.rmtree(run / "policies")
    assert str(tmp_path).encode() not in pickle.dumps(job_to_wire(job))  # no host path travels

    there = evaluator.submit(job).result(timeout=300)
    here = InProcessEvaluator().submit(job).result(timeout=120)
    assert from_disk["policy_seed"] == 0 and len(from_disk["episodes"]) == 4
    assert {e["length"] for e in from_disk["episodes"]} != {0}
    assert there.results[0] == here.results[0] == from_disk
    missing, missing_here = there.results[1], here.results[1]
    assert type(missing) is type(missing_here) is FileNotFoundError and str(missing) == str(missing_here)
    # what goes back to the LLM (the record's evaluation, the critic's prompt) names no host path
    ok, gone = ProgramRecord(iface.name, PROGRAM), ProgramRecord("it0001-c01", PROGRAM)
    evaluation_kind("episodes").score(ok, there.results[0], job)
    evaluation_kind("episodes").score(gone, missing, job)
    prompt = rda_text.critic_prompt(task, [{"name": "goal", "description": "reach the goal"}], ok,
                                    ok.evaluations["episodes"], 40)
    assert "### Episode 4:" in prompt
    assert "--keep-policies all" in gone.evaluations["episodes"]["error"]
    for text in (prompt, json.dumps(ok.evaluations), json.dumps(gone.evaluations)):
        assert str(tmp_path) not in text and "/policies/" not in text


def test_a_demos_job_on_an_actor_ranks_as_in_this_process(evaluator):
    task = ToyCorridor()
    ep = demos.from_episodes(demos.rollout(task, demos.random_policy(task), jax.random.key(0), 8), "random")
    tagged = demos.DemoSet(ep.transitions, np.where(ep.episode < 4, "expert", "random"), ep.round, ep.episode,
                           ep.step)  # fmt: skip
    ifaces = [compile_interface(PROGRAM.replace("* 0.1", f"* 0.{k}"), task, name=f"p{k}") for k in (1, 2)]
    ctx = JobContext(task, PPOConfig(), 0, 1, Budget(0, 0, 0.0), demos=tagged)
    job = evaluation_kind("demos").job(ctx, [*ifaces, default_interface(task)], {})
    there = evaluator.submit(job).result(timeout=300)
    here = InProcessEvaluator().submit(job).result(timeout=120)
    assert len(there.results) == 3
    for a, b in zip(there.results, here.results, strict=True):
        assert (a.accuracy, a.experts, a.negatives) == (b.accuracy, b.experts, b.negatives)
        np.testing.assert_array_equal(a.rewards, b.rewards)
    assert there.results[0].experts + there.results[0].negatives == len(tagged)
    assert len({r.accuracy for r in here.results}) > 1  # the programs rank differently
