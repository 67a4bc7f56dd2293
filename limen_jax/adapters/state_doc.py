"""Documentation and an offline catalog generated from a state pytree's shapes.

An adapted environment has no hand-written context: :func:`field_lines` lists every
field programs may read (its access expression, dtype and shape), and
:func:`auto_catalog` builds the offline mutator's pieces from the same fields, so any
environment a family adapter wraps can be searched without an LLM.
"""

from __future__ import annotations

import math
import re
from typing import Any

import jax
import jax.numpy as jnp

from limen_jax.catalog import Catalog, Feature, Term

# A field larger than this is documented but not offered as an offline feature.
MAX_FEATURE_SIZE = 64
# The simulator fields (under the state's physics field, e.g. ``data`` or
# ``pipeline_state``) offered as offline features: positions, velocities, controls and
# sensors in MJX's and Brax's names; the rest of the physics state is documented only.
PHYSICS_FEATURES = ("qpos", "qvel", "ctrl", "actuator_force", "sensordata", "site_xpos", "q", "qd", "x.pos",
                    "xd.vel", "xd.ang")  # fmt: skip


def fields(shapes: Any) -> list[tuple[str, Any]]:
    """``(expression, ShapeDtypeStruct)`` of each public leaf of a state pytree.

    The expression is how a program reads the leaf from ``state`` (``state.data.qpos``,
    ``state.info['time_out']``); private fields (a name starting with ``_``) and
    zero-size leaves are left out.
    """
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]:
        expr = "state" + jax.tree_util.keystr(path)
        if "._" in expr or math.prod(leaf.shape) == 0:
            continue
        out.append((expr, leaf))
    return out


def _dtype(leaf: Any) -> str:
    return "random key" if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key) else str(leaf.dtype)


def field_lines(shapes: Any) -> list[str]:
    """One markdown bullet per field: ``- `state.obs`: float32 (5,)``."""
    lines = []
    for expr, leaf in fields(shapes):
        note = " (the environment's own; do not use)" if _dtype(leaf) == "random key" else ""
        lines.append(f"- `{expr}`: {_dtype(leaf)} {tuple(leaf.shape)}{note}")
    return lines


def _is_float(leaf: Any) -> bool:
    return not jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key) and jnp.issubdtype(leaf.dtype, jnp.floating)


def _ident(expr: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"\W", "_", expr.removeprefix("state"))).strip("_").lower()


def auto_catalog(shapes: Any, horizon: int, success_term: str | None = None) -> Catalog:
    """An offline catalog over a state with ``obs``, ``reward``, ``done``, ``metrics``, ``info``.

    Features: the native observation (required), then the float fields of ``info`` and
    the :data:`PHYSICS_FEATURES` of at most :data:`MAX_FEATURE_SIZE` values, and the
    episode's time.
    Terms: the native reward (required, dense), staying alive, a control cost, each
    float metric, and ``success_term`` (code assigning ``t_success``) when given.
    """
    # the observation may be an array or a dict of arrays (e.g. state and privileged state)
    obs = ["state.obs" + expr.removeprefix("state") for expr, _ in fields(shapes.obs)]
    ravelled = ", ".join(f"jnp.ravel({e})" for e in obs)
    native = f"f_native = {obs[0]}" if len(obs) == 1 else f"f_native = jnp.concatenate([{ravelled}])"
    features = [Feature("native", native)]
    seen = {"native"}
    for expr, leaf in fields(shapes):
        top, _, rest = expr.removeprefix("state.").partition(".")
        if top != "info" and rest not in PHYSICS_FEATURES or not _is_float(leaf):
            continue
        if math.prod(leaf.shape) > MAX_FEATURE_SIZE or expr.endswith("['episode_return']"):
            continue
        name = _ident(expr)
        if name in seen:
            continue
        seen.add(name)
        features.append(Feature(name, f"f_{name} = jnp.ravel({expr}).astype(jnp.float32)", prior=0.5))
    features.append(Feature("time", 'f_time = jnp.array([state.info["step_count"] / HORIZON], jnp.float32)', 0.5))

    terms = [
        Term("native", "t_native = next_state.reward", 1.0),
        Term("alive", "t_alive = 1.0 - next_state.done", 0.5),
        Term("control", "t_control = -jnp.sum(jnp.square(action))", 0.05),
    ]
    for expr, leaf in fields(shapes.metrics):
        if _is_float(leaf) and leaf.shape == ():
            name = "m_" + _ident(expr)
            terms.append(Term(name, f"t_{name} = next_state.metrics{expr.removeprefix('state')}", 0.5, prior=0.5))
    required: tuple[str, ...] = ("native",)
    if success_term:
        terms.append(Term("success", success_term, 10.0))
        required = ("native", "success")
    return Catalog(
        prelude=f"HORIZON = {int(horizon)}\n",
        features=tuple(features),
        terms=tuple(terms),
        required_features=("native",),
        required_terms=required,
        dense_terms=("native",),
        seed_features=(0, 2),
        seed_terms=(0, 2),
    )
