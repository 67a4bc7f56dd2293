"""XLA compile options for programs that run once (or once per update), not per step.

XLA's CPU backend spends much of a small program's compile time in LLVM's optimisation
passes (threefry's unrolled rounds, behind every random draw, above all), which pay back
only in programs that run many times. Programs that run once per run or once per update
(parameter initialisation, key splitting, the evaluation's set-up, the checker's sample
rollouts and its one run of a candidate) compile with :data:`RUN_ONCE` instead, on a
CPU backend (:func:`run_once`; the checker's workers always run on the CPU): they compile
in about half the time. The task's reset, which fills the reset pool every update, keeps
full optimisation: at level 0 it slows every update.
"""

from __future__ import annotations

from typing import Any

import jax

# Backend (LLVM) optimisation level 0; XLA's own HLO passes still run.
RUN_ONCE: dict[str, Any] = {"xla_backend_optimization_level": 0}


def run_once() -> dict[str, Any] | None:
    """:data:`RUN_ONCE` on a CPU backend, None (XLA's defaults) elsewhere: on a GPU the
    level-0 kernels are unmeasured."""
    return RUN_ONCE if jax.default_backend() == "cpu" else None
