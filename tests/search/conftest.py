"""Puts the helpers these tests share with tests/evolve (the toy task, CLI runs,
test_evolve's configs) and tests/llm (the fake Anthropic API) on sys.path: they run
searches as the evolve tests do."""

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for helpers in ("evolve", "llm"):
    if str(TESTS / helpers) not in sys.path:
        sys.path.insert(0, str(TESTS / helpers))
