"""The concurrent, pipelined loop against the synchronous one, with a slow fake LLM.

    python benchmarks/pipeline.py --quick            # xland_easy, CPU preset budget

A local fake of the Messages API (tests/llm/fake_anthropic.py, through the real SDK)
answers every call after a fixed latency (default 20 s) with a valid program (a random
first-generation program from the task's offline catalog). Two runs of the same search
(3 generations x 4 candidates, ``--quick``) go through it:

- synchronous: ``--pipeline off`` and one call at a time (the baseline);
- pipelined: every call of a batch in flight at once, and batch i+1 asked and checked
  while batch i trains.

It prints each run's wall time per iteration and the share of it the loop spent waiting
on the LLM (asking and checking while nothing trained), and, last, ``sync / pipelined``.
Both runs get the same programs in the same batches (the fake model's n-th answer of a
run is the same program); JAX's persistent compilation cache is off (unless
LIMEN_JAX_XLA_CACHE is set) and the process's compiled training functions are dropped
before each run, so both compile and train the same work. The pipelined run goes first.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "llm"))
os.environ.setdefault("LIMEN_JAX_XLA_CACHE", "off")  # before limen_jax compiles anything

from fake_anthropic import FakeAnthropic, Reply  # noqa: E402

import limen_jax as lj  # noqa: E402
from limen_jax.llm import OfflineAuthor  # noqa: E402
from limen_jax.program import Limits, check_sample  # noqa: E402
from limen_jax.rl.cache import PROCESS_CACHE  # noqa: E402


class Model:
    """A fake model: after ``latency`` seconds, a from-scratch program of the catalog, a
    new draw per call (a model sampling at a temperature); :meth:`restart` replays the
    same sequence of programs for the next run."""

    def __init__(self, task_name: str, latency: float) -> None:
        self.task_name, self.latency = task_name, latency
        self.writer = OfflineAuthor(lj.make(task_name).offline_catalog())
        self.restart()

    def restart(self) -> None:
        self.calls = itertools.count()

    def __call__(self, body: dict) -> Reply:
        user = body["messages"][0]["content"]
        seed = next(self.calls)
        text = self.writer.program(None, [], "full", np.random.default_rng(seed))
        return Reply(text=text, input_tokens=len(user) // 3, output_tokens=len(text) // 3, delay=self.latency)


def run(task: str, iterations: int, candidates: int, pipeline: bool, root: Path) -> dict:
    name = "pipelined" if pipeline else "sync"
    cfg = {"search": {"iterations": iterations - 1, "candidates": candidates, "pipeline": "on" if pipeline else "off"},
           "llm": {"mutator": "anthropic", "concurrency": candidates if pipeline else 1, "max_cost_usd": 100.0}}
    t = time.time()
    result = lj.evolve(task, cfg, run_dir=root / name, verbose=True)
    wall = time.time() - t
    events = [json.loads(line) for line in (root / name / "events.jsonl").read_text().splitlines()]
    its = [e for e in events if e["event"] == "iteration"]
    assert result.complete and len(its) == iterations, result.stopped
    return {"name": name, "wall_s": wall, "iterations": its, "llm_wait_s": sum(e["llm_wait_s"] for e in its),
            "best": result.best.success if result.best else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="3 generations x 4 candidates (the documented run)")
    p.add_argument("--task", default="xland_easy")
    p.add_argument("--latency", type=float, default=20.0, help="seconds the fake LLM takes per call")
    p.add_argument("--iterations", type=int, help="generations (default 3 with --quick, else 5)")
    p.add_argument("--candidates", type=int, default=4)
    _record.add_argument(p)
    args = p.parse_args(argv)
    iterations = args.iterations or (3 if args.quick else 5)
    model = Model(args.task, args.latency)
    with FakeAnthropic(responder=model) as fake, tempfile.TemporaryDirectory() as tmp:
        os.environ["ANTHROPIC_API_KEY"] = "fake-key"
        os.environ["ANTHROPIC_BASE_URL"] = fake.url
        # both runs start equal: the checker's sample transitions computed once for both,
        # every training function compiled afresh by each (persistent cache off, and this
        # process's compiled functions dropped before each run)
        check_sample(lj.make(args.task), Limits())
        runs = []
        for pipeline in (True, False):
            model.restart()
            PROCESS_CACHE.clear()
            runs.append(run(args.task, iterations, args.candidates, pipeline, Path(tmp)))
        print(f"\n{args.task}: {iterations} generations x {args.candidates} candidates, "
              f"fake LLM latency {args.latency:.0f} s, {fake.posts} calls")
    for r in runs:
        per = [e["wall_s"] for e in r["iterations"]]
        share = r["llm_wait_s"] / max(sum(per), 1e-9)
        print(f"{r['name']:>9}: {r['wall_s']:.0f} s, per iteration "
              f"{' '.join(f'{x:.0f}' for x in per)} s (mean {np.mean(per):.0f} s), "
              f"LLM wait {r['llm_wait_s']:.0f} s = {share:.0%} of the wall time")
    print(f"sync / pipelined = {runs[1]['wall_s'] / runs[0]['wall_s']:.2f}")
    figures: dict[str, object] = {"wall sync / pipelined": runs[1]["wall_s"] / runs[0]["wall_s"]}
    for r in runs:
        figures[f"{r['name']} wall (s)"] = r["wall_s"]
        figures[f"{r['name']} LLM wait share"] = r["llm_wait_s"] / max(sum(e["wall_s"] for e in r["iterations"]), 1e-9)
    figures["generations x candidates, fake latency (s)"] = f"{iterations} x {args.candidates}, {args.latency:g}"
    _record.write(__file__, figures, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
