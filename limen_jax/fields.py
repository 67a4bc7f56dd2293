"""Typed overrides: values from a config file or the command line checked against a
dataclass's annotations before they reach the code that uses them.

A JSON config says ``"lr": "3e-4"`` or ``"num_envs": 256.5`` by mistake; without this
check the string reaches the optimiser and fails deep inside a compiled function, or the
float silently changes an array shape. Here it fails when the config is built, naming
the field. Only plain annotations are understood (bool, int, float, str, Literal, tuples
of them, ``X | None``); other fields pass through unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal


def coerce_fields(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` checked against ``cls``'s annotations: an int where a float is declared
    becomes a float, a list where a tuple is declared a tuple; anything else of the wrong
    type raises ValueError("<Class>.<field>: expected ..., got ..."). Unknown names are
    left for the caller to report."""
    hints = _hints(cls)
    out = dict(values)
    for name, value in values.items():
        if name in hints:
            out[name] = _coerce(hints[name], value, f"{cls.__name__}.{name}")
    return out


def reject_unknown(cls: type, data: Mapping[str, Any]) -> None:
    """ValueError("<Class>: unknown keys [...]") when ``data`` (a dict read back from a file)
    names a key that is no init field of the dataclass ``cls``: a corrupt or foreign file."""
    unknown = set(data) - {f.name for f in dataclasses.fields(cls) if f.init}
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {sorted(unknown)}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(kind: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return _coerce(option, value, where)
            except ValueError as err:
                errors.append(err)
        raise errors[0]
    if origin is Literal:
        if value not in args:
            raise ValueError(f"{where}: expected one of {list(args)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        item = args[0] if args and (len(args) == 2 and args[1] is Ellipsis) else None
        return tuple(_coerce(item, v, f"{where}[{i}]") if item is not None else v for i, v in enumerate(value))
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        return value
    return value
