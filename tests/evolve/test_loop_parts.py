"""The loop as parts (issue 12): strategies, the pipeline, accounting, failure classes.

Training is replaced by a deterministic fake of ``run_cascade`` (a score from the
program's text), so these tests exercise the loop's I/O in seconds; the real trainer
runs end to end in test_evolve.py.
"""

from __future__ import annotations

import json
import threading
import types

import jax
import numpy as np
import pytest
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax.archive import Archive, ArchiveConfig, ProgramRecord
from limen_jax.interface import default_interface
from limen_jax.llm import BudgetExceeded, Completion, OfflineAuthor, Usage
from limen_jax.run.cli import main
from limen_jax.run.start import resume
from limen_jax.search import Independent, MapElites, SearchView
from limen_jax.search.evaluation.evaluator import EvaluatorBase

lj.register("toy_corridor", ToyCorridor, overwrite=True)
BASE = {
    "search": {"iterations": 3, "candidates": 2, "seeds": 2, "pipeline": "on"},
    "cascade": {"short_steps": 0, "full_steps": 2048, "threshold": 0.0},
    "archive": {"num_islands": 2, "migration_interval": 2},
    "llm": {"mutator": "offline"},
}


def config(**over):
    cfg = json.loads(json.dumps(BASE))
    for key, value in over.items():
        cfg[key] = {**cfg.get(key, {}), **value}
    return cfg


def _fake_result(iface, diverged_at=None, success=None):
    s = (sum(map(ord, iface.source)) % 89) / 100 if success is None else success
    return types.SimpleNamespace(stage="full", success_per_seed=np.array([s, s]), success=s, final_return=s,
                                 curves={"success": np.full(4, s), "return": np.arange(4.0)}, feedback={},
                                 diverged_at=diverged_at)


CALLS: list[list[str]] = []  # the batches the fake trainer was given
AHEAD: list[list[str]] = []  # the batches the default evaluator was asked to compile ahead


@pytest.fixture(scope="module", autouse=True)
def _fake_cascade():
    import limen_jax.rl as rl

    def cascade(task, interfaces, **kw):
        CALLS.append([i.name for i in interfaces])
        return [_fake_result(i) for i in interfaces]

    def compile_ahead(task, interfaces, **kw):
        AHEAD.append([i.name for i in interfaces])
        return 0.0

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rl, "run_cascade", cascade)
        mp.setattr(rl, "compile_cascade", compile_ahead)
        yield


@pytest.fixture
def fake_training():
    CALLS.clear()
    return CALLS


def records(run):
    return [(r.id, r.code, r.parent_ids, r.success_per_seed) for r in run.records]


def offline():
    return OfflineAuthor(ToyCorridor().offline_catalog())


class Delivered:
    """A client delivering one offline answer through ``deliver(text)``."""

    def __init__(self, name, deliver, text) -> None:
        self.name, self.deliver, self.text = name, deliver, text

    def complete(self, system, user, images=(), seed=0):
        return self.deliver(self.text)


class Paid(OfflineAuthor):
    """The offline stand-in at $0.50 a call that refuses (budget) from call ``fail_at`` on."""

    name = "paid"

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__(ToyCorridor().offline_catalog())
        self.fail_at, self.calls = fail_at, 0
        self.lock = threading.Lock()

    def answering(self, text):
        return Delivered(self.name, self.pay, text)

    def pay(self, text):
        with self.lock:
            self.calls += 1
            n = self.calls
        if self.fail_at is not None and n >= self.fail_at:
            raise BudgetExceeded("test cap")
        return Completion(text, usage=Usage(100, 10, 0.5), model="paid-model")


@pytest.fixture(scope="module")
def piped(tmp_path_factory):
    return lj.evolve("toy_corridor", config(), run_dir=tmp_path_factory.mktemp("runs") / "piped", verbose=False)


def test_pipelined_prompts_see_the_archive_one_batch_late_and_replay_exactly(piped, tmp_path):
    by_it = {i: [r for r in piped.records if r.iteration == i] for i in range(4)}
    ids = {i: {r.id for r in rs} for i, rs in by_it.items()}
    assert piped.complete and all(len(rs) == 2 for rs in by_it.values())
    assert all(not r.parent_ids for r in by_it[1])  # proposed while batch 0 trained: archive empty
    assert {p for r in by_it[2] for p in r.parent_ids} <= ids[0]
    assert {p for r in by_it[3] for p in r.parent_ids} <= ids[0] | ids[1]
    assert json.loads((piped.run_dir / "config.json").read_text())["search"]["pipeline"] == "on"
    again = lj.evolve("toy_corridor", config(search={"pipeline": "auto"},  # auto follows the recording
                                             llm={"mutator": "replay", "replay_from": str(piped.run_dir)}),
                      run_dir=tmp_path / "replay", verbose=False)
    assert records(again) == records(piped)
    # the synchronous loop sees batch i-1 when proposing batch i
    sync = lj.evolve("toy_corridor", config(search={"pipeline": "off"}), run_dir=tmp_path / "sync", verbose=False)
    assert all(r.parent_ids for r in sync.records if r.iteration == 1)


def test_budget_stop_mid_pipeline_resumes_to_the_same_run_and_loses_no_spend(piped, tmp_path):
    run_dir = tmp_path / "capped"
    cfg = config(llm={"mutator": "anthropic"})  # not used: the mutator is given
    first = lj.evolve("toy_corridor", cfg, run_dir=run_dir, mutator=Paid(fail_at=6), verbose=False)
    assert not first.complete and first.stopped.startswith("stopped (budget)")
    state = json.loads((run_dir / "state.json").read_text())
    # batch 2 was being asked while batch 1 trained: batch 1 is checkpointed with batch 2 pending
    assert state["iteration"] == 1 and [p["id"] for p in state["pending"]] == ["it0002-c00", "it0002-c01"]
    assert state["spend_usd"] == pytest.approx(2.5)  # 5 calls paid, one of them for the unfinished batch
    done = resume(run_dir, {"llm": {"max_cost_usd": 50.0}}, mutator=Paid(), verbose=False)
    assert done.complete and records(done) == records(piped)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["spend_usd"] == pytest.approx(4.0)  # 8 distinct calls, each paid once
    assert state["usage"]["calls"] == 8 and state["usage"]["input_tokens"] == 800
    assert state["usage"]["mutator"] == "paid"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["keys"] for e in events if e["event"] == "config_change"] == [["llm.max_cost_usd"]]
    assert json.loads((run_dir / "config.json").read_text())["llm"]["max_cost_usd"] == 50.0
    with pytest.raises(ValueError, match="search.candidates"):
        resume(run_dir, {"search": {"candidates": 3}}, verbose=False)


def test_the_cli_exits_non_zero_when_the_run_stops_early(fake_training, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "llm_cache.jsonl").write_text("")
    code = main(["--task", "toy_corridor", "--iterations", "1", "--candidates", "2", "--full-steps", "2048",
                 "--short-steps", "0", "--replay-from", str(empty), "--run-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 1 and "stopped (mutator): CacheMiss" in out


class Outage:
    name = "down"

    def complete(self, system, user, images=(), seed=0):
        return Completion(text="", error="no answer after 7 attempts; last error: HTTP 529")


def test_a_total_outage_is_never_reported_as_finished(fake_training, tmp_path):
    run = lj.evolve("toy_corridor", config(), run_dir=tmp_path / "o", mutator=Outage(), verbose=False)
    assert not run.complete and run.stopped.startswith("stopped (outage)") and "HTTP 529" in run.stopped
    assert fake_training == []


def test_a_checker_fault_costs_one_candidate_and_is_never_shown_to_the_llm(fake_training, tmp_path, monkeypatch):
    import limen_jax.program as program

    real = program.compile_interface

    def buggy(source, task, mode="full", name="candidate", **kw):
        if name == "it0000-c00":
            raise RuntimeError("checker bug")
        return real(source, task, mode, name, **kw)

    monkeypatch.setattr(program, "compile_interface", buggy)
    run = lj.evolve("toy_corridor", config(search={"iterations": 1, "pipeline": "off"}),
                    run_dir=tmp_path / "c", verbose=False)
    bad = run.archive.store.get("it0000-c00")
    assert run.complete and {k: v for k, v in bad.error.items() if k != "trace"} == {
        "stage": "checker", "message": "RuntimeError: checker bug", "blame": "engine"}
    assert bad.error["trace"].endswith("RuntimeError: checker bug") and "in buggy" in bad.error["trace"]
    assert run.archive.store.get("it0000-c01").success is not None
    prompts = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
    later = [e["user"] for e in prompts if e["event"] == "prompt" and e["iteration"] == 1]
    assert later and not any("it0000-c00" in u for u in later)

    def broken(*a, **kw):
        raise RuntimeError("checker bug")

    monkeypatch.setattr(program, "compile_interface", broken)
    run = lj.evolve("toy_corridor", config(), run_dir=tmp_path / "c2", verbose=False)
    assert not run.complete and run.stopped.startswith("stopped (engine)") and "every candidate" in run.stopped


def test_a_checker_fault_that_passes_costs_nothing_and_is_noted(fake_training, tmp_path, monkeypatch):
    """A fault of the machinery that does not come back (a race between threads: the one
    seen was "dictionary changed size during iteration") is checked again; the candidate
    trains, and its record notes the fault and where it came from."""
    import limen_jax.program as program

    real = program.compile_interface
    calls = []

    def racy(source, task, mode="full", name="candidate", **kw):
        calls.append(name)
        if name == "it0000-c00" and calls.count(name) == 1:
            raise RuntimeError("dictionary changed size during iteration")
        return real(source, task, mode, name, **kw)

    monkeypatch.setattr(program, "compile_interface", racy)
    run = lj.evolve("toy_corridor", config(search={"iterations": 0, "pipeline": "off"}),
                    run_dir=tmp_path / "r", verbose=False)
    record = run.archive.store.get("it0000-c00")
    assert run.complete and record.error is None and record.success is not None
    assert calls.count("it0000-c00") == 2 and calls.count("it0000-c01") == 1
    noted = record.metadata["checker_fault_retried"]
    assert noted.startswith("RuntimeError: dictionary changed size during iteration\n") and "in racy" in noted


def test_an_engine_error_in_training_stops_resumably(tmp_path, monkeypatch):
    import limen_jax.rl as rl

    def oom(task, interfaces, **kw):  # what XLA raises when an allocation fails
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.1GiB")

    monkeypatch.setattr(rl, "run_cascade", oom)
    run = lj.evolve("toy_corridor", config(), run_dir=tmp_path / "e", verbose=False)
    assert not run.complete and run.stopped.startswith("stopped (engine)") and "RESOURCE_EXHAUSTED" in run.stopped
    assert not (run.run_dir / "state.json").exists() and len(run.records) == 0  # nothing blamed on a program


def test_divergence_is_reported_as_diverged(tmp_path, monkeypatch):
    import limen_jax.rl as rl

    def cascade(task, interfaces, **kw):
        return [_fake_result(interfaces[0], diverged_at=3), _fake_result(interfaces[1], success=float("nan"))]

    monkeypatch.setattr(rl, "run_cascade", cascade)
    run = lj.evolve("toy_corridor", config(search={"iterations": 0}), run_dir=tmp_path / "d", verbose=False)
    msgs = [r.error["message"] for r in run.records]
    assert msgs == ["training diverged: non-finite values at update 3",
                    "training diverged: the success rate is not finite"]
    assert all(r.error["kind"] == "diverged" and r.success is None for r in run.records)


GOOD = """\
import jax.numpy as jnp

def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)

def compute_reward(state, action, next_state):
    return jnp.asarray(next_state.pos == next_state.goal, jnp.float32) - 0.01
"""


class Scripted:
    name = "scripted"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, system, user, images=(), seed=0):
        self.calls += 1
        if self.calls == 1:  # cut off at max_tokens
            return Completion(text="```python\n" + GOOD[:120], metadata={"stop_reason": "max_tokens",
                                                                              "max_tokens": 64})
        # prose, then a fence holding a program that imports os, with a fence nested in a string
        return Completion(text="Here is my answer:\n\n```python\nimport os\n" + GOOD + "```\nHope it helps.")


def test_truncated_answers_are_reported_as_cut_and_rejected_code_is_the_extracted_program(fake_training, tmp_path):
    run = lj.evolve("toy_corridor", config(search={"iterations": 0}, llm={"concurrency": 1}),
                    run_dir=tmp_path / "t", mutator=Scripted(), verbose=False)
    cut, policy = run.records
    assert cut.error["stage"] == "truncated" and "cut off at the output limit (64 tokens)" in cut.error["message"]
    assert "The checker said:" in cut.error["message"]
    assert policy.error["stage"] == "policy"
    assert policy.code == "import os\n" + GOOD and "```" not in policy.code and "Hope" not in policy.code


def _view(archive, iteration=2):
    return SearchView(archive, ToyCorridor(), "full", iteration, 2)


def test_independent_shows_nothing_from_the_archive_and_failures_exclude_machine_faults():
    archive = Archive(ArchiveConfig(num_islands=1))
    archive.add(ProgramRecord("good", "# g", obs_dim=2, reward_ast_size=5, success=0.5, success_per_seed=[0.5],
                              stage="full"))
    archive.add(ProgramRecord("mistake", "x = 1", error={"stage": "policy", "message": "no os", "blame": "program"}))
    archive.add(ProgramRecord("outage", "", error={"stage": "mutator", "message": "HTTP 529", "blame": "infra"}))
    archive.add(ProgramRecord("legacy", "y = 2", error={"stage": "syntax", "message": "bad"}))  # no blame: program
    assert [r.id for r in _view(archive).program_failures(5)] == ["legacy", "mistake"]
    for p in Independent().propose(_view(archive), np.random.default_rng(0)):
        assert p.parent_id is None and not p.sections
        assert not any(name in p.user for name in ("good", "mistake", "outage", "legacy", "failed at stage"))
    shown = MapElites().propose(_view(archive), np.random.default_rng(0))
    assert all(p.parent_id == "good" for p in shown)
    assert all("Program mistake failed" in p.user and "outage" not in p.user for p in shown)


def test_checker_limits_come_from_the_config(fake_training, tmp_path):
    limits = {"max_obs_dim": 1, "max_work_vs_step": 40}
    run = lj.evolve("toy_corridor", config(search={"iterations": 0}, checker=limits), run_dir=tmp_path / "l",
                    verbose=False)  # fmt: skip
    rejected = [r for r in run.records if r.error]
    assert run.complete and len(run.records) == 2 and rejected
    assert all(r.obs_dim == 1 for r in run.records if not r.error)
    assert all(r.error["stage"] == "shape" and "between 1 and 1" in r.error["message"] for r in rejected)
    prompts = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
    users = [e["user"] for e in prompts if e["event"] == "prompt"]
    assert users and all("the observation has at most 1 features" in u for u in users)
    assert all("may cost at most 40 x the work of one environment step" in u for u in users)


class Remote(EvaluatorBase):
    """An evaluator elsewhere (a cluster's stand-in): it writes only submit and close
    (EvaluatorBase's prepare compiles nothing ahead)."""

    def __init__(self) -> None:
        self.jobs, self.closed = [], False

    def submit(self, job):
        import concurrent.futures as cf

        from limen_jax.search.evaluation.jobs import EvalBatch

        self.jobs.append(([i.name for i in job.interfaces], list(job.seeds), job.budget))
        future = cf.Future()
        future.set_result(EvalBatch([_fake_result(i, success=0.25) for i in job.interfaces], None, 1.0))
        return future

    def close(self, wait=True):
        self.closed = True


def test_an_evaluator_drops_in_through_submit_and_a_future(fake_training, tmp_path):
    remote = Remote()
    run = lj.evolve("toy_corridor", config(search={"iterations": 1}), run_dir=tmp_path / "r", verbose=False,
                    evaluator=remote)
    assert run.complete and fake_training == [] and not remote.closed  # the caller owns it
    # the baseline is a job of its own in the first batch (its observation is wider than a program's)
    assert [names for names, _, _ in remote.jobs] == [["it0000-c00", "it0000-c01"], ["toy_corridor:default"],
                                                      ["it0001-c00", "it0001-c01"]]
    seeds, budget = remote.jobs[0][1], remote.jobs[0][2]
    assert seeds == [0, 1] and (budget.short_steps, budget.full_steps, budget.threshold) == (2048, 2048, 0.0)
    assert [r.success for r in run.records] == [0.25] * 4


class Preparing(Remote):
    """A remote evaluator that also takes the loop's hint of what comes next."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared = []

    def prepare(self, job):
        self.prepared.append(list(job.interfaces))

    def submit(self, job):
        self.submitted = getattr(self, "submitted", []) + [list(job.interfaces)]
        return super().submit(job)


def test_the_next_batch_is_handed_over_to_compile_while_the_current_one_trains(fake_training, tmp_path):
    """The evaluator hears of each batch before it is submitted: at the start a batch of
    placeholders of the first batch's size (the smallest width bucket, before any program
    exists), then each pipelined batch as soon as it is checked, with the very interfaces
    it will train; the default evaluator compiles them ahead (that this changes no result
    is tests/rl/test_trainer.py's)."""
    ev = Preparing()
    run = lj.evolve("toy_corridor", config(search={"iterations": 2, "baseline": False}), run_dir=tmp_path / "p",
                    verbose=False, evaluator=ev)  # fmt: skip
    assert run.complete
    first, *later = ev.prepared
    assert [(i.name, i.obs_dim) for i in first] == [("placeholder", 1)] * 2
    assert len(later) == 2 and all(a is b for p, s in zip(later, ev.submitted[1:]) for a, b in zip(p, s, strict=True))
    # reward_only trains the task's own observation: its width, not the smallest bucket's
    rewards = Preparing()
    lj.evolve("toy_corridor", config(search={"iterations": 0, "mode": "reward_only"}), run_dir=tmp_path / "r",
              verbose=False, evaluator=rewards)  # fmt: skip
    default_dim = default_interface(lj.make("toy_corridor")).obs_dim
    assert [i.obs_dim for i in rewards.prepared[0]] == [default_dim] * 2 == [i.obs_dim for i in rewards.submitted[0]]
    AHEAD.clear()
    again = lj.evolve("toy_corridor", config(search={"iterations": 2}), run_dir=tmp_path / "d", verbose=False)
    assert again.complete
    assert AHEAD == [["placeholder"] * 2, ["it0001-c00", "it0001-c01"], ["it0002-c00", "it0002-c01"]]


def test_the_default_evaluator_compiles_ahead_in_order_and_close_waits_for_it(monkeypatch):
    """prepare() queues jobs for one compile thread; a failing compile is dropped (the
    submission meets it again); close() drops what has not started and waits for the
    compile in flight, close(wait=False) (Ctrl-C) does not."""
    import time

    import limen_jax.search.evaluation.evaluator as evaluator_mod

    started, release, done = threading.Event(), threading.Event(), []

    def compile_job(job):
        if job == "bad":
            raise RuntimeError("a compile that fails")
        started.set()
        release.wait(10)
        done.append(job)
        return 1.5

    monkeypatch.setattr(evaluator_mod, "compile_job", compile_job)
    ev = evaluator_mod.InProcessEvaluator()
    for job in ("bad", "a", "b"):
        ev.prepare(job)
    assert started.wait(10)
    t = time.monotonic()
    ev.close(wait=False)
    assert time.monotonic() - t < 1.0 and done == []
    closer = threading.Thread(target=ev.close)
    closer.start()
    time.sleep(0.2)
    assert closer.is_alive()  # waiting for "a"
    release.set()
    closer.join(10)
    assert not closer.is_alive() and done == ["a"] and ev.compiled_ahead_s == 1.5  # "b" was dropped


def test_ctrl_c_leaves_without_waiting_for_a_compile_ahead(fake_training, tmp_path, monkeypatch):
    import limen_jax.search.evaluation.evaluator as evaluator_mod

    closed = []
    monkeypatch.setattr(evaluator_mod.InProcessEvaluator, "close", lambda self, wait=True: closed.append(wait))

    class Interrupted:
        name = "interrupted"

        def complete(self, system, user, images=(), seed=0):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lj.evolve("toy_corridor", config(), run_dir=tmp_path / "c", mutator=Interrupted(), verbose=False)
    assert closed == [False]


def test_plots_are_drawn_after_the_next_batch_is_submitted(fake_training, tmp_path, monkeypatch):
    """matplotlib takes ~1 s to import and ~0.5 s a redraw on a CPU: the loop submits the
    next batch before it draws, and draws once more at the end (every image current)."""
    import limen_jax.plots as plots

    order = []
    real = plots.plot_progress
    monkeypatch.setattr(plots, "plot_progress", lambda records, *a, **k: (order.append(len(records)),
                                                                          real(records, *a, **k)))
    ev = Remote()
    ev.submit = lambda job, submit=ev.submit: (order.append(job.interfaces[0].name[:6]), submit(job))[1]
    run = lj.evolve("toy_corridor", config(search={"iterations": 2, "baseline": False}), run_dir=tmp_path / "o",
                    verbose=False, evaluator=ev)  # fmt: skip
    assert run.complete and (run.run_dir / "progress.png").exists()
    assert order == ["it0000", "it0001", 2, "it0002", 4, 6], order


def test_a_plot_interrupted_while_written_leaves_the_previous_one_whole(tmp_path, monkeypatch):
    """The loop draws progress.png between batches, where a Ctrl-C stops it at once: one
    landing while matplotlib writes the file (it truncates it, then writes in chunks) leaves
    the previous figure whole and no temporary file."""
    from PIL import Image

    import limen_jax.plots as plots

    path = tmp_path / "progress.png"
    records = [{"iteration": 0, "success": 0.25}, {"iteration": 1, "success": None}]
    plots.plot_progress(records, path)
    before = path.read_bytes()

    def interrupted(im, fp, filename, *args, **kwargs):
        fp.write(b"\x89PNG\r\n\x1a\n")  # the signature, then the Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setitem(Image.SAVE, "PNG", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plots.plot_progress([*records, {"iteration": 2, "success": 0.5}], path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["progress.png"]


class SlowOffline(OfflineAuthor):
    """The offline stand-in, answering after ``delay`` seconds (a model's latency)."""

    name = "slow"

    def __init__(self, delay: float) -> None:
        super().__init__(ToyCorridor().offline_catalog())
        self.delay = delay
        self.lock, self.in_flight, self.most = threading.Lock(), 0, 0

    def answering(self, text):
        return Delivered(self.name, self.deliver, text)

    def deliver(self, text):
        import time

        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        return Completion(text, model=self.name)


class SlowEvaluator(Remote):
    """Takes ``seconds`` per batch on a thread of its own."""

    def __init__(self, seconds: float) -> None:
        import concurrent.futures as cf

        super().__init__()
        self.seconds, self.pool = seconds, cf.ThreadPoolExecutor(1)

    def submit(self, job):
        import time

        from limen_jax.search.evaluation.jobs import EvalBatch

        def work():
            time.sleep(self.seconds)
            return EvalBatch([_fake_result(i) for i in job.interfaces], None, self.seconds)

        return self.pool.submit(work)


def test_the_pipeline_hides_the_llm_behind_training(tmp_path):
    waits = {}
    for pipeline in ("on", "off"):
        mutator = SlowOffline(1.0)
        run = lj.evolve("toy_corridor", config(search={"iterations": 2, "pipeline": pipeline}),
                        run_dir=tmp_path / pipeline, mutator=mutator, evaluator=SlowEvaluator(3.0), verbose=False)
        events = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
        waits[pipeline] = [e["llm_wait_s"] for e in events if e["event"] == "iteration"]
        assert run.complete and mutator.most == 2  # both calls of a batch in flight at once
        # when batch i+1's answers arrived: before batch i was scored only when pipelined
        order = [(e["event"], e["id"][:6]) for e in events if e["event"] in ("response", "score", "reject")]
        for i in (0, 1):
            asked = order.index(("response", f"it{i + 1:04d}"))
            scored = min(order.index(e) for e in order if e[1] == f"it{i:04d}" and e[0] != "response")
            assert (asked < scored) == (pipeline == "on"), (pipeline, order)
    assert all(w >= 1.0 for w in waits["off"]), waits
    # pipelined, only the first batch waits; the later ones were asked while the previous
    # trained (their waits, relative to the synchronous ones: the sandboxed checks also
    # count, and their time varies with the machine's load)
    assert waits["on"][0] >= 1.0 and sum(waits["on"][1:]) < sum(waits["off"][1:]) / 2, waits


def test_the_check_sample_is_built_while_the_first_batch_is_asked_for(tmp_path, monkeypatch):
    """The checker's sample (compiled rollouts of the task, slow for an MJX task on a
    CPU) is built on a thread from the start of the run, not after the first answer."""
    import time

    import limen_jax.program as program

    calls, real = [], program.check_sample

    def recorded(task, limits):
        calls.append((threading.current_thread().name, time.monotonic()))
        return real(task, limits)

    class Timed(SlowOffline):
        answered: float | None = None

        def deliver(self, text):
            out = super().deliver(text)
            self.answered = self.answered or time.monotonic()
            return out

    monkeypatch.setattr(program, "check_sample", recorded)
    mutator = Timed(1.0)
    run = lj.evolve("toy_corridor", config(search={"iterations": 0}), run_dir=tmp_path / "r", mutator=mutator,
                    evaluator=SlowEvaluator(0.1), verbose=False)  # fmt: skip
    assert run.complete and len(run.records) == 2
    assert calls[0][0] == "check-sample" and calls[0][1] < mutator.answered, calls


def test_a_finished_run_leaves_no_evaluator_thread(fake_training, tmp_path):
    import threading

    for k in range(3):  # a notebook running searches one after another
        assert lj.evolve("toy_corridor", config(search={"iterations": 1}), run_dir=tmp_path / f"r{k}",
                         verbose=False).complete
    assert [t.name for t in threading.enumerate() if t.name in ("limen-eval", "limen-compile")] == []
