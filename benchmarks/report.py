"""Render docs/results.md from the benchmark records in benchmarks/results/.

    python benchmarks/report.py                  # writes docs/results.md
    python benchmarks/report.py --out /tmp/r.md  # writes elsewhere

Records. Every benchmark script writes one JSON record per run through
benchmarks/_record.py: ``benchmarks/results/<script>.<budget>.json``, where the budget is
the first of the flags ``--quick``, ``--tiny``, ``--plan``, ``--wheels`` the command line
holds, without its dashes, or ``default`` when it holds none; a script may add a variant
(``throughput.quick-terms.json`` for ``--quick --terms``). A new run of the same script at
the same budget replaces its record. ``--no-record`` skips writing; ``LIMEN_JAX_RESULTS=DIR``
writes to DIR instead. A record holds the script's name, its budget, its figures (name ->
value, units in the name, the headline figure first), the exact command, the date (UTC),
the machine (CPU model, cores, GPU if JAX saw one, load average at start and end), the
Python and JAX versions and the git commit ("+dirty" when tracked code differed).

The page. One section per benchmark script (every ``benchmarks/*.py`` but the private
``_*.py`` modules and this one), in name order, headed by the script's name so that its
anchor is ``results.md#<script>``; each says what the script measures against what (the
first paragraph of its docstring), then one table per record with the command, date,
machine, load and versions (the record's commit stays in its file), or, without a record,
the command that makes one.
The output depends only on the records and the scripts' docstrings, so rendering the
committed records reproduces the committed page byte for byte (tests/benchmarks/test_report.py).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
PAGE = ROOT / "docs" / "results.md"
BUDGET_ORDER = ("quick", "tiny", "default", "plan", "wheels")

INTRO = """# Results

Every figure the guide cites comes from this page, and every figure on this page comes from a
record that a benchmark script wrote when it ran: the script, its exact command, the date, the
machine (with its load average, since a shared machine slows every run) and the versions. The
page is rendered from those records by `python benchmarks/report.py`; to refresh a figure, run
the command shown under it and render the page again. Ratios against a baseline measured in the
same run, on the same machine, are the figures to read: absolute seconds depend on the machine.
"""


def script_info(path: Path) -> tuple[str, str]:
    """(what it measures, the command that makes a record) from a script's source."""
    source = path.read_text()
    doc = ast.get_docstring(ast.parse(source)) or ""
    about = " ".join(doc.split("\n\n")[0].split())
    quick = '"--quick"' in source
    return about, f"python benchmarks/{path.name}" + (" --quick" if quick else "")


def scripts(folder: Path = HERE) -> dict[str, tuple[str, str]]:
    return {p.stem: script_info(p) for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")
            and p.name != "report.py"}  # fmt: skip


def load_records(folder: Path = RESULTS) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def value(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    if v is None:
        return "-"
    return str(v).replace("|", "\\|")


def _order(record: dict[str, Any]) -> tuple[int, str]:
    base = record["budget"].split("-")[0]
    return (BUDGET_ORDER.index(base) if base in BUDGET_ORDER else len(BUDGET_ORDER), record["budget"])


def record_block(r: dict[str, Any]) -> str:
    m = r["machine"]
    load = m.get("load_start") or []
    end = m.get("load_end") or []
    load_s = f"load average {load[0]} at start, {end[0]} at end" if load and end else "load average unknown"
    gpu = m.get("gpu") or "no GPU"
    rows = "\n".join(f"| {name} | {value(v)} |" for name, v in r["figures"].items())
    return (f"`{r['command']}`\n\n| figure | value |\n| --- | --- |\n{rows}\n\n"
            f"Run {r['date']} on {m['cpu']} ({m['cores']} cores, {gpu}), {load_s}; "
            f"Python {r['python']}, JAX {r['jax']}.\n")  # fmt: skip


def render(info: dict[str, tuple[str, str]], records: list[dict[str, Any]]) -> str:
    parts = [INTRO]
    for name, (about, command) in info.items():
        mine = sorted((r for r in records if r["script"] == name), key=_order)
        body = [f"## {name}\n", f"{about}\n" if about else ""]
        if mine:
            body += [record_block(r) for r in mine]
        else:
            body.append(f"No record yet: run `{command}`.\n")
        parts.append("\n".join(b for b in body if b))
    return "\n".join(parts)


def anchors(page: str) -> list[str]:
    """The anchors of the page's sections (what ``results.md#<script>`` links point at)."""
    return re.findall(r"^## (\S+)$", page, flags=re.M)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=PAGE, help="where to write the page (default: docs/results.md)")
    p.add_argument("--results", type=Path, default=RESULTS, help="the folder of records (default: benchmarks/results)")
    args = p.parse_args(argv)
    page = render(scripts(), load_records(args.results))
    args.out.write_text(page)
    print(f"wrote {args.out}: {len(anchors(page))} sections")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
