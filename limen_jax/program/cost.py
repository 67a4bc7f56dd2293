"""What a traced program costs, read from its jaxpr before anything is compiled.

Every intermediate array's size is bounded (a ``jnp.zeros((10**5, 10**5))`` is refused,
not allocated), and so is the total work per state: element operations summed over the
program, loops multiplied out (``scan`` length times its body; a ``while`` loop, whose
trip count is unknown, is refused outright), a matmul counted as its output size times
the contracted dimension.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from limen_jax.program.errors import PROGRAM_FILENAME, ProgramError


def check_cost(closed: Any, name: str, max_elements: int, max_work: float) -> None:
    """Refuse ``closed`` (a ClosedJaxpr of ``name``) if it is too big or too slow.

    ProgramError "allocation" when an array (constant or intermediate) has more than
    ``max_elements`` elements or the total work exceeds ``max_work`` element
    operations; "policy" when it contains a ``while`` loop.
    """
    for const in closed.consts:
        size = int(np.size(const))
        if size > max_elements:
            raise ProgramError(
                "allocation",
                f"`{name}` captures a constant array of {size:,} elements "
                f"(limit {max_elements:,}); build small constants only.",
            )
    work = _walk(closed.jaxpr, 1, name, max_elements)
    if work > max_work:
        raise ProgramError(
            "allocation",
            f"`{name}` is too expensive: about {work:,.0f} element operations per state "
            f"(limit {max_work:,}); avoid large loops, big matrices and "
            "whole-grid pairwise computations.",
        )


def _walk(jaxpr: Any, multiplier: float, name: str, max_elements: int) -> float:
    """Work of ``jaxpr`` (element operations), checking every intermediate's size."""
    work = 0.0
    for eqn in jaxpr.eqns:
        prim = eqn.primitive.name
        if prim == "while":
            raise ProgramError(
                "policy",
                f"{_where(eqn)}`{name}` contains a while loop (jax.lax.while_loop, or fori_loop with "
                "non-constant bounds): loops must have a static trip count; use Python-int bounds "
                "in jax.lax.fori_loop, or vectorise.",
            )
        outs = [_size(v) for v in eqn.outvars]
        for v, size in zip(eqn.outvars, outs, strict=True):
            if size > max_elements:
                shape = tuple(getattr(v.aval, "shape", ()))
                raise ProgramError(
                    "allocation",
                    f"{_where(eqn)}`{name}` creates an array of shape {shape} ({size:,} elements; "
                    f"limit {max_elements:,} per state). Work on small arrays: "
                    "the grid, local views, a few positions.",
                )
        cost = max(sum(outs), sum(_size(v) for v in eqn.invars))
        if prim == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs_shape = eqn.invars[0].aval.shape
            cost = sum(outs) * math.prod(lhs_shape[i] for i in contract)
        work += multiplier * cost
        inner = multiplier * (eqn.params["length"] if prim == "scan" else 1)
        for sub in _sub_jaxprs(eqn.params):
            work += _walk(sub, inner, name, max_elements)
    return work


def _sub_jaxprs(params: dict[str, Any]) -> list[Any]:
    found = []
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            inner = getattr(item, "jaxpr", item)  # ClosedJaxpr -> Jaxpr
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


def _size(var: Any) -> int:
    shape = getattr(getattr(var, "aval", None), "shape", None)
    return math.prod(shape) if shape is not None else 0


def _where(eqn: Any) -> str:
    """``"line N: "`` of the program line that produced ``eqn``, when known."""
    try:
        frames = eqn.source_info.traceback.frames
        lines = [f.line_num for f in frames if f.file_name == PROGRAM_FILENAME]
    except AttributeError:  # the traceback API is not public; messages degrade gracefully
        return ""
    return f"line {lines[0]}: " if lines else ""
