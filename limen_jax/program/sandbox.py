"""Restricted execution of a vetted program: builtins whitelist, module proxies, guards, deadlines.

Runs only inside a sandboxed checker worker (worker.py, isolation.py), which is the real
boundary; these in-process rules give the LLM clear messages and stop the common cases
early. The AST policy (policy.py) has already refused forbidden names and attributes;
this layer makes the same rules hold at run time whatever the policy missed:

- ``__builtins__`` is a whitelist (no ``open``, ``__import__``, ``getattr``...), with
  ``print`` a no-op, ``range`` capped, and an import hook that hands out only
  :data:`~limen_jax.program.policy.ALLOWED_MODULES`, as read-only proxies that refuse
  blocked attributes and non-allowed submodules;
- operators go through guards (guards.py, an AST rewrite) that refuse objects too large
  to build: ``[0] * 10**10`` and ``10 ** 10 ** 10`` run in C, where no time limit can
  interrupt them, and module-level array arithmetic runs eagerly, before any check;
- module globals are frozen after the body runs (lists to tuples, dicts to read-only
  mappings), so a function cannot keep state between calls and behave differently in
  training than it did when checked;
- the module body runs under a deadline and a memory allowance (deadline.py).
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from limen_jax.program.deadline import Deadline, MemoryLimit, deadline
from limen_jax.program.errors import PROGRAM_FILENAME, ProgramError, program_trace
from limen_jax.program.guards import GUARD, binop, rewrite, safe_pow, safe_prod, safe_range, safe_sum, sized
from limen_jax.program.names import ALLOWED_MODULES, attribute_problem, module_problem
from limen_jax.program.policy import check_policy

# --- the restricted namespace ---------------------------------------------------------


class ModuleProxy:
    """Read-only view of an allowed module: blocked names and other submodules are refused.

    Every attribute read goes through ``__getattribute__`` (so not even ``__dict__`` or
    the wrapped module leak), and there is no ``__name__`` (the import machinery falls
    back to ``sys.modules[f"{__name__}.{attr}"]`` when an attribute is refused).
    """

    __slots__ = ("_module", "_name")

    def __init__(self, module: types.ModuleType, name: str) -> None:
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_name", name)

    def __getattribute__(self, attr: str) -> Any:
        name = object.__getattribute__(self, "_name")
        problem = attribute_problem(attr)
        if problem:
            raise AttributeError(f"{name}.{attr}: {problem}")
        override = _OVERRIDES.get((name, attr))
        if override is not None:
            return override
        value = getattr(object.__getattribute__(self, "_module"), attr)
        if isinstance(value, types.ModuleType):
            full = f"{name}.{attr}"
            if full not in ALLOWED_MODULES:
                raise AttributeError(module_problem(full))
            return proxy(full)
        return value

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError("modules are read-only in interface programs")

    def __delattr__(self, attr: str) -> None:
        raise AttributeError("modules are read-only in interface programs")

    def __repr__(self) -> str:
        return f"<module {object.__getattribute__(self, '_name')!r}>"


_PROXIES: dict[str, ModuleProxy] = {}
# Functions replaced by guarded versions (guards.py says why).
_CONVERSIONS = ("array", "asarray", "stack", "concatenate", "hstack", "vstack", "dstack", "column_stack", "block")
_OVERRIDES: dict[tuple[str, str], Any] = {
    **{("jax.numpy", fn): sized(getattr(jnp, fn), fn) for fn in _CONVERSIONS},
    ("math", "prod"): safe_prod,
}


def proxy(name: str) -> ModuleProxy:
    """The proxy of allowed module ``name`` (imported on first use)."""
    if name not in _PROXIES:
        _PROXIES[name] = ModuleProxy(importlib.import_module(name), name)
    return _PROXIES[name]


def _safe_import(
    name: str,
    globals: Any = None,
    locals: Any = None,
    fromlist: tuple[str, ...] | None = (),
    level: int = 0,
) -> Any:
    """``__import__`` for programs: allowed modules only, returned as proxies."""
    if name == "__future__" and tuple(fromlist or ()) == ("annotations",):
        return importlib.import_module("__future__")
    problem = "relative imports are not allowed" if level else module_problem(name)
    if problem:
        raise ImportError(problem)
    for item in fromlist or ():
        problem = attribute_problem(item)
        if problem:
            raise ImportError(problem)
    # `import jax.numpy` binds `jax`; `from jax import numpy` wants `jax` too.
    return proxy(name if fromlist else name.split(".")[0])


def _print(*args: Any, **kwargs: Any) -> None:
    """print() is a no-op: programs have no output channel."""


_SAFE_BUILTINS: dict[str, Any] = {
    name: getattr(builtins, name)
    for name in (
        "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float",
        "frozenset", "int", "isinstance", "len", "list", "map", "max", "min", "reversed",
        "round", "set", "slice", "sorted", "sum", "tuple", "zip", "chr", "ord", "complex",
        "ArithmeticError", "AssertionError", "Exception", "IndexError", "KeyError",
        "NotImplementedError", "RuntimeError", "TypeError", "ValueError", "ZeroDivisionError",
    )
}  # fmt: skip
_SAFE_BUILTINS.update(
    {
        "True": True,
        "False": False,
        "None": None,
        "print": _print,
        "range": safe_range,
        "sum": safe_sum,
        "pow": safe_pow,
        "__import__": _safe_import,
    }
)


# --- running a program ----------------------------------------------------------------


def _freeze(value: Any, memo: dict[int, Any]) -> Any:
    """Immutable copy of module-level Python containers (arrays are immutable already).

    Shared sub-lists are frozen once (memo by id), so ``[row] * 1000`` costs one row.
    """
    if not isinstance(value, list | tuple | dict | set):
        return value
    key = id(value)
    if key in memo:
        if memo[key] is _IN_PROGRESS:
            raise ProgramError("exec", "module-level data refers to itself; use plain nested lists or arrays.")
        return memo[key]
    memo[key] = _IN_PROGRESS
    if isinstance(value, dict):
        frozen: Any = types.MappingProxyType({k: _freeze(v, memo) for k, v in value.items()})
    elif isinstance(value, set):
        frozen = frozenset(value)
    else:
        frozen = tuple(_freeze(v, memo) for v in value)
    memo[key] = frozen
    return frozen


_IN_PROGRESS = object()


def exec_program(source: str, seconds: float = 5.0, max_growth_bytes: int | None = 2 << 30) -> dict[str, Any]:
    """Vet ``source`` (policy), run its module body (time-limited), return its globals.

    Raises ProgramError with stage "syntax" / "policy" (from the AST), "exec" (the body
    raised), "timeout" (the body ran longer than ``seconds``), or "allocation" (it grew the
    process by more than ``max_growth_bytes``, or built an oversized object).
    """
    tree = check_policy(source)
    try:
        tree = rewrite(tree)
        code = compile(tree, PROGRAM_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        why = "expressions are nested too deeply" if isinstance(exc, RecursionError | MemoryError) else str(exc)
        raise ProgramError("syntax", f"the program cannot be compiled: {why}.") from None
    namespace: dict[str, Any] = {
        "__builtins__": dict(_SAFE_BUILTINS),
        "__name__": "interface",
        GUARD: binop,
        "jax": proxy("jax"),
        "jnp": proxy("jax.numpy"),
        "math": proxy("math"),
    }
    try:
        with deadline(seconds, max_growth_bytes):
            exec(code, namespace)
    except Deadline as exc:
        raise ProgramError(
            "timeout",
            f"running the module body took longer than {seconds:g} s (an endless loop?).",
            program_trace(exc, source, summary=f"(stopped here after {seconds:g} s)"),
        ) from None
    except MemoryLimit:
        raise ProgramError("allocation", "running the module body used too much memory.") from None
    except ProgramError as exc:  # a guard refused an oversized object
        raise ProgramError(exc.stage, exc.message, program_trace(exc, source, summary="")) from None
    except (Exception, RecursionError) as exc:  # the program's own error, reported back to it
        raise ProgramError(
            "exec", f"running the module body raised {type(exc).__name__}.", program_trace(exc, source)
        ) from None
    try:
        memo: dict[int, Any] = {}
        for key, value in list(namespace.items()):
            if key != "__builtins__":
                namespace[key] = _freeze(value, memo)
        for fn in namespace.values():
            if isinstance(fn, types.FunctionType) and fn.__defaults__:
                fn.__defaults__ = tuple(_freeze(d, memo) for d in fn.__defaults__)
    except RecursionError:
        raise ProgramError("exec", "module-level data is nested too deeply.") from None
    return namespace


def program_function(namespace: dict[str, Any], name: str, nargs: int, arg_names: str) -> Callable[..., Any]:
    """The program's function ``name``, callable with ``nargs`` positional arguments.

    Raises ProgramError(stage="signature") when it is missing, not a ``def``/``lambda``
    of the program, or cannot take ``nargs`` positional arguments.
    """
    fn = namespace.get(name)
    if fn is None:
        raise ProgramError("signature", f"the program does not define `{name}`; add `def {name}({arg_names}):`.")
    if not isinstance(fn, types.FunctionType) or fn.__code__.co_filename != PROGRAM_FILENAME:
        raise ProgramError(
            "signature", f"`{name}` must be a function defined with `def {name}({arg_names}):` in the program."
        )
    try:
        inspect.signature(fn).bind(*range(nargs))
    except TypeError:
        raise ProgramError(
            "signature",
            f"`{name}` must take exactly {nargs} positional argument{'s' * (nargs > 1)} "
            f"({arg_names}); it is defined as `{name}{inspect.signature(fn)}`.",
        ) from None
    return fn
