"""What a run leaves in a notebook: :class:`RunResult` (the archive, the store, the best)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from limen_jax.config import EvolveConfig
from limen_jax.run.baseline import baseline_line
from limen_jax.rundir import RunDir


@dataclasses.dataclass
class RunResult:
    """What a run leaves in a notebook: the archive, the program store, the best record,
    and the baseline (the task's default interface as trained in the run:
    :mod:`limen_jax.run.baseline`; None when the run skipped it)."""

    run_dir: Path
    config: EvolveConfig
    store: Any
    archive: Any
    stopped: str = "finished"
    # False when the run stopped before its planned iterations (budget cap, outage,
    # engine error, a mutator that cannot go on): the CLI then exits non-zero
    complete: bool = True
    # the signal (SIGINT 2, SIGTERM 15) that stopped the run, when one did
    signal: int | None = None
    baseline: dict[str, Any] | None = None

    @property
    def records(self) -> list[Any]:
        return sorted(self.store, key=lambda r: (r.iteration, r.id))

    @property
    def best(self) -> Any:
        return self.store.best()

    def plot(self, path: str | Path | None = None) -> Any:
        from limen_jax.plots import plot_progress

        return plot_progress([r.to_dict() for r in self.records], path, title=self.config.task,
                             baseline=(self.baseline or {}).get("success"))

    def summary(self) -> str:
        return _summary(self)


def _summary(result: RunResult) -> str:
    from limen_jax.run.repeats import savings

    recs = result.records
    own = [r for r in recs if r.duplicate_of is None]  # a repeat holds another program's result
    trained = [r for r in own if r.success is not None]
    rejected = [r for r in own if r.error]
    demos = sum(r.stage == "demos" for r in own)
    usage = (RunDir(result.run_dir).read_json("usage.json") or {})
    counts = f"{len(recs)} programs, {len(trained)} trained, {len(rejected)} rejected"
    counts += f", {demos} scored on demonstrations" if demos else ""
    saved = savings(recs)
    if saved["checked"]:
        counts += (f"; {saved['checked']} checked, {saved['repeats']} repeats of earlier programs recognised, "
                   f"{saved['train_s_saved']:.0f} s of training not spent")
    lines = [
        f"run: {result.run_dir}  ({result.stopped})",
        f"task {result.config.task}, mode {result.config.search.mode}: {counts}",
    ]
    best = result.best
    if best is not None and best.success is not None:
        seeds = ", ".join(f"{s:.2f}" for s in best.success_per_seed)
        lo, hi = _interval(result.config, best.success_per_seed)
        lines.append(
            f"best: {best.id} success {best.success:.3f} [{lo:.2f}, {hi:.2f}] (seeds {seeds}), "
            f"obs_dim {best.obs_dim}, reward AST {best.reward_ast_size}"
        )
        lines.append(f"best interface: {result.run_dir / 'best_interface.py'}")
    lines += baseline_line(result.baseline, best)
    if usage.get("calls") or usage.get("failed_calls"):
        lines.append(
            f"LLM ({usage.get('mutator')}): {usage['calls']} calls, {usage['failed_calls']} failed, "
            f"{usage['retries']} retries, {usage['input_tokens']:,} in / {usage['output_tokens']:,} out tokens, "
            f"${usage['cost_usd']:.2f}"
        )
    return "\n".join(lines)


def _interval(config: EvolveConfig, per_seed: list[float]) -> tuple[float, float]:
    """The 95 % interval of a success over its seeds and their evaluation episodes
    (:func:`limen_jax.stats.success_interval`) at the run's evaluation budget."""
    from limen_jax.rl.config import PPOConfig
    from limen_jax.stats import success_interval

    episodes = PPOConfig.preset(config.task, config.preset).replace(**config.ppo).eval_episodes
    return success_interval(per_seed, int(episodes))
