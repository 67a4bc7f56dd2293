"""The evolution run's configuration: nested frozen dataclasses, presets, strict loading.

``EvolveConfig.preset_for(task, "cpu" | "paper" | "gpu")`` gives the task's budgets (``Task.budgets``); any field can be
overridden with ``dataclasses.replace`` or from a dict (unknown keys are an error, so a
typo in a config file never silently runs the default).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, TypeVar

from limen_jax.archive import ArchiveConfig, GridSpec
from limen_jax.fields import coerce_fields
from limen_jax.llm.prompts import PromptConfig
from limen_jax.modes import MODES, Mode

T = TypeVar("T")


def _at_least(section: str, obj: Any, optional: tuple[str, ...] = (), **lows: int) -> None:
    """ValueError naming ``section.field`` when a whole-number field is not an integer or is
    below its lowest value; the ``optional`` ones may be None. Checked here rather than
    where they are used: a zero budget would otherwise train anyway (rounded up to one
    update) and a string would fail deep inside the run."""
    for name, low in lows.items():
        value = getattr(obj, name)
        if value is None and name in optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{section}.{name} must be a whole number >= {low}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """iterations: LLM rounds after the first generation; candidates: children per
    iteration (trained together in one compiled batch); seeds: seeds per full run;
    initial: from-scratch candidates in the first generation (default: ``candidates``);
    programs: a budget of programs (None: none) -- the run finishes after the batch that
    brings its programs (trained or rejected) to this many, whatever ``iterations`` says,
    so that strategies whose batches differ in size can be held to one budget. baseline:
    train the task's default interface (default observation, sparse reward) once, in the
    first batch beside the candidates, as the level the search is measured against."""

    iterations: int = 30
    candidates: int = 1
    seeds: int = 3
    initial: int | None = None
    programs: int | None = None
    baseline: bool = True
    # what evolves: "full" (observation and reward), "obs_only" (the task's sparse reward),
    # "reward_only" (the task's default observation), "sparse" (nothing: the default
    # interface alone), "independent" (from-scratch programs only, no parents)
    mode: Mode = "full"
    # a registered strategy (entry-point group limen_jax.strategies) and its options (the
    # fields of its Options dataclass, checked where the run starts: limen_jax.run.start)
    strategy: str = "map_elites"
    # the strategy's options by name (its Options dataclass's fields)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    # "on": batch i+1's LLM calls and checks run while batch i trains (its prompts see the
    # archive as of batch i-1); "off": strictly one batch after the other; "auto": on for
    # a live LLM, and for the offline mutator (whose checks then overlap training) when
    # iterations >= 2, off otherwise (sparse runs, a mutator object handed in). A replay
    # follows the recorded run. The resolved value is what config.json keeps.
    pipeline: str = "auto"
    # "demos[:threshold]": reject reward programs that rank demonstrations worse than the
    # threshold before training them (limen_jax/search/prescreen.py, checked where the
    # run starts); None: off
    prescreen: str | None = None
    # a demonstration set (.npz, limen_jax/demos.py) to rank reward programs on, instead
    # of the task's scripted expert and random play
    demos: str | None = None
    # a checked program that behaves exactly like an earlier one of the run (equal
    # fingerprints) is not trained again: it takes that program's result (limen_jax/run/repeats.py)
    dedupe: bool = True

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not isinstance(self.options, dict):
            raise ValueError(f"search.options must be a mapping of option names to values, got {self.options!r}")
        if self.pipeline not in ("auto", "on", "off"):
            raise ValueError(f"pipeline must be auto, on or off, got {self.pipeline!r}")
        _at_least("search", self, ("initial", "programs"), iterations=0, candidates=1, seeds=1, initial=1, programs=1)


@dataclasses.dataclass(frozen=True)
class CascadeConfig:
    """Environment steps of the short single-seed run and of the full multi-seed run,
    and the short run's success threshold (``short_steps=0`` skips the cascade).

    The batch watchdog (docs/security.md): a batch that trains longer than its budget is
    stopped after the update in progress, the slow program found and dropped.
    watchdog_s: the first batch's budget in seconds (0: no watchdog);
    watchdog_factor: later batches get this many times the time expected from the
    earlier batches' seconds per update (at least 60 s)."""

    # environment steps of the short single-seed run (0: no cascade, every candidate gets the full run)
    short_steps: int = 500_000
    # environment steps of the full run, on each of search.seeds seeds
    full_steps: int = 1_000_000
    # the short run's success a candidate needs to get the full run
    threshold: float = 0.05
    watchdog_s: float = 14_400.0
    watchdog_factor: float = 5.0

    def __post_init__(self) -> None:
        _at_least("cascade", self, short_steps=0, full_steps=1)
        if self.watchdog_s < 0 or self.watchdog_factor <= 0:
            raise ValueError("cascade.watchdog_s must be >= 0 (0: off) and cascade.watchdog_factor > 0")


SELECTIONS = ("fixed", "weighted", "ucb")
MAX_LLM_RETRIES = 50
MAX_LLM_CONCURRENCY = 1024
MAX_LLM_TIMEOUT_S = 3600.0
MEMBER_KEYS = ("mutator", "model", "weight", "base_url", "key_env", "price")


@dataclasses.dataclass(frozen=True)
class LLMConfig:
    """mutator: "auto" (anthropic when ANTHROPIC_API_KEY is set, else openai when
    OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline), "anthropic", "openai" (any
    OpenAI-compatible endpoint), "offline", "replay" (answers from ``replay_from``'s
    cache), or "ensemble" (the ``models`` below; what ``models`` makes "auto"). A run
    records what "auto" stood for when it began in its config.json, and keeps it on resume.
    docs/howto/use-your-llm.md shows each."""

    mutator: str = "auto"
    # None: an anthropic run uses the newest Sonnet that accepts a sampling temperature
    # (claude-sonnet-4-6; the paper samples at 0.7) and records it; an openai run names its own
    model: str | None = None
    # the sampling temperature of every call
    temperature: float = 0.7
    # the run stops cleanly (resumably) once its LLM spend reaches this many USD
    max_cost_usd: float = 20.0
    # a run directory whose cached LLM answers a replay uses (mutator "replay")
    replay_from: str | None = None
    # seconds one attempt of a call may take, at most 3600
    timeout_s: float = 300.0
    # the output cap of one call, in tokens
    max_tokens: int = 8192
    # retries of a transient failure (rate limit, timeout, server error), at most 50
    max_retries: int = 6
    # how many calls may be in flight at once (None: a whole batch), at most 1024
    concurrency: int | None = None
    # an OpenAI-compatible endpoint, including /v1 (None: OPENAI_BASE_URL, else OpenAI's)
    base_url: str | None = None
    # USD per million tokens by model id, [IN, OUT] or [IN, OUT, CACHE_READ, CACHE_WRITE],
    # over the shipped table (limen_jax/llm/prices.json); a run records the prices it used
    prices: dict[str, Any] = dataclasses.field(default_factory=dict)
    # an ensemble: entries {"mutator": "openai" | "anthropic", "model": ID, "weight": W,
    # "base_url": URL, "key_env": VARIABLE, "price": [IN, OUT]} (model required), and how a
    # call picks one: "fixed" (in turn by the request seed), "weighted" (drawn by weight),
    # "ucb" (a cost-aware bandit on the children's improvement per dollar)
    models: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # how an ensemble call picks its model: "fixed", "weighted" or "ucb" (above)
    select: str = "weighted"

    def __post_init__(self) -> None:
        _at_least("llm", self, ("concurrency",), max_tokens=1, max_retries=0, concurrency=1)
        # upper bounds too: a run directory's config.json is input, and a resume must not
        # retry an outage for days or wait hours on one attempt
        for name, high in (("max_retries", MAX_LLM_RETRIES), ("concurrency", MAX_LLM_CONCURRENCY)):
            value = getattr(self, name)
            if value is not None and value > high:
                raise ValueError(f"llm.{name} must be at most {high}, got {value!r}")
        if not 0 < self.timeout_s <= MAX_LLM_TIMEOUT_S:  # NaN included
            raise ValueError(f"llm.timeout_s must be > 0 and at most {MAX_LLM_TIMEOUT_S:g}, got {self.timeout_s!r}")
        # a NaN cap compares false with any spend, so it would never stop a run
        if not (self.max_cost_usd >= 0 and self.max_cost_usd == self.max_cost_usd):
            raise ValueError(f"llm.max_cost_usd must be a number >= 0, got {self.max_cost_usd!r}")
        if not math.isfinite(self.temperature):
            raise ValueError(f"llm.temperature must be a finite number, got {self.temperature!r}")
        if self.select not in SELECTIONS:
            raise ValueError(f"llm.select must be one of {', '.join(SELECTIONS)}, got {self.select!r}")
        if not isinstance(self.prices, dict):
            raise ValueError(f"llm.prices must map model ids to [IN, OUT] USD per million tokens, got {self.prices!r}")
        from limen_jax.llm.prices import Price

        for model, value in self.prices.items():
            Price.parse(value, what=f"llm.prices[{model!r}]")
        _check_members(self.models)


def _check_members(models: Any) -> None:
    """ValueError naming ``llm.models`` for a malformed ensemble."""
    from limen_jax.llm.prices import Price

    if not isinstance(models, list):
        raise ValueError(f"llm.models must be a list of {{\"mutator\": ..., \"model\": ...}} entries, got {models!r}")
    seen: set[str] = set()
    for i, entry in enumerate(models):
        where = f"llm.models[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str) or not entry["model"]:
            raise ValueError(f"{where} must be a mapping with a \"model\" id, got {entry!r}")
        unknown = set(entry) - set(MEMBER_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {', '.join(MEMBER_KEYS)}")
        if entry.get("mutator", "openai") not in ("openai", "anthropic"):
            raise ValueError(f"{where}.mutator must be openai or anthropic, got {entry['mutator']!r}")
        weight = entry.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
            raise ValueError(f"{where}.weight must be a number > 0, got {weight!r}")
        if "price" in entry:
            Price.parse(entry["price"], what=f"{where}.price")
        if entry["model"] in seen:
            raise ValueError(f"{where}: model {entry['model']!r} is named twice; each entry names another model")
        seen.add(entry["model"])


@dataclasses.dataclass(frozen=True)
class EvolveConfig:
    task: str = ""  # a registered task name; preset_for and evolve() set it
    seed: int = 0  # every random choice of the run derives from it and the iteration number
    preset: str = "cpu"  # the budgets the run started from: cpu, quick, paper or gpu
    search: SearchConfig = SearchConfig()
    cascade: CascadeConfig = CascadeConfig()
    archive: ArchiveConfig = ArchiveConfig()
    llm: LLMConfig = LLMConfig()
    # PPOConfig fields overriding the preset's (see limen_jax.rl.config.PPOConfig); the
    # names are checked when the config is built
    ppo: dict[str, Any] = dataclasses.field(default_factory=dict)
    # what the prompts show (limen_jax.llm.prompts.PromptConfig fields)
    prompt: PromptConfig = PromptConfig()
    # the checker's limits (limen_jax.program.Limits fields overriding its defaults)
    checker: dict[str, Any] = dataclasses.field(default_factory=dict)
    # trained policies kept in the run dir (policies/<id>/seed<k>/, limen_jax.policies):
    # "best" (the best program of each batch), "all" (every full-budget program) or "none"
    keep_policies: str = "best"

    def __post_init__(self) -> None:
        if self.keep_policies not in ("all", "best", "none"):
            raise ValueError(f"keep_policies must be all, best or none, got {self.keep_policies!r}")
        _check_names("ppo", self.ppo, "limen_jax.rl.config", "PPOConfig")
        _check_names("checker", self.checker, "limen_jax.program.checks", "Limits")

    @classmethod
    def preset_for(cls, task: str, preset: str = "cpu", **overrides: Any) -> EvolveConfig:
        """The budgets of ``preset`` for ``task``; ``overrides`` are top-level fields."""
        # the task owns its budgets (Task.budgets); an unknown name gets the defaults
        from limen_jax.registry import task_facts
        from limen_jax.task import PRESETS, Task

        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
        facts = task_facts(task) or Task
        b = facts.budget(preset)
        cfg = cls(
            task=task,
            preset=preset,
            search=SearchConfig(iterations=b.iterations, candidates=b.candidates, seeds=b.seeds),
            cascade=CascadeConfig(b.short_steps, b.full_steps, b.threshold),
            archive=ArchiveConfig(grid=GridSpec(ast_bin_width=facts.reward_ast_bin_width)),
        )
        return from_dict(cls, {**to_dict(cfg), **overrides})

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvolveConfig:
        return from_dict(cls, data)


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over``'s values, nested mappings merged key by key (neither is changed)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def assemble(task: str, config: EvolveConfig | dict[str, Any] | None = None,
             strategy: str | None = None) -> EvolveConfig:
    """The config of a run of ``task``: ``config`` as given (an EvolveConfig), or a dict of
    overrides on the task's preset (its ``preset`` key, default cpu), or the cpu preset
    (None); ``strategy``: the name of a strategy object handed in, which replaces the
    configured strategy and its options. ValueError for a malformed value."""
    if strategy is not None:
        over = {"search": {"strategy": strategy, "options": {}}}
        config = merged(config.to_dict() if isinstance(config, EvolveConfig) else dict(config or {}), over)
    if config is None:
        return EvolveConfig.preset_for(task)
    if isinstance(config, EvolveConfig):
        return dataclasses.replace(config, task=task)
    base = EvolveConfig.preset_for(task, config.get("preset", "cpu")).to_dict()
    return from_dict(EvolveConfig, merged(base, {**config, "task": task}))


def _check_names(key: str, over: dict[str, Any], module: str, cls_name: str) -> None:
    """Unknown override names are an error now, not when the run reaches them."""
    if not over:
        return
    import importlib

    cls = getattr(importlib.import_module(module), cls_name)
    unknown = set(over) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"{key}: unknown {cls_name} fields {sorted(unknown)}")
    try:
        coerce_fields(cls, over)
    except ValueError as err:
        raise ValueError(f"{key}: {err}") from None


def to_dict(obj: Any) -> dict[str, Any]:
    """Plain JSON data (tuples become lists), so a saved config compares equal to its source."""
    return json.loads(json.dumps(dataclasses.asdict(obj)))


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Build a (nested) dataclass from a dict; unknown keys and values of the wrong type
    raise ValueError."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {sorted(unknown)}; known: {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        default = getattr(cls, name, None) if not callable(getattr(cls, name, None)) else None
        if dataclasses.is_dataclass(default) and not isinstance(value, type(default)):
            if not isinstance(value, dict):
                raise ValueError(f"{cls.__name__}.{name}: expected a mapping of its fields, got {value!r}")
            kwargs[name] = from_dict(type(default), value)
        else:
            kwargs[name] = value
    # a string or float where a number or a whole number is declared fails here, naming the field
    return cls(**coerce_fields(cls, kwargs))


# Config keys a resumed run may change (the rest define the run and are refused).
RESUMABLE = frozenset({
    "search.iterations", "search.programs", "llm.max_cost_usd", "llm.model", "llm.temperature", "llm.timeout_s",
    "llm.max_tokens", "llm.max_retries", "llm.concurrency", "llm.prices", "llm.base_url",
})  # fmt: skip


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("ppo", "checker", "options", "prices"):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_changes(saved: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(accepted, refused) dotted keys whose values differ between two config dicts. A key
    the saved config lacks (a setting newer than the run) takes its value in ``new``."""
    a, b = _flat(saved), _flat(new)
    changed = sorted(k for k in a if a[k] != b.get(k))
    return [k for k in changed if k in RESUMABLE], [k for k in changed if k not in RESUMABLE]


def resume_changes(saved: dict[str, Any], new: dict[str, Any], *, allowed: bool, run: Any) -> dict[str, Any] | None:
    """What a run started again in ``run`` (its directory) with config dict ``new`` changes
    from its ``saved`` config.json: None when nothing, else the changed dotted keys with
    their new values. ValueError when a key outside :data:`RESUMABLE` changes, or any
    key does and changes are not ``allowed`` (a new start, not a resume)."""
    if saved == new:
        return None
    accepted, refused = config_changes(saved, new)
    if refused or not allowed:
        raise ValueError(
            f"{run} holds a run with another config (differs in {', '.join(refused or accepted)}); "
            f"a resume may change only {', '.join(sorted(RESUMABLE))}; or choose a new --run-dir"
        )
    values = _flat(new)
    return {k: values[k] for k in accepted}
