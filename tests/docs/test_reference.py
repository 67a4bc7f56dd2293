"""The generated reference pages (docs/reference/cli.md, config.md) are what the generator
writes now: a new flag, a changed help text or a new config key fails here until
``python docs/gen_reference.py`` is run and its pages committed."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_up_to_date():
    for path, text in _generator().pages().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run python docs/gen_reference.py"


def test_every_config_key_has_a_meaning():
    page = (ROOT / "docs" / "reference" / "config.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) > 50
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    assert all(len(c) == 4 for c in cells)
    missing = [c[0] for c in cells if not c[3]]
    assert not missing, f"config keys without a meaning (add a comment above the field): {missing}"
