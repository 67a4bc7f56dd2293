"""Exported φ and R: serialised StableHLO with a symbolic batch dimension, and how the engine calls it.

The worker traces a program once to closed jaxprs (checks.py) and exports each as a
function of the *flattened* state, batched: ``observe(*leaves[b, ...]) -> float32[b, D]``
and ``reward(*sim[b, ...], action[b, ...], *next_sim[b, ...]) -> float32[b]``, or
``float32[b, M]`` for a reward of M named terms (sorted by name), its raw values (the
worker checks those for finiteness). PRNG key leaves travel as their raw
``uint32`` key data. The engine's wrapper (:func:`unbatched`) replaces non-finite
values and bounds the rest (NaN -> 0, values clipped to +-1e6) for states outside the
checked sample. The engine deserialises the bytes (:func:`load`), verifies
their signature and that they hold no host callbacks, and wraps them as an
:class:`~limen_jax.interface.Interface` whose functions are jit- and (nested) vmap-able.
No Python of the program is involved on the engine side.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from limen_jax.program.errors import ProgramError

# Values a trained policy never sees: non-finite outputs on states outside the checked
# sample are replaced so that one bad state cannot turn a whole training run into NaN.
POSINF = 1e6
# Custom calls an exported artifact may never contain (host callbacks reach Python).
_CALLBACK_TARGET = re.compile(r"custom_call\s*@(\w*callback\w*)|call_target_name\s*=\s*\"(\w*callback\w*)\"")


def leaf_specs(tree: Any) -> list[dict[str, Any]]:
    """Per flattened leaf of ``tree`` (arrays with a leading batch axis): the per-item
    ``shape``, the ``dtype`` that travels and the PRNG ``key_impl`` (None for plain arrays)."""
    specs: list[dict[str, Any]] = []
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            data = jax.random.key_data(leaf)
            specs.append(
                {"shape": list(data.shape[1:]), "dtype": str(data.dtype), "key_impl": jax.random.key_impl(leaf)}
            )
        else:
            specs.append({"shape": list(leaf.shape[1:]), "dtype": str(leaf.dtype), "key_impl": None})
    return specs


def to_data(leaves: Sequence[Any]) -> list[Any]:
    """Leaves as they travel: PRNG keys replaced by their key data."""
    return [jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x for x in leaves]


def from_data(leaves: Sequence[Any], specs: Sequence[dict[str, Any]]) -> list[Any]:
    """Inverse of :func:`to_data`."""
    return [jax.random.wrap_key_data(x, impl=s["key_impl"]) if s["key_impl"] else x for x, s in zip(leaves, specs)]


# --- worker side ----------------------------------------------------------------------


def export_jaxpr(
    closed: Any, specs: Sequence[dict[str, Any]], post: Callable[[jax.Array], jax.Array], platforms: Sequence[str]
) -> bytes:
    """Serialise ``post(*closed(*leaves))`` vmapped over a symbolic batch dimension ``b``."""
    from jax.extend.core import jaxpr_as_fun

    fn = jaxpr_as_fun(closed)

    def batched(*data: jax.Array) -> jax.Array:
        def one(*leaves: jax.Array) -> jax.Array:
            return post(*fn(*leaves))

        return jax.vmap(one)(*from_data(data, specs))

    (b,) = export.symbolic_shape("b")
    avals = [jax.ShapeDtypeStruct((b, *s["shape"]), jnp.dtype(s["dtype"])) for s in specs]
    exported = export.export(jax.jit(batched), platforms=tuple(platforms))(*avals)
    return bytes(exported.serialize())


def observation_post(obs_dim: int) -> Callable[[jax.Array], jax.Array]:
    def post(out: jax.Array) -> jax.Array:
        return jnp.asarray(out, jnp.float32).reshape(obs_dim)

    return post


def reward_post(out: jax.Array) -> jax.Array:
    return jnp.asarray(out, jnp.float32).reshape(())


def terms_post(*outs: jax.Array) -> jax.Array:
    """A dict reward's terms (the jaxpr's outputs, sorted by name) -> float32[M]."""
    return jnp.stack([jnp.asarray(o, jnp.float32).reshape(()) for o in outs])


# --- engine side ----------------------------------------------------------------------


def load(blob: bytes, specs: Sequence[dict[str, Any]], out_shape: tuple[int, ...]) -> export.Exported:
    """Deserialise and verify one artifact: inputs match ``specs``, output is
    float32[b, *out_shape], no effects and no host callbacks. ProgramError("compile") otherwise."""
    try:
        exported = export.deserialize(bytearray(blob))
    except Exception as exc:  # malformed bytes: the worker's reply is refused
        raise ProgramError("compile", f"the exported program could not be read back ({type(exc).__name__}).") from None
    want_in = [(("b", *map(str, s["shape"])), str(s["dtype"])) for s in specs]
    got_in = [(tuple(str(d) for d in a.shape), str(a.dtype)) for a in exported.in_avals]
    outs = [(tuple(str(d) for d in a.shape), str(a.dtype)) for a in exported.out_avals]
    if got_in != want_in or outs != [(("b", *map(str, out_shape)), "float32")]:
        raise ProgramError("compile", "the exported program does not have the task's signature.")
    if exported.ordered_effects or exported.unordered_effects:
        raise ProgramError("compile", "the exported program has side effects; host callbacks are not allowed.")
    if _CALLBACK_TARGET.search(exported.mlir_module()):
        raise ProgramError("compile", "the exported program contains a host callback, which is not allowed.")
    return exported


def batched_call(exported: export.Exported) -> Callable[..., jax.Array]:
    """``exported.call`` over leaves with a leading batch axis, made vmap-able.

    ``call_exported`` has no batching rule; under ``vmap`` the extra axes are folded into
    the symbolic batch dimension (nested vmaps fold one at a time).
    """

    @jax.custom_batching.custom_vmap
    def call(*data: jax.Array) -> jax.Array:
        return exported.call(*data)  # type: ignore[no-any-return]

    @call.def_vmap
    def _rule(axis_size: int, in_batched: Sequence[bool], *data: jax.Array) -> tuple[jax.Array, bool]:
        full = [x if b else jnp.broadcast_to(x, (axis_size, *x.shape)) for x, b in zip(data, in_batched)]
        n = full[0].shape[1]
        out = call(*(x.reshape((axis_size * n, *x.shape[2:])) for x in full))
        return out.reshape((axis_size, n, *out.shape[1:])), True

    return call  # type: ignore[no-any-return]


def unbatched(call: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    """A function of one (unbatched) pytree argument list, through the batched artifact,
    with NaN replaced by 0 and values clipped to +-1e6 (the engine's own guard)."""

    def fn(*args: Any) -> jax.Array:
        leaves = to_data(jax.tree.leaves(args))
        out = call(*(jnp.asarray(x)[None] for x in leaves))[0]
        return jnp.clip(jnp.nan_to_num(out, nan=0.0, posinf=POSINF, neginf=-POSINF), -POSINF, POSINF)

    return fn


def as_numpy(tree: Any) -> list[np.ndarray]:
    """The leaves of ``tree`` as host numpy arrays, PRNG keys as key data (for the wire)."""
    return [np.asarray(x) for x in jax.device_get(to_data(jax.tree.leaves(tree)))]
