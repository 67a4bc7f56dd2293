"""Restricted execution of a vetted program: builtins whitelist, module proxies, guards, deadlines.

The AST policy (policy.py) has already refused forbidden names and attributes; this
layer makes the same rules hold at run time whatever the policy missed:

- ``__builtins__`` is a whitelist (no ``open``, ``__import__``, ``getattr``...), with
  ``print`` a no-op, ``range`` capped, and an import hook that hands out only
  :data:`~limen_jax.program.policy.ALLOWED_MODULES`, as read-only proxies that refuse
  blocked attributes and non-allowed submodules;
- ``*``, ``**``, ``<<`` and ``%`` go through guards (an AST rewrite) that refuse Python
  objects too large to build (``[0] * 10**10``, ``10 ** 10 ** 10``) — those run in C,
  where no time limit can interrupt them;
- module globals are frozen after the body runs (lists to tuples, dicts to read-only
  mappings), so a function cannot keep state between calls and behave differently in
  training than it did when checked;
- :func:`deadline` bounds the wall-clock time of Python code: SIGALRM on the main
  thread, a ``sys.settrace`` checker elsewhere.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import inspect
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import jax

from limen_jax.program.errors import PROGRAM_FILENAME, ProgramError, program_trace
from limen_jax.program.policy import ALLOWED_MODULES, attribute_problem, check_policy, module_problem

MAX_RANGE = 1_000_000  # longest range(); programs loop over grid cells, not millions
MAX_SEQUENCE_ITEMS = 10_000_000  # longest list / tuple / str built by `*`
MAX_INT_BITS = 1 << 16  # largest Python int built by `*`, `**`, `<<`
MAX_EAGER_ELEMENTS = 1 << 24  # largest concrete array built by arithmetic at module level

_GUARD = "__limen_binop__"  # injected name; programs cannot spell it (no dunders)


class Deadline(BaseException):
    """Raised into the program when its time is up.

    A BaseException so that ``except Exception`` handlers inside JAX do not swallow it.
    """


class MemoryLimit(BaseException):
    """Raised into the program when the process grew by more than its memory allowance."""


# --- deadlines ------------------------------------------------------------------------

_TICK = 0.1  # seconds between clock and memory checks


@contextlib.contextmanager
def deadline(seconds: float, max_growth_bytes: int | None = None) -> Iterator[None]:
    """Raise :class:`Deadline` inside the block once ``seconds`` of wall-clock time pass,
    and :class:`MemoryLimit` once the process's resident memory grows by more than
    ``max_growth_bytes`` (checked every 0.1 s; Linux only).

    Interrupts Python code only: a single long C call (an XLA compile) finishes first,
    which is why compiling and running happen in worker threads (see checks.py).
    Nested use is allowed; an outer timer (e.g. pytest-timeout's) is restored after.
    """
    end = time.monotonic() + seconds
    baseline = _rss_bytes() if max_growth_bytes is not None else None
    limit = None if baseline is None or max_growth_bytes is None else baseline + max_growth_bytes
    # The first limit hit is sticky: if its exception lands in a finaliser or a gc callback
    # (which swallow it), the next check raises the same one rather than another kind.
    tripped: list[type[BaseException]] = []

    def check() -> None:
        if not tripped:
            if time.monotonic() >= end:
                tripped.append(Deadline)
            elif limit is not None and (_rss_bytes() or 0) > limit:
                tripped.append(MemoryLimit)
        if tripped:
            raise tripped[0]()

    on_main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    with _quiet_unraisable(), _alarm(check) if on_main else _settrace(check):
        yield


@contextlib.contextmanager
def _quiet_unraisable() -> Iterator[None]:
    """Do not print our own exceptions when a finaliser swallows them (they are raised again)."""
    previous = sys.unraisablehook

    def hook(info: Any) -> None:
        if not isinstance(info.exc_value, Deadline | MemoryLimit):
            previous(info)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _rss_bytes() -> int | None:
    """Resident set size of this process (Linux /proc), or None where unavailable."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


try:
    _PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    _PAGE_SIZE = 4096


@contextlib.contextmanager
def _alarm(check: Callable[[], None]) -> Iterator[None]:
    armed = [True]

    def on_alarm(signum: int, frame: types.FrameType | None) -> None:
        if armed[0]:
            check()

    start = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, old_interval = signal.getitimer(signal.ITIMER_REAL)
    # Ticks keep coming: a Deadline swallowed somewhere is raised again at the next one.
    signal.setitimer(signal.ITIMER_REAL, _TICK, _TICK)
    try:
        try:
            yield
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        # Twice, in case a tick landed at the start of the inner finally.
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            remaining = old_delay - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-3), old_interval)


@contextlib.contextmanager
def _settrace(check: Callable[[], None]) -> Iterator[None]:
    """Off the main thread: check on function calls, and on lines of the program's own code."""
    next_check = [0.0]
    failure: list[BaseException] = []

    def maybe_check() -> None:
        now = time.monotonic()
        if now >= next_check[0]:
            next_check[0] = now + _TICK / 10
            try:
                check()
            except BaseException as exc:
                failure.append(exc)
                raise

    def local(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            maybe_check()
        return local

    def on_call(frame: types.FrameType, event: str, arg: Any) -> Any:
        maybe_check()
        # Line events only in the program's frames: JAX's own code is not slowed down.
        return local if frame.f_code.co_filename == PROGRAM_FILENAME else None

    old = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(old)
    # Raising from a trace function uninstalls it; if something swallowed the exception,
    # raise it now.
    if failure:
        raise failure[0]


# --- the restricted namespace ---------------------------------------------------------


class ModuleProxy:
    """Read-only view of an allowed module: blocked names and other submodules are refused."""

    def __init__(self, module: types.ModuleType, name: str) -> None:
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> Any:
        name = object.__getattribute__(self, "_name")
        # No __name__ either: the import machinery's fallback to sys.modules needs it.
        problem = attribute_problem(attr)
        if problem:
            raise AttributeError(f"{name}.{attr}: {problem}")
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


def _range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise ProgramError("allocation", f"range of {len(r)} items is too long (at most {MAX_RANGE}).")
    return r


def _pow(base: Any, exp: Any, mod: Any = None) -> Any:
    if mod is not None:
        return builtins.pow(base, exp, mod)  # modular: fast whatever the size
    return _binop(ast.Pow(), base, exp)


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
        "range": _range,
        "pow": _pow,
        "__import__": _safe_import,
    }
)


def _seq_len(x: Any) -> int | None:
    return len(x) if isinstance(x, str | bytes | list | tuple) else None


def _as_int(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    return None


def _binop(op: ast.operator, a: Any, b: Any) -> Any:
    """``a <op> b`` after refusing results too large to build in C (no deadline can stop those)."""
    if isinstance(op, ast.Mult):
        for seq, n in ((a, b), (b, a)):
            length, count = _seq_len(seq), _as_int(n)
            if length is not None and count is not None and length * count > MAX_SEQUENCE_ITEMS:
                raise ProgramError("allocation", f"a sequence of {length * count} items is too large to build.")
        ia, ib = _as_int(a), _as_int(b)
        if ia is not None and ib is not None and ia.bit_length() + ib.bit_length() > MAX_INT_BITS:
            raise ProgramError("allocation", "integer product too large; use floats or jnp arrays.")
        return _eager_check(a, b, a * b)
    if isinstance(op, ast.Pow):
        ia, ib = _as_int(a), _as_int(b)
        if ia is not None and ib is not None and ib > 0 and max(ia.bit_length(), 1) * ib > MAX_INT_BITS:
            raise ProgramError("allocation", f"integer power with exponent {ib} is too large; use floats.")
        return _eager_check(a, b, a**b)
    if isinstance(op, ast.LShift):
        ia, ib = _as_int(a), _as_int(b)
        if ia is not None and ib is not None and ib > MAX_INT_BITS:
            raise ProgramError("allocation", f"left shift by {ib} bits is too large.")
        return a << b
    if isinstance(op, ast.Mod):
        if isinstance(a, str | bytes):
            raise ProgramError("policy", "string formatting ('%') is not allowed; compute arrays, not text.")
        return a % b
    raise AssertionError(f"unguarded operator {op}")


def _eager_check(a: Any, b: Any, result: Any) -> Any:
    # Module-level arithmetic on concrete arrays runs eagerly; traced arithmetic is
    # checked on the jaxpr instead. The result exists already, but eager work at
    # module level is bounded by the policy's literal-size rule, so this only catches
    # broadcasting blow-ups of small constants (an outer product of aranges).
    size = getattr(result, "size", 0)
    if isinstance(result, jax.Array) and not isinstance(result, jax.core.Tracer) and size > MAX_EAGER_ELEMENTS:
        raise ProgramError("allocation", f"a module-level array of {size} elements is too large.")
    return result


_GUARDED_OPS = (ast.Mult, ast.Pow, ast.LShift, ast.Mod)


class _Rewrite(ast.NodeTransformer):
    """Route guarded operators through ``__limen_binop__``; drop annotations (never needed)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, _GUARDED_OPS):
            return node
        return ast.copy_location(self._guard_call(node.op, node.left, node.right), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, _GUARDED_OPS):
            return node
        load = _as_load(node.target)
        call = self._guard_call(node.op, load, node.value)
        return ast.copy_location(ast.Assign(targets=[node.target], value=call), node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        self.generic_visit(node)
        if node.value is None:
            return ast.copy_location(ast.Pass(), node)
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.returns = None
        self.generic_visit(node)
        return node

    @staticmethod
    def _guard_call(op: ast.operator, left: ast.expr, right: ast.expr) -> ast.Call:
        return ast.Call(
            func=ast.Name(id=_GUARD, ctx=ast.Load()),
            args=[ast.Constant(type(op).__name__), left, right],
            keywords=[],
        )


_OP_BY_NAME: dict[str, ast.operator] = {cls.__name__: cls() for cls in _GUARDED_OPS}


def _guard(op_name: str, a: Any, b: Any) -> Any:
    return _binop(_OP_BY_NAME[op_name], a, b)


def _as_load(target: ast.expr) -> ast.expr:
    """A Load-context copy of an assignment target (``x``, ``x[i]``)."""
    copy = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(copy, target)


# --- running a program ----------------------------------------------------------------


def _freeze(value: Any) -> Any:
    """Immutable copy of module-level Python containers (arrays are immutable already)."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return types.MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, set):
        return frozenset(value)
    return value


def exec_program(source: str, seconds: float = 5.0, max_growth_bytes: int | None = 2 << 30) -> dict[str, Any]:
    """Vet ``source`` (policy), run its module body (time-limited), return its globals.

    Raises ProgramError with stage "syntax" / "policy" (from the AST), "exec" (the body
    raised), "timeout" (the body ran longer than ``seconds``), or "allocation" (it grew the
    process by more than ``max_growth_bytes``, or built an oversized object).
    """
    tree = check_policy(source)
    try:
        tree = ast.fix_missing_locations(_Rewrite().visit(tree))
        code = compile(tree, PROGRAM_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        why = "expressions are nested too deeply" if isinstance(exc, RecursionError | MemoryError) else str(exc)
        raise ProgramError("syntax", f"the program cannot be compiled: {why}.") from None
    namespace: dict[str, Any] = {
        "__builtins__": dict(_SAFE_BUILTINS),
        "__name__": "interface",
        _GUARD: _guard,
        "jax": proxy("jax"),
        "jnp": proxy("jax.numpy"),
        "math": proxy("math"),
    }
    try:
        with deadline(seconds, max_growth_bytes):
            exec(code, namespace)
    except Deadline:
        raise ProgramError(
            "timeout", f"running the module body took longer than {seconds:g} s (an endless loop?)."
        ) from None
    except MemoryLimit:
        raise ProgramError("allocation", "running the module body used too much memory.") from None
    except ProgramError as exc:
        raise ProgramError(exc.stage, exc.message, program_trace(exc, source)) from None
    except (Exception, RecursionError) as exc:  # the program's own error, reported back to it
        raise ProgramError(
            "exec", f"running the module body raised {type(exc).__name__}.", program_trace(exc, source)
        ) from None
    for key, value in list(namespace.items()):
        if key != "__builtins__":
            namespace[key] = _freeze(value)
    for fn in namespace.values():
        if isinstance(fn, types.FunctionType) and fn.__defaults__:
            fn.__defaults__ = tuple(_freeze(d) for d in fn.__defaults__)
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
    code = fn.__code__
    n_defaults = len(fn.__defaults__ or ())
    required = code.co_argcount - n_defaults
    accepts_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    required_kwonly = [k for k in code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
                       if k not in (fn.__kwdefaults__ or {})]  # fmt: skip
    if required > nargs or (code.co_argcount < nargs and not accepts_varargs) or required_kwonly:
        got = ", ".join(code.co_varnames[: code.co_argcount]) or "no arguments"
        raise ProgramError(
            "signature",
            f"`{name}` must take exactly {nargs} positional argument{'s' * (nargs > 1)} "
            f"({arg_names}); it takes ({got}).",
        )
    return fn
