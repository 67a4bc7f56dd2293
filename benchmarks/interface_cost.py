"""The work of φ + R relative to one environment step, for the bundled reference
interfaces and the expensive attacks (the figures behind ``Limits.max_work_vs_step``).

    python benchmarks/interface_cost.py                  # every reference interface + attacks
    python benchmarks/interface_cost.py --tasks xland_easy ant

Work is counted by ``limen_jax.program.cost`` on the traced jaxprs (element operations
per state, loops multiplied out). The reference programs and the two attacks traced here
are trusted or harmless to trace; nothing is compiled or run.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from pathlib import Path
from typing import Any

import jax
from limen_envs import interfaces

import limen_jax as lj
from limen_jax.program.cost import _walk, step_work
from limen_jax.program.sandbox import exec_program, program_function

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

REFERENCES = {"xland_easy": "xland_easy", "xland_medium": "xland_medium", "xland_hard": "xland_hard",
              "go1_push": "go1_push", "panda_track": "panda_track", "ant": "ant"}  # fmt: skip


def program_work(source: str, task: Any) -> float:
    """Element operations of φ + R per transition (the program's own Python, traced here)."""
    ns = exec_program(source)
    obs = program_function(ns, "get_observation", 1, "state")
    rew = program_function(ns, "compute_reward", 3, "state, action, next_state")
    sim = jax.eval_shape(task.reset, jax.random.key(0)).sim
    action = jax.eval_shape(task.action_space.sample, jax.random.key(0))
    big = 2**62
    work = _walk(jax.make_jaxpr(obs)(sim).jaxpr, 1, "obs", big)
    return work + _walk(jax.make_jaxpr(rew)(sim, action, sim).jaxpr, 1, "reward", big)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=list(REFERENCES))
    _record.add_argument(parser)
    args = parser.parse_args()
    print(f"{'task':14s} {'step work':>12s} {'φ+R work':>12s} {'ratio':>9s}")
    figures: dict[str, float] = {}
    for name in args.tasks:
        task = lj.make(name)
        step = step_work(task)
        work = program_work(interfaces.path(REFERENCES[name]).read_text(), task)
        print(f"{name:14s} {step:12.3g} {work:12.3g} {work / step:9.3g}", flush=True)
        figures[f"{name}: reference φ+R work / step work"] = work / step
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "program"))
    from attacks import hangs
    from evolved_style import PROGRAMS

    task = lj.make("xland_easy")
    step = step_work(task)
    for label, source in PROGRAMS.items():
        work = program_work(source, task)
        print(f"evolved-style {label:15s} {work:12.3g} {work / step:9.3g} x xland_easy's step", flush=True)
        figures[f"evolved-style {label}: work / xland_easy step work"] = work / step
    for attack in ("fori_loop_2_31", "huge_convolution"):
        work = program_work(hangs.ATTACKS[attack], task)
        print(f"attack {attack:22s} {work:12.3g} {work / step:9.3g} x xland_easy's step", flush=True)
        figures[f"attack {attack}: work / xland_easy step work"] = work / step
    _record.write(__file__, figures, args)


if __name__ == "__main__":
    main()
