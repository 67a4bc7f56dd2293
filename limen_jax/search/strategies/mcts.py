"""RF-Agent's Monte-Carlo tree search over programs (``--strategy mcts``).

Batches alternate between two phases, so that every prompt sees every answer before it
(lookahead 0):

- **expand**: the first time, ``first_level`` programs from scratch, each opening with a
  one-line design thought; then select a leaf by UCT (:mod:`limen_jax.search.strategies.mcts_tree`)
  and ask its ``leaves`` children (the paper's 8: operators m1 x2, m2 x2, c3 x2, r4, d5;
  another count scales those shares, :func:`limen_jax.search.strategies.mcts_tree.operator_counts`),
  each shown what the paper says it sees (the parent's thought, code and reward
  reflection; c3 k elites drawn with odds 1 / rank; r4 the chain of k ancestors; d5 k
  nodes of other branches; k drawn from {2, 3, 4}). The children train as one batch;
  their scores F start Q = F, N = 1 and are back-propagated (η); t grows by the programs
  asked and λ decays with it.
- **verify**: for each new scored node, a self-verification (the LLM rates the reward's
  fit to the task, v_self in [-1, 1]) and a thought alignment (z rewritten from the final
  code), both text requests; each rejected child gets one repair (its traceback shown),
  trained in the same batch, scored nodes back-propagated.

The tree is plain data in the checkpoint (``to_dict``), so ``--resume`` continues it. Fitness
in the archive stays mean success; v_self and the node's UCT at selection go to
``record.metadata["scores"]``. The run stops once ``budget`` programs were expanded.

Offline (no LLM), each operator edits its parent's catalog genome as its name says
(:data:`OFFLINE_OPERATORS`: m1 one structural edit, m2 every weight retuned, c3 and r4 a
crossover with each shown node, d5 a program avoiding the shown nodes' terms); the
self-verification scores the terms' priors and the alignment summarises the genome.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.archive import ProgramRecord
from limen_jax.llm.feedback import reward_terms_text
from limen_jax.llm.offline import Edit, Genome, OfflineAuthor, read_genome, reweighted
from limen_jax.llm.reflection import reflection
from limen_jax.search.base import OfflineRequest, SearchView, StrategyBase, ask_program, ask_text
from limen_jax.search.requests import Outcome, ProgramRequest, Request, TextRequest
from limen_jax.search.sections import insert_section, plain
from limen_jax.search.strategies import mcts_tree as T
from limen_jax.search.templates import load_template, render

# "score", an optional ":" or "=", optional bold stars, a number; no two neighbouring repeats
# can take the same character, so the time is linear in the answer
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)")
_SCORE = re.compile(r"score\s*(?:[:=]\s*)?(?:\*+\s*)?(" + _NUMBER.pattern + ")", re.I)
MAX_ANSWER = 200_000  # characters of a verification answer parsed (it is a few lines)


def parse_v_self(text: str) -> float:
    """The score in a self-verification answer: the number after the last "score", else
    the last number in the text, clipped to [-1, 1]; 0 when there is none."""
    text = text[-MAX_ANSWER:]  # the end holds the last score
    found = _SCORE.findall(text) or _NUMBER.findall(text)
    if not found:
        return 0.0
    try:
        value = float(found[-1])
    except ValueError:
        return 0.0
    return float(np.clip(value, -1.0, 1.0)) if np.isfinite(value) else 0.0


def first_line(text: str, limit: int = 300) -> str:
    """A design thought from an answer's prose: its first non-empty line, without a
    "Thought:" label, cut at ``limit`` characters."""
    for line in text[:MAX_ANSWER].splitlines():
        line = line.strip().strip("*").strip()
        if line:
            return re.sub(r"^thought\s*:\s*", "", line, flags=re.I)[:limit]
    return ""


class TreeSearch(StrategyBase):
    name = "mcts"
    lookahead = 0  # every selection needs the last expansion's scores

    @dataclasses.dataclass(frozen=True)
    class Options:
        budget: int = 80  # programs expanded before the search stops (N of the λ schedule)
        first_level: int = 8  # N_I: first-level nodes, each from a design thought
        lambda0: float = 0.4  # exploration weight at t = 0
        eta: float = 0.7  # back-propagation mixing
        leaves: int = T.LEAVES  # children per expansion, trained as one batch (the paper's 8)

        def __post_init__(self) -> None:
            if self.budget < 1 or self.first_level < 1 or self.leaves < 1:
                raise ValueError("budget, first_level and leaves must be at least 1")
            if not 0.0 <= self.eta <= 1.0:
                raise ValueError("eta must be in [0, 1]")

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.tree: T.Tree = {}
        self.t = 0
        self.phase = "verify"  # the phase of the last batch: the first one expands
        self.expanded: str | None = None  # the leaf of the last expansion

    # --- proposing --------------------------------------------------------------------
    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        if self.phase == "expand" and self._to_verify():
            return self._verify(view, rng)
        return self._expand(view, rng)

    def _to_verify(self) -> list[T.Node]:
        return [n for n in self.tree.values()
                if (n.status == "scored" and not n.verified) or (n.status == "rejected" and not n.repaired)]

    def _expand(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        quiet = plain(view)
        lam = T.exploration_weight(self.t, self.options.budget, self.options.lambda0)
        leaf, levels = T.select_leaf(self.tree, lam)
        out: list[Request] = []
        if leaf is None:  # nothing scored yet: the first level
            for i in range(self.options.first_level):
                node = self._new(None, "first_level")
                request = ask_program(quiet, rng, i, 0, parent=None, tag={"node": node.id, "phase": "expand"})
                out.append(insert_section(request, load_template("mcts_thought")))
            return out
        parent = view.store.get(str(self.tree[leaf].program))
        for i, op in enumerate(T.expansion_plan(self.options.leaves)):
            node = self._new(leaf, op)
            k = int(rng.choice(T.K_CHOICES))
            shown = self._shown(op, leaf, k, rng)
            records = [view.store.get(str(self.tree[s].program)) for s in shown]
            request = ask_program(quiet, rng, i, 0, parent=parent, diverse=records, operator=op,
                                  tag={"node": node.id, "phase": "expand", "k": k, "shown": shown,
                                       "uct": levels[-1][leaf]})
            section = render("mcts_parent", thought=self.tree[leaf].thought or "(none stated)",
                             reflection=reflection(parent))
            body = render(f"mcts_{op}", k=str(len(records)), programs=_nodes(self.tree, shown, records))
            out.append(insert_section(request, f"{section}\n\n{body}\n\n{load_template('mcts_thought')}"))
        return out

    def _shown(self, op: str, leaf: str, k: int, rng: np.random.Generator) -> list[str]:
        """The nodes an operator's prompt shows besides the parent: c3 k elites (1 / rank
        over scored nodes by F, the parent left out), r4 the parent's k nearest ancestors
        (oldest first), d5 k random nodes of other branches (else off the parent's path)."""
        scored = [n for n in self.tree.values() if n.F is not None]
        if op == "c3_crossover":
            ranked = [n.id for n in sorted(scored, key=lambda n: -float(n.F))  # type: ignore[arg-type]
                      if n.id != leaf]
            return T.draw_elites(ranked, k, rng)
        if op == "r4_reason":
            return T.path_to_root(self.tree, leaf)[1 : k + 1][::-1]
        if op == "d5_diverge":
            branch = T.branch_of(self.tree, leaf)
            others = [n.id for n in scored if T.branch_of(self.tree, n.id) != branch]
            if not others:
                path = set(T.path_to_root(self.tree, leaf))
                others = [n.id for n in scored if n.id not in path]
            if not others:
                return []
            return [others[int(i)] for i in rng.choice(len(others), size=min(k, len(others)), replace=False)]
        return []

    def _verify(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        out: list[Request] = []
        system = load_template("mcts_text_system").strip() + "\n"
        texts = 0
        for node in self._to_verify():
            if node.status == "rejected":
                out.append(self._repair(view, rng, node, len([r for r in out if isinstance(r, ProgramRequest)])))
                continue
            record = view.store.get(str(node.program))
            thought = node.thought or "(none stated)"
            verify = render("mcts_verify", task_description=view.task.description.strip(),
                            task_context=view.task.context.strip(), thought=thought, code=record.code.rstrip())
            align = render("mcts_align", thought=thought, code=record.code.rstrip())
            out.append(ask_text(view, rng, texts, "self_verify", system=system, user=verify + "\n",
                                context=[record], tag={"node": node.id, "phase": "verify"}))
            out.append(ask_text(view, rng, texts + 1, "align", system=system, user=align + "\n",
                                context=[record], tag={"node": node.id, "phase": "verify"}))
            texts += 2
        return out

    def _repair(self, view: SearchView, rng: np.random.Generator, node: T.Node, index: int) -> ProgramRequest:
        failed = view.store.get(str(node.program))
        parent = view.store.get(str(self.tree[node.parent].program)) if node.parent is not None else None
        request = ask_program(plain(view), rng, index, 0, parent=parent, operator="repair",
                              tag={"node": node.id, "phase": "verify", "repair_of": failed.id})
        request = dataclasses.replace(request, context_ids=(failed.id,))
        err = failed.error or {}
        lines = str(err.get("trace") or "").rstrip().splitlines()[-view.prompt.max_trace_lines:]
        section = render("mcts_repair", operator=node.operator, stage=str(err.get("stage", "unknown")),
                         message=str(err.get("message", "")).strip() or "(no message)",
                         trace="\n".join(lines) or "(no trace)",
                         code=failed.code.rstrip() or "# (no code was extracted from the answer)")
        return insert_section(request, f"{section}\n\n{load_template('mcts_thought')}")

    def _new(self, parent: str | None, operator: str) -> T.Node:
        node = T.Node(id=f"n{len(self.tree)}", parent=parent, operator=operator)
        self.tree[node.id] = node
        return node

    # --- telling ----------------------------------------------------------------------
    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        phase = str(outcomes[0].request.tag.get("phase", "expand")) if outcomes else self.phase
        touched: set[str | None] = set()
        programs = 0
        for o in outcomes:
            node = self.tree.get(str(o.request.tag.get("node")))
            if node is None:
                continue
            if isinstance(o.request, TextRequest):
                self._answer(view, node, o)
            elif isinstance(o.request, ProgramRequest) and o.record is not None:
                programs += int(o.request.operator != "repair")
                touched.add(self._score(node, o.record))
        for leaf in sorted(t for t in touched if t is not None):
            T.backpropagate(self.tree, leaf, self.options.eta)
        event: dict[str, Any] = {"event": "mcts", "phase": phase}
        if phase == "expand":
            self.t += programs
            parents = {self.tree[str(o.request.tag["node"])].parent for o in outcomes if "node" in o.request.tag}
            self.expanded = next(iter(parents)) if len(parents) == 1 else None
            uct = next((o.request.tag["uct"] for o in outcomes if "uct" in o.request.tag), None)
            if self.expanded is not None and uct is not None:  # the leaf's UCT when it was selected
                record = view.store.get(str(self.tree[self.expanded].program))
                record.metadata.setdefault("scores", {})["uct"] = uct
            event.update(leaf=self.expanded, t=self.t)
        self.phase = phase
        event["lambda"] = T.exploration_weight(self.t, self.options.budget, self.options.lambda0)
        event["nodes"] = {s: sum(n.status == s for n in self.tree.values()) for s in ("scored", "rejected", "dead")}
        return [event]

    def _score(self, node: T.Node, record: ProgramRecord) -> str | None:
        """Attach a trained (or rejected) program to its node; returns the node whose
        children changed (its parent) when it was scored."""
        repair = node.status == "rejected"
        node.program = record.id
        if record.success is None:
            node.status = "dead" if repair else "rejected"
            node.repaired = node.repaired or repair
            return None
        node.repaired = node.repaired or repair
        node.status, node.F, node.Q, node.N = "scored", float(record.success), float(record.success), 1
        node.thought = first_line(record.thought)
        return node.parent

    def _answer(self, view: SearchView, node: T.Node, outcome: Outcome) -> None:
        node.verified = True
        request = outcome.request
        assert isinstance(request, TextRequest)
        if request.role == "self_verify":
            node.v_self = parse_v_self(outcome.text)
            if node.program is not None:
                view.store.get(node.program).metadata.setdefault("scores", {})["v_self"] = node.v_self
        elif request.role == "align" and first_line(outcome.text):
            node.thought = first_line(outcome.text)

    # --- offline answers ----------------------------------------------------------------
    def offline_text(self, request: OfflineRequest) -> str:
        """self_verify: v_self = tanh of the log mean prior of the context programs' terms;
        align: the thought as the genome's summary."""
        role = request.request.role if isinstance(request.request, TextRequest) else ""
        genomes = [g for g in (read_genome(r.code) for r in request.others) if g is not None]
        if role == "self_verify":
            odds = [request.author.priors["t"].get(t, 1.0) for g in genomes for t in g["terms"]]
            return f"score: {float(np.tanh(np.log(np.mean(odds)))) if odds else 0.0:.3f}"
        if role == "align":
            genome = read_genome(request.others[0].code) if request.others else None
            return (f"Observe {', '.join(genome['features'])}; reward {', '.join(genome['terms'])}."
                    if genome else "A program without catalog pieces.")
        return super().offline_text(request)

    def offline_program(self, request: OfflineRequest) -> str | None:
        operator = OFFLINE_OPERATORS.get(request.request.operator) if isinstance(request.request, ProgramRequest) \
            else None
        if operator is None:  # the first level and repairs: the generic operators
            return None
        parent = read_genome(request.parent.code) if request.parent is not None else None
        others = [g for g in (read_genome(r.code) for r in request.others) if g is not None]
        genome, ops = operator(request.author, parent, others, request.rng)
        return request.author.edit(genome, ops, request.mode)

    # --- memory -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"tree": [n.to_dict() for n in self.tree.values()], "t": self.t, "phase": self.phase,
                "expanded": self.expanded}

    def load(self, state: dict[str, Any]) -> None:
        self.tree = {d["id"]: T.Node.from_dict(d) for d in state["tree"]}
        T.check_tree(self.tree)
        self.t, self.phase, self.expanded = int(state["t"]), str(state["phase"]), state.get("expanded")

    def done(self, view: SearchView) -> str | None:
        if self.t >= self.options.budget and not (self.phase == "expand" and self._to_verify()):
            return f"budget of {self.options.budget} programs expanded"
        return None


def _nodes(tree: T.Tree, ids: Sequence[str], records: Sequence[ProgramRecord]) -> str:
    """The shown nodes as prompt blocks: id, design thought, success, term curves, code."""
    blocks = []
    for node_id, record in zip(ids, records):
        success = "not measured" if record.success is None else f"{record.success:.2f}"
        blocks.append(render("mcts_node", id=record.id, thought=tree[node_id].thought or "(none stated)",
                             success_rate=success, terms=reward_terms_text(record), code=record.code.rstrip()))
    return "\n\n".join(blocks)


# --- offline operators: (author, parent genome or None, shown genomes, rng) -> (genome, edits)
def restructure(author: OfflineAuthor, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
    """One structural edit: add a piece (a term, or a feature where the mode renders them)
    or drop one, never the required ones nor the last dense term."""
    genome = parent or author.random_genome(rng)
    cat, features, terms = author.catalog, list(genome["features"]), dict(genome["terms"])
    dense = [t for t in terms if t in cat.dense_terms]
    moves = [("add_term", n) for n in (t.name for t in cat.terms) if n not in terms]
    moves += [("remove_term", n) for n in terms if n not in cat.required_terms and dense != [n]]
    moves += [("add_feature", f.name) for f in cat.features if f.name not in features]
    moves += [("remove_feature", n) for n in features if n not in cat.required_features and len(features) > 1]
    if not moves:
        return retune(author, genome, others, rng)
    op, name = moves[int(rng.integers(len(moves)))]
    if op == "add_term":
        terms[name] = cat.term(name).weight
    elif op == "remove_term":
        del terms[name]
    elif op == "add_feature":
        features.append(name)
    else:
        features.remove(name)
    return {"features": sorted(features, key=author.order.__getitem__), "terms": terms}, [f"{op}:{name}"]


def retune(author: OfflineAuthor, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
    """Every term's weight times exp(N(0, 0.5)); the pieces stay."""
    genome = parent or author.random_genome(rng)
    terms = {n: reweighted(w, rng) for n, w in genome["terms"].items()}
    return {**genome, "terms": terms}, [f"reweight:{n}" for n in terms]


def cross(author: OfflineAuthor, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
    """The parent crossed with each of ``others`` in turn (elites, or ancestors)."""
    genome, ops = parent or author.random_genome(rng), []
    if not others:
        return author.mutate(genome, rng)
    for other in others:
        genome, done = author.mutate(genome, rng, other)
        ops += done
    return genome, ops


def diverge(author: OfflineAuthor, parent: Genome | None, others: list[Genome], rng: np.random.Generator) -> Edit:
    """A from-scratch genome whose terms avoid every term of the parent and ``others``
    (the required terms stay; a dense term stays when every one is taken)."""
    cat = author.catalog
    used = {t for g in [*others, *([parent] if parent else [])] for t in g["terms"]}
    genome = author.random_genome(rng)
    free = [t.name for t in cat.terms if t.name not in used]
    free_dense = [t for t in free if t in cat.dense_terms]
    terms = {n: cat.term(n).weight for n in cat.required_terms}
    terms.update({n: cat.term(n).weight for n in author.draw(rng, free_dense, 1, "t")})
    if not any(t in cat.dense_terms for t in terms):
        terms.update({n: w for n, w in genome["terms"].items() if n in cat.dense_terms})
    terms.update({n: cat.term(n).weight for n in author.draw(rng, [t for t in free if t not in terms], 1, "t")})
    return {**genome, "terms": terms}, [f"diverge:{','.join(terms)}"]


OFFLINE_OPERATORS = {"m1_restructure": restructure, "m2_retune": retune, "c3_crossover": cross,
                     "r4_reason": cross, "d5_diverge": diverge}
