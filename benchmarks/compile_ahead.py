"""Compiling the next batch ahead: the same offline search with and without it.

    python benchmarks/compile_ahead.py                  # the CPU quick start (xland_easy, 3 + 1 generations)
    python benchmarks/compile_ahead.py --task go1_push --config tiny.json

In one run, one after the other, each in a fresh process with an empty persistent
compile cache of its own: ``limen_jax.evolve`` with the default evaluator (which
compiles ahead what the loop hands it with ``prepare``: placeholders of the first
batch's shapes at the start, each pipelined batch once checked) and with the same
evaluator minus ``prepare`` (every batch compiles when it is submitted, as before).
Both search the same programs with the same seeds, so their results must agree. Prints
each run's wall time and per-iteration compile seconds (what the batch still compiled
when submitted); the last line is the wall ratio without / with.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

_RUN = """
import json, sys, time
import limen_jax as lj
from limen_jax.search.evaluation.evaluator import InProcessEvaluator

class InTurn(InProcessEvaluator):
    prepare = None  # the loop looks it up: None means nothing is compiled ahead

cfg = json.loads(sys.argv[1])
ev = InProcessEvaluator() if sys.argv[2] == "ahead" else InTurn()
t = time.perf_counter()
run = lj.evolve(sys.argv[3], cfg, run_dir=sys.argv[4], evaluator=ev, verbose=False)
wall = time.perf_counter() - t
ev.close()
events = [json.loads(line) for line in open(sys.argv[4] + "/events.jsonl")]
print(json.dumps({"wall": wall, "best": run.best.success if run.best else None,
                  "compile": [e["compile_s"] for e in events if e["event"] == "iteration"],
                  "success": [r.success for r in run.records]}))
"""


def run(mode: str, task: str, config: dict, scratch: str) -> dict:
    env = {**os.environ, "LIMEN_JAX_XLA_CACHE": os.path.join(scratch, f"xla-{mode}")}
    out = subprocess.run([sys.executable, "-c", _RUN, json.dumps(config), mode, task, os.path.join(scratch, mode)],
                         capture_output=True, text=True, env=env, check=False)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="xland_easy")
    p.add_argument("--config", default=None, help="an evolve config file (JSON); default: the task's CPU preset")
    _record.add_argument(p)
    args = p.parse_args()
    config = json.loads(pathlib.Path(args.config).read_text()) if args.config else {}
    config.setdefault("llm", {})["mutator"] = "offline"
    with tempfile.TemporaryDirectory(prefix="limen-ahead-") as scratch:
        results = {}
        for mode in ("in_turn", "ahead"):
            r = results[mode] = run(mode, args.task, config, scratch)
            compile_s = " / ".join(f"{c:.1f}" if c is not None else "-" for c in r["compile"])
            print(f"{mode:8s} wall {r['wall']:6.1f} s, compile per iteration {compile_s} s, best {r['best']:.3f}",
                  flush=True)  # fmt: skip
    same = results["in_turn"]["success"] == results["ahead"]["success"]
    print(f"same successes for every program: {same}")
    print(f"wall ratio in turn / ahead: {results['in_turn']['wall'] / results['ahead']['wall']:.2f}")
    _record.write(__file__, {
        "wall ratio in turn / ahead": results["in_turn"]["wall"] / results["ahead"]["wall"],
        "in turn wall (s)": results["in_turn"]["wall"], "ahead wall (s)": results["ahead"]["wall"],
        "same successes for every program": same, "task": args.task,
    }, args)  # fmt: skip


if __name__ == "__main__":
    main()
