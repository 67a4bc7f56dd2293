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

Nothing is imported until a name is resolved: :func:`listing` reads each task's
description from its module's source, so listing tasks stays cheap (no MuJoCo or Brax
import) and a task whose extra is not installed is marked, failing only when it is used.
An entry point names the extra its task needs as ``"module:Class [mujoco]"``. This
module knows no task.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.metadata
import importlib.util
import re
from collections.abc import Callable, Sequence
from typing import Any

from limen_jax.extras import extra_for, installed, missing_extra_line

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
    """Adapter family prefixes and the one-line description of each (read from the
    family module's source: nothing is imported)."""
    out = {}
    for prefix, ref in sorted(_all_families().items()):
        doc = _module_doc(ref.partition(":")[0]) if isinstance(ref, str) else (getattr(ref, "__doc__", None) or "")
        out[prefix] = doc.strip().splitlines()[0].replace("``", "`") if doc.strip() else ""
    return out


def family_missing_extra(prefix: str) -> str | None:
    """The extra (named by the family's entry point) that family ``prefix`` needs and that
    is not installed; None when it is installed or names none."""
    eps = [ep for ep in importlib.metadata.entry_points(group=FAMILY_GROUP) if ep.name == prefix]
    return next((extra for ep in eps[:1] for extra in ep.extras if not installed(extra)), None)


def listing() -> list[tuple[str, str, str | None]]:
    """``(name, description, missing extra or None)`` of each registered task, sorted
    (the missing extra is a module name when no extra provides it),
    without importing any task module (a description the source does not hold as a
    literal is read by importing, as :func:`describe` does)."""
    eps = {ep.name: ep for ep in reversed(list(importlib.metadata.entry_points(group=GROUP)))}
    out = []
    for name in registered_tasks():
        ep = eps.get(name) if name not in _REGISTERED else None
        missing = next((extra for extra in (ep.extras if ep else ()) if not installed(extra)), None)
        line = _static_description(ep.module, ep.attr) if ep else None
        if line is None and missing is None:
            try:
                line = describe(name)
            except ImportError as exc:
                line, missing = "", extra_for(exc) or exc.name or str(exc)
        out.append((name, line or "", missing))
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
        return missing_extra_line(f"task {name!r}", exc)
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
    except (KeyError, ImportError):  # the task is refused in one line where it is built
        return None
    return factory if isinstance(factory, type) else factory()


def unknown_env(family: str, env_name: str, known: Sequence[str]) -> UnknownTask:
    """The error for ``<family>:<env_name>`` naming no environment of the family: the
    closest names of ``known`` (difflib), or all of them when none is close."""
    close = difflib.get_close_matches(env_name, known, n=3, cutoff=0.7)
    close += [k for k in known if k.lower() == env_name.lower() and k not in close]
    if close:
        return UnknownTask(f"unknown task '{family}:{env_name}'; did you mean "
                           f"{' or '.join(f'{family}:{c}' for c in close)}?")
    return UnknownTask(f"unknown task '{family}:{env_name}'; {family} environments: {', '.join(known)}")


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
        out.setdefault(ep.name, f"{ep.module}:{ep.attr}")
    return out


def _packaged_families() -> dict[str, str]:
    return {ep.name: f"{ep.module}:{ep.attr}" for ep in importlib.metadata.entry_points(group=FAMILY_GROUP)}


def _module_ast(module: str) -> ast.Module | None:
    """The parsed source of ``module`` (its parent packages are imported, it is not); None
    when it has no readable source."""
    try:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        with open(spec.origin, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (ImportError, ValueError, OSError, SyntaxError):
        return None


def _module_doc(module: str) -> str:
    tree = _module_ast(module)
    return (ast.get_docstring(tree) if tree else None) or ""


def _static_description(module: str, attr: str) -> str | None:
    """A task class's ``description`` string literal, else its docstring's first line,
    read from source; None when the source does not hold it as a literal."""
    tree = _module_ast(module)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == attr), None) if tree else None
    if cls is None:
        return None
    for node in cls.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        value = getattr(node, "value", None)
        if (isinstance(target, ast.Name) and target.id == "description" and isinstance(value, ast.Constant)
                and isinstance(value.value, str) and value.value):
            return value.value
    doc = ast.get_docstring(cls)
    return doc.strip().splitlines()[0] if doc else None


def _all_families() -> dict[str, FamilyResolver | str]:
    return {**_packaged_families(), **_FAMILIES}
