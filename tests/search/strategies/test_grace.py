"""The grace strategy: what each prompt shows, as sent to a (fake) Messages API, the
population ranked by accuracy on demonstrations, and a resumed run equal to one never
stopped; from the CLI on the toy corridor with its own demonstrations (``--demos``), a run
killed with SIGKILL after a PPO round and resumed, and a replay, each equal to the run
never killed."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
from cli_runs import assert_same_programs, checkpoint, kill_and_resume, logged, run_cli
from fake_anthropic import FakeAnthropic, Reply
from test_evolve import toy_config
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax import demos
from limen_jax.llm.prompts import build_system
from limen_jax.program import compile_interface
from limen_jax.search.evaluation.demo_ranking import demo_rewards, hard_pairs, ranking_accuracy
from limen_jax.search.strategies.grace import render_notes
from limen_jax.task import make

APPROACH = '''
import jax.numpy as jnp

def compute_reward(state, action, next_state):
    def dist(s):
        mask = (s.grid[:, :, 0] == 5) & (s.grid[:, :, 1] == 3)
        i = jnp.argmax(mask.reshape(-1))
        target = jnp.array([i // s.grid.shape[1], i % s.grid.shape[1]])
        return jnp.abs(target - s.agent.position).sum().astype(jnp.float32)
    held = (next_state.agent.pocket[0] == 5).astype(jnp.float32)
    return jnp.float32(SCALE) * (dist(state) - dist(next_state)) + 10.0 * held
'''
SPIN = '''
import jax.numpy as jnp

def compute_reward(state, action, next_state):
    return jnp.where((action == 1) | (action == 2), 1.0, 0.0).astype(jnp.float32)
'''


def program(code: str, scale: float = 1.0) -> str:
    return f"```python\n{code.replace('SCALE', repr(scale)).strip()}\n```"


ANSWERS = [program(APPROACH), program(SPIN), program(APPROACH, 0.5), program(APPROACH, 2.0)]


def config(**options):
    return {"seed": 5, "search": {"mode": "reward_only", "strategy": "grace", "iterations": 1, "candidates": 2,
                                  "options": {"generations": 2, "p_trajectory": 1.0, "p_pairs": 1.0,
                                              "p_expert": 1.0, **options}},
            "cascade": {"full_steps": 20_000}, "llm": {"concurrency": 1}}


def test_grace_prompts_as_sent_and_the_population(tmp_path, monkeypatch):
    answers = iter(ANSWERS)
    with FakeAnthropic(responder=lambda body: Reply(next(answers))) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        cfg = config(learners=False)  # demos.npz stays as generation 1 saw it (no learners added after PPO)
        cfg["llm"]["mutator"] = "anthropic"
        cfg["search"]["iterations"] = 2  # two generations on demonstrations, then the best trained by PPO
        run = lj.evolve("xland_easy", cfg, run_dir=tmp_path / "run", verbose=False)
        sent = [r["body"] for r in fake.requests]
    assert len(sent) == 4
    users = [b["messages"][0]["content"] for b in sent]
    users = [u if isinstance(u, str) else "".join(part["text"] for part in u) for u in users]
    assert all(b["system"] == build_system("reward_only") for b in sent)
    assert not any(str(tmp_path) in u for u in users)
    # generation 0: sampled expert and random trajectories, described readably
    for u in users[:2]:
        assert "## An expert trajectory" in u and "## A random-play trajectory" in u
        assert "agent (" in u and "blue pyramid (" in u and "action PICKUP" in u
        assert "Current reward program" not in u
    # the population: ranked by accuracy, which equals the records' demos evaluations
    state = json.loads((tmp_path / "run" / "state.json").read_text())["strategy"]
    records = {r.id: r for r in run.records}
    scored = [r for r in run.records if r.iteration < 2]  # the generations; iteration 2 trains the best
    acc = {r.id: r.evaluations["demos"]["accuracy"] for r in scored}
    assert state["population"] == sorted(acc, key=lambda i: -acc[i])
    assert acc["it0000-c00"] > 0.6 > 0.5 > acc["it0000-c01"]  # approach beats spin
    assert all(r.success is None for r in scored)  # nothing trained in the generations
    [best] = [r for r in run.records if r.iteration == 2]
    assert best.success is not None and best.parent_ids == [state["population"][0]]
    # generation 1: the parent (the softmax at temperature 0.05 picks the approach reward)
    # with its accuracy and its hard examples, exactly as rendered from the stored demos
    task = make("xland_easy")
    data = demos.load_demos(tmp_path / "run" / "demos.npz", task)
    parent = compile_interface(records["it0000-c00"].code, task, mode="reward_only")
    rewards = demo_rewards([parent], data.transitions)[0]
    assert ranking_accuracy(rewards[None], data.expert)[0] == pytest.approx(acc["it0000-c00"], abs=1e-6)
    view = types.SimpleNamespace(task=task, demos=lambda: data)
    notes = render_notes(view, records["it0000-c00"], rewards, 4)
    pairs = hard_pairs(rewards, data.expert, 4)
    assert pairs and pairs[0].margin <= 0 and pairs == sorted(pairs, key=lambda p: p.margin)
    for u in users[2:]:
        assert records["it0000-c00"].code.strip() in u
        assert f"Ranking accuracy: {acc['it0000-c00']:.3f}" in u
        assert notes["pairs"] in u and notes["trajectory"] in u
        assert f"-> reward {pairs[0].r_expert:.4g}" in notes["pairs"].splitlines()[2]
    assert [r.parent_ids for r in run.records if r.iteration == 1] == [["it0000-c00"], ["it0000-c00"]]


def brief(run):
    return [(r.id, r.parent_ids, r.code, r.evaluations.get("demos")) for r in run.records]


def test_a_resumed_grace_run_equals_one_never_stopped(tmp_path):
    # a generation, a PPO round, a generation, a PPO round; the first part ends after a PPO round
    # (a run that ends before one trains its best in its last batch: the longer run does not)
    cfg = config(generations=1, p_trajectory=0.25, p_pairs=0.5, p_expert=0.75)
    cfg["llm"]["mutator"] = "offline"
    cfg["search"]["iterations"] = 3
    whole = lj.evolve("xland_easy", cfg, run_dir=tmp_path / "whole", verbose=False)
    cfg["search"]["iterations"] = 1
    lj.evolve("xland_easy", cfg, run_dir=tmp_path / "part", verbose=False)
    resumed = lj.resume(tmp_path / "part", {"search": {"iterations": 3}}, verbose=False)
    assert brief(resumed) == brief(whole)
    a, b = (json.loads((tmp_path / d / "state.json").read_text())["strategy"] for d in ("whole", "part"))
    assert a == b and len(a["population"]) == 3 and a["trained"]
    prompts = [[e["user"] for e in map(json.loads, (tmp_path / d / "events.jsonl").read_text().splitlines())
                if e["event"] == "prompt"] for d in ("whole", "part")]
    assert prompts[0] == prompts[1]
    np.testing.assert_array_equal(np.load(tmp_path / "whole" / "demos.npz")["action"],
                                  np.load(tmp_path / "part" / "demos.npz")["action"])


def test_a_round_trains_the_best_and_adds_its_rollouts_as_negatives(tmp_path):
    cfg = config(generations=1, rounds=2, p_trajectory=0.25, p_pairs=0.5, p_expert=0.75)
    cfg["llm"]["mutator"] = "offline"
    cfg["search"]["iterations"] = 2
    cfg["cascade"]["short_steps"] = 0
    run = lj.evolve("xland_easy", cfg, run_dir=tmp_path / "run", verbose=False)
    records = {r.id: r for r in run.records}
    # batch 1 trained the best of batch 0 with PPO: scored by success like any program
    state = json.loads((tmp_path / "run" / "state.json").read_text())["strategy"]
    best0 = max(["it0000-c00", "it0000-c01"], key=lambda i: records[i].evaluations["demos"]["accuracy"])
    trained = records["it0001-c00"]
    assert trained.code == records[best0].code and trained.parent_ids == [best0]
    assert trained.evaluated and state["trained"][0]["success"] == trained.success
    # its rollouts joined the negatives, tagged with the round's batch
    task = make("xland_easy")
    data = demos.load_demos(tmp_path / "run" / "demos.npz", task)
    learner = data.source == "learner"
    assert learner.sum() > 0 and set(data.round[learner].tolist()) == {1}
    assert set(data.round[~learner].tolist()) == {0}
    # and batch 2 ranked the old population again on the larger set
    for pid in ("it0000-c00", "it0000-c01"):
        iface = compile_interface(records[pid].code, task, mode="reward_only")
        acc = ranking_accuracy(demo_rewards([iface], data.transitions), data.expert)[0]
        assert records[pid].evaluations["demos"]["accuracy"] == pytest.approx(float(acc), abs=1e-6)
        assert records[pid].evaluations["demos"]["negatives"] == int((~data.expert).sum())
        assert dict(state["fitness"])[pid] == pytest.approx(float(acc), abs=1e-6)


def test_softmax_parents_and_the_ppo_fitness_mode():
    """fitness="ppo": children are trained (evaluation "ppo"), the population is ranked by
    success, the prompt names it a success rate; the parent is drawn by the softmax."""
    from limen_jax.archive import Archive, ArchiveConfig, ProgramRecord
    from limen_jax.search import SearchView
    from limen_jax.search.requests import Outcome, ProgramRequest
    from limen_jax.search.strategies.grace import Grace

    task = make("xland_easy")
    archive = Archive(ArchiveConfig())
    grace = Grace(Grace.Options(fitness="ppo", population=2, temperature=0.1))
    assert grace.max_iterations is None  # no PPO rounds: every child trains
    outcomes = []
    for k, success in enumerate([0.2, 0.9, 0.5]):
        record = ProgramRecord(id=f"it0000-c{k:02d}", code=f"# program {k}\n", iteration=0, island=0,
                               obs_dim=4, reward_ast_size=10, success_per_seed=[success], success=success,
                               stage="full")
        archive.add(record)
        request = ProgramRequest(id=record.id, iteration=0, island=0, operator="from_scratch", parent_ids=(),
                                 context_ids=(), system="", user="", sections=(), rng_seed=0, evaluation="ppo")
        outcomes.append(Outcome(request, record))
    view = SearchView(archive, task, "reward_only", 1, 1, demos=None)
    grace.tell(view, outcomes)
    assert grace.population == ["it0000-c01", "it0000-c02"]  # the best 2 of 3, best first
    # softmax at 0.1 over (0.9, 0.5): p = 1 / (1 + e^-4) = 0.982 for the best
    rng = np.random.default_rng(0)
    draws = [grace._parent(view, rng).id for _ in range(2000)]
    assert abs(draws.count("it0000-c01") / 2000 - 1 / (1 + np.exp(-4))) < 0.01
    (request,) = grace.propose(view, np.random.default_rng(1))
    assert request.evaluation == "ppo" and request.operator == "mutate"
    parent = archive.store.get(request.parent_ids[0])
    assert f"Success rate: {parent.success:.3f}" in request.user and "Ranking accuracy" not in request.user


# --- from the CLI, on the toy corridor ------------------------------------------------------


@pytest.fixture(scope="module")
def toy_demos(tmp_path_factory) -> Path:
    """A demonstration set for the toy corridor: 8 episodes of an expert that walks to the
    goal, 8 of random play."""
    import jax
    import jax.numpy as jnp

    task = ToyCorridor()
    walk = lambda sim, key: jnp.where(sim.goal > sim.pos, 2, 0)  # noqa: E731
    expert = demos.from_episodes(demos.rollout(task, walk, jax.random.key(0), 8), "expert")
    noise = demos.from_episodes(demos.rollout(task, demos.random_policy(task), jax.random.key(1), 8), "random")
    return expert.extend(noise).save(tmp_path_factory.mktemp("demos") / "toy.npz")


# 2 rounds of (1 generation of 2 children ranked on the demonstrations, 1 PPO run of the best
# whose rollouts join the negatives): 4 batches, 1,024 steps x 1 seed, no cascade
TOY_GRACE = toy_config(search={"iterations": 3, "candidates": 2, "seeds": 1, "options": {"generations": 1,
                                                                                            "rounds": 2}},
                       cascade={"short_steps": 0, "full_steps": 1024})


def grace_args(path: Path) -> list[str]:
    return ["--strategy", "grace", "--mode", "reward_only", "--fitness", "demos", "--demos", str(path)]


def cli_brief(r):
    return (r.code, r.parent_ids, r.success_per_seed, r.evaluations.get("demos"), r.metadata.get("operator"))


def same_demos(a: Path, b: Path) -> None:
    with np.load(a / "demos.npz") as x, np.load(b / "demos.npz") as y:
        assert sorted(x.files) == sorted(y.files)
        for key in x.files:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)


@pytest.fixture(scope="module")
def grace_cli(tmp_path_factory, toy_demos):
    run_dir = tmp_path_factory.mktemp("grace_cli") / "whole"
    run_cli(run_dir, TOY_GRACE, grace_args(toy_demos))
    return lj.resume(run_dir, verbose=False)


@pytest.mark.slow  # ~35 s; the CLI replay of the same run stays in the default suite
def test_a_cli_run_killed_with_9_after_a_ppo_round_resumes_to_the_same_run(grace_cli, toy_demos, tmp_path):
    whole = grace_cli
    assert [r.id for r in whole.records] == ["it0000-c00", "it0000-c01", "it0001-c00", "it0002-c00", "it0002-c01",
                                             "it0003-c00"]
    run_dir = tmp_path / "cli"
    # killed while batch 2's children are ranked: the checkpoint is the first PPO round's, whose
    # rollouts are in the run's demos.npz as negatives; the resumed run must rank on those
    killed = kill_and_resume(run_dir, TOY_GRACE, logged("program", "it0002"), grace_args(toy_demos))
    assert killed["iteration"] == 1 and [t["round"] for t in killed["strategy"]["trained"]] == [0]
    state = checkpoint(run_dir)["strategy"]
    assert state == checkpoint(whole.run_dir)["strategy"] and len(state["trained"]) == 2
    assert_same_programs(run_dir, whole.records, cli_brief)
    same_demos(run_dir, whole.run_dir)
    learner = demos.load_demos(run_dir / "demos.npz", ToyCorridor()).source == "learner"
    assert learner.sum() > 0


def test_a_cli_replay_of_a_grace_run_is_the_same_run(grace_cli, tmp_path):
    run_dir = tmp_path / "replay"
    out = run_cli(run_dir, {}, ["--replay-from", str(grace_cli.run_dir)])
    assert "strategy grace" in out.stdout
    assert json.loads((run_dir / "config.json").read_text())["llm"]["mutator"] == "replay"
    assert checkpoint(run_dir)["strategy"] == checkpoint(grace_cli.run_dir)["strategy"]
    assert_same_programs(run_dir, grace_cli.records, cli_brief)
    same_demos(run_dir, grace_cli.run_dir)
