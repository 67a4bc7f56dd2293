"""What a module loads, and that no two modules import each other.

The training core and the sandbox workers stay free of the search: ``import limen_jax.rl``
and a worker checking a program (in a process of its own, as pool.py starts one) load no
search, LLM or archive module, and neither do the modules a checker fork server preloads
(docs/security.md lists what a worker imports). The package's import graph, counting
imports inside functions and under ``TYPE_CHECKING``, has no cycle."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# "limen_jax.run." with its dot: limen_jax.run_result and limen_jax.rundir are no part of it
SEARCH_SIDE = ("limen_jax.search", "limen_jax.llm", "limen_jax.archive", "limen_jax.loop", "limen_jax.run.",
               "limen_jax.config", "limen_jax.evolve")


def loaded_after(code: str) -> list[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('limen_jax'))))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def search_side(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(SEARCH_SIDE)]


def test_the_training_core_loads_no_search_llm_or_archive_module():
    loaded = loaded_after("import limen_jax.rl")
    assert "limen_jax.rl.trainer" in loaded and search_side(loaded) == []


def test_a_worker_and_a_fork_server_load_no_search_llm_or_archive_module(tmp_path):
    """The host builds a real request frame; a fresh process answers it with the worker's
    own functions (as its serve() does, without the seal) and reports what it loaded."""
    frame = tmp_path / "request.bin"
    host = f"""
from limen_jax.program import Limits, check_sample, pool, wire
from limen_jax.task import make
task = make("xland_easy")
code = '''import jax.numpy as jnp

def get_observation(state):
    return jnp.asarray(state.agent.position, dtype=jnp.float32)

def compute_reward(state, action, next_state):
    return -jnp.sum(jnp.abs(next_state.agent.position - 4)).astype(jnp.float32)
'''
header, buffers = pool.request(code, task, "full", check_sample(task, Limits()), Limits())
open({str(frame)!r}, "wb").write(wire.encode(header, buffers))
"""
    subprocess.run([sys.executable, "-c", host], check=True, timeout=300, cwd=ROOT)
    worker = f"""
from limen_jax.program import forkserver, wire, worker
import importlib
for name in forkserver.PRELOAD:
    importlib.import_module(name)
header, buffers = wire.decode(open({str(frame)!r}, "rb").read())
sample = worker._sample(header, buffers[: len(header["sample"])])
reply, blobs = worker.check_request(header, sample)
assert reply["ok"] and blobs, reply
"""
    loaded = loaded_after(worker)
    assert "limen_jax.program.checks" in loaded and search_side(loaded) == []


def _graph() -> dict[str, set[str]]:
    pkg = ROOT / "limen_jax"
    mods = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p for p in pkg.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in mods.items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):  # every import: top level, in functions, TYPE_CHECKING
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        deps = {resolve(n) for n in names if n.startswith("limen_jax")} - {None, mod}
        # importing a submodule runs its package's __init__: that edge is no cycle of ours
        graph[mod] = {d for d in deps if d is not None and not mod.startswith(d + ".")}
    return graph


def test_no_import_cycles():
    graph = _graph()
    assert "limen_jax.loop" in graph["limen_jax.run.start"]  # the graph sees imports inside functions
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_the_config_imports_no_search_code():
    """The config is assembled below the search: strategy options and ``--prescreen`` are
    judged where the run starts (limen_jax.run.start)."""
    assert sorted(d for d in _graph()["limen_jax.config"] if d.startswith("limen_jax.search")) == []


# What each room may not import (counting imports in functions and under TYPE_CHECKING):
# docs/concepts/architecture.md draws the same table.
NEVER = {
    "limen_jax.rl": ("limen_jax.search", "limen_jax.llm", "limen_jax.archive", "limen_jax.run", "limen_jax.loop"),
    "limen_jax.program": ("limen_jax.search", "limen_jax.llm", "limen_jax.archive", "limen_jax.run", "limen_jax.loop"),
    "limen_jax.llm": ("limen_jax.search", "limen_jax.run", "limen_jax.loop", "limen_jax.config"),
    "limen_jax.search": ("limen_jax.run", "limen_jax.loop", "limen_jax.config", "limen_jax.evolve"),
    "limen_jax.archive": ("limen_jax.search", "limen_jax.llm", "limen_jax.run", "limen_jax.loop", "limen_jax.rl"),
    "limen_jax.config": ("limen_jax.search", "limen_jax.run", "limen_jax.loop"),
}


def test_each_room_imports_only_what_it_may():
    graph = _graph()
    bad = sorted((mod, dep) for mod, deps in graph.items() for room, never in NEVER.items()
                 if within(mod, room) for dep in deps if any(within(dep, n) for n in never))
    assert bad == []


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")
