"""forge (FORGE, seed 004): pair odds, depth, the bounded pool, the stopping rule and the
offline planner and engineer on hand-made inputs; whole runs on the toy corridor (offline:
plan -> components -> crossovers, depth recorded and plotted, stopped after a batch and
resumed, replayed; with an LLM: what each role sees, as sent to a local Messages-API server)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from cli_runs import assert_same_programs, checkpoint, checkpointed, kill_and_resume
from fake_anthropic import FakeAnthropic, Reply
from offline_answers import answer as offline
from offline_answers import program_request
from test_evolve import toy_config
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax.archive import Archive, ArchiveConfig, ProgramRecord
from limen_jax.llm.anthropic_client import AnthropicClient
from limen_jax.llm.offline import OfflineAuthor, read_genome
from limen_jax.llm.prompts import budget_text, build_system, contract
from limen_jax.llm.retry import RetryPolicy
from limen_jax.plots import plot_depth
from limen_jax.program import Limits
from limen_jax.run.start import resume
from limen_jax.search import SearchView
from limen_jax.search.requests import Outcome, ProgramRequest
from limen_jax.search.strategies.forge import (
    Forge,
    child_depth,
    combine,
    insert,
    pair_probabilities,
    parse_components,
    stalled,
)
from limen_jax.search.strategy_registry import check_options
from limen_jax.search.templates import render


def scored(pid: str, success: float | None, error: dict | None = None) -> ProgramRecord:
    trained = success is not None and error is None
    return ProgramRecord(pid, f"# program {pid}\nx = 1\n", iteration=1, obs_dim=2, reward_ast_size=5,
                         success_per_seed=[success, success] if trained else [], success=success if trained else None,
                         stage="full" if trained else "rejected", error=error)


def view_of(records=(), iteration=2, candidates=4) -> SearchView:
    archive = Archive(ArchiveConfig(num_islands=1))
    for r in records:
        archive.add(r)
    return SearchView(archive, ToyCorridor(), "full", iteration, candidates)


def test_pairs_are_drawn_in_proportion_to_the_sum_of_their_scores():
    pairs, probs = pair_probabilities([0.2, 0.3, 0.5])
    assert pairs == [(0, 1), (0, 2), (1, 2)]
    np.testing.assert_allclose(probs, [0.25, 0.35, 0.40])  # 0.5, 0.7, 0.8 over 2.0
    _, uniform = pair_probabilities([0.0, 0.0, 0.0])
    np.testing.assert_allclose(uniform, [1 / 3] * 3)
    _, smoothed = pair_probabilities([0.0, 0.0, 1.0], epsilon=0.5)
    np.testing.assert_allclose(smoothed, [0.5 / 3.5, 1.5 / 3.5, 1.5 / 3.5])
    with pytest.raises(ValueError, match="at least two"):
        pair_probabilities([1.0])


def test_a_strategy_draws_pairs_with_those_odds_and_gives_children_their_depth():
    forge = Forge(Forge.Options(pool=4))
    forge.components = ["c"]
    forge.pool = [{"id": "a", "score": 0.5, "depth": 3}, {"id": "b", "score": 0.3, "depth": 1},
                  {"id": "c", "score": 0.2, "depth": 0}]
    view = view_of([scored("a", 0.5), scored("b", 0.3), scored("c", 0.2)], candidates=4000)
    asked = forge.propose(view, np.random.default_rng(0))
    assert all(r.operator == "combine" for r in asked)
    share = {p: sum(r.parent_ids == p for r in asked) / len(asked) for p in [("a", "b"), ("a", "c"), ("b", "c")]}
    assert share == pytest.approx({("a", "b"): 0.40, ("a", "c"): 0.35, ("b", "c"): 0.25}, abs=0.025)
    depth = {r.parent_ids: r.tag["depth"] for r in asked}
    assert depth == {("a", "b"): 4, ("a", "c"): 4, ("b", "c"): 2}  # max(parent depths) + 1
    assert child_depth([1, 3]) == 4 and child_depth([]) == 0
    assert [r.id for r in asked[:2]] == ["it0002-c00", "it0002-c01"]


def test_the_pool_keeps_its_bound_and_the_top_scores_and_drops_invalid_children():
    pool: list = []
    for i, s in enumerate([0.1, 0.9, 0.4, 0.7, 0.2]):
        pool = insert(pool, {"id": f"p{i}", "score": s, "depth": 0}, 3)
    assert [(e["id"], e["score"]) for e in pool] == [("p1", 0.9), ("p3", 0.7), ("p2", 0.4)]

    forge = Forge(Forge.Options(pool=2))
    forge.components = ["c"]
    forge.pool = [{"id": "a", "score": 0.5, "depth": 0}, {"id": "b", "score": 0.3, "depth": 0}]
    before = forge.to_dict()
    rejected = scored("it0002-c00", None, error={"stage": "validate", "message": "no reward"})
    request = ProgramRequest("it0002-c00", 2, 0, "combine", ("a", "b"), (), "", "", (), 1, tag={"depth": 1})
    events = forge.tell(view_of(), [Outcome(request, rejected)])
    assert forge.to_dict() == before and events[0]["dropped"] == ["it0002-c00"]
    assert rejected.metadata["depth"] == 1
    better = scored("it0002-c01", 0.4)
    request = ProgramRequest("it0002-c01", 2, 0, "combine", ("a", "b"), (), "", "", (), 1, tag={"depth": 1})
    forge.tell(view_of(), [Outcome(request, better)])
    assert forge.pool == [{"id": "a", "score": 0.5, "depth": 0}, {"id": "it0002-c01", "score": 0.4, "depth": 1}]
    assert forge.to_dict()["best_by_depth"] == {"1": 0.4}  # the pool's first members came from outside tell


def test_it_stops_when_two_depth_levels_bring_no_better_score():
    assert stalled({}, 2) is None
    assert stalled({0: 0.5, 1: 0.4}, 2) is None  # only one level below depth 0
    assert stalled({0: 0.5, 1: 0.4, 2: 0.6}, 2) is None
    assert "did not improve over depths 1..2" in stalled({0: 0.5, 1: 0.4, 2: 0.5}, 2)
    assert stalled({0: 0.2, 1: 0.5, 2: 0.4, 3: 0.45}, 2) is not None  # depths 2, 3 below depth 1's 0.5
    assert stalled({0: 0.2, 1: 0.5, 2: 0.4}, 3) is None


def test_the_plan_is_read_as_numbered_lines_and_fences_are_defused():
    text = "Here are ideas:\n1. progress `approach`\n2) a goal bonus ```rm```\n- step cost\nclosing words\n"
    assert parse_components(text, 8) == ["progress `approach`", "a goal bonus '''rm'''", "step cost"]
    assert parse_components(text, 2) == ["progress `approach`", "a goal bonus '''rm'''"]
    assert parse_components("no list at all", 8) == []


def test_options_are_checked_and_max_return_says_why_it_is_not_there():
    assert check_options("forge", {"pool": 5}) == Forge.Options(pool=5)
    with pytest.raises(ValueError, match="only 'success' is available.*native return"):
        check_options("forge", {"score": "max_return"})
    with pytest.raises(ValueError, match="pool from 2 to 1000"):
        check_options("forge", {"pool": 1})
    with pytest.raises(ValueError, match="pool from 2 to 1000"):  # a draw weighs n (n - 1) / 2 pairs
        check_options("forge", {"pool": 100_000})


def test_a_checkpointed_pool_is_typed_and_bounded_before_a_draw():
    # a run directory may come from anyone: an entry without a score would fail deep in a
    # later batch, a pool of 10^5 would ask for 5 x 10^9 pair weights
    state = {"plan": "p", "components": ["a"], "best_by_depth": {"0": 0.5},
             "pool": [{"id": "it0000-c00", "score": 0.5, "depth": 0}, {"id": "it0000-c01", "score": 0.25, "depth": 1}]}
    Forge().load(state)
    for pool, said in [([{"id": "it0000-c00"}], r"pool\[0\]"), ([{"id": 5, "score": 0.1, "depth": 0}], r"pool\[0\]"),
                       ([{"id": "a", "score": float("nan"), "depth": 0}], r"pool\[0\]"),
                       ([{"id": "a", "score": 0.1, "depth": -1}], r"pool\[0\]"),
                       ([{"id": f"a{i}", "score": 0.1, "depth": 0} for i in range(17)], "a pool of 17 programs")]:
        with pytest.raises(ValueError, match=said):
            Forge().load({**state, "pool": pool})


def test_the_offline_planner_and_engineer_write_single_components_and_their_union():
    catalog = ToyCorridor().offline_catalog()
    author = OfflineAuthor(catalog)
    planned = "reward term `approach` with observation feature `side`"
    # the component comes from what forge asked (its request's tag), never from the prompt's text
    asked = program_request("component", 3, tag={"component": planned, "depth": 0})
    genome = read_genome(offline(Forge(), asked, catalog))
    # one term (and the required goal); as observation the named feature and a from-scratch draw
    drawn = author.random_genome(np.random.default_rng(3))["features"]
    assert genome["terms"] == {"goal": 1.0, "approach": 0.1}
    assert set(genome["features"]) == {"side", *drawn} and len(drawn) >= 1
    a = {"features": ["pos"], "terms": {"goal": 1.0, "approach": 0.1}}
    b = {"features": ["goal", "pos"], "terms": {"goal": 3.0, "step_cost": 0.01}}
    child, ops = combine(author, a, [b], np.random.default_rng(0))
    assert child["features"] == ["pos", "goal"] and set(child["terms"]) == {"goal", "approach", "step_cost"}
    unchanged = {k: v for k, v in child["terms"].items() if f"reweight:{k}" not in ops}
    assert ops[0] == "combine" and len(unchanged) == 2
    assert all(v == {"goal": 2.0, "approach": 0.1, "step_cost": 0.01}[k] for k, v in unchanged.items())


def test_in_reward_only_mode_each_component_asks_for_a_reward_alone():
    forge = Forge()
    forge.components = ["reward term `approach` with observation feature `pos`"]
    view = view_of(iteration=1)
    view.mode = "reward_only"
    (request,) = forge.propose(view, np.random.default_rng(0))
    assert request.system == build_system("reward_only") and "get_observation(state)" not in request.user
    assert "Write compute_reward(state, action, next_state) implementing exactly one" in request.user
    assert request.tag["component"] == forge.components[0]
    answer = offline(forge, request, ToyCorridor().offline_catalog(), mode="reward_only")
    assert "def get_observation" not in answer and "t_approach" in answer


def test_the_depth_plot_shows_the_best_success_at_each_depth_of_records_that_have_one(tmp_path):
    records = [{"success": 0.2, "metadata": {"depth": 0}}, {"success": 0.5, "metadata": {"depth": 0}},
               {"success": 0.4, "metadata": {"depth": 1}}, {"success": None, "metadata": {"depth": 2}},
               {"success": 0.9, "metadata": {}}]  # no depth: not drawn
    fig = plot_depth(records)
    best = fig.axes[0].lines[0]
    assert list(best.get_xdata()) == [0, 1] and list(best.get_ydata()) == [0.5, 0.4]
    dots, crosses = (c.get_offsets().tolist() for c in fig.axes[0].collections)
    assert dots == [[0, 0.2], [0, 0.5], [1, 0.4]] and crosses == [[2, 0.0]]
    plot_depth(records, tmp_path / "depth.png")
    assert (tmp_path / "depth.png").stat().st_size > 0


# --- whole runs ------------------------------------------------------------------------------

FORGE = toy_config(search={"iterations": 3, "candidates": 2, "seeds": 2, "strategy": "forge",
                           "options": {"components": 3, "patience": 3}})


def brief(run):
    return [(r.id, r.code, r.parent_ids, r.success_per_seed, r.metadata.get("depth"), r.metadata.get("operator"))
            for r in run.records]


@pytest.fixture(scope="module")
def forge_run(tmp_path_factory):
    return lj.evolve("toy_corridor", FORGE, run_dir=tmp_path_factory.mktemp("forge") / "a", verbose=False)


@pytest.mark.slow
def test_an_offline_run_plans_codes_each_component_then_crosses_the_pool(forge_run):
    d = forge_run.run_dir
    state = json.loads((d / "state.json").read_text())["strategy"]
    log = [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines()]
    prompts = [e for e in log if e["event"] == "prompt"]
    assert [(e["id"], e.get("role")) for e in prompts if e["iteration"] == 0] == [("it0000-t00", "plan")]
    lines = state["plan"].splitlines()[1:]
    assert len(lines) == 3 and state["components"] == [re.sub(r"^\d+\. ", "", x) for x in lines]
    first = [r for r in forge_run.records if r.iteration == 1]
    assert [r.metadata["operator"] for r in first] == ["component"] * 3
    for r, component in zip(first, state["components"]):
        term = re.search(r"reward term `(\w+)`", component).group(1)
        assert set(read_genome(r.code)["terms"]) == {"goal", term}  # the one component (and the goal bonus)
    crossed = [r for r in forge_run.records if r.iteration >= 2]
    assert len(crossed) == 4 and all(len(r.parent_ids) == 2 for r in crossed)
    depth = {r.id: r.metadata["depth"] for r in forge_run.records}
    assert all(depth[r.id] == max(depth[p] for p in r.parent_ids) + 1 for r in crossed)
    trained = sorted((r for r in forge_run.records if r.evaluated), key=lambda r: -r.success)
    assert [e["id"] for e in state["pool"]] == [r.id for r in trained][:16]
    assert (d / "depth.png").stat().st_size > 0


@pytest.mark.slow
def test_a_run_stopped_after_a_batch_resumes_to_the_same_run_and_replays(forge_run, tmp_path):
    run_dir = tmp_path / "stopped"
    lj.evolve("toy_corridor", {**FORGE, "search": {**FORGE["search"], "iterations": 1}}, run_dir=run_dir,
              verbose=False)
    stopped = json.loads((run_dir / "state.json").read_text())["strategy"]
    assert stopped["components"] and len(stopped["pool"]) >= 2 and stopped["best_by_depth"].keys() == {"0"}
    resumed = resume(run_dir, {"search": {"iterations": 3}}, verbose=False)
    assert brief(resumed) == brief(forge_run)
    final = json.loads((run_dir / "state.json").read_text())["strategy"]
    assert final == json.loads((forge_run.run_dir / "state.json").read_text())["strategy"]
    replay = {**FORGE, "llm": {"mutator": "replay", "replay_from": str(forge_run.run_dir)}}
    again = lj.evolve("toy_corridor", replay, run_dir=tmp_path / "replay", verbose=False)
    assert brief(again) == brief(forge_run)


PLAN = "Components:\n1. progress: the decrease in distance to `state.goal`\n2. a bonus on reaching the goal\n" \
       "3. a small cost per step\n"


def fake_model():
    """A fake Messages API model: the plan to the planner, a distinct valid program otherwise."""
    written = []

    def respond(body):
        if body["system"].startswith("You are the planner"):
            return Reply(PLAN)
        written.append(len(written))
        code = ("import jax.numpy as jnp\n\n\ndef get_observation(state):\n"
                "    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)\n\n\n"
                "def compute_reward(state, action, next_state):\n"
                "    near = jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)\n"
                f"    w = {0.05 * len(written):.2f}\n"
                "    return (w * near + (next_state.pos == next_state.goal)).astype(jnp.float32)\n")
        return Reply(f"Here it is.\n```python\n{code}```\n")

    return respond


@pytest.mark.slow
def test_each_role_sees_what_the_paper_gives_it_as_sent_to_the_api(tmp_path):
    config = toy_config(search={"iterations": 2, "candidates": 2, "seeds": 2, "strategy": "forge",
                                "options": {"components": 3}})
    with FakeAnthropic(responder=fake_model()) as fake:
        mutator = AnthropicClient(api_key="test-key", base_url=fake.url, timeout=30.0,
                                  retry=RetryPolicy(max_retries=1, base_delay=0.01))
        run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "llm", mutator=mutator, verbose=False)
    sent = [(r["body"]["system"], r["body"]["messages"][0]["content"]) for r in fake.requests]
    task = ToyCorridor()
    described = {"task_description": task.description, "task_context": task.context}
    fixed = contract("full", budget_text(2048, 2), Limits().max_obs_dim, Limits().max_work_vs_step)

    # the planner, asked alone first: the environment's description, nothing else
    assert sent[0] == (render("forge_planner_system") + "\n", render("forge_planner", **described, count="3") + "\n")
    assert task.description in sent[0][1] and "```" not in sent[0][1]

    # one engineer call per listed component, each naming its component (asked concurrently)
    components = parse_components(PLAN, 3)
    assert sorted(u for _, u in sent[1:4]) == sorted(render("forge_component", **described, **fixed, component=c) + "\n"
                                                     for c in components)
    assert all(s == build_system("full") for s, _ in sent[1:])

    # a crossover: the description and both parents with their scores; no other program
    records = {r.id: r for r in run.records}
    crossed = [r for r in run.records if r.iteration == 2]
    assert len(crossed) == 2 and len(sent) == 6
    expected = []
    for record in crossed:
        parents = {}
        for key, p in zip("ab", (records[i] for i in record.parent_ids)):
            seeds = ", ".join(f"{s:.2f}" for s in p.success_per_seed)
            parents |= {f"id_{key}": p.id, f"code_{key}": p.code.rstrip(),
                        f"score_{key}": f"{p.success:.2f} (per seed: {seeds})"}
        expected.append(render("forge_engineer", **described, **fixed, **parents) + "\n")
        others = [r for r in run.records if r.iteration == 1 and r.id not in record.parent_ids]
        assert others and all(r.code.rstrip() not in expected[-1] for r in others)
        assert record.metadata["depth"] == 1
    assert sorted(u for _, u in sent[4:]) == sorted(expected)


@pytest.mark.slow
def test_the_cli_runs_it_and_a_kill_9_mid_pool_resumes_to_the_same_run(forge_run, tmp_path):
    run_dir = tmp_path / "cli"
    killed = kill_and_resume(run_dir, {**FORGE, "search": {**FORGE["search"], "options": {}}}, checkpointed(1),
                             ["--strategy", "forge", "--set", "search.options.components=3",
                              "--set", "search.options.patience=3"])
    assert killed["iteration"] < 3 and killed["strategy"]["components"]
    assert checkpoint(run_dir)["strategy"] == checkpoint(forge_run.run_dir)["strategy"]
    assert_same_programs(run_dir, forge_run.records,
                         lambda r: (r.code, r.parent_ids, r.success_per_seed, r.metadata["depth"]))
    assert (run_dir / "depth.png").stat().st_size > 0
