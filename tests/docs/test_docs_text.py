"""The README and the guide read as a guide: the README fits in 150 lines, and no page
speaks of development history (work sessions, issue numbers, commit ids)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README_MAX_LINES = 150
HISTORY = re.compile(r"session [0-9]|issue [0-9]", re.I)
# a commit id: a word of 7-12 hex digits with at least one digit and one letter
COMMIT = re.compile(r"(?<![\w#.-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w-])(?!\.\w)", re.I)
FENCED = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.S | re.M)
INLINE = re.compile(r"`[^`\n]*`")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose(text: str) -> str:
    """The text outside code blocks and inline code."""
    return INLINE.sub("", FENCED.sub("", text))


def commit_ids(text: str) -> list[str]:
    return COMMIT.findall(prose(text))


def test_the_readme_is_at_most_150_lines():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES}"


def test_no_page_speaks_of_sessions_or_issues():
    found = [(str(p.relative_to(ROOT)), m.group(0)) for p in pages() for m in HISTORY.finditer(p.read_text())]
    assert not found, found


def test_no_page_names_a_commit():
    found = [(str(p.relative_to(ROOT)), ids) for p in pages() if (ids := commit_ids(p.read_text()))]
    assert not found, found


def test_the_checks_catch_what_they_are_for():
    assert commit_ids("fixed in commit 1a2b3c4.") == ["1a2b3c4"]
    assert commit_ids("see 04d0e21f9c") == ["04d0e21f9c"]
    assert not commit_ids("a colour `#1a2b3c4d`, a hash in code:\n```\nsha 1a2b3c4d5e\n```\n")
    assert not commit_ids("1000000 steps, facade, 2e-5, 0x1a2b3c4")
    assert HISTORY.search("as Session 12 found") and HISTORY.search("see issue 7")
