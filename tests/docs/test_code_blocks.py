"""Every ```python block of README.md and docs/**/*.md runs as shown.

A page's blocks run in order in one fresh Python process (a later block may use what an
earlier one made), with a temporary directory as the working directory, a temporary XLA cache (shared by
the pages of one test session) and matplotlib's file backend. A block that cannot run
here (it needs an API key, a GPU, Ray or hours) is fenced ```python no-run, and the text
beside it says why.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
BLOCK_SECONDS = 300  # a page's first compile, on a shared 2-core machine, takes most of it
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)

RUNNER = r'''
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
scope = {"__name__": "__main__"}
for line, code in blocks:
    print(f"--- block at line {line}", flush=True)
    try:
        exec(compile(code, f"<block at line {line}>", "exec"), scope)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED: the block at line {line}", flush=True)
        sys.exit(1)
'''


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line, info string, code) of each fenced block of the page."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, m.group("info").strip(), textwrap.dedent(m.group("body"))))
    return out


def runnable(path: Path) -> list[tuple[int, str]]:
    return [(line, code) for line, info, code in blocks(path) if info == "python"]


def test_blocks_are_fenced_python_or_python_no_run():
    """A block meant as Python is either run or marked no-run: no other spelling slips by."""
    odd = [(p.relative_to(ROOT), line, info) for p in pages() for line, info, _ in blocks(p)
           if info.lower().startswith(("py", "python")) and info not in ("python", "python no-run")]
    assert not odd, odd


def test_the_extractor_finds_runnable_and_no_run_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("x\n\n```python\na = 1\n```\n\n!!! note\n    ```python no-run\n    b = 2\n    ```\n")
    assert runnable(page) == [(3, "a = 1\n")]
    assert [info for _, info, _ in blocks(page)] == ["python", "python no-run"]


@pytest.fixture(scope="session")
def xla_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for every page of the session, none of the user's."""
    return tmp_path_factory.mktemp("xla")


PAGES = [p for p in pages() if runnable(p)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_a_pages_python_blocks_run(page: Path, tmp_path: Path, xla_cache: Path) -> None:
    import json

    code = runnable(page)
    (tmp_path / "blocks.json").write_text(json.dumps(code))
    (tmp_path / "runner.py").write_text(RUNNER)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(LIMEN_JAX_XLA_CACHE=str(xla_cache), MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "blocks.json")], cwd=work,
                          env=env, capture_output=True, text=True, timeout=BLOCK_SECONDS * len(code))
    assert done.returncode == 0, f"{page.relative_to(ROOT)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def test_no_run_blocks_are_counted():
    """How many blocks are left out (reported, not limited)."""
    counts = {str(p.relative_to(ROOT)): sum(info == "python no-run" for _, info, _ in blocks(p)) for p in pages()}
    print("python no-run blocks:", {k: v for k, v in counts.items() if v}, "total", sum(counts.values()))
