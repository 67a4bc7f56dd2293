from __future__ import annotations

import json

import pytest

from limen_jax.llm import (
    CacheMiss,
    CachingMutator,
    MutationRequest,
    MutationResponse,
    Mutator,
    ReplayMutator,
    ResponseCache,
)
from limen_jax.llm.replay import cache_key


class Scripted:
    """A live mutator stand-in: answers "answer <n>", or the scripted errors first."""

    name = "scripted"

    def __init__(self, errors: int = 0) -> None:
        self.calls = 0
        self.errors = errors

    def propose(self, request: MutationRequest) -> MutationResponse:
        self.calls += 1
        if self.calls <= self.errors:
            return MutationResponse(text="", model="m", error="HTTP 500")
        return MutationResponse(
            text=f"answer {self.calls}",
            input_tokens=10 * self.calls,
            output_tokens=5,
            cost_usd=0.01,
            model="m",
            metadata={"n": self.calls},
        )


def req(seed: int = 0, user: str = "u") -> MutationRequest:
    return MutationRequest(system="s", user=user, task_name="t", mode="obs_only", rng_seed=seed)


def test_protocol_conformance(tmp_path):
    inner = Scripted()
    assert isinstance(inner, Mutator)
    assert isinstance(CachingMutator(inner, tmp_path / "c.jsonl"), Mutator)


def test_key_is_sha256_of_prompt_and_sample():
    import hashlib

    expected = hashlib.sha256(json.dumps(["s", "u", "3:0"]).encode()).hexdigest()
    assert cache_key("s", "u", "3:0") == expected
    assert len({cache_key("s", "u", "0:0"), cache_key("s", "u", "0:1"), cache_key("s", "v", "0:0")}) == 3


def test_record_then_replay_identical(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    inner = Scripted()
    live = CachingMutator(inner, path)
    reqs = [req(0), req(0), req(1), req(0, user="other")]  # same prompt+seed twice: two samples
    recorded = [live.propose(r) for r in reqs]
    assert inner.calls == 4 and live.misses == 4 and live.hits == 0
    assert [r.text for r in recorded] == ["answer 1", "answer 2", "answer 3", "answer 4"]

    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["sample"] for e in entries] == ["0:0", "0:1", "1:0", "0:0"]
    assert entries[0]["system"] == "s" and entries[0]["mode"] == "obs_only" and entries[0]["task"] == "t"

    replay = ReplayMutator(path)
    replayed = [replay.propose(r) for r in reqs]
    for a, b in zip(recorded, replayed):
        assert b.to_dict() == {**a.to_dict(), "cached": True, "cost_usd": 0.0}
    with pytest.raises(CacheMiss):
        replay.propose(req(0))  # a third sample of the same prompt was never recorded


def test_resumed_run_pays_nothing_twice(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    CachingMutator(Scripted(), path).propose(req(7))
    inner = Scripted()
    resumed = CachingMutator(inner, path)
    r = resumed.propose(req(7))
    assert inner.calls == 0 and resumed.hits == 1
    assert (r.text, r.cached, r.cost_usd) == ("answer 1", True, 0.0)
    resumed.propose(req(8))
    assert inner.calls == 1


def test_cached_error_is_retried_and_superseded(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    first = CachingMutator(Scripted(errors=1), path).propose(req())
    assert first.error == "HTTP 500"
    assert ReplayMutator(path).propose(req()).error == "HTTP 500"  # replay reproduces what happened
    inner = Scripted()
    again = CachingMutator(inner, path).propose(req())
    assert inner.calls == 1 and again.text == "answer 1"
    assert ReplayMutator(path).propose(req()).text == "answer 1"  # the later line wins
    assert len(path.read_text().splitlines()) == 2


def test_torn_last_line_is_skipped_and_appends_stay_parsable(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    CachingMutator(Scripted(), path).propose(req(0))
    with path.open("a") as f:
        f.write('{"v": 1, "key": "abc", "resp')  # kill -9 mid-write
    cache = ResponseCache(path)
    assert cache.skipped_lines == 1 and len(cache) == 1
    CachingMutator(Scripted(), cache).propose(req(1))
    reread = ResponseCache(path)
    assert reread.skipped_lines == 1 and len(reread) == 2
    assert ReplayMutator(path).propose(req(1)).text == "answer 1"


def test_budget_exception_records_nothing(tmp_path):
    from limen_jax.llm import BudgetExceeded

    class Broke:
        name = "broke"

        def propose(self, request: MutationRequest) -> MutationResponse:
            raise BudgetExceeded("cap")

    path = tmp_path / "llm_cache.jsonl"
    with pytest.raises(BudgetExceeded):
        CachingMutator(Broke(), path).propose(req())
    assert not path.exists()


def test_replay_needs_an_existing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ReplayMutator(tmp_path / "missing.jsonl")


def test_response_dict_round_trip():
    r = MutationResponse(text="t", input_tokens=1, output_tokens=2, cost_usd=0.5, model="m", metadata={"a": [1]})
    assert MutationResponse.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    with pytest.raises(ValueError, match="unknown keys"):
        MutationResponse.from_dict({"text": "", "tokens": 1})
    with pytest.raises(ValueError, match="unknown mode"):
        MutationRequest(system="", user="", task_name="t", mode="sparse")  # type: ignore[arg-type]
