"""portfolio: batched UCB1 slots and improvements by hand, request ids kept apart by
SearchView.first_index, outcomes routed to the member that asked, members' memory nested;
whole runs on the toy corridor (stopped after a batch and resumed, replayed, killed with
SIGKILL from the CLI and resumed)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from cli_runs import assert_same_programs, checkpoint, checkpointed, events, kill_and_resume
from test_evolve import toy_config
from test_forge import scored, view_of

import limen_jax as lj
from limen_jax.archive import ProgramRecord, program_id
from limen_jax.run.start import resume
from limen_jax.search import StrategyBase, ask_program, ask_text, evaluate, register_strategy, strategy_names
from limen_jax.search.requests import Outcome, ProgramRequest, TextRequest
from limen_jax.search.strategies.portfolio import DEFAULT_MEMBERS, Portfolio, _loads, improvements_of, ucb_slots


def test_slots_go_by_batched_ucb1_on_improvement_per_program():
    # N = 3: A 0.05 + sqrt(ln 3 / 2) = 0.7912, B 0 + sqrt(ln 3) = 1.0481 -> B (B now counts 2)
    # N = 4: A 0.05 + sqrt(ln 4 / 2) = 0.8826, B 0 + sqrt(ln 4 / 2) = 0.8326 -> A (A now 3)
    # N = 5: A 0.05 + sqrt(ln 5 / 3) = 0.7826, B 0 + sqrt(ln 5 / 2) = 0.8972 -> B
    assert 0.05 + math.sqrt(math.log(5) / 3) < math.sqrt(math.log(5) / 2)
    assert ucb_slots({"A": [0.1, 0.0], "B": [0.0]}, 3, c=1.0) == {"A": 1, "B": 2}
    assert ucb_slots({"A": [0.1, 0.0], "B": [0.0]}, 1, c=1.0) == {"A": 0, "B": 1}
    # members with no program yet come first, in member order
    assert ucb_slots({"A": [0.5], "B": [], "C": []}, 2, c=1.0) == {"A": 0, "B": 1, "C": 1}
    # the window: A's last program improved nothing, B's did (c = 0: the means alone decide)
    assert ucb_slots({"A": [0.9, 0.0, 0.0], "B": [0.1]}, 1, c=0.0, window=1) == {"A": 0, "B": 1}
    assert ucb_slots({"A": [0.9, 0.0, 0.0], "B": [0.1]}, 1, c=0.0, window=0) == {"A": 1, "B": 0}


def test_an_improvement_is_how_far_a_full_budget_child_raises_the_best_before_the_batch():
    short = dataclasses.replace(scored("it0003-c03", 0.9), stage="short")
    outcomes = [Outcome(_ask("it0003-c00"), scored("it0003-c00", 0.7)),
                Outcome(_ask("it0003-c01"), scored("it0003-c01", 0.4)),
                Outcome(_ask("it0003-c02"), scored("it0003-c02", None, {"stage": "validate"})),
                Outcome(_ask("it0003-c03"), short),
                Outcome(TextRequest("it0003-t04", 3, "plan", "", "", 1), text="1. x")]
    gains = improvements_of(outcomes, 0.5)
    assert [i for i, _ in gains] == ["it0003-c00", "it0003-c01", "it0003-c02", "it0003-c03"]
    assert [g for _, g in gains] == pytest.approx([0.2, 0.0, 0.0, 0.0])


def _ask(pid: str) -> ProgramRequest:
    return ProgramRequest(pid, 3, 0, "mutate", (), (), "", "", (), 1)


def test_request_builders_number_from_the_views_first_index():
    view = dataclasses.replace(view_of([scored("it0001-c00", 0.5)], iteration=2), first_index=5)
    rng = np.random.default_rng(0)
    assert ask_program(view, rng, 1, 0, parent=None).id == "it0002-c06"
    assert ask_text(view, rng, 0, "plan", system="", user="").id == "it0002-t05"
    assert evaluate(view, 2, view.store.top_k(1), "retrain").id == "it0002-e07"
    assert ask_program(view_of(iteration=2), rng, 1, 0, parent=None).id == "it0002-c01"  # first_index 0


def test_members_share_a_batch_without_id_clashes_and_are_told_their_own_outcomes():
    p = Portfolio(Portfolio.Options(members="map_elites,greedy,forge", c=1.0))
    assert p.lookahead == 0  # forge reads every outcome before it proposes again
    assert Portfolio(Portfolio.Options(members="map_elites,greedy")).lookahead == 1
    view = view_of(iteration=0, candidates=3)
    asked = p.propose(view, np.random.default_rng([7, 0]))
    # three members, none has a program yet: one slot each; forge's first batch is its plan
    assert [(r.id, p.owner[r.id]) for r in asked] == [
        ("it0000-c00", "map_elites"), ("it0000-c01", "greedy"), ("it0000-t02", "forge")]
    assert isinstance(asked[2], TextRequest) and asked[2].role == "plan"
    seeds = np.random.default_rng([7, 0]).integers(2**31 - 1, size=3)
    alone = p.members["map_elites"].propose(dataclasses.replace(view, candidates=1),
                                            np.random.default_rng(int(seeds[0])))
    assert asked[0] == alone[0]  # each member draws from its own Generator

    records = [scored("it0000-c00", 0.3), scored("it0000-c01", 0.6)]
    for r in records:
        view.archive.add(r)
    outcomes = [Outcome(asked[0], records[0]), Outcome(asked[1], records[1]),
                Outcome(asked[2], text="1. reward term `approach` with observation feature `pos`")]
    events = p.tell(view, outcomes)
    assert p.members["forge"].components == ["reward term `approach` with observation feature `pos`"]
    assert p.improvements == {"map_elites": [0.3], "greedy": [0.6], "forge": []}  # best before: none (0)
    assert p.owner == {}
    assert events[-1]["programs"] == {"map_elites": 1, "greedy": 1, "forge": 0}
    assert [e["member"] for e in events[:-1]] == ["forge"]

    # the next batch: forge (no program yet) first, then UCB1 between 0.3 and 0.6 over N = 2
    nxt = p.propose(dataclasses.replace(view, iteration=1), np.random.default_rng([7, 1]))
    # forge first (inf), then N = 3: greedy 0.6 + sqrt(ln 3) = 1.648 over map_elites 1.348, forge 1.048;
    # then N = 4: map_elites 0.3 + sqrt(ln 4) = 1.477 over greedy 0.6 + sqrt(ln 4 / 2) = 1.433
    assert [(r.id, p.owner[r.id]) for r in nxt] == [
        ("it0001-c00", "map_elites"), ("it0001-c01", "greedy"), ("it0001-c02", "forge")]
    assert nxt[2].operator == "component"

    state = json.loads(json.dumps(p.to_dict()))
    again = Portfolio(Portfolio.Options(members="map_elites,greedy,forge", c=1.0))
    again.load(state)
    assert again.to_dict() == state and again.members["forge"].components == p.members["forge"].components


class _FixedIds(StrategyBase):
    """Ignores view.first_index: always asks for candidate 0."""

    name = "fixed_ids"

    def propose(self, view, rng):
        return [ProgramRequest(program_id(view.iteration, 0), view.iteration, 0, "from_scratch", (), (), "", "",
                               (), 1)]


def test_members_that_reuse_ids_and_unknown_members_are_errors():
    register_strategy("fixed_a", _FixedIds)
    register_strategy("fixed_b", _FixedIds)
    p = Portfolio(Portfolio.Options(members="fixed_a,fixed_b"))
    with pytest.raises(ValueError, match=r"'fixed_b' reused request ids \['it0000-c00'\]"):
        p.propose(view_of(iteration=0, candidates=2), np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"unknown: \['nope'\]"):
        Portfolio(Portfolio.Options(members="map_elites,nope"))
    with pytest.raises(ValueError, match="distinct"):
        Portfolio(Portfolio.Options(members="greedy,greedy"))
    # the default names the field's strategies; those not registered here are left out
    assert list(Portfolio().members) == [m for m in DEFAULT_MEMBERS if m in strategy_names() and _loads(m)]
    assert {"map_elites", "forge"} <= set(Portfolio().members)


def test_members_take_their_own_options_checked_against_their_options_classes():
    from limen_jax.run.cli import _parser, config_from_args
    from limen_jax.run.start import check_settings
    from limen_jax.search.strategies.forge import Forge
    from limen_jax.search.strategies.mcts import TreeSearch
    from limen_jax.search.strategy_registry import check_options, make_strategy

    p = Portfolio(Portfolio.Options(members="map_elites,mcts,forge",
                                    member_options={"mcts": {"first_level": 3, "leaves": 2}, "forge": {"pool": 4}}))
    assert p.members["mcts"].options == TreeSearch.Options(first_level=3, leaves=2)
    assert p.members["forge"].options == Forge.Options(pool=4)
    assert p.members["map_elites"].options == type(p.members["map_elites"]).Options()  # not named: defaults
    assert Portfolio(Portfolio.Options(members="map_elites,mcts")).members["mcts"].options == TreeSearch.Options()
    # the member asks as its options say: mcts's first level is 3 programs whatever its slots
    asked = p.propose(view_of(iteration=0, candidates=3), np.random.default_rng(0))
    assert [p.owner[r.id] for r in asked] == ["map_elites", "mcts", "mcts", "mcts", "forge"]
    for bad, why in (({"mcts": {"leaf": 3}}, r"member_options\['mcts'\]: .*unknown options \['leaf'\]"),
                     ({"mcts": {"first_level": "3"}}, r"member_options\['mcts'\]: .*first_level: expected an integer"),
                     ({"mcts": {"leaves": 0}}, r"member_options\['mcts'\]: .*leaves must be at least 1"),
                     ({"eureka": {"k": 2}}, r"names \['eureka'\], which are not members"),
                     ({"mcts": 3}, "must map member names to their options")):
        with pytest.raises(ValueError, match=why):
            check_options("portfolio", {"members": "map_elites,mcts", "member_options": bad})
    # from the command line, by dotted key or as JSON, into the run's config and its members
    for sets in (["search.options.member_options.mcts.first_level=3"],
                 ['search.options.member_options={"mcts": {"first_level": 3}}']):
        flags = [x for item in sets for x in ("--set", item)]
        args = _parser().parse_args(["--task", "xland_easy", "--strategy", "portfolio", "--set",
                                     "search.options.members=map_elites,mcts", *flags])
        search = config_from_args(args).search
        assert search.options["member_options"] == {"mcts": {"first_level": 3}}
        assert make_strategy("portfolio", search.options).members["mcts"].options.first_level == 3
    with pytest.raises(ValueError, match="member_options"):
        check_settings(config_from_args(_parser().parse_args(["--task", "xland_easy", "--strategy", "portfolio",
                                                              "--set", "search.options.member_options.mcts.budget=0"])))


def test_it_is_done_when_every_member_is():
    p = Portfolio(Portfolio.Options(members="greedy,forge"))
    view = view_of(iteration=5)
    assert p.done(view) is None
    p.members["forge"].best_by_depth = {0: 0.5, 1: 0.4, 2: 0.3}  # forge stalled: its slots go to greedy
    assert p.members["forge"].done(view) and p.done(view) is None
    asked = p.propose(dataclasses.replace(view, candidates=2), np.random.default_rng(0))
    assert {p.owner[r.id] for r in asked} == {"greedy"}
    p.members = {"forge": p.members["forge"]}
    assert p.done(view) == "every member is done"


# --- whole runs ------------------------------------------------------------------------------

PORTFOLIO = toy_config(search={"iterations": 3, "candidates": 3, "seeds": 2, "strategy": "portfolio",
                               "options": {"members": "map_elites,greedy,independent,forge"}})


def brief(run):
    return [(r.id, r.code, r.parent_ids, r.success_per_seed, r.metadata.get("operator")) for r in run.records]


@pytest.fixture(scope="module")
def portfolio_run(tmp_path_factory):
    return lj.evolve("toy_corridor", PORTFOLIO, run_dir=tmp_path_factory.mktemp("portfolio") / "a", verbose=False)


@pytest.mark.slow
def test_a_run_gives_every_member_slots_and_credits_each_for_its_children(portfolio_run):
    d = portfolio_run.run_dir
    state = json.loads((d / "state.json").read_text())["strategy"]
    log = [e for e in events(d) if e["event"] == "portfolio"]
    assert len(log) == 4
    records: dict[str, ProgramRecord] = {r.id: r for r in portfolio_run.records}
    best = 0.0
    improvements: dict[str, list[float]] = {m: [] for m in state["members"]}
    for it, e in enumerate(log):
        assert e["best_before"] == best
        asked = [r for r in portfolio_run.records if r.iteration == it]
        owners = {m: [r for r in asked if _owner(r, e, asked) == m] for m in improvements}
        assert {m: len(rs) for m, rs in owners.items()} == e["programs"]
        for m, rs in owners.items():
            improvements[m] += [max(0.0, r.success - best) if r.evaluated else 0.0 for r in rs]
        best = max([best, *(r.success for r in asked if r.evaluated)])
    assert state["improvements"] == improvements
    assert all(len(h) > 0 for h in improvements.values())  # every member had a turn
    assert state["members"]["forge"]["components"] and state["owner"] == {}
    assert records  # the run kept its records


def _owner(record, event, asked):
    """The member whose request made ``record``: members propose in member order, each
    numbering from where the one before stopped, so each one's ids follow the last's."""
    counts = event["programs"]
    order = sorted(asked, key=lambda r: r.id)
    start = 0
    for member, n in counts.items():
        if record in order[start:start + n]:
            return member
        start += n
    raise AssertionError(record.id)


@pytest.mark.slow
def test_a_stopped_run_resumes_its_members_to_the_same_run_and_replays(portfolio_run, tmp_path):
    run_dir = tmp_path / "stopped"
    lj.evolve("toy_corridor", {**PORTFOLIO, "search": {**PORTFOLIO["search"], "iterations": 1}}, run_dir=run_dir,
              verbose=False)
    stopped = json.loads((run_dir / "state.json").read_text())["strategy"]
    assert stopped["members"]["forge"]["plan"] and stopped["improvements"]["map_elites"]
    resumed = resume(run_dir, {"search": {"iterations": 3}}, verbose=False)
    assert brief(resumed) == brief(portfolio_run)
    final = json.loads((run_dir / "state.json").read_text())["strategy"]
    assert final == json.loads((portfolio_run.run_dir / "state.json").read_text())["strategy"]
    replay = {**PORTFOLIO, "llm": {"mutator": "replay", "replay_from": str(portfolio_run.run_dir)}}
    assert brief(lj.evolve("toy_corridor", replay, run_dir=tmp_path / "replay", verbose=False)) == brief(portfolio_run)


@pytest.mark.slow
def test_the_cli_runs_it_and_a_kill_9_resumes_to_the_same_run(portfolio_run, tmp_path):
    run_dir = tmp_path / "cli"
    config = {**PORTFOLIO, "search": {**PORTFOLIO["search"], "options": {}}}
    killed = kill_and_resume(run_dir, config, checkpointed(1), ["--strategy", "portfolio", "--set",
                                                                "search.options.members=map_elites,greedy,independent,forge"])
    assert killed["iteration"] < 3
    assert checkpoint(run_dir)["strategy"] == checkpoint(portfolio_run.run_dir)["strategy"]
    assert_same_programs(run_dir, portfolio_run.records, lambda r: (r.code, r.success_per_seed))
