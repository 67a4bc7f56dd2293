"""The AST policy: what an interface program may say, decided before anything runs.

Programs are untrusted LLM output. The policy is the first of three layers (then
restricted builtins and module proxies at exec time, then time and size limits while
tracing), and the one that produces precise, fixable messages:

- imports: ``jax`` and its numeric submodules (:data:`~limen_jax.program.names.ALLOWED_MODULES`) and ``math``;
- no double-underscore names, no attribute starting with ``_`` (``__class__``,
  ``__globals__``, ``_trace``...), no interpreter internals (``gi_frame``, ``f_back``,
  ``tb_frame``...), no attribute assignment;
- no escape hatches from JAX: ``jax.debug``, callbacks, ``jnp.load``/``save``, config,
  profiler, ``jax.experimental`` ... (blocked by attribute name, whatever the alias);
- no ``open``/``exec``/``eval``/``getattr``/``type``/... names, no string formatting
  (``.format``, f-strings: ``"{0.__class__}".format(x)`` reads attributes by name);
- no classes, ``try``, ``with``, ``global``, generators, ``match``, decorators;
- module-level code calls only cheap constructors (``jnp.array([...])``, ``math``,
  small literal-sized ``jnp.arange``...), so no array work runs untraced, before the
  size checks can see it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator

from limen_jax.program.errors import ProgramError
from limen_jax.program.names import JAX_ONLY_SUBMODULES, attribute_problem, module_problem, name_problem

MAX_SOURCE_CHARS = 64_000
MAX_VIOLATIONS_REPORTED = 5

# Top-level calls allowed at module level: conversions of Python data, math, reshapes.
_MODULE_LEVEL_BUILTINS = frozenset(
    {
        "tuple", "list", "dict", "set", "frozenset", "float", "int", "bool", "abs", "min",
        "max", "round", "len", "range", "sum", "zip", "enumerate", "sorted", "reversed",
        "pow", "divmod", "any", "all", "map", "filter", "print", "isinstance",
    }
)  # fmt: skip
_JNP_CONVERSIONS = frozenset(
    {
        "array", "asarray", "float32", "float16", "bfloat16", "int32", "int16", "int8",
        "uint8", "uint16", "uint32", "bool_", "dtype",
    }
)  # fmt: skip
_JNP_SIZED = frozenset({"arange", "zeros", "ones", "full", "eye", "identity", "linspace"})
# Methods that cannot grow data: list/dict bookkeeping and array reshapes.
_SAFE_METHODS = frozenset(
    {
        "append", "extend", "insert", "pop", "remove", "index", "count", "items", "keys", "values",
        "get", "copy", "update", "setdefault", "reshape", "astype", "ravel", "flatten", "transpose",
        "squeeze",
    }
)  # fmt: skip
_MODULE_LEVEL_MAX_LITERAL_ELEMENTS = 2**16

_FORBIDDEN_NODES: dict[type[ast.AST], str] = {
    ast.ClassDef: "class definitions are not allowed; use functions",
    ast.Global: "`global` is not allowed; functions must be pure",
    ast.Nonlocal: "`nonlocal` is not allowed; functions must be pure",
    ast.Try: "`try`/`except` is not allowed; errors must surface so they can be fixed",
    ast.With: "`with` blocks are not allowed",
    ast.AsyncWith: "async code is not allowed",
    ast.AsyncFunctionDef: "async code is not allowed",
    ast.AsyncFor: "async code is not allowed",
    ast.Await: "async code is not allowed",
    ast.Yield: "generators (`yield`) are not allowed; return arrays",
    ast.YieldFrom: "generators (`yield from`) are not allowed; return arrays",
    ast.JoinedStr: "f-strings are not allowed; interface programs compute arrays, not text",
    ast.Match: "`match` statements are not allowed; use jnp.where / jax.lax.select",
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _FORBIDDEN_NODES[ast.TryStar] = _FORBIDDEN_NODES[ast.Try]


def parse_program(source: str) -> ast.Module:
    """Parse ``source``; ProgramError "syntax" (with the offending line), or "policy" when too long."""
    if len(source) > MAX_SOURCE_CHARS:
        raise ProgramError("policy", f"the program is {len(source)} characters long; keep it under {MAX_SOURCE_CHARS}.")
    try:
        return ast.parse(source, filename="<interface>")
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        trace = f"{where}: {line.strip()}" if line.strip() else where
        raise ProgramError("syntax", f"the program does not parse: {exc.msg} ({where}).", trace) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ProgramError(
            "syntax", f"the program cannot be parsed ({type(exc).__name__}): expressions are nested too deeply."
        ) from None


def check_policy(source: str) -> ast.Module:
    """Parse and vet ``source``; return its AST, normalised.

    Two harmless LLM habits are removed rather than refused: an ``if __name__ ==
    "__main__":`` demo block (it would never run here) and ``@jax.jit`` / ``@jit``
    decorators (the checker jits the functions itself).
    Raises ProgramError: stage "syntax" when it does not parse, "policy" listing up to
    :data:`MAX_VIOLATIONS_REPORTED` violations (each with its line) otherwise.
    """
    tree = parse_program(source)
    tree.body = [stmt for stmt in tree.body if not _is_main_guard(stmt)]
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            node.decorator_list = [d for d in node.decorator_list if _dotted(d) not in ("jax.jit", "jit")]
    found: list[tuple[int, str]] = []
    for node, problem in _violations(tree):
        item = (getattr(node, "lineno", 0), problem)
        if item not in found:
            found.append(item)
        if len(found) >= MAX_VIOLATIONS_REPORTED:
            break
    if found:
        found.sort()
        lines = source.splitlines()
        shown = sorted({ln for ln, _ in found if 0 < ln <= len(lines)})
        trace = "\n".join(f"line {ln}: {lines[ln - 1].strip()}" for ln in shown)
        message = "; ".join(f"line {ln}: {problem}" for ln, problem in found[:3])
        raise ProgramError("policy", message, trace)
    return tree


def _is_main_guard(stmt: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` — LLMs add demo code there; it never runs here."""
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    test = stmt.test
    sides = [test.left, *test.comparators]
    return (
        len(sides) == 2
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    )


def _violations(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    yield from _module_level_violations(tree)
    bound = _bound_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in bound and not node.id.startswith("__"):
            continue  # the program's own variable (`type = grid[..., 0]`), not the builtin
        problem = _node_problem(node)
        if problem:
            yield node, problem


def _bound_names(tree: ast.Module) -> set[str]:
    """Names the program binds itself (assignments, arguments, defs, imports)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return bound


def _node_problem(node: ast.AST) -> str | None:
    for kind, why in _FORBIDDEN_NODES.items():
        if isinstance(node, kind):
            return why
    if isinstance(node, ast.Import):
        for alias in node.names:
            problem = module_problem(alias.name) or (alias.asname and name_problem(alias.asname))
            if problem:
                return problem
    elif isinstance(node, ast.ImportFrom):
        return _import_from_problem(node)
    elif isinstance(node, ast.Name):
        return name_problem(node.id)
    elif isinstance(node, ast.Attribute):
        if not isinstance(node.ctx, ast.Load):
            return f"assigning or deleting attributes ('.{node.attr} = ...') is not allowed; functions must be pure"
        owner = _dotted(node.value)
        if node.attr in JAX_ONLY_SUBMODULES and owner.split(".")[0] == "jax":
            return module_problem(f"{owner}.{node.attr}")
        return attribute_problem(node.attr)
    elif isinstance(node, ast.arg | ast.keyword):
        return name_problem(node.arg) if node.arg is not None else None
    elif isinstance(node, ast.FunctionDef):
        if node.decorator_list:
            return "decorators are not allowed (the checker applies jit and vmap itself)"
        return name_problem(node.name)
    elif _is_string_formatting(node):
        return "string formatting ('%') is not allowed; interface programs compute arrays, not text"
    elif (
        isinstance(node, ast.Subscript)
        and not isinstance(node.ctx, ast.Load)
        and not isinstance(node.value, ast.Name | ast.Subscript)
    ):
        # `x[i] = v` on a local list is fine; `state.grid[i] = v` mutates shared objects.
        return "item assignment is only allowed on local variables (use x.at[i].set(v) for arrays)"
    return None


def _is_string_formatting(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str | bytes)
    )


def _import_from_problem(node: ast.ImportFrom) -> str | None:
    if node.level:
        return "relative imports are not allowed"
    module = node.module or ""
    if module == "__future__":
        bad = [a.name for a in node.names if a.name != "annotations"]
        return f"only `from __future__ import annotations` is allowed, not {bad}" if bad else None
    problem = module_problem(module)
    if problem:
        return problem
    for alias in node.names:
        if alias.name == "*":
            return f"`from {module} import *` is not allowed; import the names you use"
        problem = attribute_problem(alias.name) or (alias.asname and name_problem(alias.asname))
        if not problem and alias.name in JAX_ONLY_SUBMODULES:
            problem = module_problem(f"{module}.{alias.name}")
        if problem:
            return problem
    return None


def _module_level_violations(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """Calls that run at import time must be cheap: array work belongs in the functions.

    Module-level code runs eagerly, outside any trace, so a ``jnp.zeros((10**5, 10**5))``
    there would allocate before a single check could look at it. Function bodies and
    lambda bodies are skipped (they run traced and checked); defaults are not (they run
    when the ``def`` does).
    """
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.Lambda):
            args = node.args
            stack.extend([*args.defaults, *(d for d in args.kw_defaults if d is not None)])
            continue
        if isinstance(node, ast.Call):
            problem = _module_level_call_problem(node)
            if problem:
                yield node, problem
        stack.extend(ast.iter_child_nodes(node))


def _module_level_call_problem(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in _MODULE_LEVEL_BUILTINS:
        return None
    if isinstance(func, ast.Attribute):
        base = _dotted(func.value)
        if base == "math" or (func.attr in _JNP_CONVERSIONS and base in ("jnp", "jax.numpy")):
            return None
        if func.attr in _SAFE_METHODS:
            return None
        if func.attr in _JNP_SIZED and base in ("jnp", "jax.numpy"):
            size = _literal_size(call)
            if size is not None and size <= _MODULE_LEVEL_MAX_LITERAL_ELEMENTS:
                return None
    shown = ast.unparse(func) if len(ast.unparse(func)) < 60 else "this call"
    return (
        f"module-level code may only build small constants (literals, jnp.array([...]), math, "
        f"jnp.arange/zeros with literal sizes); call `{shown}(...)` inside your functions instead"
    )


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _literal_size(call: ast.Call) -> int | None:
    """Product of the integer literals in ``call``'s arguments (an upper bound on the
    array size); None when an argument is anything but literals, tuples and dtypes."""
    sizes: list[int] = []
    stack: list[ast.expr] = [*call.args, *(k.value for k in call.keywords)]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Constant):
            if isinstance(node.value, int) and not isinstance(node.value, bool):
                sizes.append(max(1, abs(node.value)))
        elif isinstance(node, ast.Tuple | ast.List):
            stack.extend(node.elts)
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
        elif not (isinstance(node, ast.Attribute) and _dotted(node).startswith(("jnp.", "jax.numpy."))):
            return None  # a name or expression: its size is unknown here
    return math.prod(sizes)
