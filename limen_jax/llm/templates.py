"""Prompt templates: ``prompts/*.md`` files packaged beside a module, and filling them.

:data:`TEMPLATES` holds the generic prompts (``limen_jax/llm/prompts/``); a strategy's own
prompts live in a folder of their own, read through another :class:`Templates`.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from string import Template

# Marks an omitted optional block so that the blank lines around it can be folded.
_EMPTY = "\x00"


class Templates:
    """The templates in the ``prompts/`` folder of the package ``package`` (packaged data)."""

    def __init__(self, package: str) -> None:
        self.package = package

    @functools.cache  # noqa: B019 (a few module-level instances, alive for the process)
    def load(self, name: str) -> str:
        """The text of ``prompts/<name>.md`` (read once)."""
        path = resources.files(self.package).joinpath("prompts", f"{name}.md")
        if not path.is_file():
            raise FileNotFoundError(f"no prompt template {name!r} ({path})")
        return path.read_text(encoding="utf-8")

    def names(self) -> list[str]:
        folder = resources.files(self.package).joinpath("prompts")
        return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".md"))

    def render(self, name: str, **values: str) -> str:
        """Fill a template; a missing value is an error. Empty values drop their paragraph."""
        filled = {k: (v if v.strip() else _EMPTY) for k, v in values.items()}
        text = Template(self.load(name)).substitute(filled)
        return re.sub(r"\n*\x00\n*", "\n\n", text).strip()


TEMPLATES = Templates("limen_jax.llm")
load_template = TEMPLATES.load
template_names = TEMPLATES.names
render = TEMPLATES.render
