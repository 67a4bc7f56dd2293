"""Requests as data, strategies by name with options, whose fault a failure is (by type)."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from offline_answers import answer, text_request
from toy_task import ToyCorridor

from limen_jax.archive import Archive, ArchiveConfig, ProgramRecord
from limen_jax.config import EvolveConfig, SearchConfig
from limen_jax.llm.offline import OfflineAuthor
from limen_jax.run.ask import thought_of
from limen_jax.run.cli import _parser, config_from_args, main, parse_sets
from limen_jax.run.start import check_settings
from limen_jax.search import (
    EvalRequest,
    MapElites,
    ProgramRequest,
    SearchView,
    StrategyBase,
    TextRequest,
    ask_text,
    make_strategy,
    register_strategy,
    strategy_names,
)
from limen_jax.search.faults import EngineFault, TrainingStalled, is_engine_error
from limen_jax.search.requests import request_from_dict, request_to_dict


def view(archive=None, iteration=1):
    return SearchView(archive or Archive(ArchiveConfig(num_islands=1)), ToyCorridor(), "full", iteration, 2)


def test_every_request_kind_round_trips_through_json():
    requests = [
        ProgramRequest("it0001-c00", 1, 0, "crossover", ("a", "b"), ("c",), "sys", "user", ("failures",), 7,
                       evaluation="retrain", tag={"node": 3}),
        ProgramRequest("it0001-c01", 1, 0, "given", (), (), "", "", (), 0, source="given", code="x = 1\n"),
        TextRequest("it0001-t00", 1, "critique", "sys", "user", 9, ("a",), {"k": [1, 2]}),
        EvalRequest("it0001-e00", 1, ("a", "b"), "retrain", {"seeds": 4}),
    ]
    for r in requests:
        again = request_from_dict(json.loads(json.dumps(request_to_dict(r))))
        assert again == r and type(again) is type(r)
    assert requests[0].parent_id == "a" and requests[1].parent_id is None
    with pytest.raises(ValueError, match="unknown request kind 'vote'"):
        request_from_dict({**request_to_dict(requests[2]), "kind": "vote"})
    with pytest.raises(ValueError, match="source must be one of"):
        ProgramRequest("x", 0, 0, "op", (), (), "", "", (), 0, source="web")


def test_text_requests_are_seeded_from_the_batch_generator():
    a = ask_text(view(), np.random.default_rng([0, 1]), 0, "plan", system="s", user="u")
    b = ask_text(view(), np.random.default_rng([0, 1]), 0, "plan", system="s", user="u")
    assert a == b and a.id == "it0001-t00" and a.rng_seed == int(np.random.default_rng([0, 1]).integers(2**31 - 1))


def test_offline_a_strategy_describes_its_text_requests_context_by_default():
    catalog = ToyCorridor().offline_catalog()
    text = OfflineAuthor(catalog).program(None, [], "full", np.random.default_rng(1))
    from limen_jax.run.ask import extracted_code

    good = ProgramRecord("p", extracted_code(text, "full"), success=0.5)
    for role in ("critique", "riddle"):
        said = answer(StrategyBase(), text_request(role, 4, [good]), catalog, others=[good])
        assert said == answer(StrategyBase(), text_request(role, 4, [good]), catalog, others=[good])
        assert said.startswith(f"Offline {role}:\n- p (success 0.50): features ") and "```" not in said
    assert answer(StrategyBase(), text_request("plan"), catalog) == "Offline plan:\nnothing to review"


def test_the_thought_is_the_answer_without_its_code():
    text = "I will reward progress.\n\n```python\ndef f():\n    return 1\n```\n\nThen penalise time.\n```\nx\n```"
    assert thought_of(text) == "I will reward progress.\n\nThen penalise time."
    assert thought_of("```python\nx = 1\n") == ""  # a reply cut off inside its code


class Counting(StrategyBase):
    name = "counting_test"

    @dataclasses.dataclass(frozen=True)
    class Options:
        k: int = 1
        temperature: float = 0.5
        label: str = "x"

    def __init__(self, options=None):
        super().__init__(options)
        self.told = 0

    def to_dict(self):
        return {"told": self.told}

    def load(self, state):
        self.told = state["told"]


def test_strategies_by_name_with_checked_options_and_restored_memory():
    assert {"map_elites", "greedy", "independent", "sparse"} <= set(strategy_names())  # entry points
    assert isinstance(make_strategy("map_elites"), MapElites)
    register_strategy("counting_test", Counting)
    s = make_strategy("counting_test", {"k": 3, "temperature": 1}, {"told": 5})
    assert s.options == Counting.Options(k=3, temperature=1.0, label="x") and s.told == 5
    cfg = SearchConfig(strategy="counting_test", options={"k": 2})
    assert cfg.options == {"k": 2}
    check_settings(EvolveConfig(search=cfg))  # judged where the run starts, before its directory is made
    for search, why in ((SearchConfig(strategy="counting_test", options={"kk": 2}),
                         r"unknown options \['kk'\] of strategy 'counting_test'"),
                        (SearchConfig(strategy="counting_test", options={"k": "three"}), "Options.k: expected"),
                        (SearchConfig(strategy="mcts_typo"), "unknown search strategy 'mcts_typo'"),
                        (SearchConfig(strategy="map_elites", options={"k": 1}), "takes no options")):
        with pytest.raises(ValueError, match=why):
            check_settings(EvolveConfig(search=search))
    with pytest.raises(ValueError, match="keeps no state"):
        make_strategy("map_elites", None, {"tree": []})


def test_set_reaches_any_config_value_and_bad_items_are_one_line_errors(capsys):
    assert parse_sets(["search.options.k=4", "llm.temperature=1.0", "search.options.label=abc"]) == {
        "search": {"options": {"k": 4, "label": "abc"}}, "llm": {"temperature": 1.0}}
    register_strategy("counting_test", Counting)
    args = _parser().parse_args(["--task", "xland_easy", "--strategy", "counting_test", "--set",
                                 "search.options.k=4"])
    cfg = config_from_args(args)
    assert cfg.search.strategy == "counting_test" and cfg.search.options == {"k": 4}
    assert EvolveConfig.from_dict(cfg.to_dict()) == cfg
    for bad, says in ((["--set", "search.options.k"], "expected KEY=VALUE"),
                      (["--strategy", "counting_test", "--set", "search.options.k=x"], "Options.k: expected"),
                      (["--strategy", "nope"], "unknown search strategy 'nope'")):
        assert main(["--task", "xland_easy", "--run-dir", "/nonexistent/never", *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err and "Traceback" not in err


class RayStyleWrapper(Exception):
    """Ray re-raises a task's exception as a class deriving from both its own error and
    the cause's class; the triage must see through it."""


def test_failures_are_classified_by_type_not_message():
    oom = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.1GiB")
    wrapped = type("RayTaskError(JaxRuntimeError)", (RayStyleWrapper, jax.errors.JaxRuntimeError), {})("x")
    assert is_engine_error(oom) and is_engine_error(wrapped)
    assert is_engine_error(MemoryError()) and is_engine_error(TrainingStalled("t")) and is_engine_error(EngineFault())
    # a program's exception that merely mentions memory is still the program's
    assert not is_engine_error(RuntimeError("RESOURCE_EXHAUSTED: Out of memory"))
    assert not is_engine_error(ValueError("XlaRuntimeError INTERNAL: in the program's own message"))
