"""Programs in the style of interfaces evolved by LIMEN (module-level constants, Python
loops that build feature lists with ``.extend``/``.append``, star-unpacking into
``jnp.array``, ``jax.nn.one_hot``, ``jax.lax.select``, potential-based shaping).

Written for this repository; they exist so that ordinary Python an LLM writes is never
refused as if it were an escape (``list.extend`` was once mistaken for ``jax.extend``).
"""

from __future__ import annotations

PICKUP_STYLE = '''"""Evolved-style interface: go to the target object and pick it up."""

import jax
import jax.numpy as jnp

BALL, KEY_TILE, FLOOR = 3, 7, 1
MOVES = jnp.array([(-1, 0), (0, 1), (1, 0), (0, -1)], dtype=jnp.int32)
WEIGHTS = {"near": 0.5, "face": 0.2}


def _centroid(mask, ys, xs):
    count = jnp.sum(mask).astype(jnp.float32)
    cy = jnp.sum(ys * mask).astype(jnp.float32) / jnp.maximum(count, 1.0)
    cx = jnp.sum(xs * mask).astype(jnp.float32) / jnp.maximum(count, 1.0)
    return cy, cx, (count > 0).astype(jnp.float32)


def get_observation(state):
    h, w = state.grid.shape[:2]
    ys, xs = jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij")
    ay = state.agent.position[0].astype(jnp.float32)
    ax = state.agent.position[1].astype(jnp.float32)
    features = [ay / (h - 1), ax / (w - 1)]
    features.extend(list(jax.nn.one_hot(state.agent.direction, 4)))
    for tile in (BALL, KEY_TILE):
        cy, cx, present = _centroid(state.grid[:, :, 0] == tile, ys, xs)
        features.extend([(cy - ay) / h, (cx - ax) / w, present])
    around = []
    for k in range(4):
        ny = jnp.clip(state.agent.position[0] + MOVES[k, 0], 0, h - 1)
        nx = jnp.clip(state.agent.position[1] + MOVES[k, 1], 0, w - 1)
        around.append((state.grid[ny, nx, 0] == FLOOR).astype(jnp.float32))
    holding = (state.agent.pocket[0] != 0).astype(jnp.float32)
    return jnp.array([*features, *around, holding, state.step_num / 80.0], dtype=jnp.float32)


def compute_reward(state, action, next_state):
    h, w = state.grid.shape[:2]
    ys, xs = jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij")
    cy, cx, _ = _centroid(state.grid[:, :, 0] == BALL, ys, xs)
    d0 = jnp.abs(state.agent.position[0] - cy) + jnp.abs(state.agent.position[1] - cx)
    d1 = jnp.abs(next_state.agent.position[0] - cy) + jnp.abs(next_state.agent.position[1] - cx)
    picked = (state.agent.pocket[0] == 0) & (next_state.agent.pocket[0] != 0)
    terms = []
    terms.extend([WEIGHTS["near"] * (d0 - d1) / (h + w), jax.lax.select(picked, 10.0, 0.0)])
    terms.append(-0.01)
    return jnp.sum(jnp.array(terms, dtype=jnp.float32))
'''

CHAIN_STYLE = """import jax
import jax.numpy as jnp

TARGETS = [(3, 1), (7, 2), (5, 5)]


def get_observation(state):
    rows = []
    for tile, color in TARGETS:
        mask = (state.grid[:, :, 0] == tile) & (state.grid[:, :, 1] == color)
        rows.extend([jnp.any(mask).astype(jnp.float32), jnp.sum(mask).astype(jnp.float32) / 81.0])
    pocket = list(state.agent.pocket.astype(jnp.float32) / 12.0)
    rows.extend(pocket)
    local = state.grid[:3, :3, 0].reshape(-1).astype(jnp.float32) / 12.0
    return jnp.concatenate([jnp.stack(rows), local, state.agent.position.astype(jnp.float32) / 9.0])


def compute_reward(state, action, next_state):
    got = [(next_state.agent.pocket[0] == t) & (state.agent.pocket[0] != t) for t, _ in TARGETS]
    bonus = sum(jnp.where(g, 1.0, 0.0) for g in got)
    step = jnp.abs(next_state.agent.position - state.agent.position).sum().astype(jnp.float32)
    return (bonus + 0.05 * step - 0.01).astype(jnp.float32)
"""

PROGRAMS = {"pickup_style": PICKUP_STYLE, "chain_style": CHAIN_STYLE}
