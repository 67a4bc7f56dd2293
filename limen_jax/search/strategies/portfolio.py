"""A portfolio of strategies: several registered strategies side by side on one archive,
each batch slot given by a bandit to the member whose recent children improved it most.

Improvement: a member's program (a child of a program request it made, trained or
rejected) scores ``max(0, s - b)``, where ``s`` is the child's success when it was trained
at the full budget (0 when it was rejected or stopped by the cascade) and ``b`` the best
full-budget success in the archive before the batch (the best over records not in the
batch being told; 0 when there is none). So a member gains credit only for children that
raise the archive's best, by how much, and pays for every program it asks for.

Allocation (UCB1, slot by slot): with ``n_m`` the member's programs in its window (its
last ``window`` programs; 0: all), ``mean_m`` their mean improvement and ``N`` the sum of
the ``n_m``, each slot goes to the not-done member with the highest
``mean_m + c * sqrt(ln(N) / n_m)`` (a member with ``n_m = 0`` first; ties to the earlier
member); the slot then counts as one more program of that member (``n_m`` and ``N`` + 1,
mean unchanged) for the next slot, so a batch spreads over near-equal members.

Each member proposes with a view of its own: ``candidates`` = its slots, ``first_index``
past the ids the members before it used, so ids never collide; each gets its own
Generator (one seed per member drawn from the batch's, in member order). A member may ask
more or fewer programs than its slots (forge's plan batch asks text only, its component
batch one program per component). Outcomes go back to the member that asked, by request
id. Lookahead is the least of the members'; the portfolio is done when every member is.
Memory: each member's own ``to_dict`` (nested), the improvements per member, and the
owner of each request in flight. Offline, a request is answered by the member that asked
(its ``offline_text`` / ``offline_program``).

Members' options: ``member_options`` maps a member's name to its own ``search.options``
(``{"mcts": {"first_level": 3}}``; from the CLI ``--set
search.options.member_options.mcts.first_level=3``), each checked against that member's
``Options`` where the run starts; a member not named takes its defaults.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.search.base import OfflineRequest, SearchView, StrategyBase
from limen_jax.search.requests import Outcome, ProgramRequest, Request
from limen_jax.search.strategy_registry import check_options, make_strategy, strategy_class, strategy_names

DEFAULT_MEMBERS = ("map_elites", "eureka", "mcts", "forge")  # those registered in this process


def ucb_slots(improvements: dict[str, list[float]], slots: int, c: float, window: int = 0) -> dict[str, int]:
    """Slots per member by batched UCB1 (see the module docstring). ``improvements``: each
    member's improvements, oldest first, in member order; returns every member's count."""
    recent = {m: (h[-window:] if window > 0 else list(h)) for m, h in improvements.items()}
    n = {m: len(h) for m, h in recent.items()}
    mean = {m: (sum(h) / len(h) if h else 0.0) for m, h in recent.items()}
    out = dict.fromkeys(improvements, 0)
    for _ in range(slots):
        total = sum(n.values())

        def ucb(m: str, total: int = total) -> float:
            return math.inf if n[m] == 0 else mean[m] + c * math.sqrt(math.log(total) / n[m])

        chosen = max(improvements, key=ucb)  # the first of equal maxima
        out[chosen] += 1
        n[chosen] += 1
    return out


def improvements_of(outcomes: Sequence[Outcome], best_before: float) -> list[tuple[str, float]]:
    """(request id, improvement) of each program outcome (see the module docstring)."""
    out = []
    for o in outcomes:
        if isinstance(o.request, ProgramRequest) and o.record is not None:
            s = float(o.record.success or 0.0) if o.record.evaluated else 0.0
            out.append((o.request.id, max(0.0, s - best_before)))
    return out


def _split(members: str) -> list[str]:
    return [m.strip() for m in members.split(",") if m.strip()]


def check_member_options(member_options: Any, members: Sequence[str]) -> None:
    """ValueError unless ``member_options`` maps names among ``members`` to mappings of
    options that each member's ``Options`` accepts (names, types and values)."""
    if not isinstance(member_options, dict) or not all(isinstance(v, dict) for v in member_options.values()):
        raise ValueError("member_options must map member names to their options, e.g. "
                         f'{{"mcts": {{"first_level": 3}}}}, got {member_options!r}')
    stray = sorted(set(member_options) - set(members))
    if stray:
        raise ValueError(f"member_options names {stray}, which are not members (members: {list(members)})")
    for name, options in member_options.items():
        try:
            check_options(name, options)
        except ImportError as exc:
            raise ValueError(f"member_options[{name!r}]: strategy {name!r} cannot be loaded ({exc})") from None
        except ValueError as exc:
            raise ValueError(f"member_options[{name!r}]: {exc}") from None


def _loads(name: str) -> bool:
    """Whether the strategy registered as ``name`` can be loaded (an entry point may name a
    module that is not installed)."""
    try:
        strategy_class(name)
    except ImportError:
        return False
    return True


class Portfolio(StrategyBase):
    name = "portfolio"

    @dataclasses.dataclass(frozen=True)
    class Options:
        members: str = ",".join(DEFAULT_MEMBERS)  # comma-separated strategy names
        c: float = math.sqrt(2.0)  # UCB1's exploration weight
        window: int = 8  # the programs per member the mean and count are taken over (0: all)
        # member name -> that member's own options (its Options' fields); others take defaults
        member_options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

        def __post_init__(self) -> None:
            if self.c < 0 or self.window < 0:
                raise ValueError("need c >= 0 and window >= 0")
            check_member_options(self.member_options, _split(self.members))

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.members = {name: make_strategy(name, self.options.member_options.get(name))
                        for name in self._member_names()}
        self.improvements: dict[str, list[float]] = {m: [] for m in self.members}
        self.owner: dict[str, str] = {}  # request id -> member, for requests not yet told
        self.lookahead = min(getattr(s, "lookahead", 1) for s in self.members.values())

    def _member_names(self) -> list[str]:
        """The members asked for; of the default list, those this process can load (the
        default names strategies other packages provide); any other unknown name is an error."""
        asked = _split(self.options.members)
        known = {m for m in strategy_names() if _loads(m)}
        default = self.options.members == ",".join(DEFAULT_MEMBERS)
        names = [m for m in asked if m in known] if default else asked
        unknown = [m for m in names if m not in known]
        if unknown or not names or "portfolio" in names or len(set(names)) < len(names):
            raise ValueError(f"portfolio members {asked}: need distinct registered strategies other than "
                             f"portfolio (unknown: {unknown}; registered: {sorted(known)})")
        return names

    def _active(self, view: SearchView) -> list[str]:
        return [m for m, s in self.members.items() if not s.done(view)]

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        seeds = rng.integers(2**31 - 1, size=len(self.members))
        active = self._active(view)
        slots = ucb_slots({m: self.improvements[m] for m in active}, view.candidates, self.options.c,
                          self.options.window)
        out: list[Request] = []
        taken: set[str] = set()
        for (name, strategy), seed in zip(self.members.items(), seeds):
            if not slots.get(name):
                continue
            mine = list(strategy.propose(dataclasses.replace(view, candidates=slots[name], first_index=len(out)),
                                         np.random.default_rng(int(seed))))
            clash = taken & {r.id for r in mine}
            if clash:
                raise ValueError(f"portfolio member {name!r} reused request ids {sorted(clash)}: its ids must "
                                 "start at view.first_index (use the request builders of limen_jax.search.base)")
            taken |= {r.id for r in mine}
            self.owner.update({r.id: name for r in mine})
            out += mine
        return out

    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        told = {o.request.id for o in outcomes}
        before = [r.success for r in view.store if r.evaluated and r.id not in told]
        best_before = max(before, default=0.0)
        gains = dict(improvements_of(outcomes, best_before))
        events: list[dict[str, Any]] = []
        for name, strategy in self.members.items():
            mine = [o for o in outcomes if self.owner.get(o.request.id) == name]
            if not mine:
                continue
            self.improvements[name] += [gains[o.request.id] for o in mine if o.request.id in gains]
            events += [{**e, "member": name} for e in strategy.tell(view, mine)]
        programs = {m: sum(self.owner.get(i) == m for i in gains) for m in self.members}
        for request_id in told:
            self.owner.pop(request_id, None)
        events.append({"event": "portfolio", "best_before": best_before, "programs": programs,
                       "improvements": {m: h[-self.options.window or None:] for m, h in self.improvements.items()}})
        return events

    def done(self, view: SearchView) -> str | None:
        return "every member is done" if not self._active(view) else None

    def _asker(self, request: OfflineRequest) -> Any:
        name = self.owner.get(request.request.id)
        return self.members[name] if name in self.members else super()

    def offline_text(self, request: OfflineRequest) -> str:
        return str(self._asker(request).offline_text(request))

    def offline_program(self, request: OfflineRequest) -> str | None:
        answer = self._asker(request).offline_program(request)
        return None if answer is None else str(answer)

    def to_dict(self) -> dict[str, Any]:
        return {"members": {m: s.to_dict() for m, s in self.members.items()},
                "improvements": {m: list(h) for m, h in self.improvements.items()}, "owner": dict(self.owner)}

    def load(self, state: dict[str, Any]) -> None:
        if sorted(state["members"]) != sorted(self.members):
            raise ValueError(f"the checkpoint's portfolio has members {sorted(state['members'])}, "
                             f"this one {sorted(self.members)}")
        for name, member_state in state["members"].items():
            if member_state:
                self.members[name].load(member_state)
        self.improvements = {m: [float(x) for x in state["improvements"][m]] for m in self.members}
        self.owner = {str(k): str(v) for k, v in state["owner"].items()}
