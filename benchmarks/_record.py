"""The JSON record every benchmark script writes beside its printed lines.

A script adds ``--no-record`` to its parser (:func:`add_argument`) and, once its figures are
known, calls :func:`write` with them (name -> value, units in the name, the headline figure
first). The record goes to ``benchmarks/results/<script>.<budget>.json`` (or the folder in
``LIMEN_JAX_RESULTS``), replacing the previous run of that script at that budget;
benchmarks/report.py renders docs/results.md from these files. Only the standard library is
imported here: a script that never imports JAX (gpu.py --plan) keeps not importing it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
# The flags that name a budget, first match wins; a run with none of them is "default".
BUDGET_FLAGS = ("--quick", "--tiny", "--plan", "--wheels")


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux/macOS
        return []


LOAD_AT_START = _load()  # taken when the script imports this module, before its work


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-record", action="store_true",
                        help="do not write the JSON record (benchmarks/results/, or $LIMEN_JAX_RESULTS)")  # fmt: skip


def budget(argv: list[str]) -> str:
    """The budget a command line runs: the first of BUDGET_FLAGS it holds, without dashes."""
    for flag in BUDGET_FLAGS:
        if flag in argv:
            return flag.removeprefix("--")
    return "default"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu() -> str | None:
    if "jax" not in sys.modules:  # never import JAX for this
        return None
    try:
        jax = sys.modules["jax"]
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
    except Exception:
        return None
    return f"{len(gpus)} x {gpus[0].device_kind}" if gpus else None


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    return out.stdout.strip() if out.returncode == 0 else ""


def commit() -> str:
    """The short commit id, "+dirty" when tracked code differs (the records themselves excluded)."""
    head = _git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown"
    outside = (":!benchmarks/results", ":!docs/results.md")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *outside)
    return head + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "gpu": _gpu(), "load_start": LOAD_AT_START,
            "load_end": _load()}  # fmt: skip


def write(script: str, figures: dict[str, Any], args: argparse.Namespace | None = None,
          argv: list[str] | None = None, variant: str | None = None) -> Path | None:  # fmt: skip
    """Write the record of this run of ``script`` (its ``__file__``); None with --no-record.
    ``variant`` names a second kind of run at the same budget (``throughput --terms``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--no-record" in argv or (args is not None and getattr(args, "no_record", False)):
        return None
    name = Path(script).stem
    record = {
        "script": name,
        "budget": budget(argv) + (f"-{variant}" if variant else ""),
        "command": " ".join(["python", f"benchmarks/{name}.py", *argv]),
        "figures": {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in figures.items()},
        "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        "machine": machine(),
        "python": platform.python_version(),
        "jax": _version("jax"),
        "commit": commit(),
    }
    folder = Path(os.environ.get("LIMEN_JAX_RESULTS") or RESULTS)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.{record['budget']}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"record: {path}", file=sys.stderr, flush=True)
    return path
