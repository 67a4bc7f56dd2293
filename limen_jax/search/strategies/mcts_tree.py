"""RF-Agent's search tree as plain data, and its arithmetic: UCT, back-propagation, the
exploration schedule, the expansion plan and the elite draw (pure functions; the
``mcts`` strategy in :mod:`limen_jax.search.strategies.mcts` does the asking).

The tree is a dict ``node id -> Node`` in creation order. A virtual root sits above the
first-level nodes (``parent`` None); its visit count is the sum of theirs. Only scored
nodes (a trained program: ``Q`` set) take part in selection and back-propagation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

# The expansion actions and how many children each gets in the paper's 8 per expansion:
# m1 restructure (add or drop terms), m2 retune weights, c3 crossover with elites,
# r4 reason over the chain of ancestors, d5 write something unlike other branches.
OPERATORS = ("m1_restructure", "m2_retune", "c3_crossover", "r4_reason", "d5_diverge")
COUNTS = (2, 2, 2, 1, 1)
LEAVES = sum(COUNTS)  # the paper's children per expansion
K_CHOICES = (2, 3, 4)  # k elites / ancestors / other nodes shown, drawn per child

Tree = dict[str, "Node"]


@dataclasses.dataclass
class Node:
    """One node. id: "n<index>". parent: the parent node's id (None: under the virtual
    root). operator: the action that made it ("first_level", an OPERATORS name).
    program: the id of its program in the run's store (the repair's once repaired).
    thought: the one-line design thought z. F: its program's mean success; Q: its value
    (starts at F); N: visits (starts at 1); v_self: the LLM's self-verification score in
    [-1, 1] (None until asked). status: "asked", "scored", "rejected" (awaits its one
    repair) or "dead". repaired: a repair was asked. verified: self-verification and
    thought alignment were asked."""

    id: str
    parent: str | None
    operator: str
    program: str | None = None
    thought: str = ""
    F: float | None = None
    Q: float | None = None
    N: int = 0
    v_self: float | None = None
    status: str = "asked"
    repaired: bool = False
    verified: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        """A node of a checkpoint (untrusted: a run directory may come from anyone);
        ValueError naming the field unless each has its type (N at least 1 once scored)."""
        node = cls(**data)
        real = lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
        fields = {"id": isinstance(node.id, str), "parent": node.parent is None or isinstance(node.parent, str),
                  "operator": isinstance(node.operator, str), "thought": isinstance(node.thought, str),
                  "program": node.program is None or isinstance(node.program, str),
                  "F": real(node.F), "Q": real(node.Q), "v_self": real(node.v_self),
                  "N": isinstance(node.N, int) and not isinstance(node.N, bool) and int(node.Q is not None) <= node.N,
                  "status": node.status in STATUSES, "repaired": isinstance(node.repaired, bool),
                  "verified": isinstance(node.verified, bool)}
        bad = [k for k, ok in fields.items() if not ok]
        if bad:
            raise ValueError(f"mcts node {ascii(node.id)[:40]}: {bad[0]} {ascii(getattr(node, bad[0]))[:60]} "
                             "is not a value of that field")
        return node


STATUSES = ("asked", "scored", "rejected", "dead")


MAX_NODES = 20_000  # nodes of a checkpointed tree (a paper-scale search has about a hundred)
MAX_DEPTH = 1_000  # levels: selection and back-propagation cost nodes x depth


def check_tree(tree: Tree) -> None:
    """ValueError unless each node's parent is None or a node of ``tree``, no chain of
    parents loops (path_to_root would never end) and the tree is at most MAX_NODES nodes
    and MAX_DEPTH levels (each search step costs nodes x depth); linear in the tree."""
    if len(tree) > MAX_NODES:
        raise ValueError(f"mcts tree of {len(tree)} nodes: at most {MAX_NODES}")
    depth: dict[str, int] = {}  # node -> its level (-1: on the chain being walked)
    for start in tree:
        chain: list[str] = []
        at: str | None = start
        while at is not None and at not in depth:
            if at not in tree:
                raise ValueError(f"mcts node {ascii(chain[-1])[:40]}: parent {ascii(at)[:40]} is not a node of "
                                 "the tree")
            depth[at] = -1
            chain.append(at)
            at = tree[at].parent
        below = 0 if at is None else depth[at]
        if below < 0:
            raise ValueError(f"mcts node {ascii(at)[:40]}: its parents form a loop")
        for k, node in enumerate(reversed(chain), 1):
            depth[node] = below + k
        if below + len(chain) > MAX_DEPTH:
            raise ValueError(f"mcts tree deeper than {MAX_DEPTH} levels (node {ascii(start)[:40]})")


def scored_children(tree: Tree, parent: str | None) -> list[Node]:
    """The scored children of ``parent`` (None: the virtual root), in creation order."""
    return [n for n in tree.values() if n.parent == parent and n.Q is not None]


def visits(tree: Tree, node: str | None) -> int:
    """N of ``node``; the virtual root's is the sum of the first-level nodes'."""
    return sum(n.N for n in scored_children(tree, None)) if node is None else tree[node].N


def exploration_weight(t: int, budget: int, lambda0: float = 0.4) -> float:
    """λ = λ0 (N - t) / N: linear decay from λ0 at t = 0 to 0 once ``t`` (programs
    expanded) reaches the budget N; never negative."""
    return lambda0 * max(0, budget - t) / budget


def uct_scores(tree: Tree, parent: str | None, lam: float) -> dict[str, float]:
    """UCT of each scored child c of ``parent``:
    (Q(c) - Qmin) / (Qmax - Qmin) + λ [sqrt(2 ln(N(parent) + 1) / N(c)) + softmax(v_self)(c)].
    Q is min-max scaled over every scored node of the tree (the term is 0 when all Q are
    equal); the softmax runs over the siblings, an unverified v_self counting as 0."""
    kids = scored_children(tree, parent)
    if not kids:
        return {}
    qs = [float(n.Q) for n in tree.values() if n.Q is not None]
    qmin, qmax = min(qs), max(qs)
    v = np.array([n.v_self or 0.0 for n in kids], dtype=np.float64)
    prior = np.exp(v - v.max())
    prior /= prior.sum()
    n_parent = visits(tree, parent)
    out = {}
    for node, p in zip(kids, prior):
        exploit = (float(node.Q) - qmin) / (qmax - qmin) if qmax > qmin else 0.0  # type: ignore[arg-type]
        explore = math.sqrt(2.0 * math.log(n_parent + 1) / node.N)
        out[node.id] = exploit + lam * (explore + float(p))
    return out


def select_leaf(tree: Tree, lam: float) -> tuple[str | None, list[dict[str, float]]]:
    """Follow the highest-UCT child from the virtual root down to a node without scored
    children (ties: the earlier node). Returns the leaf (None when no node is scored) and
    the UCT values of each level passed, for the run log."""
    node: str | None = None
    levels: list[dict[str, float]] = []
    while True:
        scores = uct_scores(tree, node, lam)
        if not scores:
            return node, levels
        levels.append(scores)
        node = max(scores, key=scores.__getitem__)


def path_to_root(tree: Tree, node: str) -> list[str]:
    """``node`` and its ancestors, ``node`` first."""
    out = [node]
    while tree[out[-1]].parent is not None:
        out.append(tree[out[-1]].parent)  # type: ignore[arg-type]
    return out


def backpropagate(tree: Tree, node: str, eta: float = 0.7) -> None:
    """After ``node``'s children were scored, update it and each ancestor, nearest
    first: Q(s) <- (1 - η) Q(s) + η max over its scored children of Q; N(s) = the sum of
    its scored children's N. A node with no scored child is left as it is."""
    for s in path_to_root(tree, node):
        kids = scored_children(tree, s)
        if not kids:
            continue
        here = tree[s]
        best = max(float(k.Q) for k in kids)  # type: ignore[arg-type]
        here.Q = (1.0 - eta) * float(here.Q if here.Q is not None else best) + eta * best
        here.N = sum(k.N for k in kids)


def operator_counts(leaves: int = LEAVES) -> tuple[int, ...]:
    """Children per operator (in OPERATORS order) for an expansion of ``leaves``: the
    paper's 2, 2, 2, 1, 1 scaled to ``leaves`` by largest remainders (ties to the earlier
    operator), so 8 gives the paper's counts, 16 twice them, 5 one each, 3 m1, m2, c3."""
    if leaves < 1:
        raise ValueError(f"an expansion needs at least 1 leaf, got {leaves}")
    shares = [leaves * n / LEAVES for n in COUNTS]
    counts = [math.floor(s) for s in shares]
    by_remainder = sorted(range(len(COUNTS)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in by_remainder[: leaves - sum(counts)]:
        counts[i] += 1
    return tuple(counts)


def expansion_plan(leaves: int = LEAVES) -> list[str]:
    """The operators of one expansion of ``leaves`` children, grouped in OPERATORS order;
    the paper's 8: m1, m1, m2, m2, c3, c3, r4, d5."""
    return [op for op, n in zip(OPERATORS, operator_counts(leaves)) for _ in range(n)]


def elite_weights(n: int) -> np.ndarray:
    """Draw odds of ``n`` elites ranked best first: 1 / rank, normalised. (n,) float64."""
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64)
    return w / w.sum()


def draw_elites(ranked: Sequence[str], k: int, rng: np.random.Generator) -> list[str]:
    """``k`` distinct ids from ``ranked`` (best first), each draw with odds 1 / rank."""
    if not ranked or k <= 0:
        return []
    picked = rng.choice(len(ranked), size=min(k, len(ranked)), replace=False, p=elite_weights(len(ranked)))
    return [ranked[int(i)] for i in picked]


def branch_of(tree: Tree, node: str) -> str:
    """The first-level node whose subtree holds ``node``."""
    return path_to_root(tree, node)[-1]
