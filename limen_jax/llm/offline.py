"""The offline mutator: evolves programs from a task's catalog, with no network.

A program is described by a genome, ``{"features": [names], "terms": {name: weight}}``,
written into the source as a ``# limen-genome:`` comment so that a parent read back
from the archive can be edited again. Mutations: add, remove or reweight a piece, and
crossover with a second parent. Output is ordinary source in a markdown fence, which
goes through the same extraction and validation as an LLM's answer.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import numpy as np

from limen_jax.catalog import Catalog
from limen_jax.llm import offline_rda
from limen_jax.llm.mutator import MutationRequest, MutationResponse  # noqa: I001
from limen_jax.modes import REQUIRED

GENOME_TAG = "# limen-genome:"
_GENOME_RE = re.compile(r"^# limen-genome: (\{.*\})\s*$", re.MULTILINE)

Genome = dict[str, Any]
COMPONENT_LINE = "Component to write:"  # forge's component prompt names its component on this line
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
    except json.JSONDecodeError:
        return None
    if not isinstance(genome.get("features"), list) or not isinstance(genome.get("terms"), dict):
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
        if genome.get("named", True) and terms:  # a dict reward: one named term per piece (rollout shows each)
            named = ", ".join(f'"{t.name}": jnp.asarray({w:.4g} * t_{t.name}, dtype=jnp.float32)' for t, w in terms)
            lines.append(f"    return {{{named}}}")
        else:
            lines.append(f"    return jnp.asarray({total}, dtype=jnp.float32)")
    return "\n".join(lines) + "\n"


class OfflineMutator:
    """Catalog-driven mutation; deterministic given the request's ``rng_seed``."""

    name = "offline"
    reweighted = staticmethod(reweighted)  # for the strategies' operator modules (offline_rda)

    def __init__(self, catalog: Catalog, *, max_ops: int = 2) -> None:
        self.catalog = catalog
        self.max_ops = max_ops
        self._order = {f.name: i for i, f in enumerate(catalog.features)}  # features render in catalog order
        self._priors = {"f": {f.name: f.prior for f in catalog.features}, "t": {t.name: t.prior for t in catalog.terms}}

    # --- genomes ------------------------------------------------------------------
    def random_genome(self, rng: np.random.Generator) -> Genome:
        """A small from-scratch program: the required pieces, a few features, a dense term,
        maybe one more term."""
        cat = self.catalog
        n_feat = int(rng.integers(cat.seed_features[0], cat.seed_features[1] + 1))
        names = [f.name for f in cat.features if f.name not in cat.required_features]
        drawn = self._draw(rng, names, n_feat, "f")
        features = sorted({*cat.required_features, *drawn}, key=self._order.__getitem__)
        terms = {name: cat.term(name).weight for name in cat.required_terms}
        if cat.dense_terms:
            name = self._draw(rng, list(cat.dense_terms), 1, "t")[0]
            terms[name] = cat.term(name).weight
        optional = [t.name for t in cat.terms if t.name not in terms]
        n_terms = int(rng.integers(cat.seed_terms[0], cat.seed_terms[1] + 1))
        for name in self._draw(rng, optional, n_terms, "t"):
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
                name = self._draw(rng, unused_f, 1, "f")[0]
                features.append(name)
            elif op == "remove_feature":
                name = self._draw(rng, removable_f, 1, "f", inverse=True)[0]
                features.remove(name)
            elif op == "add_term":
                name = self._draw(rng, unused_t, 1, "t")[0]
                terms[name] = cat.term(name).weight
            elif op == "remove_term":
                name = self._draw(rng, removable_t, 1, "t", inverse=True)[0]
                del terms[name]
            else:
                name = str(rng.choice(sorted(terms)))
                terms[name] = reweighted(terms[name], rng)
            ops.append(f"{op}:{name}")
        return {"features": sorted(set(features), key=self._order.__getitem__), "terms": terms}, ops

    def _draw(
        self, rng: np.random.Generator, names: list[str], k: int, kind: str, inverse: bool = False
    ) -> list[str]:
        """``k`` distinct feature (``kind`` "f") or term ("t") names drawn with odds
        proportional to their priors (to 1 / prior with ``inverse``: an informed author
        drops the least promising piece first)."""
        if k <= 0 or not names:
            return []
        priors = self._priors[kind]
        odds = np.array([priors.get(n, 1.0) for n in names], dtype=np.float64)
        odds = 1.0 / odds if inverse else odds
        picked = rng.choice(len(names), size=min(k, len(names)), replace=False, p=odds / odds.sum())
        return [names[i] for i in picked]

    # --- Mutator protocol -----------------------------------------------------------
    # A request's ``operator`` -> the method that answers it, called as
    # ``method(parent_genome_or_None, other_genomes, rng) -> (genome, ops)``; the operators
    # "from_scratch", "mutate" and "crossover" (and any not listed) take the default path:
    # from scratch without a parent, else 1..max_ops edits with a 30 % chance of crossing
    # over with one of the others.
    PROGRAM_OPERATORS: dict[str, str] = {
        # RF-Agent's expansion actions (limen_jax.search.strategies.mcts)
        "m1_restructure": "restructure", "m2_retune": "retune", "c3_crossover": "cross",
        "r4_reason": "cross", "d5_diverge": "diverge",
        # RDA's programs (limen_jax.search.strategies.rda) and FORGE's engineer (limen_jax.search.strategies.forge)
        "rda_initial": "_rda_initial", "rda_rewrite": "_rda_rewrite", "combine": "combine",
    }
    # Operators that read what the prompt names (forge's planned component), called as
    # ``method(prompt_user_text, rng) -> (genome, ops)``.
    PROMPT_OPERATORS: dict[str, str] = {"component": "component"}

    def _rda_initial(self, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Any:
        return offline_rda.initial_genome(self, rng)

    def _rda_rewrite(self, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Any:
        return offline_rda.rewrite_genome(self, parent, rng)

    # --- strategy operators (PROGRAM_OPERATORS) --------------------------------------
    def restructure(self, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
        """One structural edit: add a piece (a term, or a feature where the mode renders
        them) or drop one, never the required ones nor the last dense term."""
        genome = parent or self.random_genome(rng)
        cat, features, terms = self.catalog, list(genome["features"]), dict(genome["terms"])
        dense = [t for t in terms if t in cat.dense_terms]
        moves = [("add_term", n) for n in (t.name for t in cat.terms) if n not in terms]
        moves += [("remove_term", n) for n in terms if n not in cat.required_terms and dense != [n]]
        moves += [("add_feature", f.name) for f in cat.features if f.name not in features]
        moves += [("remove_feature", n) for n in features if n not in cat.required_features and len(features) > 1]
        if not moves:
            return self.retune(genome, others, rng)
        op, name = moves[int(rng.integers(len(moves)))]
        if op == "add_term":
            terms[name] = cat.term(name).weight
        elif op == "remove_term":
            del terms[name]
        elif op == "add_feature":
            features.append(name)
        else:
            features.remove(name)
        return {"features": sorted(features, key=self._order.__getitem__), "terms": terms}, [f"{op}:{name}"]

    def retune(self, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
        """Every term's weight times exp(N(0, 0.5)); the pieces stay."""
        genome = parent or self.random_genome(rng)
        terms = {n: reweighted(w, rng) for n, w in genome["terms"].items()}
        return {**genome, "terms": terms}, [f"reweight:{n}" for n in terms]

    def cross(self, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
        """The parent crossed with each of ``others`` in turn (elites, or ancestors)."""
        genome, ops = parent or self.random_genome(rng), []
        if not others:
            return self.mutate(genome, rng)
        for other in others:
            genome, done = self.mutate(genome, rng, other)
            ops += done
        return genome, ops

    def diverge(self, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
        """A from-scratch genome whose terms avoid every term of the parent and ``others``
        (the required terms stay; a dense term stays when every one is taken)."""
        cat = self.catalog
        used = {t for g in [*others, *([parent] if parent else [])] for t in g["terms"]}
        genome = self.random_genome(rng)
        free = [t.name for t in cat.terms if t.name not in used]
        free_dense = [t for t in free if t in cat.dense_terms]
        terms = {n: cat.term(n).weight for n in cat.required_terms}
        terms.update({n: cat.term(n).weight for n in self._draw(rng, free_dense, 1, "t")})
        if not any(t in cat.dense_terms for t in terms):
            terms.update({n: w for n, w in genome["terms"].items() if n in cat.dense_terms})
        terms.update({n: cat.term(n).weight for n in self._draw(rng, [t for t in free if t not in terms], 1, "t")})
        return {**genome, "terms": terms}, [f"diverge:{','.join(terms)}"]

    def propose(self, request: MutationRequest) -> MutationResponse:
        rng = np.random.default_rng(request.rng_seed)
        if request.role != "program":
            return self.answer_text(request, rng)
        parent = read_genome(request.parent.code) if request.parent is not None else None
        others = [g for g in (read_genome(r.code) for r in request.others) if g is not None]
        operator = self.PROGRAM_OPERATORS.get(request.operator)
        if request.operator in self.PROMPT_OPERATORS:
            genome, ops = getattr(self, self.PROMPT_OPERATORS[request.operator])(request.user, rng)
        elif operator is not None:  # a strategy's own operator (see PROGRAM_OPERATORS)
            genome, ops = getattr(self, operator)(parent, others, rng)
        elif parent is None:
            genome, ops = self.random_genome(rng), ["from_scratch"]
        else:
            other = others[int(rng.integers(len(others)))] if others and rng.random() < 0.3 else None
            genome, ops = self.mutate(parent, rng, other)
        code = render(self.catalog, genome, request.mode)
        text = f"Offline edit ({', '.join(ops)}).\n\n```python\n{code}```\n"
        return MutationResponse(text=text, model="offline", metadata={"ops": ops, "genome": genome})

    def component(self, prompt: str, rng: np.random.Generator) -> Edit:
        """One planned component (forge): the catalog term named in the prompt's
        "Component to write:" line (drawn by prior when it names none) and the required
        terms; as observation, the features that line names, the required ones and a
        from-scratch draw (an engineer writing one reward term still writes a whole
        observation, and the term may need features the plan did not name)."""
        cat = self.catalog
        line = next((x for x in prompt.splitlines() if x.startswith(COMPONENT_LINE)), "")
        named = re.findall(r"`(\w+)`", line)
        term = next((n for n in named if n in {t.name for t in cat.terms}), None)
        term = term or self._draw(rng, [t.name for t in cat.terms], 1, "t")[0]
        drawn = self.random_genome(rng)["features"]
        feats = {*cat.required_features, *(n for n in named if n in self._order), *drawn}
        terms = {name: cat.term(name).weight for name in (*cat.required_terms, term)}
        return {"features": sorted(feats, key=self._order.__getitem__), "terms": terms}, [f"component:{term}"]

    def combine(self, parent: Genome | None, others: list[Genome],
                rng: np.random.Generator) -> Edit:
        """Forge's engineer: both parents' features and terms (a term both hold keeps the
        mean weight), then one term reweighted, as an engineer balancing the merged terms."""
        if parent is None or not others:
            return self.random_genome(rng), ["from_scratch"]
        other = others[0]
        terms = {**other["terms"], **parent["terms"]}
        for name in set(parent["terms"]) & set(other["terms"]):
            terms[name] = float(f"{(parent['terms'][name] + other['terms'][name]) / 2:.3g}")
        name = str(rng.choice(sorted(terms)))
        terms[name] = reweighted(terms[name], rng)
        features = sorted({*parent["features"], *other["features"]}, key=self._order.__getitem__)
        return {"features": features, "terms": terms}, ["combine", f"reweight:{name}"]

    # --- text requests ----------------------------------------------------------------
    def answer_text(self, request: MutationRequest, rng: np.random.Generator) -> MutationResponse:
        """A deterministic answer to a text request, by role: "plan" names catalog pieces
        drawn by their priors (what an author would try); the RDA roles ("decompose",
        "critic", "reflect_subtasks") are :mod:`limen_jax.llm.offline_rda`'s; "verify" gives a
        score in [0, 1] (the share of the context programs' reward terms that are dense
        shaping terms, else a draw); "critique" and any other role describe the context
        programs' pieces and scores."""
        cat = self.catalog
        role = request.role
        if role in offline_rda.ROLES:
            return MutationResponse(text=offline_rda.answer(cat, role, list(request.others)), model="offline",
                                    metadata={"role": role})
        if role == "plan":
            terms = self._draw(rng, [t.name for t in cat.terms], min(3, len(cat.terms)), "t")
            feats = self._draw(rng, [f.name for f in cat.features], min(3, len(cat.features)), "f")
            lines = [f"{i + 1}. reward term `{t}` with observation feature `{f}`"
                     for i, (t, f) in enumerate(zip(terms, feats + terms[len(feats):]))]
            text = f"Offline {role}:\n" + "\n".join(lines)
        elif role == "self_verify":  # RF-Agent's v_self in [-1, 1]: tanh of the log mean prior of the terms
            genomes = [g for g in (read_genome(r.code) for r in request.others) if g is not None]
            odds = [self._priors["t"].get(t, 1.0) for g in genomes for t in g["terms"]]
            text = f"score: {float(np.tanh(np.log(np.mean(odds)))) if odds else 0.0:.3f}"
        elif role == "align":  # the thought as the genome's summary
            genome = read_genome(request.others[0].code) if request.others else None
            text = (f"Observe {', '.join(genome['features'])}; reward {', '.join(genome['terms'])}."
                    if genome else "A program without catalog pieces.")
        elif role == "verify":
            genomes = [g for g in (read_genome(r.code) for r in request.others) if g is not None]
            terms = [t for g in genomes for t in g["terms"]]
            score = sum(t in cat.dense_terms for t in terms) / len(terms) if terms else float(rng.random())
            text = f"score: {score:.2f}"
        else:
            parts = []
            for record in request.others:
                genome = read_genome(record.code)
                pieces = (f"features {', '.join(genome['features'])}; terms {', '.join(genome['terms'])}"
                          if genome else "no catalog pieces")
                scored = "untrained" if record.success is None else f"success {record.success:.2f}"
                parts.append(f"- {record.id} ({scored}): {pieces}")
            text = f"Offline {role}:\n" + ("\n".join(parts) if parts else "nothing to review")
        return MutationResponse(text=text, model="offline", metadata={"role": role})
