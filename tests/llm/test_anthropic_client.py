"""AnthropicClient (under the shared cap, cache and replay) against a local fake of the Messages API:
no network, tiny timeouts."""

from __future__ import annotations

import dataclasses
import json
import logging
import time

import numpy as np
import pytest
from fake_anthropic import FakeAnthropic, Malformed, Raw, Reply, Slow, Status

from limen_jax.llm import BudgetExceeded, CacheMiss, CachingClient, Capped, Client, ReplayClient
from limen_jax.llm.anthropic_client import (
    DEFAULT_MODEL,
    PAPER_MODEL,
    AnthropicClient,
    accepts_temperature,
    call_cost,
    price_for,
)
from limen_jax.llm.client import MissingAPIKey, RequestRefused
from limen_jax.llm.retry import RetryPolicy

BASE = 0.01
POLICY = RetryPolicy(max_retries=3, base_delay=BASE, max_delay=1.0, jitter=0.25)
# Sonnet 5.x: $2 in / $10 out per million; Reply() bills 1000 in + 200 out tokens.
ONE_CALL = (1000 * 2.0 + 200 * 10.0) / 1e6


@dataclasses.dataclass(frozen=True)
class Ask:
    system: str
    user: str
    seed: int = 0


def request(seed: int = 0, user: str = "Write the interface.") -> Ask:
    return Ask("You design interfaces.", user, seed)


def ask(client: Client, a: Ask):
    return client.complete(a.system, a.user, (), a.seed)


@pytest.fixture
def delays():
    return []


def mutator(fake: FakeAnthropic, delays: list[float], max_cost_usd: float | None = None,
            prior_cost_usd: float = 0.0, **kw: object) -> Capped:
    """The client under the cap, as a run builds it (the cap's ledger counts its calls)."""
    opts: dict[str, object] = dict(
        api_key="test-key", base_url=fake.url, timeout=0.5, retry=POLICY, sleep=delays.append
    )
    opts.update(kw)
    return Capped(AnthropicClient(**opts), max_cost_usd, prior_cost_usd)  # type: ignore[arg-type]


def test_success_accounts_tokens_and_cost_exactly(delays):
    with FakeAnthropic([Reply("```python\nx = 1\n```"), Reply("second", input_tokens=1234, output_tokens=567)]) as fake:
        m = mutator(fake, delays)
        r1 = ask(m, request())
        r2 = ask(m, request(1))
    assert (r1.text, r1.usage.input_tokens, r1.usage.output_tokens) == ("```python\nx = 1\n```", 1000, 200)
    assert (r1.usage.retries, r1.error) == (0, None)
    assert r1.usage.cost_usd == ONE_CALL == pytest.approx(0.004)
    assert r1.model == DEFAULT_MODEL and r1.metadata["stop_reason"] == "end_turn" and not r1.cached
    assert r2.usage.cost_usd == pytest.approx((1234 * 2 + 567 * 10) / 1e6, rel=1e-12)
    u = m.ledger
    assert (u.calls, u.retries, u.failed_calls, u.input_tokens, u.output_tokens) == (2, 0, 0, 2234, 767)
    assert u.cost_usd == pytest.approx(r1.usage.cost_usd + r2.usage.cost_usd, rel=1e-12)
    body = fake.requests[0]["body"]
    assert body["model"] == DEFAULT_MODEL and body["max_tokens"] == 8192
    assert body["system"] == "You design interfaces."
    assert body["messages"] == [{"role": "user", "content": "Write the interface."}]
    assert "temperature" not in body  # Sonnet 5.x rejects a non-default temperature
    assert delays == []


def test_temperature_is_sent_to_models_that_take_it(delays):
    with FakeAnthropic([Reply()]) as fake:
        m = mutator(fake, delays, model=PAPER_MODEL)
        ask(m, request())
    assert fake.requests[0]["body"]["temperature"] == 0.7
    assert m.ledger.cost_usd == pytest.approx((1000 * 3 + 200 * 15) / 1e6)


def test_429_then_success_backs_off_and_honours_retry_after(delays):
    with FakeAnthropic(
        [Status(429, "rate_limit_error"), Status(429, "rate_limit_error", {"retry-after": "0.5"}), Reply()]
    ) as fake:
        m = mutator(fake, delays)
        r = ask(m, request())
    assert r.error is None and r.usage.retries == 2 and fake.posts == 3
    assert delays == [BASE, 0.5]  # 2**0 * base, then the server's retry-after (> 2 * base)
    assert m.ledger.retries == 2 and m.ledger.calls == 1
    assert r.usage.cost_usd == ONE_CALL  # failed attempts are not billed


def test_5xx_then_success(delays):
    with FakeAnthropic([Status(500), Status(529, "overloaded_error"), Status(503), Reply("ok")]) as fake:
        m = mutator(fake, delays)
        r = ask(m, request())
    assert (r.text, r.usage.retries, fake.posts) == ("ok", 3, 4)
    assert delays == [BASE, 2 * BASE, 4 * BASE]


def test_timeout_then_success(delays):
    with FakeAnthropic([Slow(1.5), Reply("after timeout")]) as fake:
        m = mutator(fake, delays)
        t0 = time.monotonic()
        r = ask(m, request())
        elapsed = time.monotonic() - t0
    assert r.text == "after timeout" and r.usage.retries == 1 and m.ledger.retries == 1
    assert 0.4 < elapsed < 1.5  # gave up on the slow attempt after ~0.5 s


def test_malformed_json_is_retried(delays):
    with FakeAnthropic([Malformed(), Reply("fine")]) as fake:
        m = mutator(fake, delays)
        r = ask(m, request())
    assert (r.text, r.usage.retries, fake.posts) == ("fine", 1, 2)


def test_code_less_answer_is_returned_not_raised(delays):
    prose = "I think the agent should look at the pyramid. Good luck!"
    with FakeAnthropic([Reply(prose)]) as fake:
        r = ask(mutator(fake, delays), request())
    assert r.text == prose and r.error is None  # validation rejects it later


def test_thinking_blocks_are_dropped(delays):
    content = [
        {"type": "thinking", "thinking": "let me think", "signature": "sig"},
        {"type": "text", "text": "part 1 "},
        {"type": "text", "text": "part 2"},
    ]
    with FakeAnthropic([Reply(content=content, stop_reason="max_tokens")]) as fake:
        r = ask(mutator(fake, delays), request())
    assert r.text == "part 1 part 2"
    assert r.metadata["blocks"] == ["thinking", "text", "text"] and r.metadata["stop_reason"] == "max_tokens"


def test_exhausted_retries_return_an_error_response(delays):
    with FakeAnthropic([Status(500)] * 4) as fake:
        m = mutator(fake, delays)
        r = ask(m, request())
    assert fake.posts == 4 and r.text == "" and r.usage.retries == 3
    assert r.error is not None and "4 attempts" in r.error and "HTTP 500" in r.error
    assert (m.ledger.calls, m.ledger.failed_calls, m.ledger.retries, m.ledger.cost_usd) == (0, 1, 3, 0.0)


def test_refused_request_is_fatal_and_not_retried(delays):
    with FakeAnthropic([Status(401, "authentication_error"), Reply()]) as fake:
        m = mutator(fake, delays)
        with pytest.raises(RequestRefused, match="HTTP 401"):
            ask(m, request())
    assert fake.posts == 1 and delays == []


def test_jitter_comes_from_the_passed_generator(delays):
    with FakeAnthropic([Status(429), Status(429), Reply()]) as fake:
        ask(mutator(fake, delays, rng=np.random.default_rng(0)), request())
    u = np.random.default_rng(0).random(2)
    assert delays == [BASE * (1 + 0.25 * u[0]), 2 * BASE * (1 + 0.25 * u[1])]


def test_budget_cap_stops_before_the_call_that_could_exceed_it(delays):
    req = Ask("s" * 30, "u" * 30)
    # worst case: ceil(60 chars / 3) = 20 input tokens, 100 output tokens at $2 / $10 per M
    worst = (20 * 2.0 + 100 * 10.0) / 1e6
    with FakeAnthropic([Reply()] * 3) as fake:
        m = mutator(fake, delays, max_tokens=100, max_cost_usd=2 * ONE_CALL + worst / 2)
        assert m.inner.worst_cost(req.system, req.user) == pytest.approx(worst)
        ask(m, req)
        ask(m, req)  # spent 0.008 + worst 0.00104 <= cap 0.00852
        with pytest.raises(BudgetExceeded, match="budget"):
            ask(m, req)
    assert fake.posts == 2 and m.spent_usd == pytest.approx(2 * ONE_CALL)


def test_budget_already_exceeded_stops(delays):
    with FakeAnthropic([Reply()]) as fake:
        m = mutator(fake, delays, max_cost_usd=0.001)  # one call costs 0.004 > cap
        with pytest.raises(BudgetExceeded):
            ask(m, request())
    assert fake.posts == 0


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY"):
        AnthropicClient()


def test_key_and_base_url_from_the_environment(monkeypatch, delays):
    with FakeAnthropic([Reply("env")]) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        r = ask(AnthropicClient(timeout=0.5, retry=POLICY, sleep=delays.append), request())
    assert r.text == "env"
    headers = {k.lower(): v for k, v in fake.requests[0]["headers"].items()}
    assert "env-key" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


def test_price_table_and_temperature_rules():
    assert price_for("claude-sonnet-5-5") == (2.0, 10.0)
    assert price_for("claude-sonnet-4-6") == (3.0, 15.0)
    assert price_for("claude-opus-4-1") == (15.0, 75.0)
    assert price_for("claude-opus-4-5-20251101") == (5.0, 25.0)  # longest prefix wins
    assert price_for("claude-haiku-4-5") == (1.0, 5.0)
    with pytest.raises(ValueError, match="prices="):
        price_for("gpt-5")
    assert call_cost((2.0, 10.0), 1_000_000, 0) == 2.0
    assert call_cost((2.0, 10.0), 0, 0, cache_write_tokens=1_000_000, cache_read_tokens=1_000_000) == 2.5 + 0.2
    assert accepts_temperature("claude-sonnet-4-6") and accepts_temperature("claude-haiku-4-5")
    assert not accepts_temperature("claude-sonnet-5-5") and not accepts_temperature("claude-opus-4-8")
    with pytest.raises(MissingAPIKey):
        AnthropicClient(api_key="")  # empty is missing, not a key


def test_every_answer_is_cached_and_replays_identically(tmp_path, delays):
    path = tmp_path / "llm_cache.jsonl"
    reqs = [request(0), request(1), request(0)]  # the third repeats the first: a distinct sample
    with FakeAnthropic([Reply("a"), Status(429), Reply("b", input_tokens=7), Reply("c")]) as fake:
        live = CachingClient(AnthropicClient(api_key="k", base_url=fake.url, timeout=0.5, retry=POLICY,
                                             sleep=delays.append), path)
        recorded = [ask(live, r) for r in reqs]
        assert fake.posts == 4 and live.name == "anthropic"
    assert [r.text for r in recorded] == ["a", "b", "c"]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [ln["response"]["text"] for ln in lines] == ["a", "b", "c"]
    assert [ln["sample"] for ln in lines] == ["0:0", "1:0", "0:1"]

    replay = ReplayClient(path)
    replayed = [ask(replay, r) for r in reqs]
    for a, b in zip(recorded, replayed):
        assert (a.text, a.usage.input_tokens, a.usage.output_tokens, a.model, a.error, a.usage.retries, a.metadata) == (
            b.text,
            b.usage.input_tokens,
            b.usage.output_tokens,
            b.model,
            b.error,
            b.usage.retries,
            b.metadata,
        )
        assert b.cached and b.usage.cost_usd == 0.0
    with pytest.raises(CacheMiss, match="no recorded answer"):
        ask(replay, request(2))


def test_prior_spend_of_a_resumed_run_counts_against_the_cap(delays):
    with FakeAnthropic([Reply()]) as fake:
        m = mutator(fake, delays, max_tokens=100, max_cost_usd=1.0, prior_cost_usd=0.999)
        with pytest.raises(BudgetExceeded, match=r"spent \$0.9990"):
            ask(m, request())
        assert fake.posts == 0 and m.spent_usd == 0.999


def test_effort_is_sent_only_when_set(delays):
    with FakeAnthropic([Reply(), Reply()]) as fake:
        ask(mutator(fake, delays), request())
        ask(mutator(fake, delays, effort="low"), request())
    assert "output_config" not in fake.requests[0]["body"]
    assert fake.requests[1]["body"]["output_config"] == {"effort": "low"}


def test_retries_and_the_temperature_fallback_are_logged(delays, caplog):
    caplog.set_level(logging.WARNING)
    with FakeAnthropic([Status(503), Reply()]) as fake:
        ask(mutator(fake, delays), request())
    assert "does not accept a sampling temperature" in caplog.text  # DEFAULT_MODEL is Sonnet 5.x
    assert "anthropic call failed (HTTP 503), retry 1/3 in 0.01s" in caplog.text


@pytest.mark.parametrize("bad", [Reply("no usage", usage=False), Reply(content=[]), Raw()],
                         ids=["no-usage", "empty-content", "html-page"])
def test_unusable_200_replies_are_retried_like_transient_failures(delays, bad):
    with FakeAnthropic([bad, Reply("```python\nx = 1\n```")]) as fake:
        m = mutator(fake, delays)
        r = ask(m, request())
    assert fake.posts == 2 and r.error is None and r.usage.retries == 1 and r.text == "```python\nx = 1\n```"
    assert m.ledger.retries == 1 and len(delays) == 1


def test_unusable_replies_that_outlast_the_retries_are_recorded_and_replayed(tmp_path, delays):
    cache = tmp_path / "llm_cache.jsonl"
    with FakeAnthropic([], default=Reply(content=[])) as fake:
        live = CachingClient(AnthropicClient(api_key="test-key", base_url=fake.url, timeout=0.5, retry=POLICY,
                                             sleep=delays.append), cache)
        r = ask(live, request())
    assert fake.posts == POLICY.max_retries + 1 and r.error and "empty content" in r.error
    replayed = ask(ReplayClient(cache), request())  # no CacheMiss: the failure is on record
    assert replayed.error == r.error and replayed.cached


def test_retry_after_ms_is_honoured(delays):
    with FakeAnthropic([Status(429, headers={"retry-after-ms": "750"}), Reply()]) as fake:
        m = mutator(fake, delays, retry=RetryPolicy(max_retries=2, base_delay=0.001, max_delay=5.0, jitter=0.0))
        ask(m, request())
    assert delays == [pytest.approx(0.75)]


def test_a_reply_cut_at_max_tokens_is_marked_truncated(delays):
    with FakeAnthropic([Reply("```python\ndef get_obs", stop_reason="max_tokens")]) as fake:
        r = ask(mutator(fake, delays, max_tokens=64), request())
    assert r.metadata["truncated"] is True and r.metadata["max_tokens"] == 64
