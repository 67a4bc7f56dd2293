"""The shipped strategies' own prompt templates (``limen_jax/search/prompts/*.md``), read and
filled like the generic ones (:class:`~limen_jax.llm.templates.Templates`)."""

from __future__ import annotations

from limen_jax.llm.templates import Templates

TEMPLATES = Templates("limen_jax.search")
load_template = TEMPLATES.load
template_names = TEMPLATES.names
render = TEMPLATES.render
