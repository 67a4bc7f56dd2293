"""Finding tasks by name: entry points, explicit registrations, adapter families.

A name resolves, in this order, to

1. a factory passed to :func:`register` in this process;
2. an entry point of the group ``limen_jax.tasks`` of any installed distribution
   (``name = "package.module:Class"``); the bundled suite registers this way, exactly
   as a third-party package would;
3. ``<family>:<env>`` for a registered adapter family (``playground:CartpoleBalance``,
   ``brax:reacher``): the family builds a task class for that environment;
4. ``package.module:Class``, imported directly;
5. the class of a task already built in this process under that name (so a task made
   by hand still has its facts found by ``PPOConfig.preset(task.name)``).

A name read from a file (a run directory's config.json, a kept policy's policy.json) is
checked first (:func:`check_recorded`): only 1, 2, 3 and 5 pass, so a file never names a
module to import or a function to call.

Nothing is imported until a name is resolved, so listing tasks stays cheap and a task
whose extra is not installed fails only when it is used. This module knows no task.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from typing import Any

GROUP = "limen_jax.tasks"
FAMILY_GROUP = "limen_jax.task_families"

TaskFactory = Callable[..., Any]  # builds a limen_jax.task.Task (not imported: task.py imports this)
# A family maps an environment name to a task factory ("module:function" or a callable).
FamilyResolver = Callable[[str], TaskFactory]

# The environment of a family name read from a file: a plain name, never code or a path out.
_ENV = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,99}")

_REGISTERED: dict[str, TaskFactory | str] = {}
_FAMILIES: dict[str, FamilyResolver | str] = {}
_BUILT: dict[str, type] = {}


def register(name: str, factory: TaskFactory | str, *, overwrite: bool = False) -> None:
    """Register a task factory (a Task subclass, a callable, or "module:attr") under ``name``."""
    if not overwrite and (name in _REGISTERED or name in _entry_points()):
        raise ValueError(f"task {name!r} is already registered")
    _REGISTERED[name] = factory


def register_family(prefix: str, resolver: FamilyResolver | str) -> None:
    """Register an adapter family: ``--task <prefix>:<env>`` calls ``resolver(env)`` for a factory."""
    _FAMILIES[prefix] = resolver


def note_task(name: str, cls: type) -> None:
    """Remember the class of a task built in this process (called by ``Task.__init__``)."""
    if name:
        _BUILT[name] = cls


def registered_tasks() -> list[str]:
    """Names of the registered tasks (entry points and :func:`register`), sorted."""
    return sorted(set(_REGISTERED) | set(_entry_points()))


def families() -> dict[str, str]:
    """Adapter family prefixes and the one-line description of each."""
    out = {}
    for prefix, ref in sorted(_all_families().items()):
        try:
            module = importlib.import_module(ref.partition(":")[0]) if isinstance(ref, str) else None
            doc = (module.__doc__ if module else getattr(ref, "__doc__", None)) or ""
        except ImportError:
            doc = ""
        out[prefix] = doc.strip().splitlines()[0].replace("``", "`") if doc.strip() else ""
    return out


class UnknownTask(KeyError):
    """No task is registered under a name. A KeyError (what callers catch) whose str() is
    the message itself, not its repr in quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown task"


def task_problem(name: str, exc: BaseException) -> str:
    """One line for a CLI saying why task ``name`` cannot be built from ``exc`` (what
    :func:`make` raised): an unknown name lists the registered ones; a missing package or
    a bad parameter is named as such."""
    if isinstance(exc, UnknownTask):
        return str(exc)
    if isinstance(exc, ImportError):
        return f"task {name!r} needs a package that is not installed ({exc.name or exc}); see the README's extras"
    return f"task {name!r} cannot be built: {exc}"


def factory_for(name: str) -> TaskFactory:
    """The factory that builds task ``name``.

    Raises :class:`UnknownTask` (a KeyError) for an unknown name and ImportError when the task's package (or
    extra) is not installed.
    """
    if name in _REGISTERED:
        return _resolve(_REGISTERED[name])
    eps = _entry_points()
    if name in eps:
        return _resolve(eps[name])
    prefix, sep, rest = name.partition(":")
    fams = _all_families()
    if sep and prefix in fams:
        resolver = fams[prefix]
        family = _resolve(resolver) if isinstance(resolver, str) else resolver
        return family(rest)
    if sep and rest:
        try:
            return _resolve(name)
        except ModuleNotFoundError as err:
            if err.name and name.startswith(err.name):
                raise UnknownTask(f"unknown task {name!r}: no module {err.name!r}") from err
            raise
    if name in _BUILT:
        return _BUILT[name]
    raise UnknownTask(
        f"unknown task {name!r}; registered: {', '.join(registered_tasks())}; "
        f"families: {', '.join(f'{p}:<env>' for p in sorted(fams))}"
    )


def check_recorded(name: Any, where: str) -> str:
    """``name``, a task name read from a file (``where``: the file), when resolving it imports
    and calls only registered code: a task of :func:`register` or an entry point, one built in
    this process, or ``<family>:<env>`` of a registered family. ValueError (one line, naming
    the file) for anything else, a ``module:function`` above all, before anything is imported."""
    if not isinstance(name, str) or not 0 < len(name) <= 200:
        raise ValueError(f"{where}: task is not a task name: {ascii(name)[:60]}")
    if name in _REGISTERED or name in _BUILT or name in _entry_points():
        return name
    prefix, sep, env = name.partition(":")
    if sep and prefix in _all_families() and _ENV.fullmatch(env):
        return name
    raise ValueError(f"{where}: task {ascii(name)[:80]} is not a registered task nor <family>:<env> of a registered "
                     "family; a run directory names no code to import (register the task to use it)")


def make(name: str, **params: float) -> Any:
    """Build a task by name (see the module docstring for what a name may be)."""
    return factory_for(name)(**params)


def describe(name: str) -> str:
    """The one-line description of a task, without building it."""
    factory = factory_for(name)
    return str(getattr(factory, "description", "") or (factory.__doc__ or "").strip().splitlines()[0])


def task_facts(name: str) -> Any | None:
    """What carries task ``name``'s facts (``ppo_preset``, ``budget``): its class, or the
    built task when the factory is not a class; None for an unknown name."""
    try:
        factory = factory_for(name)
    except KeyError:
        return None
    return factory if isinstance(factory, type) else factory()


def _resolve(ref: Any) -> Any:
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _entry_points() -> dict[str, str]:
    """``name -> "module:attr"`` of every installed ``limen_jax.tasks`` entry point (first wins)."""
    out: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        out.setdefault(ep.name, ep.value)
    return out


def _packaged_families() -> dict[str, str]:
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=FAMILY_GROUP)}


def _all_families() -> dict[str, FamilyResolver | str]:
    return {**_packaged_families(), **_FAMILIES}
