"""The spend cap holds across a stop and a resume, end to end: the run's Anthropic mutator
(built by ``make_mutator``) talks to a local fake Messages API, and a resumed run counts
what its cache's ledger says the first session paid."""

from __future__ import annotations

import re

from llm.fake_anthropic import FakeAnthropic, Reply
from test_evolve import toy_config

import limen_jax as lj
from limen_jax.llm.replay import ResponseCache

PROGRAM = """```python
import jax.numpy as jnp


def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    return (jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)).astype(jnp.float32)
```"""
CALL_USD = (1000 * 3.0 + 200 * 15.0) / 1e6  # Sonnet 4.6 prices, the fake's usage per reply


def test_the_cap_counts_the_first_sessions_spend_after_a_resume(tmp_path, monkeypatch):
    run = tmp_path / "run"
    cap = 5 * CALL_USD + CALL_USD / 2  # room for 5 calls of the fake's size in the whole run
    with FakeAnthropic(default=Reply(PROGRAM)) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        llm = {"mutator": "anthropic", "max_cost_usd": cap, "max_tokens": 200, "max_retries": 0}
        # the fake answers one program: dedupe off trains every copy, so the prompts (and the
        # next call's estimate below) show each
        search = {"iterations": 1, "candidates": 2, "dedupe": False}
        first = lj.evolve("toy_corridor", toy_config(llm=llm, search=search), run_dir=run, verbose=False)
        assert first.complete and fake.posts == 4  # generation 0 and iteration 1: 2 calls each
        paid = ResponseCache(run / "llm_cache.jsonl").ledger.cost_usd
        assert abs(paid - 4 * CALL_USD) < 1e-9
        # the resume asks for 3 more iterations (6 calls); only what is left of the cap may be spent
        again = lj.resume(run, {"search": {"iterations": 4}}, verbose=False)
        spent = ResponseCache(run / "llm_cache.jsonl").ledger.cost_usd
    assert again.stopped.startswith("stopped (budget)") and not again.complete
    # the first session's 4 calls count (read from the ledger); whether the refusal came while the
    # fifth call was in flight or after it was paid is a race, so both ways of saying it are right
    said = re.search(r"spent \$([0-9.]+) \(\+\$([0-9.]+) in flight\)", again.stopped)
    assert said is not None, again.stopped
    assert (said.group(1), said.group(2)) in {("0.0240", "0.0090"), ("0.0300", "0.0000")}, again.stopped
    assert spent <= cap
    assert abs(spent - 5 * CALL_USD) < 1e-9
    assert fake.posts == 5  # the one call the cap still had room for
