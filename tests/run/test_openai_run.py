"""Searches through an OpenAI-compatible endpoint (a local fake of the Chat Completions API,
the real ``openai`` SDK) from the evolve CLI: the spend recorded equals the spend billed
across a resume that raises the cap, odd replies cost the run no program, a replay needs no
endpoint, an unpriced model is refused up front, and an ensemble asks every model."""

from __future__ import annotations

import itertools
import json
import threading

import pytest
from fake_anthropic import FakeAnthropic
from fake_anthropic import Reply as ClaudeReply
from fake_openai import CUT_OFF_JSON, INVALID_UTF8, FakeOpenAI, Raw, Reply
from test_evolve import TINY_PPO

from limen_jax.archive import ProgramRecord
from limen_jax.compare import load_run, table
from limen_jax.llm.replay import ResponseCache
from limen_jax.run.cli import main

PRICES = {"M": (3.0, 15.0)}


class Programs:
    """A fake model that writes a different valid toy program each time it is asked."""

    def __init__(self) -> None:
        self._count = itertools.count()
        self._lock = threading.Lock()

    def text(self) -> str:
        with self._lock:
            k = next(self._count)
        return f"""```python
import jax.numpy as jnp


def get_observation(state):
    return jnp.array([state.pos / {10.0 + k}, state.goal / 10.0], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    gain = jnp.abs(state.goal - state.pos) - jnp.abs(next_state.goal - next_state.pos)
    return ({1.0 + k / 10} * gain).astype(jnp.float32)
```"""


def config(tmp_path, **llm: object) -> str:
    cfg = {"search": {"iterations": 1, "candidates": 2, "seeds": 1},
           "cascade": {"short_steps": 0, "full_steps": 2048, "threshold": 0.0},
           "llm": {"max_tokens": 400, "max_retries": 3, "concurrency": 1, **llm}, "ppo": TINY_PPO}
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def trained(run) -> dict[str, list[float]]:
    state = json.loads((run / "state.json").read_text())
    records = [ProgramRecord.from_dict(p) for p in state["archive"]["programs"]]
    return {r.id: r.success_per_seed for r in records if r.evaluated}


@pytest.fixture
def no_provider_env(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_an_openai_run_records_true_spend_across_a_resume_that_raises_the_cap(tmp_path, no_provider_env):
    run, programs = tmp_path / "run", Programs()
    flags = ["--task", "toy_corridor", "--config", config(tmp_path), "--mutator", "openai", "--model", "M",
             "--set", 'llm.prices={"M": [3, 15]}', "--max-cost", "0.02", "--run-dir", str(run)]
    with FakeOpenAI(responder=lambda body: Reply(programs.text())) as fake:
        no_provider_env.setenv("OPENAI_BASE_URL", fake.url)
        assert main(flags) == 1  # stopped by the cap: room for two calls of $0.006 and no third's worst case
        first = fake.posts
        assert main(["--resume", str(run), "--max-cost", "30", "--iterations", "2"]) == 0
        billed = fake.spend(PRICES)
    recorded = json.loads((run / "config.json").read_text())["llm"]
    assert (recorded["mutator"], recorded["model"], recorded["prices"]) == ("openai", "M", {"M": [3, 15, 3, 3]})
    assert (first, fake.posts) == (2, 6) and recorded["max_cost_usd"] == 30
    assert ResponseCache(run / "llm_cache.jsonl").ledger.cost_usd == pytest.approx(billed, abs=1e-12)
    usage = json.loads((run / "usage.json").read_text())
    assert usage["by_model"]["M"]["calls"] == 6 and usage["prices"] == {"M": [3, 15, 3, 3]}
    assert usage["by_model"]["M"]["cost_usd"] == pytest.approx(billed, abs=1e-6)
    assert len(trained(run)) == 6


def test_odd_replies_cost_no_program_and_a_replay_needs_no_endpoint(tmp_path, no_provider_env):
    run, again, programs = tmp_path / "run", tmp_path / "again", Programs()
    odd = iter([Reply(programs.text(), usage=False), Reply(programs.text(), choices=False), Reply(""), Raw(),
                CUT_OFF_JSON, INVALID_UTF8, Reply("```python\nx = '\ud800'\n```"), Reply("<think>hm</think>")])

    def responder(body):  # every other attempt is odd, the rest well formed with think text around the code
        return next(odd, None) if len(fake.requests) % 2 else None

    with FakeOpenAI(responder=lambda body: responder(body) or Reply(f"<think>plan</think>{programs.text()}")) as fake:
        flags = ["--task", "toy_corridor", "--config", config(tmp_path), "--mutator", "openai",
                 "--model", "M", "--llm-base-url", fake.url, "--set", 'llm.prices={"M": [3, 15]}',
                 "--run-dir", str(run)]
        assert main(flags) == 0
    assert len(trained(run)) >= 4
    assert main(["--replay-from", str(run), "--run-dir", str(again)]) == 0  # the server is gone
    assert trained(again) == trained(run)


def test_a_model_without_a_price_is_refused_up_front(tmp_path, capsys, no_provider_env):
    no_provider_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    flags = ["--task", "toy_corridor", "--config", config(tmp_path), "--mutator", "openai",
             "--model", "nobody-knows", "--run-dir", str(tmp_path / "run")]
    assert main(flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no price known for model 'nobody-knows'") and "llm.prices" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_an_ensemble_of_two_providers_asks_both_and_keeps_the_cap(tmp_path, no_provider_env):
    run, programs = tmp_path / "run", Programs()
    with FakeOpenAI(responder=lambda body: Reply(programs.text())) as fake, \
            FakeAnthropic(responder=lambda body: ClaudeReply(programs.text())) as claude:
        no_provider_env.setenv("ANTHROPIC_API_KEY", "test-key")
        members = [{"mutator": "openai", "model": "M", "base_url": fake.url, "price": [3, 15]},
                   {"mutator": "anthropic", "model": "claude-sonnet-4-6", "base_url": claude.url}]
        settings = config(tmp_path, models=members, select="fixed")
        flags = ["--task", "toy_corridor", "--config", settings, "--max-cost", "0.02", "--run-dir", str(run)]
        assert main(flags) == 1  # stopped by the cap
        # the endpoints the run names are used only when the resume names them again
        assert main(["--resume", str(run), "--max-cost", "30", "--iterations", "2"]) == 2
        assert main(["--resume", str(run), "--config", settings, "--max-cost", "30", "--iterations", "2"]) == 0
        billed = fake.spend(PRICES) + claude.posts * (1000 * 3.0 + 200 * 15.0) / 1e6
    usage = json.loads((run / "usage.json").read_text())
    assert usage["mutator"] == "ensemble" and set(usage["by_model"]) == {"M", "claude-sonnet-4-6"}
    calls = {m: u["calls"] for m, u in usage["by_model"].items()}
    assert calls == {"M": fake.posts, "claude-sonnet-4-6": claude.posts} and min(calls.values()) >= 1
    assert sum(calls.values()) == 6
    assert ResponseCache(run / "llm_cache.jsonl").ledger.cost_usd == pytest.approx(billed, abs=1e-12)
    row = table([load_run(run)]).splitlines()[-1]
    assert f"| ensemble (M: {calls['M']} calls, $" in row
    assert f"; claude-sonnet-4-6: {calls['claude-sonnet-4-6']} calls, $" in row
    no_provider_env.delenv("ANTHROPIC_API_KEY")
    assert main(["--replay-from", str(run), "--run-dir", str(tmp_path / "again")]) == 0  # both servers are gone
    assert trained(tmp_path / "again") == trained(run)
