"""Figures of a run: progress (the paper's Figure 3) and the archive heatmap."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # headless: runs on servers and in CI
    import matplotlib.pyplot as plt

    return plt


def best_so_far(records: Sequence[dict[str, Any]]) -> list[float]:
    """The running best success after each iteration 0..last (0 before any score).
    ``records``: ProgramRecord dicts; rejected ones (success None) count as no score."""
    if not records:
        return []
    best, out = 0.0, []
    for it in range(max(r["iteration"] for r in records) + 1):
        scores = [r["success"] for r in records if r["iteration"] == it and r.get("success") is not None]
        best = max([best, *scores])
        out.append(best)
    return out


def _candidates(ax: Any, records: Sequence[dict[str, Any]], x: Any) -> list[dict[str, Any]]:
    """Each record as a dot at ``x(record)`` and its success, rejected ones (success None) as
    red crosses at 0; returns the scored records."""
    ok = [r for r in records if r.get("success") is not None]
    bad = [r for r in records if r.get("success") is None]
    if ok:
        ax.scatter([x(r) for r in ok], [r["success"] for r in ok], s=22, alpha=0.6, color="tab:blue",
                   label="candidate")
    if bad:
        ax.scatter([x(r) for r in bad], [0.0] * len(bad), marker="x", color="tab:red", label="rejected / crashed")
    return ok


def _finish_success(fig: Any, ax: Any, xlabel: str, title: str, path: str | Path | None) -> Any:
    """Integer x ticks, the success axis, legend and title; saved to ``path`` when given."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def _save(fig: Any, path: str | Path | None) -> Any:
    fig.tight_layout()
    if path is not None:
        save_atomic(fig, path)
        _pyplot().close(fig)
    return fig


def save_atomic(fig: Any, path: str | Path) -> None:
    """``fig.savefig(path)`` (format from the name's suffix) written whole or not at all: a
    Ctrl-C or a kill while it writes leaves the previous figure, never a torn one (matplotlib
    truncates the file first and writes it in chunks)."""
    from limen_jax.run.reader import write_file

    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format=path.suffix.lstrip(".") or "png")
    # a temporary file made afresh (O_EXCL | O_NOFOLLOW) and renamed over the entry: a link
    # planted at the figure's name or its temporary name is replaced, never written through
    write_file(path.parent, path.name, buf.getvalue())


def plot_progress(records: Sequence[dict[str, Any]], path: str | Path | None = None, title: str = "",
                  baseline: float | None = None) -> Any:
    """Each candidate as a dot at its iteration (crashes as red crosses at 0), the running
    best success as a step line, and the baseline's success (the task's default interface)
    as a dashed level when given. ``records``: ProgramRecord dicts."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    _candidates(ax, records, lambda r: r["iteration"])
    if records:
        line = best_so_far(records)
        ax.step(range(len(line)), line, where="post", color="black", label="best so far")
    if baseline is not None:
        ax.axhline(baseline, color="tab:gray", linestyle="--", label=f"baseline {baseline:.2f} (sparse reward)")
    return _finish_success(fig, ax, "iteration", title or "interface search", path)


def plot_archive(heatmap: np.ndarray, obs_labels: Sequence[str], ast_labels: Sequence[str],
                 path: str | Path | None = None, title: str = "") -> Any:
    """Heatmap of the best fitness per cell over all islands, on the run viewer's axes
    (reward AST nodes across, observation dimension up), cut to the occupied cells and one
    empty cell around them: a run fills a few cells of a 10 x 20 grid.

    heatmap: (num_obs_bins, num_ast_bins) float, NaN where empty (Archive.heatmap()).
    """
    h = np.asarray(heatmap, dtype=np.float64)
    rows, cols = np.nonzero(np.isfinite(h).any(1))[0], np.nonzero(np.isfinite(h).any(0))[0]
    r0, r1 = (max(rows[0] - 1, 0), min(rows[-1] + 2, h.shape[0])) if rows.size else (0, h.shape[0])
    c0, c1 = (max(cols[0] - 1, 0), min(cols[-1] + 2, h.shape[1])) if cols.size else (0, h.shape[1])
    part = h[r0:r1, c0:c1]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(min(3 + 0.55 * part.shape[1], 11), min(2.5 + 0.4 * part.shape[0], 7)))
    im = ax.imshow(part, origin="lower", aspect="auto", vmin=0.0, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(part.shape[1]))
    ax.set_xticklabels(ast_labels[c0:c1], rotation=45, fontsize=7)
    ax.set_yticks(range(part.shape[0]))
    ax.set_yticklabels(obs_labels[r0:r1], fontsize=7)
    ax.set_xlabel("reward AST nodes")
    ax.set_ylabel("observation dimension")
    whole = part.shape == h.shape
    # two short lines: a one-line title is wider than a plot of a few cells and is cut off
    ax.set_title(title or "MAP-Elites archive\nbest success per cell" + ("" if whole else " (occupied region)"),
                 fontsize=10)
    for (i, j), value in np.ndenumerate(part):  # each filled cell's number
        if np.isfinite(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if value > 0.6 else "white")
    fig.colorbar(im, ax=ax, label="success")
    return _save(fig, path)


def plot_depth(records: Sequence[dict[str, Any]], path: str | Path | None = None, title: str = "") -> Any:
    """Success by lineage depth: each candidate whose ``metadata["depth"]`` is set as a dot
    at its depth (rejected ones as red crosses at 0), and the best success per depth as a
    line. ``records``: ProgramRecord dicts; those without a depth are left out."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    deep = [r for r in records if isinstance(r.get("metadata", {}).get("depth"), int)]
    ok = _candidates(ax, deep, lambda r: r["metadata"]["depth"])
    if ok:
        depths = sorted({r["metadata"]["depth"] for r in ok})
        best = [max(r["success"] for r in ok if r["metadata"]["depth"] == d) for d in depths]
        ax.plot(depths, best, color="black", marker="o", label="best at depth")
    return _finish_success(fig, ax, "lineage depth", title or "success by lineage depth", path)
