"""A program's behaviour on the check sample: its fingerprint, and how near two programs are.

The checker runs every program's φ and R on the same sample of transitions (checks.py);
what they return there is what training would see, so it identifies the program's
behaviour whatever its text looks like (names, comments, constant spellings, order of
definitions and of independent statements). :func:`fingerprint` turns the outputs into
a :class:`Fingerprint`: a digest, equal for two programs exactly when their quantised
outputs are, and two small summaries for near-duplicate measures
(:func:`similarity`).

What is hashed: the mode, the observation's length and dtype and its values, and the
reward's total per transition. A dict reward's split into named terms is left out on
purpose: PPO sees only φ and the total reward, so two programs equal on both train
identically; the terms only name curves and feedback.

Precision: each output column (one observation feature, or the reward, over the sample)
is quantised on a grid of ``2**-BITS`` times the power of two at or above its largest
magnitude, i.e. about 1.5e-5 of the column's scale. Float32 noise from the same
arithmetic in another order (``(a + b) + c`` against ``a + (b + c)``) is a few units in
the last place, 2**-24 of the scale, 256 times below the grid step; a value moved that
little crosses a grid boundary with a chance of a few in 256, and then two repeats hash
apart (a repeat missed, never a false match). Any output that moves by more than one
grid step (a changed constant, a feature computed in bfloat16) always changes the
digest. Fingerprints are comparable for one task and one check sample (``Limits``).

The worker computes the fingerprint and sends it to the engine as JSON
(:meth:`Fingerprint.to_json`); the engine parses it back with
:meth:`Fingerprint.from_json`, which refuses anything malformed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

# Grid step = 2**-BITS of a column's scale (see the module docstring).
BITS = 16
# Bumped when what is hashed changes, so that old and new digests never match.
VERSION = 1
MODES = ("full", "obs_only", "reward_only")
_HEX = re.compile(r"[0-9a-f]{32}")
_COLUMN_HEX = re.compile(r"[0-9a-f]{16}")
MAX_SAMPLE = 1 << 16  # most transitions a reward summary may hold (the sample is ~112)
MAX_FEATURES = 4096


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What a checked program does on the check sample.

    digest: 32 hex characters; equal digests mean equal behaviour (see the module
        docstring for the precision).
    mode: "full", "obs_only" or "reward_only" (the part the program supplies).
    obs_columns: one 16-hex digest per observation feature, in feature order (its
        quantised column and scale); () when the observation is the task's default.
    reward: the total reward on each sample transition (float32 values), () when the
        reward is the task's sparse reward.
    """

    digest: str
    mode: str
    obs_columns: tuple[str, ...] = ()
    reward: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready; :meth:`from_json` inverts it."""
        return {"digest": self.digest, "mode": self.mode, "obs_columns": list(self.obs_columns),
                "reward": list(self.reward)}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> Fingerprint:
        """Parse untrusted JSON (a worker's reply, a run dir); ValueError when malformed."""
        if not isinstance(data, Mapping) or set(data) != {"digest", "mode", "obs_columns", "reward"}:
            raise ValueError("a fingerprint is an object with digest, mode, obs_columns and reward")
        digest, mode, columns, reward = data["digest"], data["mode"], data["obs_columns"], data["reward"]
        if not isinstance(digest, str) or not _HEX.fullmatch(digest) or mode not in MODES:
            raise ValueError("a fingerprint's digest or mode is malformed")
        if not isinstance(columns, list) or len(columns) > MAX_FEATURES or not all(
            isinstance(c, str) and _COLUMN_HEX.fullmatch(c) for c in columns
        ):
            raise ValueError("a fingerprint's observation columns are malformed")
        if not isinstance(reward, list) or len(reward) > MAX_SAMPLE or not all(
            type(r) in (int, float) and math.isfinite(r) for r in reward
        ):
            raise ValueError("a fingerprint's rewards are malformed")
        return cls(digest, mode, tuple(columns), tuple(float(r) for r in reward))


def quantise(column: np.ndarray) -> tuple[int, np.ndarray]:
    """A column's scale exponent e (its largest magnitude is below 2**e; 0 for all zeros)
    and its values on the grid of step 2**(e - BITS), as int64 in [-2**BITS, 2**BITS].

    column: float32 or float64 [N], finite.
    """
    values = np.asarray(column, np.float64)
    biggest = float(np.abs(values).max()) if values.size else 0.0
    if biggest == 0.0:
        return 0, np.zeros(values.shape, np.int64)
    exponent = math.frexp(biggest)[1]  # biggest = m * 2**exponent, 0.5 <= m < 1
    # ldexp is exact; rint of -0.0 is -0.0, which becomes the integer 0
    return exponent, np.rint(np.ldexp(values, BITS - exponent)).astype(np.int64)


def column_digest(column: np.ndarray) -> str:
    """16 hex characters naming a quantised column (its scale included: x and 2x differ)."""
    exponent, grid = quantise(column)
    h = hashlib.blake2b(digest_size=8)
    h.update(np.int64(exponent).tobytes())
    h.update(grid.astype("<i8").tobytes())
    return h.hexdigest()


def fingerprint(mode: str, obs: np.ndarray | None, reward: np.ndarray | None) -> Fingerprint:
    """The fingerprint of a program's outputs on the check sample.

    mode: the check's mode. obs: float32 [N, D] (None when the observation is the task
    default). reward: float32 [N], or [N, M] for a dict reward's M terms, whose sum over
    the terms is the reward (None when the reward is the task's).
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    parts: dict[str, Any] = {"version": VERSION, "bits": BITS, "mode": mode}
    columns: tuple[str, ...] = ()
    total: tuple[float, ...] = ()
    if obs is not None:
        obs = np.asarray(obs)
        columns = tuple(column_digest(obs[:, j]) for j in range(obs.shape[1]))
        parts["obs"] = {"shape": list(obs.shape[1:]), "dtype": obs.dtype.str, "columns": columns}
    if reward is not None:
        reward = np.asarray(reward)
        summed = (reward.sum(axis=1) if reward.ndim == 2 else reward).astype(np.float32)
        total = tuple(float(r) for r in summed)
        parts["reward"] = {"dtype": summed.dtype.str, "column": column_digest(summed)}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]
    return Fingerprint(digest, mode, columns, total)


# --- near duplicates -------------------------------------------------------------------


def shared_features(a: Fingerprint, b: Fingerprint) -> float | None:
    """The fraction of observation features the two programs share, whatever their order:
    matched features (as a multiset) over the larger observation's length. 1.0 exactly when
    one observation is the other's features permuted; None when either is the default."""
    if not a.obs_columns or not b.obs_columns:
        return None
    common = sum((Counter(a.obs_columns) & Counter(b.obs_columns)).values())
    return common / max(len(a.obs_columns), len(b.obs_columns))


def reward_rank_correlation(a: Fingerprint, b: Fingerprint) -> float | None:
    """Spearman's rank correlation of the two rewards over the sample transitions (ties
    get their mean rank): 1.0 when one reward is a monotone increasing function of the
    other there (e.g. rescaled). None when either reward is the task's, the samples
    differ in length, or either reward is constant."""
    if not a.reward or not b.reward or len(a.reward) != len(b.reward):
        return None
    ra, rb = _ranks(np.asarray(a.reward)), _ranks(np.asarray(b.reward))
    da, db = ra - ra.mean(), rb - rb.mean()
    norm = math.sqrt(float(da @ da) * float(db @ db))
    return float(da @ db) / norm if norm > 0 else None


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties averaged."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    uniq, inverse = np.unique(values, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks, minlength=len(uniq))
    return np.asarray(sums / np.bincount(inverse, minlength=len(uniq)))[inverse]


def similarity(a: Fingerprint, b: Fingerprint) -> dict[str, Any]:
    """How near two checked programs are, as JSON-ready data for a run to record:
    ``same`` (equal digests: the same behaviour), ``observation_permuted`` (the same
    features in another order; None when either observation is the default),
    ``shared_features`` and ``reward_rank_correlation`` (see their functions)."""
    shared = shared_features(a, b)
    permuted = None if shared is None else shared == 1.0 and len(a.obs_columns) == len(b.obs_columns)
    return {
        "same": a.digest == b.digest,
        "observation_permuted": permuted,
        "shared_features": shared,
        "reward_rank_correlation": reward_rank_correlation(a, b),
    }
