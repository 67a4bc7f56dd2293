"""A run's curves as TensorBoard event files, written by tensorboardX (``limen_jax[tensorboard]``).

Layout under the output folder (one TensorBoard "run" per folder)::

    search/          best_success, spend_usd, llm_calls, candidates, rejected: one point per iteration
    <program id>/    every learning curve of the program under its own name ("success",
                     "return", "reward/<term>", ...), one point per recorded training step

A curve's points are indexed 0, 1, ... (the record keeps no environment-step axis).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from limen_jax.view import data


class MissingTensorboardX(RuntimeError):
    pass


def _writer_class() -> Any:
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise MissingTensorboardX("--tensorboard needs tensorboardX: pip install 'limen_jax[tensorboard]'") from None
    return SummaryWriter


def write(run: data.Run, out_dir: str | Path) -> int:
    """Write the event files; returns how many scalar points were written."""
    writer_class = _writer_class()
    out = Path(out_dir)
    points = 0
    search = writer_class(logdir=str(out / "search"))
    try:
        for p in data.progress(run):
            it = p["iteration"]
            for tag, value in (("best_success", p["best"]), ("spend_usd", p["cost_total_usd"]),
                               ("llm_calls", p["calls"]), ("candidates", p["candidates"]),
                               ("rejected", p["rejected"])):
                if value is not None:
                    search.add_scalar(f"search/{tag}", float(value), it)
                    points += 1
    finally:
        search.close()
    for record in run.records.values():
        curves = record["curves"] or {}
        if not curves:
            continue
        writer = writer_class(logdir=str(out / _safe(record["id"])))
        try:
            for key in data.curve_keys(curves):
                for step, value in enumerate(curves[key]):
                    if isinstance(value, int | float) and data.finite(float(value)) is not None:
                        writer.add_scalar(key, float(value), step)
                        points += 1
        finally:
            writer.close()
    return points


_NAME_CHARS = 64


def _safe(name: str) -> str:
    """A folder name from a program id (ids are the run's data: keep them inside ``out``, and
    short enough for any file system). An id that is not already such a name gets a hash of
    it appended, so two ids never share a folder."""
    plain = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name).strip(".")
    if plain == name and 0 < len(name) <= _NAME_CHARS and name != "search":  # search/: the run's own
        return name
    return f"{plain[:_NAME_CHARS]}-{hashlib.sha256(name.encode('utf-8', 'replace')).hexdigest()[:12]}"
