"""What a traced program costs, read from its jaxpr before anything is compiled.

Every intermediate array's size is bounded (a ``jnp.zeros((10**5, 10**5))`` is refused,
not allocated), and so is the total work per state: element operations summed over the
program, loops multiplied out (``scan`` length times its body; a ``while`` loop, whose
trip count is unknown, is refused outright), a matmul counted as its output size times
the contracted dimension, a convolution as its output size times the kernel's size per
output feature.

The budget of φ and R together is relative to the task's own step (:func:`step_work`,
the same count over the trusted ``task.step``): a program may cost ``max_work_vs_step``
environment steps per transition, never less than an absolute floor (tiny env steps must
not refuse ordinary programs) nor more than an absolute ceiling.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import jax
import numpy as np

from limen_jax.program.errors import PROGRAM_FILENAME, ProgramError


def check_cost(closed: Any, name: str, max_elements: int, max_work: float) -> float:
    """Refuse ``closed`` (a ClosedJaxpr of ``name``) if it is too big or too slow; its work.

    ProgramError "allocation" when an array (constant or intermediate) has more than
    ``max_elements`` elements or the total work exceeds ``max_work`` element
    operations; "policy" when it contains a ``while`` loop. Returns the work (element
    operations per state).
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
    return work


def work_budget(step: float, factor: float, floor: float, ceiling: float) -> float:
    """Element operations φ + R may cost per transition: ``factor`` x the env step's
    ``step`` work, within [floor, ceiling]; the ceiling alone when ``step`` is unknown (0)."""
    if step <= 0 or factor <= 0:
        return ceiling
    return min(max(factor * step, floor), ceiling)


def check_total(work: float, step: float, budget: float) -> None:
    """Refuse φ + R costing ``work`` per transition over ``budget`` (ProgramError "allocation");
    the message states the cost as a multiple of one environment step (``step`` work)."""
    if work <= budget:
        return
    if step > 0:
        told = f"about {work / step:,.0f} x the work of one environment step (limit {budget / step:,.0f} x)"
    else:
        told = f"about {work:,.0f} element operations (limit {budget:,.0f})"
    raise ProgramError(
        "allocation",
        f"`get_observation` and `compute_reward` together cost {told} per transition: the interface "
        "would dominate training time. Compute fewer, cheaper features: no loops over the grid, "
        "no large matrices or pairwise computations over many objects.",
    )


# step_work is traced once per task (class and parameters) in this process.
_STEP_WORK: dict[tuple[Any, ...], float] = {}
_STEP_LOCK = threading.Lock()


def step_work(task: Any) -> float:
    """Element operations of one ``task.step`` (the trusted task's own code), counted as for
    programs; cached per task class and parameters."""
    key = (type(task), task.name, tuple(sorted((k, repr(v)) for k, v in dict(task.params).items())))
    with _STEP_LOCK:
        if key not in _STEP_WORK:
            state = jax.eval_shape(task.reset, jax.random.key(0))
            action = jax.ShapeDtypeStruct(task.action_space.shape, _action_dtype(task))
            closed = jax.make_jaxpr(task.step)(state, action)
            _STEP_WORK[key] = _walk(closed.jaxpr, 1, "step", 2**62, refuse_while=False)
        return _STEP_WORK[key]


def _action_dtype(task: Any) -> Any:
    sample = jax.eval_shape(task.action_space.sample, jax.random.key(0))
    return sample.dtype


def _walk(jaxpr: Any, multiplier: float, name: str, max_elements: int, refuse_while: bool = True) -> float:
    """Work of ``jaxpr`` (element operations), checking every intermediate's size.

    refuse_while: a ``while`` loop is a policy error (programs); for trusted task code
    (``refuse_while=False``) its body counts once, its trip count being unknown.
    """
    work = 0.0
    for eqn in jaxpr.eqns:
        prim = eqn.primitive.name
        if prim == "while" and refuse_while:
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
        work += multiplier * _eqn_cost(eqn, prim, outs)
        inner = multiplier * (eqn.params["length"] if prim == "scan" else 1)
        for sub in _sub_jaxprs(eqn.params):
            work += _walk(sub, inner, name, max_elements, refuse_while)
    return work


def _eqn_cost(eqn: Any, prim: str, outs: list[int]) -> float:
    """One equation's own work: the larger of its inputs and outputs, except for a
    contraction, where every output element sums over the contracted elements."""
    if prim == "dot_general":
        (contract, _), _ = eqn.params["dimension_numbers"]
        lhs_shape = eqn.invars[0].aval.shape
        return float(sum(outs) * math.prod(lhs_shape[i] for i in contract))
    if prim == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape
        out_feature_dim = eqn.params["dimension_numbers"].rhs_spec[0]
        return float(sum(outs) * (math.prod(rhs) // max(rhs[out_feature_dim], 1)))
    return float(max(sum(outs), sum(_size(v) for v in eqn.invars)))


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
