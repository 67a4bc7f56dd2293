"""What a search run shows and leaves besides its log and checkpoint: the line it prints
per batch, ``best_interface.py`` (the best program, with the command that trains it) and
the plots (``progress.png``, ``archive.png``, ``depth.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from limen_jax.modes import program_mode
from limen_jax.rundir import write_text_atomic


def report_lines(it: int, iterations: int, store: Any, spend: float, timing: dict[str, Any],
                 elapsed_s: float) -> list[str]:
    """Batch ``it``'s line (candidates, scores, the best so far, spend, seconds per
    phase as in its ``iteration`` event), then one per rejected candidate."""
    recs = [r for r in store if r.iteration == it]
    scored = [r for r in recs if r.success is not None]
    best = store.best()
    parts = [f"[iter {it}/{iterations}]", f"{len(recs)} candidates"]
    rejected = sum(r.error is not None for r in recs)  # others may be scored by a kind that trains nothing
    if rejected:
        parts.append(f"{rejected} rejected")
    repeats = sum(r.duplicate_of is not None for r in recs)  # not trained: each took an earlier program's result
    if repeats:
        parts.append(f"{repeats} repeats")
    if scored:
        parts.append("success " + " ".join(f"{r.success:.2f}" for r in scored))
    parts.append(f"best {best.success:.2f} ({best.id})" if best else "best -")
    parts.append(f"spend ${spend:.2f}")
    phases = (f"llm {timing['llm_s']:.1f}s (waited {timing['llm_wait_s']:.1f}s), "
              f"check {timing['check_s']:.1f}s, train {timing['train_s']:.1f}s")
    if timing["compile_s"] is not None:
        phases += f" (compile {timing['compile_s']:.1f}s, evaluate {timing['eval_s'] or 0.0:.1f}s)"
    parts.append(phases)
    parts.append(f"{elapsed_s:.0f}s")
    return [" | ".join(parts)] + [f"    {r.id} rejected at {r.error.get('stage')}: {str(r.error.get('message'))[:100]}"
                                  for r in recs if r.error]


def write_best(run: Path, store: Any, config: Any, task_name: str) -> None:
    """``run``/best_interface.py: the best program so far, under a docstring that scores
    it and says how to train it (none written before a program is scored)."""
    best = store.best()
    if best is not None:
        header = (
            f'"""Best interface of {run.name}: task {task_name}, mode {config.search.mode}.\n\n'
            f"program {best.id} (iteration {best.iteration}), success {best.success:.3f} "
            f"(per seed: {', '.join(f'{s:.3f}' for s in best.success_per_seed)}), "
            f"obs_dim {best.obs_dim}, reward AST {best.reward_ast_size}.\n"
            f"Train it: python -m limen_jax.train --task {config.task} {train_flags(config.search.mode)} "
            f'--seeds 10\n"""\n'
        )
        write_text_atomic(run / "best_interface.py", header + best.code)


def train_flags(mode: str) -> str:
    """How ``limen_jax.train`` trains what a run of ``mode`` finds best: the sparse
    baseline is the task's default; an ablation keeps the other half from the default too."""
    if mode == "sparse":
        return "--default"
    half = program_mode(mode)
    return "--interface best_interface.py" + (f" --mode {half}" if half != "full" else "")


def write_plots(run: Path, archive: Any, task_name: str, mode: str, baseline: dict[str, Any] | None = None) -> None:
    """progress.png (with the ``baseline``'s level: :mod:`limen_jax.run.baseline`) and
    archive.png, and depth.png when records carry a lineage depth (``metadata["depth"]``);
    nothing before the first record."""
    from limen_jax.plots import plot_archive, plot_depth, plot_progress  # matplotlib: slow to import

    records = [r.to_dict() for r in archive.store]
    if records:
        plot_progress(records, run / "progress.png", title=f"{task_name} ({mode})",
                      baseline=(baseline or {}).get("success"))
        spec = archive.config.grid
        plot_archive(archive.heatmap(), spec.obs_labels(), spec.ast_labels(), run / "archive.png")
        if any("depth" in r["metadata"] for r in records):
            plot_depth(records, run / "depth.png", title=f"{task_name}: success by lineage depth")
