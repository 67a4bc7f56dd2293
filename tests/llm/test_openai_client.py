"""OpenAIClient (under the shared cap, cache and replay) against a local fake of the Chat
Completions API, through the real ``openai`` SDK: no network, tiny timeouts."""

from __future__ import annotations

import pytest
from fake_openai import CUT_OFF_JSON, INVALID_UTF8, FakeOpenAI, Raw, Reply, Slow, Status

from limen_jax.llm import BudgetExceeded, CachingClient, Capped, ReplayClient
from limen_jax.llm.client import MissingAPIKey, RequestRefused
from limen_jax.llm.openai_client import NO_KEY, OpenAIClient
from limen_jax.llm.prices import Price
from limen_jax.llm.replies import estimated_tokens, prompt_tokens
from limen_jax.llm.retry import RetryPolicy

POLICY = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=1.0, jitter=0.0)
PRICE = Price(3.0, 15.0, 0.3, 3.0)
ONE_CALL = (1000 * 3.0 + 200 * 15.0) / 1e6  # Reply() bills 1000 prompt + 200 completion tokens
CODE = "```python\nx = 1\n```"
SYSTEM, USER = "You design interfaces.", "Write the interface."


@pytest.fixture
def delays():
    return []


def client(fake: FakeOpenAI, delays: list[float], **kw: object) -> OpenAIClient:
    opts: dict[str, object] = dict(price=PRICE, api_key="test-key", base_url=fake.url, timeout=0.3, retry=POLICY,
                                   sleep=delays.append)
    opts.update(kw)
    return OpenAIClient(str(opts.pop("model", "m-test")), **opts)  # type: ignore[arg-type]


def test_happy_path_sends_the_prompt_and_bills_the_reply(delays):
    with FakeOpenAI([Reply(CODE)]) as fake:
        capped = Capped(client(fake, delays))
        r = capped.complete(SYSTEM, USER, (), seed=7)
    assert (r.text, r.error, r.model, r.usage.retries) == (CODE, None, "m-test", 0)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (1000, 200)
    assert r.usage.cost_usd == pytest.approx(ONE_CALL, abs=1e-12)
    assert capped.ledger.cost_usd == pytest.approx(ONE_CALL, abs=1e-12) and capped.ledger.calls == 1
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer test-key"
    body = sent["body"]
    assert body["model"] == "m-test" and body["seed"] == 7
    assert (body["max_tokens"], body["temperature"]) == (8192, 0.7)
    assert body["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    assert r.metadata["truncated"] is False and r.metadata["finish_reason"] == "stop"


def test_cached_prompt_tokens_are_billed_at_the_cache_read_price(delays):
    with FakeOpenAI([Reply(CODE, cached_tokens=600)]) as fake:
        r = client(fake, delays).complete(SYSTEM, USER)
    assert r.usage.cost_usd == pytest.approx((400 * 3.0 + 600 * 0.3 + 200 * 15.0) / 1e6, abs=1e-12)


@pytest.mark.parametrize("code", [429, 500, 503])
def test_transient_statuses_are_retried_honouring_retry_after(delays, code):
    with FakeOpenAI([Status(code, {"retry-after": "0.5"}), Status(code, {"retry-after-ms": "20"}), Reply(CODE)]) as f:
        r = client(f, delays).complete(SYSTEM, USER)
    assert (r.text, r.usage.retries, f.posts) == (CODE, 2, 3)
    assert delays == [0.5, pytest.approx(0.02)]  # the server's waits, longer than our 0.01 s backoff


def test_a_hang_times_out_and_is_retried(delays):
    with FakeOpenAI([Slow(2.0), Reply(CODE)]) as fake:
        r = client(fake, delays).complete(SYSTEM, USER)
    assert (r.text, r.usage.retries, fake.posts) == (CODE, 1, 2)


def test_a_refused_request_is_not_retried(delays):
    with FakeOpenAI([Status(401)]) as fake, pytest.raises(RequestRefused, match="HTTP 401"):
        client(fake, delays).complete(SYSTEM, USER)
    assert fake.posts == 1 and delays == []


ODD = {
    "no-usage": Reply(CODE, usage=False),
    "no-choices": Reply(CODE, choices=False),
    "empty-content": Reply(""),
    "null-content": Reply(None),
    "html-page": Raw(),
    "cut-off-json": CUT_OFF_JSON,
    "invalid-utf8": INVALID_UTF8,
    "lone-surrogate": Reply("```python\nx = '\ud800'\n```"),
    "only-thinking": Reply("<think>the agent should see the goal</think>"),
}


def _paid(name: str) -> float:
    """What an odd reply is billed: its usage where it reports one, an estimate without."""
    if name == "no-usage":
        return PRICE.cost(prompt_tokens(SYSTEM, USER, ()), estimated_tokens(len(CODE)))
    return 0.0 if isinstance(ODD[name], Raw) else ONE_CALL


@pytest.mark.parametrize("name", list(ODD))
def test_odd_replies_are_retried_and_their_bill_kept(delays, name):
    with FakeOpenAI([ODD[name], Reply(CODE)]) as fake:
        capped = Capped(client(fake, delays))
        r = capped.complete(SYSTEM, USER)
    assert (r.text, r.error, r.usage.retries, fake.posts) == (CODE, None, 1, 2)
    assert r.usage.cost_usd == pytest.approx(ONE_CALL + _paid(name), abs=1e-12)
    assert capped.ledger.cost_usd == pytest.approx(ONE_CALL + _paid(name), abs=1e-12)
    assert fake.spend({"m-test": (3.0, 15.0)}) <= capped.ledger.cost_usd + 1e-12  # nothing billed goes unrecorded


def test_think_text_around_the_code_is_cut_out(delays):
    with FakeOpenAI([Reply(f"<think>first the observation\n</think>\n{CODE}")]) as fake:
        r = client(fake, delays).complete(SYSTEM, USER)
    assert (r.text, r.usage.retries) == (CODE, 0)


def test_a_reply_cut_at_the_token_cap_is_marked_truncated(delays):
    with FakeOpenAI([Reply("```python\nx = ", finish_reason="length")]) as fake:
        r = client(fake, delays).complete(SYSTEM, USER)
    assert r.metadata["truncated"] is True and r.error is None


def test_odd_replies_to_the_end_are_an_answerless_call_on_record(tmp_path, delays):
    cache = tmp_path / "llm_cache.jsonl"
    with FakeOpenAI([], default=Reply("")) as fake:
        capped = Capped(client(fake, delays))
        r = CachingClient(capped, cache).complete(SYSTEM, USER)
    assert fake.posts == POLICY.max_retries + 1 and r.error and "empty content" in r.error
    assert r.usage.cost_usd == pytest.approx(4 * ONE_CALL, abs=1e-12)  # each empty reply was billed
    assert capped.ledger.failed_calls == 1 and capped.ledger.cost_usd == pytest.approx(4 * ONE_CALL, abs=1e-12)
    replayed = ReplayClient(cache).complete(SYSTEM, USER)  # no server: the failure is on record
    assert replayed.error == r.error and replayed.cached


def test_images_are_sent_as_data_urls_and_dropped_where_refused(delays):
    with FakeOpenAI([Reply(CODE), Status(400), Reply(CODE), Reply(CODE)]) as fake:
        c = client(fake, delays)
        c.complete(SYSTEM, USER, ("AAAA",))
        c.complete(SYSTEM, USER, ("AAAA",))  # refused with the image, answered without
        c.complete(SYSTEM, USER, ("AAAA",))
    first = fake.requests[0]["body"]["messages"][1]["content"]
    assert first == [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                     {"type": "text", "text": USER}]
    assert [isinstance(r["body"]["messages"][1]["content"], str) for r in fake.requests] == [False, False, True, True]


def test_a_reasoning_model_gets_max_completion_tokens_and_no_temperature(delays):
    with FakeOpenAI([Reply(CODE)]) as fake:
        client(fake, delays, model="openai/o4-mini", max_tokens=100).complete(SYSTEM, USER)
    body = fake.requests[0]["body"]
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body and "temperature" not in body


def test_key_and_endpoint_from_the_environment_and_a_keyless_local_server(monkeypatch, delays):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        OpenAIClient("m", price=PRICE)
    with FakeOpenAI([Reply(CODE), Reply(CODE)]) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        OpenAIClient("m", price=PRICE, retry=POLICY).complete(SYSTEM, USER)
        monkeypatch.setenv("MY_KEY", "secret")
        OpenAIClient("m", price=PRICE, retry=POLICY, api_key_env="MY_KEY").complete(SYSTEM, USER)
    assert [r["headers"]["authorization"] for r in fake.requests] == [f"Bearer {NO_KEY}", "Bearer secret"]


def test_the_cap_counts_a_resumed_runs_spend_and_stops_before_the_call(delays):
    with FakeOpenAI([], default=Reply(CODE)) as fake:
        c = client(fake, delays, max_tokens=200)
        worst = c.worst_cost(SYSTEM, USER)
        capped = Capped(c, max_cost_usd=1.0, prior_cost_usd=1.0 - worst / 2)
        with pytest.raises(BudgetExceeded):
            capped.complete(SYSTEM, USER)
        assert fake.posts == 0
        roomy = Capped(c, max_cost_usd=1.0, prior_cost_usd=1.0 - worst)
        roomy.complete(SYSTEM, USER)
    assert roomy.spent_usd == pytest.approx(1.0 - worst + ONE_CALL)
