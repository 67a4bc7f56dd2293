"""A program that behaves exactly like an earlier one of the run is not trained again.

A fake Messages API answers three interfaces, each three times in forms that differ only in
names, comments, constant spellings and the order of definitions. The run (three batches of
three, the last after a resume) trains three programs and records six repeats, each naming
the program it repeats and holding its result: in the same batch, in the batch training
while the next is checked (the pipeline), and across a resume (the fingerprint is kept with
the record in the run directory).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading

import numpy as np
import pytest
from cli_runs import checkpoint, checkpointed, cli_env, kill_and_resume
from llm.fake_anthropic import FakeAnthropic, Reply
from repeat_programs import A, B, C, answer
from test_evolve import toy_config
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax.archive import ProgramRecord
from limen_jax.llm.prompts import PromptConfig, build_prompt
from limen_jax.program import compile_interface
from limen_jax.run.ask import Child
from limen_jax.run.cli import _parser, config_from_args
from limen_jax.run.repeats import Repeats
from limen_jax.search.requests import ProgramRequest
from limen_jax.view import data as view

# batch 0: A, B and A again (a repeat in its own batch); batch 1: C, and B and A again (B's
# original still training: the pipeline checks batch 1 while batch 0 trains); batch 2, after
# a resume: C, B, C again
ORDER = [A[0], B[0], A[1], C[0], B[1], A[2], C[1], B[2], C[2]]
LETTER = {code: letter for letter, group in zip("ABC", (A, B, C)) for code in group}


def llm(**over):
    return {"mutator": "anthropic", "max_tokens": 400, "max_retries": 0, "concurrency": 1, **over}


class Answers:
    """Answers the fake API's requests in order with ``codes``, cycling."""

    def __init__(self, codes: list[str]) -> None:
        self.codes, self.lock, self.count = itertools.cycle(codes), threading.Lock(), 0

    def __call__(self, body):
        with self.lock:
            self.count += 1
            return Reply(answer(next(self.codes)))


def asked(run):
    """The run's programs written by the model, in order (not the task's default baseline)."""
    return [r for r in run.records if r.metadata.get("source") != "default"]


def letter(record: ProgramRecord) -> str:
    return next(LETTER[code] for code in LETTER if code.strip() == record.code.strip())


def events(run_dir):
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """The 9-program run: two batches, a stop, a resume for the third; (result, checkpoint
    after the first session)."""
    run_dir = tmp_path_factory.mktemp("repeats") / "run"
    answers = Answers(ORDER)
    with FakeAnthropic(responder=answers) as fake, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANTHROPIC_API_KEY", "test-key")
        mp.setenv("ANTHROPIC_BASE_URL", fake.url)
        config = toy_config(llm=llm(), search={"iterations": 1, "candidates": 3})
        first = lj.evolve("toy_corridor", config, run_dir=run_dir, verbose=False)
        assert first.complete and answers.count == 6
        between = json.loads((run_dir / "state.json").read_text())
        again = lj.resume(run_dir, {"search": {"iterations": 2}}, verbose=False)
    assert again.complete and answers.count == 9
    return again, between


def test_nine_answers_of_three_behaviours_train_three(resumed):
    run, _ = resumed
    records = asked(run)
    assert [letter(r) for r in records] == [LETTER[code] for code in ORDER]
    first = {}
    for r in records:
        first.setdefault(letter(r), r.id)
    originals = [r for r in records if r.duplicate_of is None]
    assert [r.id for r in originals] == list(first.values())  # the first of each behaviour
    assert all(r.success is not None and r.stage == "full" and r.fingerprint is not None for r in originals)
    repeats = [r for r in records if r.duplicate_of is not None]
    assert len(repeats) == 6
    by_id = {r.id: r for r in records}
    for r in repeats:
        original = by_id[r.duplicate_of]
        assert r.duplicate_of == first[letter(r)]
        assert r.fingerprint == original.fingerprint
        assert (r.success_per_seed, r.success, r.stage, r.curves) == (original.success_per_seed, original.success,
                                                                      original.stage, original.curves)
        assert r.metadata["train_wall_s"] == 0.0
        assert r.metadata["train_s_saved"] == original.metadata["train_wall_s"] > 0
        assert r.metadata["nearest"]["id"] == original.id and r.metadata["nearest"]["same"] is True
        assert not r.evaluated  # never in the grid, the best-of lists or parent selection
    # only the originals were written to train, and only they entered the grid
    trained = [e["id"] for e in events(run.run_dir) if e["event"] == "program"]
    assert sorted(trained) == sorted(r.id for r in originals if r.metadata.get("source") != "default")
    assert {r.id for r in run.archive.elites()} <= {r.id for r in run.records if r.duplicate_of is None}
    # B's repeat in batch 1 was checked while B trained in batch 0
    assert json.loads((run.run_dir / "config.json").read_text())["search"]["pipeline"] == "on"
    assert records[4].duplicate_of == records[1].id and records[4].iteration == 1 and records[1].iteration == 0
    # the near-duplicate measure is recorded for every program after the first
    assert records[1].metadata["nearest"]["id"] == records[0].id
    assert records[1].metadata["nearest"]["same"] is False
    assert records[1].metadata["nearest"]["shared_features"] == 0.5  # pos / 10 in both


def test_the_fingerprint_survives_a_resume(resumed):
    run, between = resumed
    stored = {p["id"]: p for p in between["archive"]["programs"]}
    assert between["iteration"] == 1 and len([p for p in stored.values() if p["fingerprint"]]) == 6
    records = asked(run)
    third = [r for r in records if r.iteration == 2]
    # every program of the resumed batch repeats one recorded by the first session
    assert [r.duplicate_of for r in third] == [records[3].id, records[1].id, records[3].id]
    assert all(r.duplicate_of in stored for r in third)
    for r in records:
        if r.id in stored:
            assert r.fingerprint == stored[r.id]["fingerprint"]


def test_what_it_saved_is_reported(resumed):
    run, _ = resumed
    saved = round(sum(r.metadata["train_s_saved"] for r in run.records if r.duplicate_of), 2)
    usage = json.loads((run.run_dir / "usage.json").read_text())
    checked = len([r for r in run.records if r.fingerprint is not None])
    assert checked == 9 and usage["programs"] == {"checked": 9, "repeats": 6, "train_s_saved": saved}
    assert f"; 9 checked, 6 repeats of earlier programs recognised, {saved:.0f} s of training not spent" in (
        run.summary())
    page = view.summary(view.load(run.run_dir))
    assert page["run"]["usage"]["programs"]["repeats"] == 6
    nodes = {n["id"]: n for n in page["programs"]}
    for r in run.records:
        assert nodes[r.id]["duplicate_of"] == r.duplicate_of
        assert nodes[r.id]["evaluated"] == r.evaluated
    reports = [e for e in events(run.run_dir) if e["event"] == "score"]
    assert all("fingerprint" not in e for e in reports)  # the log stays small: state.json keeps it
    assert sum(e["duplicate_of"] is not None for e in reports) == 6


def test_repeats_are_recognised_the_same_after_a_kill_9(resumed, tmp_path):
    """Killed once batch 0 is checkpointed (batch 1 already asked and checked), resumed from
    the CLI: the resumed process knows batch 0's programs only by their stored fingerprints."""
    answers = Answers(ORDER)
    with FakeAnthropic(responder=answers) as fake:
        env = {**cli_env(), "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.url}
        config = toy_config(llm=llm(), search={"iterations": 2, "candidates": 3})
        kill_and_resume(tmp_path / "run", config, checkpointed(0), env=env)
    state = checkpoint(tmp_path / "run")
    assert state is not None and state["iteration"] == 2
    mine = [ProgramRecord.from_dict(p) for p in state["archive"]["programs"]]
    mine = [r for r in mine if r.metadata.get("source") != "default"]
    expected = [(r.id, letter(r), r.duplicate_of) for r in asked(resumed[0])]
    assert [(r.id, letter(r), r.duplicate_of) for r in mine] == expected


def test_off_trains_every_program_and_still_measures(tmp_path, monkeypatch):
    answers = Answers([A[0], A[1], B[0]])
    with FakeAnthropic(responder=answers) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        config = toy_config(llm=llm(), search={"iterations": 0, "candidates": 3, "dedupe": False})
        run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "off", verbose=False)
    records = asked(run)
    assert run.complete and [letter(r) for r in records] == ["A", "A", "B"]
    assert all(r.duplicate_of is None and r.success is not None for r in records)
    trained = [e["id"] for e in events(run.run_dir) if e["event"] == "program"]
    assert sorted(trained) == sorted(r.id for r in records)
    assert records[0].fingerprint == records[1].fingerprint
    assert records[1].metadata["nearest"]["id"] == records[0].id and records[1].metadata["nearest"]["same"] is True
    assert "; 3 checked, 0 repeats of earlier programs recognised, 0 s of training not spent" in run.summary()


def test_the_cli_turns_it_off():
    assert config_from_args(_parser().parse_args(["--task", "toy_corridor", "--no-dedupe"])).search.dedupe is False
    assert config_from_args(_parser().parse_args(["--task", "toy_corridor"])).search.dedupe is True


# --- without training ---------------------------------------------------------------------------


def child(pid: str, code: str, evaluation: str = "ppo", source: str = "llm") -> Child:
    request = ProgramRequest(id=pid, iteration=0, island=0, operator="from_scratch", parent_ids=(), context_ids=(),
                             system="", user="", sections=(), rng_seed=0, evaluation=evaluation, source=source,
                             code=code if source == "given" else "")
    iface = compile_interface(code, ToyCorridor(), mode="full", name=pid)
    return Child(request, ProgramRecord(id=pid, code=iface.source), iface)


@pytest.fixture(scope="module")
def one_constant():
    """A and C, each beside a copy that differs in one constant, and A's other forms."""
    return [child("a", A[0]), child("a_goal", A[0].replace("state.goal / 10.0", "state.goal / 10.5")),
            child("c", C[0]), child("c_cost", C[0].replace("0.01)", "0.011)")), child("a2", A[2]),
            child("a1", A[1], evaluation="demos"), child("given", A[1], source="given")]


def test_programs_that_differ_in_one_constant_are_never_merged(one_constant):
    children = copy.deepcopy(one_constant)
    repeats = Repeats(True).mark(children)
    # a2 repeats a; a1 is scored by another evaluation kind (its result would not be a's);
    # a program the strategy hands in is a repeat like any answer
    assert [(c.record.id, c.record.duplicate_of) for c in repeats] == [("a2", "a"), ("given", "a")]
    assert [c.record.id for c in children if c.interface is not None] == ["a", "a_goal", "c", "c_cost", "a1"]
    assert children[1].record.metadata["nearest"]["id"] == "a"
    assert children[1].record.metadata["nearest"]["shared_features"] == 0.5  # the goal column changed
    assert children[3].record.metadata["nearest"]["observation_permuted"] is True  # the same observation


def test_the_index_is_rebuilt_from_records_and_checked(one_constant):
    children = copy.deepcopy(one_constant)
    Repeats(True).mark(children[:4])
    records = [c.record for c in children[:4]]
    again = Repeats.of(records, on=True)
    later = copy.deepcopy(one_constant[4:5])
    assert [c.record.duplicate_of for c in again.mark(later)] == ["a"]
    assert Repeats.of(records, on=False).mark(copy.deepcopy(one_constant[4:5])) == []
    bad = copy.deepcopy(records)
    bad[2].fingerprint = {**bad[2].fingerprint, "digest": "not hex"}
    with pytest.raises(ValueError, match="program c in the run directory: a fingerprint's digest"):
        Repeats.of(bad, on=True)
    orphan = ProgramRecord(id="x", code="", fingerprint=records[0].fingerprint, duplicate_of="nowhere")
    with pytest.raises(ValueError, match="program x in the run directory repeats 'nowhere'"):
        Repeats.of([*records, orphan], on=True)


def test_the_default_interface_is_never_a_repeat():
    from limen_jax.interface import default_interface

    request = ProgramRequest(id="d", iteration=0, island=0, operator="baseline", parent_ids=(), context_ids=(),
                             system="", user="", sections=(), rng_seed=0, source="default")
    children = [Child(request, ProgramRecord(id="d", code=""), default_interface(ToyCorridor()))]
    assert Repeats(True).mark(children) == [] and children[0].record.fingerprint is None
    assert children[0].interface is not None


def test_the_next_prompt_says_a_repeat_behaved_identically():
    parent = ProgramRecord(id="it0001-c02", code=A[1], success=0.5, success_per_seed=[0.5, 0.5], stage="full",
                           duplicate_of="it0000-c00")
    failed = ProgramRecord(id="it0002-c00", code=B[1], duplicate_of="it0000-c01",
                           error={"stage": "train", "message": "diverged"})
    prompt = build_prompt(ToyCorridor(), "full", np.random.default_rng(0), parent=parent, failures=[failed],
                          config=PromptConfig(section_prob=1.0))
    said = ("It behaved identically to program {} (the same observation and reward on every check transition), "
            "so it was not trained again: this is that program's result.")
    assert f"Success rate: 0.50 (per seed: 0.50, 0.50) {said.format('it0000-c00')}" in prompt.user
    assert f"Error: diverged {said.format('it0000-c01')}" in prompt.user
