from __future__ import annotations

import json

import pytest

from limen_jax.llm import (
    BudgetExceeded,
    CacheMiss,
    CachingClient,
    Capped,
    Client,
    Completion,
    ReplayClient,
    ResponseCache,
    Usage,
)
from limen_jax.llm.replay import cache_key


class Scripted:
    """A live client stand-in: answers "answer <n>", or the scripted errors first."""

    name = "scripted"

    def __init__(self, errors: int = 0) -> None:
        self.calls = 0
        self.errors = errors

    def complete(self, system: str, user: str, images=(), seed: int = 0) -> Completion:
        self.calls += 1
        if self.calls <= self.errors:
            return Completion(text="", model="m", error="HTTP 500")
        return Completion(text=f"answer {self.calls}", usage=Usage(10 * self.calls, 5, 0.01), model="m",
                          metadata={"n": self.calls})

    def worst_cost(self, system: str, user: str, images=()) -> float:
        return 0.02


def ask(client, seed: int = 0, user: str = "u", images=()) -> Completion:
    return client.complete("s", user, images, seed)


def test_protocol_conformance(tmp_path):
    inner = Scripted()
    assert isinstance(inner, Client)
    assert isinstance(CachingClient(inner, tmp_path / "c.jsonl"), Client) and isinstance(Capped(inner), Client)


def test_key_is_sha256_of_prompt_and_sample():
    import hashlib

    expected = hashlib.sha256(json.dumps(["s", "u", "3:0"]).encode()).hexdigest()
    assert cache_key("s", "u", "3:0") == expected
    assert len({cache_key("s", "u", "0:0"), cache_key("s", "u", "0:1"), cache_key("s", "v", "0:0")}) == 3


def test_record_then_replay_identical(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    inner = Scripted()
    live = CachingClient(inner, path)
    asks = [(0, "u"), (0, "u"), (1, "u"), (0, "other")]  # same prompt+seed twice: two samples
    recorded = [ask(live, s, u) for s, u in asks]
    assert inner.calls == 4 and live.misses == 4 and live.hits == 0
    assert [r.text for r in recorded] == ["answer 1", "answer 2", "answer 3", "answer 4"]

    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["sample"] for e in entries] == ["0:0", "0:1", "1:0", "0:0"]
    assert entries[0]["system"] == "s" and entries[0]["response"]["input_tokens"] == 10

    replay = ReplayClient(path)
    replayed = [ask(replay, s, u) for s, u in asks]
    for a, b in zip(recorded, replayed):
        assert b.to_dict() == {**a.to_dict(), "cached": True, "cost_usd": 0.0}
    with pytest.raises(CacheMiss):
        ask(replay, 0)  # a third sample of the same prompt was never recorded


def test_images_change_the_key_but_stay_out_of_the_file(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    live = CachingClient(Scripted(), path)
    assert ask(live, 0).text == "answer 1"
    assert ask(live, 0, images=("aGk=",)).text == "answer 2"  # another question: a fresh sample 0:0
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [ln["sample"] for ln in lines] == ["0:0", "0:0"] and lines[1]["images"] == 1
    assert "aGk=" not in path.read_text()
    assert ask(ReplayClient(path), 0, images=("aGk=",)).text == "answer 2"


def test_resumed_run_pays_nothing_twice(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    ask(CachingClient(Scripted(), path), 7)
    inner = Scripted()
    resumed = CachingClient(inner, path)
    r = ask(resumed, 7)
    assert inner.calls == 0 and resumed.hits == 1
    assert (r.text, r.cached, r.usage.cost_usd) == ("answer 1", True, 0.0)
    ask(resumed, 8)
    assert inner.calls == 1
    assert ResponseCache(path).ledger.to_dict() == {"calls": 2, "failed_calls": 0, "retries": 0,
                                                    "input_tokens": 20, "output_tokens": 10, "cost_usd": 0.02}


def test_cached_error_is_retried_and_superseded(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    first = ask(CachingClient(Scripted(errors=1), path))
    assert first.error == "HTTP 500"
    assert ask(ReplayClient(path)).error == "HTTP 500"  # replay reproduces what happened
    inner = Scripted()
    again = ask(CachingClient(inner, path))
    assert inner.calls == 1 and again.text == "answer 1"
    assert ask(ReplayClient(path)).text == "answer 1"  # the later line wins
    assert len(path.read_text().splitlines()) == 2


def test_torn_last_line_is_skipped_and_appends_stay_parsable(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    ask(CachingClient(Scripted(), path), 0)
    with path.open("a") as f:
        f.write('{"v": 1, "key": "abc", "resp')  # kill -9 mid-write
    cache = ResponseCache(path)
    assert cache.skipped_lines == 1 and len(cache) == 1
    ask(CachingClient(Scripted(), cache), 1)
    reread = ResponseCache(path)
    assert reread.skipped_lines == 1 and len(reread) == 2
    assert ask(ReplayClient(path), 1).text == "answer 1"


def test_budget_exception_records_nothing(tmp_path):
    class Broke:
        name = "broke"

        def complete(self, system, user, images=(), seed=0) -> Completion:
            raise BudgetExceeded("cap")

    path = tmp_path / "llm_cache.jsonl"
    with pytest.raises(BudgetExceeded):
        ask(CachingClient(Broke(), path))
    assert not path.exists()


def test_a_crashing_client_is_recorded_as_an_error_answer(tmp_path):
    class Crash:
        name = "crash"

        def complete(self, system, user, images=(), seed=0) -> Completion:
            raise RuntimeError("boom")

    path = tmp_path / "llm_cache.jsonl"
    r = ask(CachingClient(Crash(), path))
    assert r.error == "RuntimeError: boom" and ask(ReplayClient(path)).error == "RuntimeError: boom"


def test_the_cap_reserves_the_worst_case_and_counts_what_was_paid():
    capped = Capped(Scripted(), max_cost_usd=0.035, prior_cost_usd=0.005)
    ask(capped)  # 0.005 + 0.02 worst <= 0.035; pays 0.01
    ask(capped)  # 0.015 + 0.02 <= 0.035
    with pytest.raises(BudgetExceeded, match=r"spent \$0.0250 \(\+\$0.0000 in flight\); the next call may cost up"):
        ask(capped)  # 0.025 + 0.02 > 0.035
    assert capped.spent_usd == pytest.approx(0.025) and capped.ledger.calls == 2


def test_replay_needs_an_existing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ReplayClient(tmp_path / "missing.jsonl")


def test_completion_dict_round_trip_and_the_cache_line_format():
    r = Completion(text="t", usage=Usage(1, 2, 0.5, 3), model="m", metadata={"a": [1]})
    flat = r.to_dict()
    assert flat == {"text": "t", "model": "m", "cached": False, "error": None, "metadata": {"a": [1]},
                    "input_tokens": 1, "output_tokens": 2, "cost_usd": 0.5, "retries": 3}
    assert Completion.from_dict(json.loads(json.dumps(flat))) == r
    assert Completion.from_dict({**flat, "code": None}) == r  # the format's lines also carry "code": null
    with pytest.raises(ValueError, match="unknown keys"):
        Completion.from_dict({"text": "", "tokens": 1})
