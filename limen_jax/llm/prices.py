"""Prices per model: the table shipped with the package (``prices.json``) and what a run
overrides (``llm.prices``), turned into dollars per call.

A price is US dollars per million tokens. A call costs
``input x IN + output x OUT + cache_read x CR + cache_write x CW`` (/1e6), where the token
counts are what the provider bills in each class (an OpenAI prompt's cached tokens are
moved out of ``input`` into ``cache_read`` by its client).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

TABLE_FILE = "prices.json"


@dataclasses.dataclass(frozen=True)
class Price:
    """Dollars per million tokens: input, output, cache reads and cache writes."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        """Dollars for one call of these token counts."""
        return (input_tokens * self.input + output_tokens * self.output + cache_read_tokens * self.cache_read
                + cache_write_tokens * self.cache_write) / 1e6

    def to_list(self) -> list[float]:
        """[IN, OUT, CACHE_READ, CACHE_WRITE]: the form config.json and usage.json keep."""
        return [self.input, self.output, self.cache_read, self.cache_write]

    @classmethod
    def parse(cls, value: Any, *, what: str, read_factor: float = 1.0, write_factor: float = 1.0) -> Price:
        """A price from ``[IN, OUT]`` or ``[IN, OUT, CACHE_READ, CACHE_WRITE]`` (non-negative
        numbers); cache prices default to the input price times the factors. ValueError naming
        ``what`` otherwise."""
        ok = (isinstance(value, list | tuple) and len(value) in (2, 4)
              and all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in value))
        if not ok:
            raise ValueError(f"{what}: a price is [IN, OUT] or [IN, OUT, CACHE_READ, CACHE_WRITE] in USD per "
                             f"million tokens (numbers >= 0), got {value!r}")
        p_in, p_out = float(value[0]), float(value[1])
        if len(value) == 4:
            return cls(p_in, p_out, float(value[2]), float(value[3]))
        # rounded so that 3 x 0.1 is recorded as 0.3, not 0.30000000000000004
        return cls(p_in, p_out, round(p_in * read_factor, 12), round(p_in * write_factor, 12))


@functools.cache
def table() -> dict[str, Price]:
    """The shipped table, by model id (every group's models in one mapping)."""
    data = json.loads(resources.files("limen_jax.llm").joinpath(TABLE_FILE).read_text(encoding="utf-8"))
    out: dict[str, Price] = {}
    for group, spec in data["groups"].items():
        factors = {"read_factor": spec["cache_read_factor"], "write_factor": spec["cache_write_factor"]}
        for model, value in spec["models"].items():
            out[model] = Price.parse(value, what=f"{TABLE_FILE} {group}.{model}", **factors)
    return out


def lookup(model: str, prices: Mapping[str, Price]) -> Price | None:
    """``model``'s price in ``prices``: an exact id, else the longest id that is a prefix of
    it followed by "-" (a dated snapshot of a listed model); None when none matches."""
    if model in prices:
        return prices[model]
    matches = [k for k in prices if model.startswith(k + "-")]
    return prices[max(matches, key=len)] if matches else None


def price_for(model: str, overrides: Mapping[str, Any] | None = None) -> Price:
    """``model``'s price: from ``overrides`` (``llm.prices``: model id -> [IN, OUT, ...])
    first, then the shipped table. ValueError naming ``llm.prices`` for a model with none."""
    given = {k: Price.parse(v, what=f"llm.prices[{k!r}]") for k, v in (overrides or {}).items()}
    found = lookup(model, given) or lookup(model, table())
    if found is None:
        raise ValueError(f"no price known for model {model!r}: give one with --set 'llm.prices={{\"{model}\": "
                         "[IN, OUT]}' (USD per million input and output tokens; [0, 0] for a local model)")
    return found


def prices_used(models: Iterable[str], overrides: Mapping[str, Any] | None = None) -> dict[str, list[float]]:
    """The price of each model a run uses, as config.json keeps it (``llm.prices``):
    model id -> [IN, OUT, CACHE_READ, CACHE_WRITE]. ValueError for a model with no price."""
    return {m: price_for(m, overrides).to_list() for m in dict.fromkeys(models)}
