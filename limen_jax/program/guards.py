"""Operator guards: refuse objects too large to build before Python or JAX builds them.

Some operations run entirely in C, where no deadline can interrupt them:
``[0] * 10**10``, ``'x' * 10**11``, ``10 ** 10 ** 10``, ``1 << 10**10``; and array
arithmetic at module level runs eagerly (outside any trace, so the jaxpr size checks
never see it): ``jnp.arange(60000)[:, None] + jnp.arange(60000)`` allocates 14 GB.

:func:`rewrite` turns such operators into calls of :func:`binop` (under the injected
name :data:`GUARD`, which programs cannot spell: dunder names are refused by the
policy). Inside function bodies only ``*``, ``**``, ``<<`` and ``%`` are routed (array
code there is traced, and checked on its jaxpr); at module level every binary operator
and comparison is, so eager array results are sized with ``jax.eval_shape`` first.
The rewrite also drops annotations, which would otherwise be evaluated.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import jax

from limen_jax.program.errors import ProgramError

GUARD = "__limen_binop__"
MAX_RANGE = 1_000_000  # longest range(); programs loop over grid cells, not millions
MAX_SEQUENCE_ITEMS = 10_000_000  # longest list / tuple / str built by `*`
MAX_INT_BITS = 1 << 16  # largest Python int built by `*`, `**`, `<<`
MAX_EAGER_ELEMENTS = 1 << 24  # largest array built eagerly by module-level arithmetic

_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mult": operator.mul,
    "MatMult": operator.matmul,
    "Div": operator.truediv,
    "FloorDiv": operator.floordiv,
    "Mod": operator.mod,
    "Pow": operator.pow,
    "LShift": operator.lshift,
    "RShift": operator.rshift,
    "BitOr": operator.or_,
    "BitXor": operator.xor,
    "BitAnd": operator.and_,
    "Eq": operator.eq,
    "NotEq": operator.ne,
    "Lt": operator.lt,
    "LtE": operator.le,
    "Gt": operator.gt,
    "GtE": operator.ge,
}
_ALWAYS_GUARDED = (ast.Mult, ast.Pow, ast.LShift, ast.Mod)


def binop(op_name: str, a: Any, b: Any) -> Any:
    """``a <op> b``, or ProgramError("allocation") when the result would be too large."""
    ia, ib = _as_int(a), _as_int(b)
    if op_name == "Mult":
        for seq, n in ((a, b), (b, a)):
            count = _as_int(n)
            if count is not None and isinstance(seq, str | bytes | list | tuple):
                items = deep_size(seq) * count
                if items > MAX_SEQUENCE_ITEMS:
                    raise ProgramError("allocation", f"a sequence of {items} items is too large to build.")
        if ia is not None and ib is not None and ia.bit_length() + ib.bit_length() > MAX_INT_BITS:
            raise ProgramError("allocation", "integer product too large; use floats or jnp arrays.")
    elif op_name == "Pow":
        if ia is not None and ib is not None and ib > 0 and max(ia.bit_length(), 1) * ib > MAX_INT_BITS:
            raise ProgramError("allocation", f"integer power with exponent {ib} is too large; use floats.")
    elif op_name == "LShift":
        if ia is not None and ib is not None and ib > MAX_INT_BITS:
            raise ProgramError("allocation", f"left shift by {ib} bits is too large.")
    elif op_name == "Mod" and isinstance(a, str | bytes):
        raise ProgramError("policy", "string formatting ('%') is not allowed; compute arrays, not text.")
    fn = _OPERATORS[op_name]
    if _is_concrete_array(a) or _is_concrete_array(b):
        _check_eager_size(fn, a, b)
    return fn(a, b)


def safe_range(*args: int) -> range:
    """``range`` with at most :data:`MAX_RANGE` items."""
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise ProgramError("allocation", f"range of {len(r)} items is too long (at most {MAX_RANGE}).")
    return r


def safe_pow(base: Any, exp: Any, mod: Any = None) -> Any:
    """``pow`` with the ``**`` guard (modular exponentiation is fast whatever the size)."""
    if mod is not None:
        return builtins.pow(base, exp, mod)
    return binop("Pow", base, exp)


def rewrite(tree: ast.Module) -> ast.Module:
    """Route operators through :data:`GUARD` and drop annotations (see the module docstring)."""
    return ast.fix_missing_locations(_Rewrite().visit(tree))


def _as_int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def deep_size(x: Any, memo: dict[int, int] | None = None) -> int:
    """Items in ``x`` counting nested lists and tuples in full: ``[[0] * 1000] * 1000`` is
    10**6 although it holds two lists. Shared sub-lists are measured once (memo by id)."""
    if isinstance(x, str | bytes):
        return len(x)
    if not isinstance(x, list | tuple):
        return int(getattr(x, "size", 1)) if isinstance(x, jax.Array) else 1
    memo = {} if memo is None else memo
    if id(x) not in memo:
        memo[id(x)] = 0  # a self-referencing list counts its own reference as empty
        memo[id(x)] = sum(deep_size(item, memo) for item in x) if x else 0
    return memo[id(x)]


def sized(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` (a jnp constructor such as ``jnp.array``) refusing Python data too large to convert.

    Converting nested lists runs in C (uninterruptible) and happens eagerly even while
    tracing, so ``jnp.array([[[0] * 1000] * 1000] * 1000])`` must be refused up front.
    """

    def guarded(*args: Any, **kwargs: Any) -> Any:
        for arg in args:
            if isinstance(arg, list | tuple) and deep_size(arg) > MAX_SEQUENCE_ITEMS:
                raise ProgramError(
                    "allocation",
                    f"jnp.{name} of a Python sequence with more than {MAX_SEQUENCE_ITEMS:,} items.",
                )
        return fn(*args, **kwargs)

    return guarded


def safe_sum(iterable: Any, start: Any = 0) -> Any:
    """``sum`` of numbers (summing lists concatenates them quadratically, in C)."""
    if isinstance(start, list | tuple | str | bytes):
        raise ProgramError("policy", "sum() of lists or strings is not allowed; use jnp.concatenate or jnp.sum.")
    return builtins.sum(iterable, start)


def safe_prod(iterable: Any, *, start: Any = 1) -> Any:
    """``math.prod`` one guarded multiplication at a time (a big-integer product runs in C)."""
    result = start
    for item in iterable:
        result = binop("Mult", result, item)
    return result


def _is_concrete_array(x: Any) -> bool:
    return isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)


def _check_eager_size(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> None:
    try:
        out = jax.eval_shape(fn, a, b)
    except Exception:  # the operation itself will raise the informative error
        return
    size = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(out))
    if size > MAX_EAGER_ELEMENTS:
        raise ProgramError(
            "allocation",
            f"module-level arithmetic would build an array of {size:,} elements (limit "
            f"{MAX_EAGER_ELEMENTS:,}); compute large arrays inside your functions.",
        )


class _Rewrite(ast.NodeTransformer):
    def __init__(self) -> None:
        self.module_level = True

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if not (self.module_level or isinstance(node.op, _ALWAYS_GUARDED)):
            return node
        return ast.copy_location(_guard_call(type(node.op).__name__, node.left, node.right), node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        name = type(node.ops[0]).__name__
        if not self.module_level or len(node.ops) != 1 or name not in _OPERATORS:
            return node
        return ast.copy_location(_guard_call(name, node.left, node.comparators[0]), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        if not (self.module_level or isinstance(node.op, _ALWAYS_GUARDED)):
            return node
        load = ast.copy_location(ast.parse(ast.unparse(node.target), mode="eval").body, node.target)
        call = _guard_call(type(node.op).__name__, load, node.value)
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
        node.args = self.visit(node.args)  # defaults run when the def does: same level
        node.body = self._body(node.body)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        node.args = self.visit(node.args)
        outer, self.module_level = self.module_level, False
        node.body = self.visit(node.body)
        self.module_level = outer
        return node

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        outer, self.module_level = self.module_level, False
        out = [self.visit(stmt) for stmt in body]
        self.module_level = outer
        return out


def _guard_call(op_name: str, left: ast.expr, right: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(id=GUARD, ctx=ast.Load()), args=[ast.Constant(op_name), left, right], keywords=[])
