"""Every CLI's --help is plain text: no reStructuredText markers reach a terminal."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

CLIS = ["evolve", "train", "check", "tasks", "compare", "rollout", "view", "demos"]


@pytest.mark.parametrize("cli", CLIS)
def test_help_is_plain_text(cli):
    out = subprocess.run([sys.executable, "-m", f"limen_jax.{cli}", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith(f"usage: python -m limen_jax.{cli}"), out.stderr[-1000:]
    # an RST literal (``x``) or role; a markdown fence (```python) is meant
    assert not re.search(r"(?<!`)``[^`\n]+``(?!`)|:func:|:class:|:mod:", out.stdout), out.stdout
