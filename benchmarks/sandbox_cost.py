"""What the sandboxed checker costs: check time per program, K programs in parallel, and
training speed with the exported artifact vs the program's Python closure.

    python benchmarks/sandbox_cost.py                 # xland_easy, K=8, 50k training steps
    python benchmarks/sandbox_cost.py --steps 20000 --k 8 --workers 8

"worker start-up" times a fresh Python importing what a worker (and a fork server) imports
before its first program, against the same plus the config module (and with it the search,
LLM and archive modules), in the same run: what keeping them out of a worker's imports
saves every fresh worker.

"one program" is checked twice: in a fork server's child (the default; the server was
started by the check before) and in a fresh worker (``LIMEN_JAX_FORKSERVER=0``).

The closure side runs the bundled (trusted) reference interface's Python in this process,
as an engine without the sandbox would; the exported side is what compile_interface returns.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

import jax
from limen_envs import interfaces

import limen_jax as lj
import limen_jax.rl
from limen_jax.interface import Interface
from limen_jax.program import Limits, check_sample, compile_interface, compile_many, isolation, pool
from limen_jax.program.sandbox import exec_program, program_function

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402


def closure_interface(source: str, obs_dim: int, size: int) -> Interface:
    """The pre-sandbox way: the program's own Python functions, called in the engine."""
    ns = exec_program(source)
    obs = program_function(ns, "get_observation", 1, "state")
    rew = program_function(ns, "compute_reward", 3, "state, action, next_state")

    def observe(sim):  # type: ignore[no-untyped-def]
        return jax.numpy.asarray(obs(sim), jax.numpy.float32).reshape(obs_dim)

    def reward(sim, a, nxt):  # type: ignore[no-untyped-def]
        return jax.numpy.asarray(rew(sim, a, nxt), jax.numpy.float32).reshape(())

    return Interface(observe, reward, obs_dim, size, source, "closure")


def steps_per_second(task, iface: Interface, steps: int) -> float:  # type: ignore[no-untyped-def]
    result = lj.rl.train(task, [iface], seeds=1, steps=steps)
    return steps / max(result.wall_s - result.compile_s, 1e-9)


def kernel_seconds(iface: Interface, sample, repeats: int = 30) -> float:  # type: ignore[no-untyped-def]
    """Best time of jit(vmap(observe + reward)) over the sample tiled to 4096 transitions."""
    big = jax.tree.map(lambda x: jax.numpy.concatenate([x] * (4096 // len(x) + 1))[:4096], sample)

    @jax.jit
    def both(tr):  # type: ignore[no-untyped-def]
        obs = jax.vmap(iface.observe)(tr.sim)
        return obs.sum() + jax.vmap(iface.reward)(tr.sim, tr.action, tr.next_sim).sum()

    jax.block_until_ready(both(big))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(both(big))
        best = min(best, time.perf_counter() - t0)
    return best


def startup_seconds(modules: list[str], repeats: int) -> float:
    """Median wall seconds of a fresh interpreter importing ``modules``."""
    code = f"import importlib\nfor m in {modules!r}: importlib.import_module(m)"
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="xland_easy")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-checks", action="store_true", help="only the training comparison")
    parser.add_argument("--startup-repeats", type=int, default=7)
    _record.add_argument(parser)
    args = parser.parse_args()

    from limen_jax.program.forkserver import PRELOAD

    worker = list(PRELOAD)
    before = startup_seconds([*worker, "limen_jax.config", "limen_jax.search", "limen_jax.llm"], args.startup_repeats)
    after = startup_seconds(worker, args.startup_repeats)
    print(f"worker start-up (median of {args.startup_repeats}): {after:.2f} s, with the search modules "
          f"it loaded before {before:.2f} s (ratio {before / after:.2f})")

    task = lj.make(args.task)
    source = interfaces.path(args.task).read_text()
    limits = Limits()
    sample = check_sample(task, limits)
    print(f"mechanism: {isolation.mechanism()}")

    iface = compile_interface(source, task, sample=sample)
    if not args.skip_checks:
        t0 = time.perf_counter()
        iface = compile_interface(source, task, sample=sample)
        forked = time.perf_counter() - t0
        os.environ[pool.ENV_FORKSERVER] = "0"
        t0 = time.perf_counter()
        compile_interface(source, task, sample=sample)
        fresh = time.perf_counter() - t0
        del os.environ[pool.ENV_FORKSERVER]
        print(f"one program: {forked:.1f} s in a fork server's child, {fresh:.1f} s in a fresh worker "
              f"(ratio {fresh / forked:.2f})")
        sources = [source + f"\n# variant {i}\n" for i in range(args.k)]
        t0 = time.perf_counter()
        results = compile_many(sources, task, sample=sample, workers=args.workers)
        many = time.perf_counter() - t0
        ok = sum(isinstance(r, Interface) for r in results)
        print(f"K={args.k} programs, {args.workers} workers: {many:.1f} s ({many / args.k:.1f} s/program), {ok} ok")

    closure = closure_interface(iface.source, iface.obs_dim, iface.reward_ast_size)
    ke, kc = kernel_seconds(iface, sample), kernel_seconds(closure, sample)
    print(f"φ+R over 4096 transitions: exported {ke * 1e3:.2f} ms, closure {kc * 1e3:.2f} ms, ratio {kc / ke:.3f}")
    ratios = []
    for r in range(args.repeats):
        exported = steps_per_second(task, iface, args.steps)
        python = steps_per_second(task, closure, args.steps)
        ratios.append(exported / python)
        print(
            f"repeat {r}: training steps/s exported {exported:.0f}, closure {python:.0f}, ratio {exported / python:.3f}"
        )
    figures: dict[str, object] = {}
    if ratios:
        figures["training steps/s exported / closure (median)"] = statistics.median(ratios)
    if not args.skip_checks:
        figures.update({"check of one program, fork server (s)": forked,
                        "check of one program, fresh worker (s)": fresh,
                        f"check of {args.k} programs, {args.workers} workers (s)": many,
                        f"programs passing of {args.k}": ok})  # fmt: skip
    figures.update({"worker start-up (s)": after, "worker start-up with the search modules (s)": before,
                    "φ+R exported, 4096 transitions (ms)": ke * 1e3, "φ+R closure, 4096 transitions (ms)": kc * 1e3,
                    "isolation mechanism": isolation.mechanism()})  # fmt: skip
    _record.write(__file__, figures, args)


if __name__ == "__main__":
    main()
