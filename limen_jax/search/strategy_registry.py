"""Finding strategies by name: in-process registrations, then entry points.

The group ``limen_jax.strategies`` maps a name to a strategy class (``"package.module:
Class"``); the shipped strategies register exactly this way, as a third-party package
would. :func:`register_strategy` adds one in this process (a class, or an object a user
passes to ``lj.evolve(..., strategy=obj)``). A strategy's ``Options`` dataclass is filled
from ``search.options``; unknown names and ill-typed values are an error up front.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from typing import Any

from limen_jax.fields import coerce_fields

GROUP = "limen_jax.strategies"
_REGISTERED: dict[str, Any] = {}


def register_strategy(name: str, strategy: Any, *, overwrite: bool = True) -> None:
    """Register a strategy class (or a ready object) under ``name`` for this process."""
    if not overwrite and name in _REGISTERED:
        raise ValueError(f"strategy {name!r} is already registered")
    _REGISTERED[name] = strategy


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}


def strategy_names() -> list[str]:
    """Every strategy name this process can make, sorted."""
    return sorted(set(_REGISTERED) | set(_entry_points()))


def strategy_class(name: str) -> Any:
    """The class registered as ``name`` (the object's class for a registered object)."""
    found = _REGISTERED.get(name)
    if found is None:
        ep = _entry_points().get(name)
        if ep is None:
            raise ValueError(f"unknown search strategy {name!r}; expected one of {strategy_names()}")
        found = ep.load()
    return found if isinstance(found, type) else type(found)


def check_options(name: str, options: dict[str, Any]) -> Any:
    """``options`` as the strategy's ``Options`` instance; ValueError naming what is wrong."""
    cls = strategy_class(name)
    opts_cls: Any = getattr(cls, "Options", None)
    if not isinstance(opts_cls, type) or not dataclasses.is_dataclass(opts_cls) or not dataclasses.fields(opts_cls):
        if options:
            raise ValueError(f"search.options: strategy {name!r} takes no options, got {sorted(options)}")
        return opts_cls() if isinstance(opts_cls, type) and dataclasses.is_dataclass(opts_cls) else None
    known = {f.name for f in dataclasses.fields(opts_cls)}
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"search.options: unknown options {sorted(unknown)} of strategy {name!r}; "
                         f"known: {sorted(known)}")
    try:
        return opts_cls(**coerce_fields(opts_cls, options))
    except (TypeError, ValueError) as err:
        raise ValueError(f"search.options of strategy {name!r}: {err}") from None


def make_strategy(name: str, options: dict[str, Any] | None = None, state: dict[str, Any] | None = None) -> Any:
    """The strategy called ``name`` with ``options``, its memory restored from ``state``."""
    found = _REGISTERED.get(name)
    if found is not None and not isinstance(found, type):
        strategy = found  # an object handed in: it holds its own options
    else:
        cls = strategy_class(name)
        opts = check_options(name, options or {})
        strategy = cls(opts) if opts is not None else cls()
    if state:
        strategy.load(state)
    return strategy
