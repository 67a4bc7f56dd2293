"""benchmarks/report.py: the committed page is exactly what the committed records render to,
every benchmark script has its section and anchor, and two hand-made records render as
written here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "report.py"


def load():
    spec = importlib.util.spec_from_file_location("bench_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_what_the_committed_records_render_to(tmp_path):
    report = load()
    out = tmp_path / "results.md"
    assert report.main(["--out", str(out)]) == 0
    assert out.read_bytes() == (ROOT / "docs" / "results.md").read_bytes(), (
        "docs/results.md is stale: run python benchmarks/report.py"
    )


def test_every_script_has_a_section_whose_anchor_is_its_name():
    report = load()
    names = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
    names.remove("report")
    page = (ROOT / "docs" / "results.md").read_text()
    assert report.anchors(page) == names
    for cited in ("compile_cost", "batched_vs_sequential", "vs_purejaxrl", "throughput", "fidelity", "gpu",
                  "evaluators", "sharding", "sandbox_cost", "check_sample_cost", "watchdog_cost", "view_open",
                  "mujoco_tasks", "strategies", "pipeline", "quick_start"):  # fmt: skip
        assert cited in names


def test_every_committed_record_names_a_script_and_its_budget():
    report = load()
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        record = json.loads(path.read_text())
        assert path.name == f"{record['script']}.{record['budget']}.json"
        assert (ROOT / "benchmarks" / f"{record['script']}.py").is_file()
        assert record["command"].startswith(f"python benchmarks/{record['script']}.py")
        assert record["figures"] and report.value(next(iter(record["figures"].values())))


MACHINE = {"cpu": "Test CPU", "cores": 2, "gpu": None, "load_start": [1.5, 1.0, 0.5], "load_end": [2.0, 1.0, 0.5]}


def test_two_hand_made_records_render_exactly():
    report = load()
    info = {
        "alpha": ("What alpha measures, against its baseline.", "python benchmarks/alpha.py --quick"),
        "beta": ("What beta measures.", "python benchmarks/beta.py"),
        "gamma": ("", "python benchmarks/gamma.py"),
    }
    records = [
        {"script": "alpha", "budget": "default", "command": "python benchmarks/alpha.py",
         "figures": {"ratio": 1.23456, "wall (s)": 12345.6, "ok": True}, "date": "2026-01-02T03:04:05+00:00",
         "machine": {**MACHINE, "gpu": "1 x H100"}, "python": "3.11.7", "jax": "0.4.30", "commit": "abc1234"},
        {"script": "alpha", "budget": "quick", "command": "python benchmarks/alpha.py --quick",
         "figures": {"ratio": 0.5, "programs": 12000, "note": "a | b"}, "date": "2026-01-01T00:00:00+00:00",
         "machine": MACHINE, "python": "3.11.7", "jax": "0.4.30", "commit": "abc1234+dirty"},
    ]  # fmt: skip
    page = report.render(info, records)
    assert page == report.INTRO + """
## alpha

What alpha measures, against its baseline.

`python benchmarks/alpha.py --quick`

| figure | value |
| --- | --- |
| ratio | 0.5 |
| programs | 12,000 |
| note | a \\| b |

Run 2026-01-01T00:00:00+00:00 on Test CPU (2 cores, no GPU), load average 1.5 at start, 2.0 at end; \
Python 3.11.7, JAX 0.4.30.

`python benchmarks/alpha.py`

| figure | value |
| --- | --- |
| ratio | 1.23 |
| wall (s) | 12,346 |
| ok | yes |

Run 2026-01-02T03:04:05+00:00 on Test CPU (2 cores, 1 x H100), load average 1.5 at start, 2.0 at end; \
Python 3.11.7, JAX 0.4.30.

## beta

What beta measures.

No record yet: run `python benchmarks/beta.py`.

## gamma

No record yet: run `python benchmarks/gamma.py`.
"""
    assert report.anchors(page) == ["alpha", "beta", "gamma"]


def test_a_record_goes_where_LIMEN_JAX_RESULTS_says_and_no_record_writes_nothing(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import _record

    monkeypatch.setenv("LIMEN_JAX_RESULTS", str(tmp_path))
    path = _record.write("benchmarks/alpha.py", {"ratio": 2.0}, argv=["--quick", "--k", "3"])
    record = json.loads(path.read_text())
    assert path == tmp_path / "alpha.quick.json"
    assert record["command"] == "python benchmarks/alpha.py --quick --k 3" and record["figures"] == {"ratio": 2.0}
    assert set(record) == {"script", "budget", "command", "figures", "date", "machine", "python", "jax", "commit"}
    assert set(record["machine"]) == {"cpu", "cores", "gpu", "load_start", "load_end"}
    assert _record.write("benchmarks/beta.py", {"x": 1}, argv=["--no-record"]) is None
    assert not (tmp_path / "beta.default.json").exists()
