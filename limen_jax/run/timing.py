"""A batch's timing line (the ``iteration`` event and the printed report)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from limen_jax.run.ask import Prepared
from limen_jax.run.state import Clock
from limen_jax.search.evaluation.jobs import EvalBatch


def batch_timing(prepared: Prepared, batches: Sequence[EvalBatch], clock: Clock, now: float) -> dict[str, Any]:
    """Seconds of the batch: asking (``llm_s``), checking, training (its compile and
    evaluation parts when every job reports them, else None), waiting for the LLM after
    the previous batch stopped training (``llm_wait_s``), and wall time since the previous
    batch was recorded. Moves ``clock`` on to this batch (the next one's wait counts from
    when this one stopped training)."""
    compile_s = [b.compile_s for b in batches]
    eval_s = [b.eval_s for b in batches]
    timing = {
        "llm_s": round(prepared.llm_s, 2), "check_s": round(prepared.check_s, 2),
        "train_s": round(sum(b.wall_s for b in batches), 2),
        "compile_s": None if not batches or None in compile_s else round(sum(compile_s), 2),  # type: ignore[arg-type]
        "eval_s": None if not batches or None in eval_s else round(sum(eval_s), 2),  # type: ignore[arg-type]
        "llm_wait_s": round(max(0.0, prepared.end - max(prepared.start, clock.last_train_end)), 2),
        "wall_s": round(now - clock.last_iter_end, 2),
    }
    clock.last_train_end = max((b.finished_at for b in batches), default=now)
    clock.last_iter_end = now
    return timing
