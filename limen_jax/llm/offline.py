"""The offline stand-in: writes programs from a task's catalog, with no network.

A program is described by a genome, ``{"features": [names], "terms": {name: weight}}``,
written into the source as a ``# limen-genome:`` comment so that a parent read back
from the archive can be edited again. The generic operators: from scratch (no parent),
and mutate (add, remove or reweight a piece) with crossover (a second parent's pieces).
Output is ordinary source in a markdown fence, which goes through the same extraction
and validation as an LLM's answer. A strategy's own operators and text answers are the
strategy's (``offline_program`` / ``offline_text``, :mod:`limen_jax.search.base`); they
build on the genome helpers here.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.catalog import Catalog
from limen_jax.interface import MAX_REWARD_TERMS
from limen_jax.llm.client import Answered, Client
from limen_jax.modes import REQUIRED

GENOME_TAG = "# limen-genome:"
_GENOME_RE = re.compile(r"^# limen-genome: (\{.*\})\s*$", re.MULTILINE)

Genome = dict[str, Any]
Edit = tuple[Genome, list[str]]  # a child genome and the edits that made it


def reweighted(weight: float, rng: np.random.Generator) -> float:
    """``weight`` times exp(N(0, 0.5)), to 3 significant digits: every offline reweighting."""
    return float(f"{weight * float(np.exp(rng.normal(0.0, 0.5))):.3g}")


def read_genome(code: str | None) -> Genome | None:
    """The genome written into ``code`` by :func:`render`, or None."""
    match = _GENOME_RE.search(code or "")
    if not match:
        return None
    try:
        genome = json.loads(match.group(1))
    except (ValueError, RecursionError):  # a program of a run directory is untrusted text
        return None
    features, terms = genome.get("features"), genome.get("terms")
    if not (isinstance(features, list) and all(isinstance(f, str) for f in features)
            and isinstance(terms, dict) and all(isinstance(w, (int, float)) and not isinstance(w, bool)
                                                and math.isfinite(w) for w in terms.values())):
        return None
    return genome


def render(catalog: Catalog, genome: Genome, mode: str = "full") -> str:
    """Source code for ``genome``: the prelude, then the functions the mode asks for."""
    features = [f for f in catalog.features if f.name in genome["features"]]
    terms = [(t, float(genome["terms"][t.name])) for t in catalog.terms if t.name in genome["terms"]]
    lines = ["import jax", "import jax.numpy as jnp", "", f"{GENOME_TAG} {json.dumps(genome, sort_keys=True)}", ""]
    lines.append(catalog.prelude.rstrip())
    if "get_observation" in REQUIRED[mode]:
        lines += ["", "", "def get_observation(state):"]
        for f in features:
            lines.append(textwrap.indent(f"# {f.name}\n{f.code}", "    "))
        parts = ", ".join(f"jnp.ravel(f_{f.name})" for f in features)
        lines.append(f"    return jnp.concatenate([{parts}]).astype(jnp.float32)")
    if "compute_reward" in REQUIRED[mode]:
        lines += ["", "", "def compute_reward(state, action, next_state):"]
        for t, _ in terms:
            lines.append(textwrap.indent(f"# {t.name}\n{t.code}", "    "))
        total = " + ".join(f"{w:.4g} * t_{t.name}" for t, w in terms) or "0.0"
        # a dict reward: one named term per piece (rollout shows each), as many as a reward may name
        if genome.get("named", True) and 0 < len(terms) <= MAX_REWARD_TERMS:
            named = ", ".join(f'"{t.name}": jnp.asarray({w:.4g} * t_{t.name}, dtype=jnp.float32)' for t, w in terms)
            lines.append(f"    return {{{named}}}")
        else:
            lines.append(f"    return jnp.asarray({total}, dtype=jnp.float32)")
    return "\n".join(lines) + "\n"


class OfflineAuthor:
    """Catalog-driven programs; deterministic given the Generator it is handed. Not a
    client: its answers need the request (parent, mode), not only the prompt."""

    name = "offline"

    def __init__(self, catalog: Catalog, *, max_ops: int = 2) -> None:
        self.catalog = catalog
        self.max_ops = max_ops
        self.order = {f.name: i for i, f in enumerate(catalog.features)}  # features render in catalog order
        self.priors = {"f": {f.name: f.prior for f in catalog.features}, "t": {t.name: t.prior for t in catalog.terms}}

    # --- genomes ------------------------------------------------------------------
    def random_genome(self, rng: np.random.Generator) -> Genome:
        """A small from-scratch program: the required pieces, a few features, a dense term,
        maybe one more term."""
        cat = self.catalog
        n_feat = int(rng.integers(cat.seed_features[0], cat.seed_features[1] + 1))
        names = [f.name for f in cat.features if f.name not in cat.required_features]
        drawn = self.draw(rng, names, n_feat, "f")
        features = sorted({*cat.required_features, *drawn}, key=self.order.__getitem__)
        terms = {name: cat.term(name).weight for name in cat.required_terms}
        if cat.dense_terms:
            name = self.draw(rng, list(cat.dense_terms), 1, "t")[0]
            terms[name] = cat.term(name).weight
        optional = [t.name for t in cat.terms if t.name not in terms]
        n_terms = int(rng.integers(cat.seed_terms[0], cat.seed_terms[1] + 1))
        for name in self.draw(rng, optional, n_terms, "t"):
            terms[name] = cat.term(name).weight
        return {"features": features, "terms": terms}

    def mutate(self, genome: Genome, rng: np.random.Generator, other: Genome | None = None) -> tuple[Genome, list[str]]:
        """Apply 1..max_ops edits (crossover first when ``other`` is given)."""
        cat = self.catalog
        features = list(genome["features"])
        terms = dict(genome["terms"])
        ops: list[str] = []
        if other is not None:
            pool = sorted(set(features) | set(other["features"]))
            keep = [
                f
                for f in pool
                if (f in features and f in other["features"]) or f in cat.required_features or rng.random() < 0.5
            ]
            features = keep or features
            for name, weight in other["terms"].items():
                if name not in terms and rng.random() < 0.5:
                    terms[name] = weight
            ops.append("crossover")
        n_ops = int(rng.integers(1, self.max_ops + 1))
        while n_ops > 0 or (features == genome["features"] and terms == genome["terms"] and len(ops) < 8):
            # an edit can undo another (add then remove): keep editing until the child differs
            n_ops -= 1
            unused_f = [f.name for f in cat.features if f.name not in features]
            unused_t = [t.name for t in cat.terms if t.name not in terms]
            removable_f = [f for f in features if f not in cat.required_features]
            # the last dense term stays: without one the reward is constant under random play
            # and the checker would reject the child
            dense = [t for t in terms if t in cat.dense_terms]
            removable_t = [t for t in terms if t not in cat.required_terms and dense != [t]]
            choices = []
            if unused_f:
                choices += ["add_feature"] * 3
            if removable_f and len(features) > 1:
                choices.append("remove_feature")
            if unused_t:
                choices += ["add_term"] * 2
            if removable_t:
                choices.append("remove_term")
            choices += ["reweight"] * 2
            op = str(rng.choice(choices))
            if op == "add_feature":
                name = self.draw(rng, unused_f, 1, "f")[0]
                features.append(name)
            elif op == "remove_feature":
                name = self.draw(rng, removable_f, 1, "f", inverse=True)[0]
                features.remove(name)
            elif op == "add_term":
                name = self.draw(rng, unused_t, 1, "t")[0]
                terms[name] = cat.term(name).weight
            elif op == "remove_term":
                name = self.draw(rng, removable_t, 1, "t", inverse=True)[0]
                del terms[name]
            else:
                name = str(rng.choice(sorted(terms)))
                terms[name] = reweighted(terms[name], rng)
            ops.append(f"{op}:{name}")
        return {"features": sorted(set(features), key=self.order.__getitem__), "terms": terms}, ops

    def draw(
        self, rng: np.random.Generator, names: list[str], k: int, kind: str, inverse: bool = False
    ) -> list[str]:
        """``k`` distinct feature (``kind`` "f") or term ("t") names drawn with odds
        proportional to their priors (to 1 / prior with ``inverse``: an informed author
        drops the least promising piece first)."""
        if k <= 0 or not names:
            return []
        priors = self.priors[kind]
        odds = np.array([priors.get(n, 1.0) for n in names], dtype=np.float64)
        odds = 1.0 / odds if inverse else odds
        picked = rng.choice(len(names), size=min(k, len(names)), replace=False, p=odds / odds.sum())
        return [names[i] for i in picked]

    # --- answers --------------------------------------------------------------------
    def program(self, parent: str | None, others: Sequence[str], mode: str, rng: np.random.Generator) -> str:
        """The generic operators' answer (from scratch, mutate, crossover) as an LLM would
        write it: from scratch without a ``parent`` (source code) or with one that holds
        no genome, else 1..max_ops edits of it with a 30 % chance of crossing over with
        one of ``others`` (source codes; those without a genome are skipped)."""
        genome = read_genome(parent) if parent is not None else None
        genomes = [g for g in (read_genome(c) for c in others) if g is not None]
        if genome is None:  # no parent, or one not written offline: a fresh program
            child, ops = self.random_genome(rng), ["from_scratch"]
        else:
            other = genomes[int(rng.integers(len(genomes)))] if genomes and rng.random() < 0.3 else None
            child, ops = self.mutate(genome, rng, other)
        return self.edit(child, ops, mode)

    def answering(self, text: str) -> Client:
        """The client that delivers ``text``, an answer written offline for one request:
        as the stand-in's, at no cost (a subclass may price it or delay it, as a model would)."""
        return Answered(text, model=self.name, name=self.name)

    def edit(self, genome: Genome, ops: Sequence[str], mode: str) -> str:
        """The answer holding ``genome``'s program: a line naming the edits, then the code."""
        return f"Offline edit ({', '.join(ops)}).\n\n```python\n{render(self.catalog, genome, mode)}```\n"
