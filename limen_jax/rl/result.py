"""Results of a batched training run."""

from __future__ import annotations

import dataclasses

import numpy as np

from limen_jax.rl.policy import Policy


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

    def summary(self) -> str:
        lines = []
        for k, name in enumerate(self.names):
            per_seed = " ".join(f"{x:.3f}" for x in self.success[k])
            lines.append(f"{name}: success {self.success_mean[k]:.3f} (seeds {per_seed})")
        return "\n".join(lines)
