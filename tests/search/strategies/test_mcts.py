"""RF-Agent's tree search (``--strategy mcts``): the UCT, back-propagation, schedule and
elite-draw arithmetic against hand computation; what each prompt role sees, as sent to
a local fake Messages API; the tree kept through tell; an offline run end to end, its
resume, and a CLI run killed with -9 and resumed."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path

import numpy as np
import pytest
from cli_runs import kill_9, logged, resume_cli
from fake_anthropic import FakeAnthropic, Reply
from offline_answers import answer as offline
from offline_answers import program_request, text_request
from test_evolve import toy_config
from toy_task import ToyCorridor

import limen_jax as lj
from limen_jax.archive import Archive, ProgramRecord
from limen_jax.llm.offline import OfflineAuthor, render
from limen_jax.llm.prompts import build_system
from limen_jax.search import SearchView
from limen_jax.search.requests import Outcome, ProgramRequest, TextRequest
from limen_jax.search.strategies import mcts_tree as T
from limen_jax.search.strategies.mcts import TreeSearch, cross, diverge, parse_v_self, restructure, retune


def hand_tree() -> T.Tree:
    """root -> a (Q .5, N 3, v 0), b (Q .2, N 1, v 1); a -> c (Q .6, N 1, v .5), d (Q .4, N 2, v -.5)."""
    nodes = [T.Node("a", None, "first_level", "p0", "think a", 0.5, 0.5, 3, 0.0, "scored", verified=True),
             T.Node("b", None, "first_level", "p1", "think b", 0.2, 0.2, 1, 1.0, "scored", verified=True),
             T.Node("c", "a", "m1_restructure", "p2", "think c", 0.6, 0.6, 1, 0.5, "scored", verified=True),
             T.Node("d", "a", "m2_retune", "p3", "think d", 0.4, 0.4, 2, -0.5, "scored", verified=True)]
    return {n.id: n for n in nodes}


def test_uct_values_and_the_chosen_leaf_match_hand_computation():
    tree = hand_tree()
    # Qmin .2, Qmax .6 over the tree; N(root) = 3 + 1; softmax(0, 1) = (1/(1+e), e/(1+e))
    # a: .75 + .4 (sqrt(2 ln 5 / 3) + .268941) ; b: 0 + .4 (sqrt(2 ln 5) + .731059)
    level1 = T.uct_scores(tree, None, 0.4)
    assert level1 == pytest.approx({"a": 1.2719114, "b": 1.0100725}, abs=1e-6)
    # N(a) = 3; softmax(.5, -.5) = (.731059, .268941)
    # c: 1 + .4 (sqrt(2 ln 4) + .731059) ; d: .5 + .4 (sqrt(ln 4) + .268941)
    level2 = T.uct_scores(tree, "a", 0.4)
    assert level2 == pytest.approx({"c": 1.9584671, "d": 1.0785406}, abs=1e-6)
    assert T.select_leaf(tree, 0.4) == ("c", [level1, level2])
    # with λ = 0 only the scaled Q counts; all Q equal: the term is 0 and the first node wins
    assert T.select_leaf(tree, 0.0)[0] == "c"
    for n in tree.values():
        n.Q = 0.3
    assert T.uct_scores(tree, None, 0.0) == {"a": 0.0, "b": 0.0}


def test_one_back_propagation_gives_the_hand_derived_values():
    tree = hand_tree()
    tree["e"] = T.Node("e", "c", "m1_restructure", "p4", F=0.9, Q=0.9, N=1, status="scored")
    tree["f"] = T.Node("f", "c", "m2_retune", "p5", F=0.3, Q=0.3, N=1, status="scored")
    tree["g"] = T.Node("g", "c", "c3_crossover", "p6", status="rejected")  # not scored: left out
    T.backpropagate(tree, "c", eta=0.7)
    # c: 0.3 * 0.6 + 0.7 * 0.9 = 0.81; a: 0.3 * 0.5 + 0.7 * 0.81 = 0.717
    values = [tree[n].Q for n in ("c", "a")]
    assert values == pytest.approx([0.81, 0.717])
    assert (tree["c"].N, tree["a"].N) == (2, 4)
    assert tree["b"].Q == 0.2 and tree["b"].N == 1 and tree["d"].Q == 0.4
    assert T.visits(tree, None) == 5


def test_a_checkpointed_tree_is_typed_and_acyclic_before_the_search_uses_it():
    # a run directory may come from anyone: a loop of parents would make path_to_root (the
    # d5 operator, back-propagation) grow a list forever; N 0 on a scored node divides by 0
    good = [n.to_dict() for n in hand_tree().values()]
    TreeSearch().load({"tree": good, "t": 1, "phase": "expand", "expanded": None})
    def tampered(i, **changed):
        return [dict(d, **changed) if k == i else d for k, d in enumerate(good)]
    for tree, said in [(tampered(0, parent="a"), "parents form a loop"),  # a -> a
                       (tampered(0, parent="d"), "parents form a loop"),  # a -> d -> a
                       (tampered(1, parent="n999"), "parent 'n999' is not a node of the tree"),
                       (tampered(0, N=0), "N 0"), (tampered(0, Q="abc"), "Q 'abc'"),
                       (tampered(0, F=float("nan")), "F nan"), (tampered(0, status="x"), "status 'x'")]:
        with pytest.raises(ValueError, match=said):
            TreeSearch().load({"tree": tree, "t": 1, "phase": "expand", "expanded": None})
    def chain(n, depth):  # n nodes, the first depth of them one below the other
        return [T.Node(f"x{i}", f"x{i - 1}" if 0 < i < depth else None, "m1_restructure").to_dict() for i in range(n)]
    TreeSearch().load({"tree": chain(T.MAX_NODES, T.MAX_DEPTH), "t": 1, "phase": "expand", "expanded": None})
    for tree, said in [(chain(T.MAX_NODES + 1, 1), "20001 nodes"), (chain(T.MAX_DEPTH + 1, T.MAX_DEPTH + 1), "deeper")]:
        with pytest.raises(ValueError, match=said):  # selection and back-propagation cost nodes x depth
            TreeSearch().load({"tree": tree, "t": 1, "phase": "expand", "expanded": None})


def test_exploration_weight_decays_linearly_to_zero():
    assert [T.exploration_weight(t, 80) for t in (0, 40, 80, 96)] == [0.4, 0.2, 0.0, 0.0]


def test_an_expansion_has_the_papers_operator_counts():
    assert collections.Counter(T.expansion_plan()) == {"m1_restructure": 2, "m2_retune": 2, "c3_crossover": 2,
                                                        "r4_reason": 1, "d5_diverge": 1}
    assert T.expansion_plan() == T.expansion_plan(8) == ["m1_restructure"] * 2 + ["m2_retune"] * 2 + \
        ["c3_crossover"] * 2 + ["r4_reason", "d5_diverge"]


def test_another_leaf_count_scales_the_papers_shares_by_largest_remainders():
    # shares K x (2, 2, 2, 1, 1) / 8; the floors, then one more to the largest remainders (ties: earlier)
    assert T.operator_counts(3) == (1, 1, 1, 0, 0)  # 0.75 x 3, 0.375 x 2
    assert T.operator_counts(4) == (1, 1, 1, 1, 0)  # 1, 1, 1, 0.5, 0.5: the tie to r4
    assert T.operator_counts(5) == (1, 1, 1, 1, 1)  # 1.25 x 3, 0.625 x 2
    assert T.operator_counts(6) == (2, 1, 1, 1, 1)  # 1.5 x 3, 0.75 x 2
    assert T.operator_counts(16) == (4, 4, 4, 2, 2)
    assert T.operator_counts(1) == (1, 0, 0, 0, 0)
    assert T.expansion_plan(3) == ["m1_restructure", "m2_retune", "c3_crossover"]
    assert all(sum(T.operator_counts(k)) == len(T.expansion_plan(k)) == k for k in range(1, 40))
    with pytest.raises(ValueError, match="at least 1 leaf"):
        T.operator_counts(0)


def test_leaves_is_an_option_checked_like_the_others():
    from limen_jax.search.strategy_registry import check_options

    assert TreeSearch.Options().leaves == 8
    assert check_options("mcts", {"leaves": 3}) == TreeSearch.Options(leaves=3)
    with pytest.raises(ValueError, match="leaves must be at least 1"):
        check_options("mcts", {"leaves": 0})
    with pytest.raises(ValueError, match="Options.leaves: expected an integer, got 2.5"):
        check_options("mcts", {"leaves": 2.5})
    strategy = TreeSearch(TreeSearch.Options(leaves=3))
    strategy.tree = hand_tree()
    requests = strategy.propose(hand_view(), np.random.default_rng(1))
    assert [r.operator for r in requests] == ["m1_restructure", "m2_retune", "c3_crossover"]
    assert [r.id for r in requests] == ["it0003-c00", "it0003-c01", "it0003-c02"]
    assert all(r.parent_ids == ("p2",) for r in requests)


def test_ten_thousand_elite_draws_follow_one_over_rank():
    rng = np.random.default_rng(0)
    counts = collections.Counter(T.draw_elites(["r1", "r2", "r3", "r4"], 1, rng)[0] for _ in range(10_000))
    h = 1 + 1 / 2 + 1 / 3 + 1 / 4
    for rank, name in enumerate(["r1", "r2", "r3", "r4"], 1):
        assert counts[name] / 10_000 == pytest.approx(1 / rank / h, abs=0.015)
    assert sorted(T.draw_elites(["r1", "r2", "r3"], 5, rng)) == ["r1", "r2", "r3"]  # k > pool: all, once


def test_self_verification_answers_parse_robustly():
    assert parse_v_self("It pays for the goal.\nscore: 0.7") == 0.7
    assert parse_v_self("Score = -2") == -1.0
    assert parse_v_self("I'd give 0.3 overall.\n**Score:** **0.5**") == 0.5
    assert parse_v_self("no idea") == 0.0
    assert parse_v_self("maybe 0.25") == 0.25


# --- prompts, as sent ------------------------------------------------------------------------

TASK = ToyCorridor()
CATALOG = TASK.offline_catalog()
GENOMES = {  # program id -> genome, one per node of hand_tree (p0..p3) and a rejected child
    "p0": {"features": ["side"], "terms": {"goal": 1.0, "approach": 0.1}},
    "p1": {"features": ["pos"], "terms": {"goal": 1.0, "step_cost": 0.01}},
    "p2": {"features": ["side", "goal"], "terms": {"goal": 1.0, "approach": 0.2}},
    "p3": {"features": ["side"], "terms": {"goal": 2.0, "approach": 0.1}},
}


def record(pid: str, success: float, goal: list[float]) -> ProgramRecord:
    curves = {"success": [0.0, 0.1, 0.2, success], "episode_length": [16.0, 15.0, 14.0, 12.0],
              "return": [0.1, 0.2, 0.3, 0.4], "reward/goal": goal, "reward/approach": [0.5] * 4}
    return ProgramRecord(id=pid, code=render(CATALOG, GENOMES[pid]), success=success, success_per_seed=[success],
                         curves=curves, stage="full", obs_dim=2, reward_ast_size=30)


def hand_view(iteration: int = 3) -> SearchView:
    archive = Archive()
    for pid, f, goal in (("p0", 0.5, [0.0, 0.2, 0.4, 0.5]), ("p1", 0.2, [0.0, 0.1, 0.1, 0.2]),
                         ("p2", 0.6, [0.1, 0.3, 0.5, 0.6]), ("p3", 0.4, [0.0, 0.0, 0.3, 0.4])):
        archive.add(record(pid, f, goal))
    failed = ProgramRecord(id="p9", code="def compute_reward(state, action, next_state):\n    return velocity\n",
                           error={"stage": "trace", "message": "NameError: name 'velocity' is not defined",
                                  "trace": "Traceback (most recent call last):\n  line 2\nNameError: velocity"})
    archive.add(failed)
    return SearchView(archive, TASK, "full", iteration, 8)


def sent(requests, view) -> list[dict]:
    """Each request as the Anthropic client sends it to a fake Messages API: the bodies."""
    from limen_jax.llm.anthropic_client import AnthropicClient

    with FakeAnthropic(default=Reply("ok")) as fake:
        client = AnthropicClient(api_key="test-key", base_url=fake.url, timeout=5)
        for r in requests:
            client.complete(r.system, r.user, (), r.rng_seed)
    return [req["body"] for req in fake.requests]


def user_of(body: dict) -> str:
    assert body["messages"][0]["role"] == "user"
    return body["messages"][0]["content"]


def blocks(user: str) -> list[str]:
    """The ids of the programs shown as node blocks ("#### Program <id>")."""
    return [line.split()[2] for line in user.splitlines() if line.startswith("#### Program ")]


def test_first_level_prompts_ask_for_a_thought_then_code():
    strategy = TreeSearch(TreeSearch.Options(first_level=3))
    view = hand_view(0)
    requests = strategy.propose(view, np.random.default_rng(0))
    assert [r.operator for r in requests] == ["from_scratch"] * 3
    for body in sent(requests, view):
        user = user_of(body)
        assert body["system"] == build_system("full")
        assert TASK.description in user and 'starts with "Thought:"' in user
        assert "## Parent Program" not in user and "#### Program" not in user


def test_each_expansion_role_sees_what_the_paper_says():
    strategy = TreeSearch()
    strategy.tree = hand_tree()
    view = hand_view()
    requests = strategy.propose(view, np.random.default_rng(1))
    assert [r.operator for r in requests] == T.expansion_plan()
    assert all(r.parent_ids == ("p2",) for r in requests)  # the leaf c holds p2
    bodies = sent(requests, view)
    for r, body in zip(requests, bodies):
        user = user_of(body)
        assert body["system"] == build_system("full")
        # every role: the parent's thought, code and reward reflection with each term's statistics
        assert "## The parent's design thought\n\nthink c" in user
        assert "## Parent Program" in user and '"approach": 0.2' in user
        assert "## Reward reflection" in user and "How to read these statistics" in user
        assert "`goal`: 0.1, 0.3, 0.5, 0.6 (max 0.6, mean 0.375, min 0.1)" in user
        assert "`approach` never moved (it stayed at 0.5)" in user
        assert "Task success over training (10 points, first to last): 0, 0.1, 0.2, 0.6" in user
        assert "Episode length over training (10 points, first to last): 16, 15, 14, 12" in user
        # nothing of MAP-Elites' archive sections
        assert "Best programs discovered" not in user and "Recent failures" not in user
        shown = blocks(user)
        tag = r.tag
        if r.operator in ("m1_restructure", "m2_retune"):
            assert shown == [] and ("restructure the reward" in user) == (r.operator == "m1_restructure")
        elif r.operator == "c3_crossover":  # k elites, parent left out, best first by F: a, d, b
            assert "combine with the best programs" in user
            assert len(shown) == min(tag["k"], 3) and set(shown) <= {"p0", "p3", "p1"}
        elif r.operator == "r4_reason":  # the chain of ancestors above c: a
            assert "reason over the lineage" in user and shown == ["p0"] and "Design thought: think a" in user
        else:  # d5: nodes of other branches than a's: b
            assert "try something different" in user and shown == ["p1"] and "Design thought: think b" in user
        assert shown == [strategy.tree[s].program for s in tag["shown"]]


def test_verify_align_and_repair_see_what_the_paper_says():
    strategy = TreeSearch()
    strategy.tree = hand_tree()
    strategy.tree["c"].verified = False
    strategy.tree["e"] = T.Node("e", "c", "c3_crossover", "p9", status="rejected")
    strategy.phase = "expand"  # the last batch expanded c: this one verifies and repairs
    view = hand_view()
    requests = strategy.propose(view, np.random.default_rng(2))
    kinds = [r.role if isinstance(r, TextRequest) else r.operator for r in requests]
    assert kinds == ["self_verify", "align", "repair"] and isinstance(requests[2], ProgramRequest)
    verify, align, repair = (user_of(b) for b in sent(requests, view))
    code = view.store.get("p2").code.rstrip()
    # self-verification: the task, the thought and the code; no score, no curves
    assert TASK.description in verify and TASK.context in verify and "Design thought: think c" in verify
    assert code in verify and 'score: <number>' in verify and "Success rate" not in verify and "max" not in verify
    # alignment: the thought and the final code only
    assert "Thought: think c" in align and code in align and TASK.description not in align
    # repair: the failed child's code, error and traceback, its step, the parent it derives from
    assert "step (c3_crossover) failed" in repair and "NameError: name 'velocity' is not defined" in repair
    assert "Traceback (most recent call last)" in repair and "return velocity" in repair
    assert requests[2].parent_ids == ("p2",) and requests[2].context_ids == ("p9",)


def test_tell_scores_backpropagates_and_advances_the_schedule():
    strategy = TreeSearch(TreeSearch.Options(budget=16))
    strategy.tree = hand_tree()
    strategy.t = 4
    view = hand_view()
    requests = strategy.propose(view, np.random.default_rng(3))
    successes = [0.9, 0.3, None, 0.1, 0.2, 0.2, 0.4, 0.5]  # one child rejected
    outcomes = []
    for r, s in zip(requests, successes):
        rec = ProgramRecord(id=r.id, code="", success=s, thought="Thought: a new idea\n\nmore prose",
                            error=None if s is not None else {"stage": "trace", "message": "x"})
        view.store.add(rec)
        outcomes.append(Outcome(r, rec))
    events = strategy.tell(view, outcomes)
    c, a = strategy.tree["c"], strategy.tree["a"]
    # c: 0.3 * 0.6 + 0.7 * 0.9 (its best child) = 0.81; a: 0.3 * 0.5 + 0.7 * 0.81 = 0.717
    values = [c.Q, a.Q]
    assert values == pytest.approx([0.81, 0.717])
    assert (c.N, a.N) == (7, 9)  # 7 scored children; a: 7 + d's 2
    assert strategy.t == 12 and events[0]["lambda"] == pytest.approx(0.4 * 4 / 16) and events[0]["leaf"] == "c"
    new = [strategy.tree[r.tag["node"]] for r in requests]
    assert [n.status for n in new] == ["scored"] * 2 + ["rejected"] + ["scored"] * 5
    assert new[0].thought == "a new idea" and new[0].Q == 0.9 and new[0].N == 1
    # c's UCT when selected, at λ = 0.4 (16 - 4) / 16 = 0.3: 1 + 0.3 (sqrt(2 ln 4) + .731059)
    assert view.store.get("p2").metadata["scores"]["uct"] == pytest.approx(1.7188503, abs=1e-6)
    # the next batch verifies the 7 scored children and repairs the rejected one
    nxt = strategy.propose(view, np.random.default_rng(4))
    assert sum(isinstance(r, TextRequest) for r in nxt) == 14
    assert [r.operator for r in nxt if isinstance(r, ProgramRequest)] == ["repair"]


# --- whole runs ------------------------------------------------------------------------------

OPTIONS = {"budget": 10, "first_level": 2}
CONFIG = toy_config(search={"strategy": "mcts", "iterations": 5, "candidates": 8, "options": OPTIONS})


def tree_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "state.json").read_text())["strategy"]


def brief(run):
    return [(r.id, r.parent_ids, r.success_per_seed, r.metadata.get("operator"), r.metadata.get("scores"))
            for r in run.records]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    return lj.evolve("toy_corridor", CONFIG, run_dir=tmp_path_factory.mktemp("mcts") / "run", verbose=False)


def test_a_first_level_run_verifies_its_nodes_and_stops_at_its_budget(tmp_path):
    config = toy_config(search={"strategy": "mcts", "iterations": 5, "candidates": 2,
                                "options": {"budget": 2, "first_level": 2}})
    run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "run", verbose=False)
    assert run.stopped == "finished early: budget of 2 programs expanded"  # expand, verify, stop
    state = tree_of(run.run_dir)
    assert (state["t"], state["phase"]) == (2, "verify")
    assert [(n["program"], n["F"], n["Q"], n["N"]) for n in state["tree"]] == \
        [(r.id, r.success, r.success, 1) for r in run.records]
    assert all(n["verified"] and n["v_self"] == 0.0 and n["thought"].startswith("Observe ") for n in state["tree"])


def test_a_run_with_leaves_k_trains_k_children_per_expansion(tmp_path):
    # first_level = leaves: every batch of programs has one shape, compiled once
    config = toy_config(search={"strategy": "mcts", "iterations": 9, "candidates": 8, "seeds": 1,
                                "options": {"budget": 6, "first_level": 3, "leaves": 3}},
                        cascade={"short_steps": 0, "full_steps": 1024})
    run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "run", verbose=False)
    # batches: first level (3), verify, an expansion of 3 leaves, verify; t = 6 = budget
    assert run.stopped == "finished early: budget of 6 programs expanded"
    assert collections.Counter(r.iteration for r in run.records) == {0: 3, 2: 3}  # search.candidates (8): no part
    kids = [r for r in run.records if r.iteration == 2]
    assert [r.metadata["operator"] for r in kids] == ["m1_restructure", "m2_retune", "c3_crossover"]
    assert len({tuple(r.parent_ids) for r in kids}) == 1  # the children of one leaf
    state = tree_of(run.run_dir)
    assert state["t"] == 6 and len(state["tree"]) == 6
    events = [json.loads(x) for x in (run.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["t"] for e in events if e["event"] == "mcts" and e["phase"] == "expand"] == [3, 6]


@pytest.mark.slow
def test_an_offline_run_grows_the_tree_and_stops_at_its_budget(whole):
    # batches: first level (2), verify, expansion (8), verify; t = 10 = budget
    assert whole.stopped == "finished early: budget of 10 programs expanded"
    ops = [r.metadata["operator"] for r in whole.records]
    assert ops == ["from_scratch"] * 2 + T.expansion_plan()
    state = tree_of(whole.run_dir)
    assert state["t"] == 10 and len(state["tree"]) == 10
    leaf = [n for n in state["tree"] if n["parent"] is None]
    expanded = {n["parent"] for n in state["tree"] if n["parent"] is not None}
    assert len(leaf) == 2 and len(expanded) == 1
    parent = next(n for n in leaf if n["id"] in expanded)
    assert all(r.parent_ids == [parent["program"]] for r in whole.records[2:])
    # every scored node was verified (offline v_self: tanh(log mean prior) = 0 for the toy's
    # priors of 1) and its thought aligned to its genome
    for n in state["tree"]:
        assert n["verified"] and n["v_self"] == 0.0 and n["thought"].startswith("Observe ")
    kids = [n for n in state["tree"] if n["parent"] == parent["id"]]
    best = max(k["Q"] for k in kids)
    assert parent["Q"] == pytest.approx(0.3 * parent["F"] + 0.7 * best) and parent["N"] == len(kids)
    events = [json.loads(x) for x in (whole.run_dir / "events.jsonl").read_text().splitlines()]
    texts = [e for e in events if e["event"] == "prompt" and e.get("kind") == "text"]
    assert collections.Counter(e["role"] for e in texts) == {"self_verify": 10, "align": 10}


@pytest.mark.slow
def test_stopped_and_resumed_it_is_the_same_tree(whole, tmp_path):
    run_dir = tmp_path / "run"
    lj.evolve("toy_corridor", toy_config(**{**CONFIG, "search": {**CONFIG["search"], "iterations": 2}}),
              run_dir=run_dir, verbose=False)
    assert tree_of(run_dir)["phase"] == "expand"  # stopped after the expansion, before its verification
    again = lj.resume(run_dir, {"search": {"iterations": 5}}, verbose=False)
    assert brief(again) == brief(whole)
    assert tree_of(run_dir) == tree_of(whole.run_dir)
    # resumed once more, a run its strategy stopped early stays stopped: nothing new is asked
    done = lj.resume(run_dir, verbose=False)
    assert done.stopped == "finished early: budget of 10 programs expanded" and brief(done) == brief(whole)


@pytest.mark.slow
def test_a_replayed_run_grows_the_same_tree(whole, tmp_path):
    config = {**CONFIG, "llm": {"mutator": "replay", "replay_from": str(whole.run_dir)}}
    replayed = lj.evolve("toy_corridor", config, run_dir=tmp_path / "replayed", verbose=False)
    assert brief(replayed) == brief(whole)
    assert tree_of(replayed.run_dir) == tree_of(whole.run_dir)


@pytest.mark.slow
def test_cli_run_killed_with_9_then_resumed_continues_the_identical_tree(whole, tmp_path):
    run_dir = tmp_path / "run"
    # killed while the expansion trains: the last checkpoint is the first level, verified
    killed = kill_9(run_dir, CONFIG, logged("program", "it0002"), ["--strategy", "mcts"])
    assert killed is not None and killed["strategy"]["phase"] == "verify"
    out = resume_cli(run_dir)
    assert "finished early: budget of 10 programs expanded" in out.stdout
    assert brief(lj.resume(run_dir, verbose=False)) == brief(whole)
    assert tree_of(run_dir) == tree_of(whole.run_dir)


def test_offline_operators_do_what_their_names_say():
    m = OfflineAuthor(CATALOG)
    rng = np.random.default_rng(0)
    parent = GENOMES["p2"]
    for _ in range(20):
        child, ops = restructure(m, parent, [], rng)
        assert len(ops) == 1 and ops[0].split(":")[0] in ("add_term", "remove_term", "add_feature", "remove_feature")
        changed = (set(child["terms"]) ^ set(parent["terms"])) | (set(child["features"]) ^ set(parent["features"]))
        assert len(changed) == 1
        child, _ = retune(m, parent, [], rng)
        assert set(child["terms"]) == set(parent["terms"]) and child["features"] == parent["features"]
        child, _ = diverge(m, parent, [GENOMES["p1"]], rng)
        # shares no optional term with the shown nodes; the required goal stays, and a dense term
        assert "step_cost" not in child["terms"] and "goal" in child["terms"] and "approach" in child["terms"]
        child, ops = cross(m, parent, [GENOMES["p1"]], rng)
        assert ops[0] == "crossover"
    view = hand_view()
    record = view.store.get("p2")
    verify = offline(TreeSearch(), text_request("self_verify", context=[record]), CATALOG, others=[record])
    assert math.isclose(parse_v_self(verify), 0.0)
    align = offline(TreeSearch(), text_request("align", context=[record]), CATALOG, others=[record])
    assert align == "Observe side, goal; reward approach, goal."
    # a repair (and the first level) takes the stand-in's generic operator
    repair = program_request("repair", 5, parents=[record])
    assert offline(TreeSearch(), repair, CATALOG, parent=record) == m.program(record.code, [], "full",
                                                                            np.random.default_rng(5))
