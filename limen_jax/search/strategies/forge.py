"""FORGE (seed 004): a planner lists single reward components, an engineer crosses pairs
of a bounded pool, and every program's lineage depth is kept.

Batches, each proposed only once the one before is told (``lookahead`` 0):

1. plan: one text request (role "plan"): the planner sees the task's plain-language
   description and lists ``components`` single reward components, one per numbered line;
2. components: one program request per listed component (operator "component", depth
   0), the component named on the prompt's ``Component to write:`` line;
3. rounds: ``view.candidates`` crossovers (operator "combine"), each of a pair of pool
   programs drawn with :func:`pair_probabilities`; the engineer sees the description and
   both parents with their scores, nothing else; depth = max(parent depths) + 1.

A child that fails the checker or training is dropped, never repaired; one that trains
enters the pool, which keeps the ``pool`` highest scores. A plan that lists nothing is
asked again, and so are the components while fewer than two programs are in the pool.
The run stops when the best score has not improved over ``patience`` depth levels (the
paper's "deeper rewards stop paying"), or at the round cap ``search.iterations``.

Memory (plain JSON, in state.json): the plan, its components, the pool (id, score, depth)
and the best score seen at each depth. Each child's depth is also written to its
``record.metadata["depth"]``; the run directory's depth.png plots success by depth.

Offline (no LLM): the plan names catalog terms and features drawn by their priors; a
component is the catalog term its plan line names (in backticks) with the required terms;
the engineer's crossover is both parents' pieces with one term reweighted.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.archive import ProgramRecord, program_id
from limen_jax.llm.offline import Edit, Genome, OfflineAuthor, read_genome, reweighted
from limen_jax.llm.prompts import build_system, contract
from limen_jax.search.base import OfflineRequest, SearchView, StrategyBase, ask_text
from limen_jax.search.requests import Outcome, ProgramRequest, Request, TextRequest
from limen_jax.search.templates import render

_ITEM = re.compile(r"(?:\d+[.)]|[-*])\s+(.+)")  # on a stripped line: no two repeats share a character
MAX_COMPONENT_CHARS = 300  # a planned component is one sentence; a longer line is cut
MAX_PLAN_CHARS = 200_000  # of a plan parsed (a plan is a few lines)


MAX_POOL = 1_000  # programs a pool may keep: a draw weighs n (n - 1) / 2 pairs (the paper keeps 16)


def pair_probabilities(scores: Sequence[float], epsilon: float = 0.0) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The unordered pairs (i < j) of ``scores`` and their probabilities: (s_i + s_j +
    epsilon) normalised over all pairs, uniform when every weight is 0.

    Returns (pairs, probs): n(n-1)/2 index pairs in lexicographic order, probs
    (n(n-1)/2,) float64 summing to 1. Needs n >= 2."""
    n = len(scores)
    if n < 2:
        raise ValueError(f"pairs need at least two programs, got {n}")
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    weights = np.array([scores[i] + scores[j] + epsilon for i, j in pairs], dtype=np.float64)
    total = weights.sum()
    probs = weights / total if total > 0 else np.full(len(pairs), 1.0 / len(pairs))
    return pairs, probs


def child_depth(parent_depths: Sequence[int]) -> int:
    """A crossover child's depth: one more than its deepest parent (0 without parents)."""
    return max(parent_depths) + 1 if parent_depths else 0


def insert(pool: list[dict[str, Any]], entry: dict[str, Any], bound: int) -> list[dict[str, Any]]:
    """The pool with ``entry`` ({"id", "score", "depth"}) added, the lowest scores pruned to
    ``bound`` entries; sorted by score, highest first (earlier entries first on ties)."""
    ranked = sorted([*pool, entry], key=lambda e: -e["score"])
    return ranked[:bound]


def parse_components(text: str, limit: int) -> list[str]:
    """The planner's numbered or bulleted lines, at most ``limit``; each cut to
    MAX_COMPONENT_CHARS and with code fences defused (it is shown in a later prompt)."""
    found = []
    for line in text[:MAX_PLAN_CHARS].splitlines():
        match = _ITEM.match(line.strip()[:4 * MAX_COMPONENT_CHARS])
        if match:
            found.append(match.group(1).replace("```", "'''")[:MAX_COMPONENT_CHARS])
    return found[:limit]


def stalled(best_by_depth: dict[int, float], patience: int) -> str | None:
    """Why the search stops: the deepest ``patience`` levels found nothing better than
    the levels above them; None while they did (or too few levels exist)."""
    if not best_by_depth:
        return None
    deepest = max(best_by_depth)
    cut = deepest - patience
    if cut < 0:
        return None
    earlier = max(s for d, s in best_by_depth.items() if d <= cut)
    recent = max(s for d, s in best_by_depth.items() if d > cut)
    if recent > earlier:
        return None
    return (f"the best score {earlier:.3f} (depth <= {cut}) did not improve over depths "
            f"{cut + 1}..{deepest} ({recent:.3f})")


class Forge(StrategyBase):
    name = "forge"
    lookahead = 0  # each batch is chosen from the whole pool of the batch before

    @dataclasses.dataclass(frozen=True)
    class Options:
        components: int = 8  # single components the planner is asked for (and coded, at most)
        pool: int = 16  # programs the pool keeps (the lowest scores are pruned)
        epsilon: float = 0.0  # added to every pair's weight s_i + s_j
        patience: int = 2  # depth levels without a new best before the search stops
        score: str = "success"  # the paper's "max_return" (J*) needs native returns the trainer lacks

        def __post_init__(self) -> None:
            if self.score != "success":
                raise ValueError(
                    f"score {self.score!r}: only 'success' is available; the paper's J* (max_return, the best "
                    "native return over evaluation episodes) needs the task's own returns, and the trainer "
                    "reports only success and the return under each program's own reward, which does not "
                    "compare across programs")
            if self.components < 1 or not 2 <= self.pool <= MAX_POOL or self.patience < 1 or self.epsilon < 0:
                raise ValueError(f"need components >= 1, pool from 2 to {MAX_POOL}, patience >= 1 and epsilon >= 0")

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.plan = ""
        self.components: list[str] = []
        self.pool: list[dict[str, Any]] = []
        self.best_by_depth: dict[int, float] = {}

    # --- proposing --------------------------------------------------------------------
    def phase(self) -> str:
        """"plan" until a plan lists components, "components" while the pool holds fewer
        than two programs, then "combine"."""
        return "plan" if not self.components else "components" if len(self.pool) < 2 else "combine"

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        task = {"task_description": view.task.description.strip(), "task_context": view.task.context.strip()}
        fixed = contract(view.mode, view.budget, view.max_obs_dim, view.max_work_vs_step)
        phase = self.phase()
        if phase == "plan":
            user = render("forge_planner", **task, count=str(self.options.components)) + "\n"
            return [ask_text(view, rng, 0, "plan", system=render("forge_planner_system") + "\n", user=user)]
        if phase == "components":
            return [self._program(view, rng, k, render("forge_component", **task, **fixed, component=c),
                                  "component", (), component=c) for k, c in enumerate(self.components)]
        pairs, probs = pair_probabilities([e["score"] for e in self.pool], self.options.epsilon)
        out: list[Request] = []
        for k in range(view.candidates):
            i, j = pairs[int(rng.choice(len(pairs), p=probs))]
            a, b = self.pool[i], self.pool[j]
            user = render("forge_engineer", **task, **fixed, **self._parent("a", view.store.get(a["id"])),
                          **self._parent("b", view.store.get(b["id"])))
            out.append(self._program(view, rng, k, user, "combine", (a, b)))
        return out

    @staticmethod
    def _parent(key: str, record: ProgramRecord) -> dict[str, str]:
        per_seed = ", ".join(f"{s:.2f}" for s in record.success_per_seed)
        score = "not measured" if record.success is None else f"{record.success:.2f} (per seed: {per_seed})"
        return {f"id_{key}": record.id, f"code_{key}": record.code.rstrip(), f"score_{key}": score}

    def _program(self, view: SearchView, rng: np.random.Generator, k: int, user: str, operator: str,
                 parents: Sequence[dict[str, Any]], component: str | None = None) -> ProgramRequest:
        tag: dict[str, Any] = {"depth": child_depth([p["depth"] for p in parents])}
        if component is not None:
            tag["component"] = component
        return ProgramRequest(
            id=program_id(view.iteration, view.first_index + k), iteration=view.iteration, island=0,
            operator=operator, parent_ids=tuple(p["id"] for p in parents), context_ids=(),
            system=build_system(view.mode), user=user + "\n", sections=(), rng_seed=int(rng.integers(2**31 - 1)),
            tag=tag,
        )

    # --- being told -------------------------------------------------------------------
    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        dropped: list[str] = []
        for o in outcomes:
            request, record = o.request, o.record
            if isinstance(request, TextRequest) and request.role == "plan":
                self.plan = o.text
                self.components = parse_components(o.text, self.options.components)
            elif isinstance(request, ProgramRequest) and record is not None and "depth" in request.tag:
                depth = int(request.tag["depth"])
                record.metadata["depth"] = depth
                if record.error is not None or record.success is None or o.duplicate_of is not None:
                    dropped.append(record.id)  # invalid, or a repeat of a program told before: dropped
                    continue
                score = float(record.success)
                self.pool = insert(self.pool, {"id": record.id, "score": score, "depth": depth}, self.options.pool)
                self.best_by_depth[depth] = max(score, self.best_by_depth.get(depth, score))
        return [{"event": "forge", "phase": self.phase(), "components": len(self.components),
                 "pool": [e["id"] for e in self.pool], "dropped": dropped,
                 "best_by_depth": {str(d): s for d, s in sorted(self.best_by_depth.items())}}]

    def done(self, view: SearchView) -> str | None:
        return stalled(self.best_by_depth, self.options.patience)

    # --- offline answers ----------------------------------------------------------------
    def offline_text(self, request: OfflineRequest) -> str:
        """The plan: up to three numbered components, each a catalog term and a feature
        drawn by their priors (what an author would try)."""
        author = request.author
        terms = author.draw(request.rng, [t.name for t in author.catalog.terms], min(3, len(author.catalog.terms)), "t")
        feats = author.draw(request.rng, [f.name for f in author.catalog.features],
                            min(3, len(author.catalog.features)), "f")
        lines = [f"{i + 1}. reward term `{t}` with observation feature `{f}`"
                 for i, (t, f) in enumerate(zip(terms, feats + terms[len(feats):]))]
        return "Offline plan:\n" + "\n".join(lines)

    def offline_program(self, request: OfflineRequest) -> str | None:
        asked = request.request
        if not isinstance(asked, ProgramRequest) or asked.operator not in ("component", "combine"):
            return None
        if asked.operator == "component":
            genome, ops = component(request.author, str(asked.tag.get("component", "")), request.rng)
        else:
            parent = read_genome(request.parent.code) if request.parent is not None else None
            others = [g for g in (read_genome(r.code) for r in request.others) if g is not None]
            genome, ops = combine(request.author, parent, others, request.rng)
        return request.author.edit(genome, ops, request.mode)

    # --- memory -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "components": list(self.components), "pool": [dict(e) for e in self.pool],
                "best_by_depth": {str(d): s for d, s in sorted(self.best_by_depth.items())}}

    def load(self, state: dict[str, Any]) -> None:
        self.plan = str(state["plan"])
        self.components = [str(c) for c in state["components"]]
        self.pool = [dict(e) for e in state["pool"]]
        self.best_by_depth = {int(d): float(s) for d, s in state["best_by_depth"].items()}
        # a checkpoint is untrusted (a run directory may come from anyone): each pool entry
        # is {"id", "score", "depth"} typed, and the pool no larger than the option keeps
        # (its pairs are drawn from n (n - 1) / 2 weights)
        for k, e in enumerate(self.pool):
            score, depth = e.get("score"), e.get("depth")
            if not (isinstance(e.get("id"), str) and isinstance(score, (int, float)) and not isinstance(score, bool)
                    and math.isfinite(score) and isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0):
                raise ValueError(f"forge: pool[{k}] is not an entry {{id, score, depth}}: {ascii(e)[:80]}")
        if len(self.pool) > self.options.pool:
            raise ValueError(f"forge: a pool of {len(self.pool)} programs; the option keeps {self.options.pool}")


def component(author: OfflineAuthor, planned: str, rng: np.random.Generator) -> Edit:
    """The offline engineer's one planned component: the catalog term the plan line
    ``planned`` names in backticks (drawn by prior when it names none) and the required
    terms; as observation, the features the line names, the required ones and a
    from-scratch draw (an engineer writing one reward term still writes a whole
    observation, and the term may need features the plan did not name)."""
    cat = author.catalog
    named = re.findall(r"`(\w+)`", planned)
    term = next((n for n in named if n in {t.name for t in cat.terms}), None)
    term = term or author.draw(rng, [t.name for t in cat.terms], 1, "t")[0]
    drawn = author.random_genome(rng)["features"]
    feats = {*cat.required_features, *(n for n in named if n in author.order), *drawn}
    terms = {name: cat.term(name).weight for name in (*cat.required_terms, term)}
    return {"features": sorted(feats, key=author.order.__getitem__), "terms": terms}, [f"component:{term}"]


def combine(author: OfflineAuthor, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
    """The offline engineer's crossover: both parents' features and terms (a term both
    hold keeps the mean weight), then one term reweighted, as an engineer balancing the
    merged terms."""
    if parent is None or not others:
        return author.random_genome(rng), ["from_scratch"]
    other = others[0]
    terms = {**other["terms"], **parent["terms"]}
    for name in set(parent["terms"]) & set(other["terms"]):
        terms[name] = float(f"{(parent['terms'][name] + other['terms'][name]) / 2:.3g}")
    name = str(rng.choice(sorted(terms)))
    terms[name] = reweighted(terms[name], rng)
    features = sorted({*parent["features"], *other["features"]}, key=author.order.__getitem__)
    return {"features": features, "terms": terms}, ["combine", f"reweight:{name}"]
