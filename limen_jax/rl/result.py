"""Results of a batched training run, and the training feedback the search puts in prompts."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from limen_jax.rl.policy import Policy

CURVE_POINTS = 10  # learning curves in feedback are summarised to this many points


@dataclasses.dataclass
class BatchResult:
    """K candidates x S seeds.

    success: float32 (K, S), evaluation success rate per slot; success_mean: (K,).
    final_return: float32 (K, S), mean evaluation-episode return under the candidate's R.
    curves: name -> float32 (K, S, U), one value per update (NaN where no episode ended):
        "return", "success", "episode_length" of the episodes that ended during the
        update's rollout, and the PPO statistics "policy_loss", "value_loss", "entropy",
        "approx_kl", "clip_frac", "episodes".
    steps: env steps per slot (per candidate per seed). wall_s: whole call, compile
    included; compile_s: compilation alone, of which kernel_compile_s the programs' own
    kernel (the rest is program-independent, compiled once per shape and then reused);
    eval_s: the final evaluation, its compiling excluded.
    diverged_at: int32 (K, S), the first update whose observations, rewards or
    parameters were not finite (the slot froze there), -1 where that never happened.
    Curves add "pool_overflow": episode starts handed out twice in the update's rollout
    because more episodes ended than the reset pool holds.
    term_names: per candidate, its reward terms' names (() for a scalar reward); a batch
    with any adds curves "reward/<name>" (NaN in the rows of candidates without that
    term), see :meth:`BatchTrainer.run`.
    eval_terms: float32 (K, S, M), each term's mean sum over the evaluation episodes,
    candidate k's slot j holding ``term_names[k][j]``; None when no candidate has terms.
    policies: per candidate, its S trained policies (``train_batch(return_policies=True)``).
    """

    names: list[str]
    seeds: list[int]
    success: np.ndarray
    final_return: np.ndarray
    curves: dict[str, np.ndarray]
    steps: int
    wall_s: float
    compile_s: float
    diverged_at: np.ndarray | None = None
    kernel_compile_s: float = 0.0
    eval_s: float = 0.0
    term_names: list[tuple[str, ...]] = dataclasses.field(default_factory=list)
    eval_terms: np.ndarray | None = None
    policies: list[list[Policy]] | None = None

    @property
    def success_mean(self) -> np.ndarray:
        return self.success.mean(axis=1)

    def terms_of(self, k: int) -> tuple[str, ...]:
        """Candidate ``k``'s reward-term names (() for a scalar reward)."""
        return self.term_names[k] if k < len(self.term_names) else ()

    def curves_of(self, k: int) -> dict[str, np.ndarray]:
        """Candidate ``k``'s curves, name -> (S, U): the shared ones and its own terms'."""
        own = {f"reward/{t}" for t in self.terms_of(k)}
        return {n: c[k] for n, c in self.curves.items() if not n.startswith("reward/") or n in own}

    def eval_terms_of(self, k: int) -> dict[str, np.ndarray]:
        """Candidate ``k``'s evaluation term sums, name -> float32 (S,); {} for a scalar reward."""
        if self.eval_terms is None:
            return {}
        return {t: self.eval_terms[k, :, j] for j, t in enumerate(self.terms_of(k))}

    def feedback(self, k: int) -> dict[str, Any]:
        """Training feedback for candidate ``k`` (plain data, for prompts and logs).

        success_curve / return_curve: the seed-mean learning curve summarised to 10 points
        (mean of each tenth of training). trend: "improving" / "declining" / "flat", from
        the change over the second half of training (success if it moved by 0.05 or more,
        else return relative to its range). plateau: the last 30% of training moved
        success by less than 0.02 and return by less than 5% of its range.
        seed_spread: max - min success over seeds.
        """
        success = self.success[k]
        sc = _summarise(self.curves["success"][k])
        rc = _summarise(self.curves["return"][k])
        half = len(sc) // 2
        d_success = _delta(sc, half)
        r_range = float(np.nanmax(rc) - np.nanmin(rc)) if np.isfinite(rc).any() else 0.0
        d_return = _delta(rc, half) / r_range if r_range > 1e-8 else 0.0
        if abs(d_success) >= 0.05:
            trend = "improving" if d_success > 0 else "declining"
        elif abs(d_return) >= 0.1:
            trend = "improving" if d_return > 0 else "declining"
        else:
            trend = "flat"
        tail = max(1, int(round(0.3 * len(sc))))
        plateau = bool(
            len(sc) > tail
            and _span(sc[-tail - 1 :]) < 0.02
            and (r_range <= 1e-8 or _span(rc[-tail - 1 :]) < 0.05 * r_range)
        )
        out: dict[str, Any] = {
            "name": self.names[k],
            "success_mean": float(success.mean()),
            "success_per_seed": [round(float(x), 4) for x in success],
            "seed_spread": float(success.max() - success.min()),
            "final_return": float(self.final_return[k].mean()),
            "success_curve": [_round(x) for x in sc],
            "return_curve": [_round(x) for x in rc],
            "trend": trend,
            "plateau": plateau,
            "steps": int(self.steps),
        }
        if self.diverged_at is not None and (self.diverged_at[k] >= 0).any():
            # the program's fault, for the prompt: its values went non-finite
            out["diverged_at_update"] = int(self.diverged_at[k][self.diverged_at[k] >= 0].min())
        return out

    def summary(self) -> str:
        lines = []
        for k, name in enumerate(self.names):
            per_seed = " ".join(f"{x:.3f}" for x in self.success[k])
            lines.append(f"{name}: success {self.success_mean[k]:.3f} (seeds {per_seed})")
        return "\n".join(lines)


def _summarise(curve: np.ndarray) -> np.ndarray:
    """(S, U) -> the seed-mean curve averaged over CURVE_POINTS chunks of updates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(curve, axis=0)
        chunks = np.array_split(mean, min(CURVE_POINTS, len(mean)))
        return np.array([np.nanmean(c) if np.isfinite(c).any() else np.nan for c in chunks])


def _delta(curve: np.ndarray, start: int) -> float:
    finite = curve[start:][np.isfinite(curve[start:])]
    return float(finite[-1] - finite[0]) if len(finite) >= 2 else 0.0


def _span(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.max() - x.min()) if len(x) else 0.0


def _round(x: float) -> float | None:
    return None if not np.isfinite(x) else round(float(x), 4)
