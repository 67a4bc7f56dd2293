"""The prompt templates (``prompts/*.md``, packaged data) and filling them."""

from __future__ import annotations

import functools
import re
from importlib import resources
from string import Template

# Marks an omitted optional block so that the blank lines around it can be folded.
_EMPTY = "\x00"


@functools.cache
def load_template(name: str) -> str:
    """The text of ``prompts/<name>.md`` (packaged data, read once)."""
    path = resources.files("limen_jax.llm").joinpath("prompts", f"{name}.md")
    if not path.is_file():
        raise FileNotFoundError(f"no prompt template {name!r} ({path})")
    return path.read_text(encoding="utf-8")


def template_names() -> list[str]:
    folder = resources.files("limen_jax.llm").joinpath("prompts")
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".md"))


def render(name: str, **values: str) -> str:
    """Fill a template; a missing value is an error. Empty values drop their paragraph."""
    filled = {k: (v if v.strip() else _EMPTY) for k, v in values.items()}
    text = Template(load_template(name)).substitute(filled)
    return re.sub(r"\n*\x00\n*", "\n\n", text).strip()
