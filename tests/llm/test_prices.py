"""The price table shipped with the package, overrides, and what a run records."""

from __future__ import annotations

import dataclasses

import pytest

from limen_jax.config import LLMConfig
from limen_jax.llm.factory import resolve_mutator, settled
from limen_jax.llm.prices import Price, lookup, price_for, table


def test_the_table_prices_common_models_and_their_dated_snapshots():
    assert price_for("gpt-4o") == Price(2.5, 10.0, 1.25, 2.5)
    assert price_for("gpt-4o-mini") == Price(0.15, 0.6, 0.075, 0.15)  # its own entry, not gpt-4o's
    assert price_for("gpt-4o-2024-08-06") == price_for("gpt-4o")
    assert price_for("claude-sonnet-4-6-20260101").to_list() == [3.0, 15.0, 0.3, 3.75]
    assert price_for("anthropic/claude-sonnet-4.5").to_list()[:2] == [3.0, 15.0]
    assert lookup("gpt-4oz", table()) is None  # a prefix counts only before a "-"
    assert all(p.input >= 0 and p.output >= p.input for p in table().values())


def test_overrides_win_and_an_unknown_model_is_refused_naming_llm_prices():
    assert price_for("gpt-4o", {"gpt-4o": [1, 2]}) == Price(1.0, 2.0, 1.0, 1.0)
    assert price_for("qwen", {"qwen": [0, 0]}).cost(10**6, 10**6) == 0.0
    with pytest.raises(ValueError, match=r"no price known for model 'qwen'.*llm.prices"):
        price_for("qwen")
    with pytest.raises(ValueError, match=r"llm.prices\['m'\]: a price is"):
        price_for("m", {"m": [1, "x"]})
    assert Price(3, 15, 0.3, 3.75).cost(1000, 200, cache_read_tokens=100, cache_write_tokens=10) == pytest.approx(
        (1000 * 3 + 200 * 15 + 100 * 0.3 + 10 * 3.75) / 1e6)


def test_a_run_records_its_model_and_prices(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert resolve_mutator("auto") == "offline"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert resolve_mutator("auto") == "openai"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert resolve_mutator("auto") == "anthropic" and resolve_mutator("auto", [{"model": "m"}]) == "ensemble"
    claude = settled(LLMConfig(mutator="anthropic"))
    assert claude.model == "claude-sonnet-4-6" and claude.prices == {"claude-sonnet-4-6": [3.0, 15.0, 0.3, 3.75]}
    local = settled(LLMConfig(mutator="openai", model="llama", prices={"llama": [0, 0]}))
    assert local.prices == {"llama": [0.0, 0.0, 0.0, 0.0]}
    members = [{"model": "gpt-4o-mini"}, {"model": "mine", "price": [1, 2]}]
    ensemble = settled(LLMConfig(mutator="ensemble", models=members))
    assert ensemble.prices == {"gpt-4o-mini": [0.15, 0.6, 0.075, 0.15], "mine": [1.0, 2.0, 1.0, 1.0]}
    assert settled(dataclasses.replace(ensemble, mutator="replay")).prices == ensemble.prices
    for bad, said in ((LLMConfig(mutator="openai"), "needs --model"),
                      (LLMConfig(mutator="openai", models=members), "llm.models makes an ensemble"),
                      (LLMConfig(mutator="ensemble"), "needs llm.models")):
        with pytest.raises(ValueError, match=said):
            settled(bad)
    with pytest.raises(ValueError, match=r"llm.models\[1\]: model 'a' is named twice"):
        LLMConfig(models=[{"model": "a"}, {"model": "a"}])
    with pytest.raises(ValueError, match="llm.select must be one of fixed, weighted, ucb"):
        LLMConfig(select="best")
