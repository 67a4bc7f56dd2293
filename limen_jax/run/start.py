"""Where a run starts: ``lj.evolve`` and ``lj.resume``.

The task is resolved here, once, and handed down as an object; the settings the config
cannot judge alone (the strategy's options, ``--prescreen``, a ``--demos`` file) are
checked here, before the run directory is made, so bad input is refused (ValueError,
one line) with nothing written. Then the loop runs (:func:`limen_jax.loop.run_loop`).
Every random choice derives from ``config.seed`` and the iteration number, so a resumed
run makes the same choices it would have made, and a run replayed from its LLM cache
reproduces exactly.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from limen_jax.config import EvolveConfig, assemble, merged
from limen_jax.run_result import RunResult
from limen_jax.rundir import RunDir, holds_config


def evolve(
    task: str,
    config: EvolveConfig | dict[str, Any] | None = None,
    *,
    run_dir: str | os.PathLike[str] | None = None,
    mutator: Any = None,
    verbose: bool = True,
    evaluator: Any = None,
    strategy: Any = None,
    handle_signals: bool = False,
) -> RunResult:
    """Run (or, if ``run_dir`` holds a checkpoint, resume) an interface search.

    config: an EvolveConfig, a dict of overrides on the CPU preset, or None.
    mutator: a model client (:class:`limen_jax.llm.Client`: ``complete(system, user, images,
        seed) -> Completion``) or an offline stand-in (:class:`limen_jax.llm.OfflineAuthor`);
        by default chosen by ``config.llm.mutator``.
    evaluator: a :class:`limen_jax.search.evaluation.evaluator.Evaluator` (``submit(job) -> Future``,
        ``prepare(job)``, ``close(wait)``; subclass ``EvaluatorBase`` for the last two);
        by default the in-process batched cascade.
    strategy: a strategy object (:class:`limen_jax.search.Strategy`) to run instead of the
        configured one; ``config.search.strategy`` becomes its name. To resume its run,
        pass the object again (with its options) or register its class by entry point.
    handle_signals: SIGINT and SIGTERM stop the run resumably (the first at the next safe
        point, a second at once; ``RunResult.signal`` says which): what the CLI does.
    """
    if strategy is not None:
        _register(strategy)
    settled = assemble(task, config, strategy.name if strategy is not None else None)
    return start(settled, resolve_task(settled.task), run_dir if run_dir is not None else default_run_dir(settled),
                 mutator=mutator, verbose=verbose, evaluator=evaluator, handle_signals=handle_signals)


def resume(
    run_dir: str | os.PathLike[str],
    overrides: dict[str, Any] | None = None,
    *,
    mutator: Any = None,
    verbose: bool = True,
    evaluator: Any = None,
    strategy: Any = None,
    handle_signals: bool = False,
) -> RunResult:
    """Continue a killed or finished run from its directory, with its own config.

    overrides: nested config values to change on the way (e.g. ``{"llm": {"max_cost_usd":
    40}}``, ``{"search": {"iterations": 10}}``); only :data:`limen_jax.config.RESUMABLE`
    keys may change, anything else is refused with a ValueError naming it.
    strategy: the strategy object the run was started with, if it was handed in (its
    memory is restored from the checkpoint).
    """
    if strategy is not None:
        _register(strategy)
    if not holds_config(run_dir):
        # checked before RunDir, which would create the directory
        raise FileNotFoundError(f"{run_dir} holds no config.json: not a limen_jax run directory")
    rd = RunDir(run_dir, create=False)
    config = recorded_config(rd, overrides or {})
    return start(config, resolve_task(config.task), run_dir, mutator=mutator, verbose=verbose,
                 evaluator=evaluator, handle_signals=handle_signals, allow_changes=True, rd=rd)


def start(config: EvolveConfig, task: Any, run_dir: str | os.PathLike[str], *, mutator: Any = None,
          verbose: bool = True, evaluator: Any = None, handle_signals: bool = False, allow_changes: bool = False,
          rd: RunDir | None = None) -> RunResult:
    """Check what the config cannot check alone, then run ``config`` on ``task`` (resolved
    by :func:`resolve_task`) in ``run_dir`` (``rd``: that directory, opened already)."""
    check_settings(config)
    if config.search.demos and not (Path(run_dir) / "demos.npz").exists():
        from limen_jax.demos import load_demos

        load_demos(config.search.demos, task)  # a bad file is refused before the run dir exists
    from limen_jax.loop import run_loop

    # the loop makes the directory once it has checked the run can start
    return run_loop(config, rd if rd is not None else RunDir(run_dir, create=False), task, mutator=mutator,
                    evaluator=evaluator, verbose=verbose, allow_changes=allow_changes,
                    handle_signals=handle_signals)


def recorded_config(rd: RunDir, overrides: dict[str, Any]) -> EvolveConfig:
    """The config of the run in ``rd`` with ``overrides``: its task checked before anything
    builds it (:func:`limen_jax.registry.check_recorded`), its fields by the config's own
    parser; RunDirError (a ValueError, one line naming config.json) otherwise."""
    from limen_jax.registry import check_recorded
    from limen_jax.run.reader import RunDirError

    path = rd.path / "config.json"
    saved = rd.read_json("config.json")
    if not isinstance(saved, dict):
        raise RunDirError(f"{path}: not a JSON object")
    check_recorded(saved.get("task"), str(path))
    try:
        config = EvolveConfig.from_dict(merged(saved, overrides))
    except (KeyError, TypeError, ValueError) as exc:
        raise RunDirError(f"{path}: {exc}") from None
    check_recorded(config.task, str(path))  # an override may not name code either
    _check_endpoints(saved, overrides, path)
    _check_limits(saved, overrides, path)
    return config


def _check_limits(saved: dict[str, Any], overrides: dict[str, Any], path: Path) -> None:
    """RunDirError unless every checker limit config.json raises above its default
    (seconds, memory, work, sample sizes) is named again by the resume: a run directory
    may come from someone else, and a stage limit of hours lets a pending program hold
    the resume for hours."""
    import dataclasses

    from limen_jax.program import Limits
    from limen_jax.run.reader import RunDirError

    checker = saved.get("checker")
    asked_checker = overrides.get("checker")
    asked: dict[str, Any] = asked_checker if isinstance(asked_checker, dict) else {}
    if not isinstance(checker, dict):
        return
    defaults = {f.name: f.default for f in dataclasses.fields(Limits)}
    for key, value in checker.items():
        default = defaults.get(key)
        if (key != "sample_seed" and isinstance(default, (int, float)) and isinstance(value, (int, float))
                and value > default and asked.get(key) != value):
            raise RunDirError(f"{path}: checker.{key} {value!r} loosens the checker (default {default!r}) as the "
                              f"run directory says; resume with --config FILE holding checker.{key} if you trust it")


def _check_endpoints(saved: dict[str, Any], overrides: dict[str, Any], path: Path) -> None:
    """RunDirError unless every LLM endpoint config.json names (``llm.base_url``,
    ``llm.models[i].base_url``, this machine's included: on a shared machine another user
    may listen there) and every key variable other than the provider's own
    (``llm.models[i].key_env``) is named again by the resume itself: a run directory may
    come from someone else, and the client sends the API key, or the value of the variable
    ``key_env`` names, to that endpoint."""
    from limen_jax.llm.factory import PROVIDER_KEY_ENV
    from limen_jax.run.reader import RunDirError

    llm = saved.get("llm")
    asked_llm = overrides.get("llm")
    asked: dict[str, Any] = asked_llm if isinstance(asked_llm, dict) else {}
    if not isinstance(llm, dict):
        return
    url = llm.get("base_url")
    if url is not None and asked.get("base_url") != url:
        raise RunDirError(f"{path}: llm.base_url {ascii(url)[:100]} is an endpoint the run directory names: your "
                          "API key would go there; resume with --llm-base-url and that URL if you trust it")
    models = llm.get("models")
    if not isinstance(models, list) or asked.get("models") == models:
        return
    again = "resume with --config FILE holding the same llm.models if you trust it"
    for i, m in enumerate(models):
        if not isinstance(m, dict):
            continue
        if m.get("base_url") is not None:
            raise RunDirError(f"{path}: llm.models[{i}].base_url {ascii(m['base_url'])[:100]} is an endpoint the "
                              f"run directory names: your API key would go there; {again}")
        key_env = m.get("key_env")
        if key_env is not None and key_env != PROVIDER_KEY_ENV.get(str(m.get("mutator"))):
            raise RunDirError(f"{path}: llm.models[{i}].key_env {ascii(key_env)[:60]} names the variable whose value "
                              f"would be sent as the API key; {again}")


def resolve_task(name: str) -> Any:
    """The task ``name`` built; ValueError (one line: what is registered, what is missing)
    when it cannot be."""
    from limen_jax.registry import task_problem
    from limen_jax.task import make

    try:
        return make(name)
    except (KeyError, ImportError) as exc:
        raise ValueError(task_problem(name, exc)) from None


def check_settings(config: EvolveConfig) -> None:
    """ValueError (one line) for a strategy that is not registered, its options, or a
    malformed ``search.prescreen``."""
    from limen_jax.search.evaluation.prescreen import parse_prescreen
    from limen_jax.search.strategy_registry import check_options

    parse_prescreen(config.search.prescreen)
    check_options(config.search.strategy, config.search.options)


def default_run_dir(config: EvolveConfig) -> Path:
    """``runs/<task>-<mode>-<time>``: where a run goes without ``run_dir``."""
    return Path("runs") / f"{config.task}-{config.search.mode}-{time.strftime('%Y%m%d-%H%M%S')}"


def _register(strategy: Any) -> None:
    from limen_jax.search.strategy_registry import register_strategy

    register_strategy(strategy.name, strategy)
