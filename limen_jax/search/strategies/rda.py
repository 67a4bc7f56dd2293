"""RDA (reward design agent): decompose the task, write one reward term per subtask, and
let a critic read what each trained policy did before the next revision.

One RDA iteration is four batches (``lookahead`` 0: each reads the last one's outcomes):

1. programs: K = ``search.candidates`` rewards, each a dict with one named term per
   subtask (round 0 from scratch, later each rewritten from its predecessor's critique;
   a failed predecessor is replaced by the best so far), trained by ``ppo``;
2. ``episodes``: each trained candidate's kept policy rolled out for ``episodes``
   evaluation episodes, every step's reward terms logged
   (:mod:`limen_jax.search.evaluation.episodes`);
3. ``critic``: one text request per candidate holding exactly its episodes' term logs
   and a renderer line (and, where the reward's terms are not the subtasks, a line naming
   the subtasks without a term and the terms named after no subtask); per episode and
   subtask a completion score in [0, 1] and a reason, aggregated per subtask (mean over
   episodes) and per candidate (mean over subtasks); the best by that aggregate is kept;
4. ``reflect_subtasks``: vague subtask descriptions sharpened, same names and count
   (skipped after the last iteration).

A rewrite whose predecessor's terms are not the subtasks gets a section naming what is
missing and what is extra; nothing is rejected for it (the paper's revisions may add
terms), and the ``programs`` event lists such candidates (``terms_mismatch``).

Batch 0 asks for the decomposition (``decompose``). The run ends after ``iterations``
iterations (so ``search.iterations`` must allow ``4 * iterations`` batches). Memory
(subtasks, stage, candidates, critiques, the best) is plain JSON, restored on --resume.
Selection by critic aggregate; task success still feeds the archive and ``compare``.

Offline (no LLM), the answers come in the formats the prompts ask for, so they go through
the same parsers as an LLM's: the decomposition is the catalog's dense shaping terms, then
its required terms, one subtask each, named after the term (what a catalog knows of the
task's stages); the critic scores a subtask 1 in an episode when its term summed above
:data:`CRITIC_THRESHOLD` there (read from the candidate's ``episodes`` log), else 0; the
reflection sharpens each description with that test. The programs: ``rda_initial`` a
reward with one named term per offline subtask, ``rda_rewrite`` every term of its parent
reweighted, names kept (both a dict reward: the genome is marked ``named``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.catalog import Catalog
from limen_jax.interface import MAX_REWARD_TERMS
from limen_jax.llm.offline import Edit, Genome, OfflineAuthor, read_genome, reweighted
from limen_jax.search.base import OfflineRequest, SearchView, StrategyBase, ask_program, ask_text, evaluate
from limen_jax.search.requests import Outcome, ProgramRequest, Request, TextRequest
from limen_jax.search.strategies import rda_text as text

STAGES = ("decompose", "programs", "episodes", "critic", "reflect", "done")
CRITIC_THRESHOLD = 0.0  # offline, a subtask passed in an episode when its term summed above this


class Decompose(StrategyBase):
    name = "rda"
    lookahead = 0
    keep_policies = "all"  # the critic rolls out every candidate's policy

    @dataclasses.dataclass(frozen=True)
    class Options:
        iterations: int = 5  # RDA iterations (4 batches each, after the decomposition)
        episodes: int = 3  # evaluation episodes per candidate the critic reads
        max_subtasks: int = 4  # most subtasks the decomposition may give
        frames: int = 20  # rendered frames per critic query, over its episodes (where the task renders)

        def __post_init__(self) -> None:
            ok = min(self.iterations, self.episodes) >= 1 and self.frames >= 0
            if not ok or not 1 <= self.max_subtasks <= MAX_REWARD_TERMS:
                raise ValueError(f"iterations and episodes must be >= 1, frames >= 0 and max_subtasks in "
                                 f"1..{MAX_REWARD_TERMS}")

    def __init__(self, options: Options | None = None) -> None:
        super().__init__(options)
        self.stage = "decompose"
        self.round = 0
        self.subtasks: list[dict[str, str]] = []
        self.candidates: list[str] = []  # this round's program ids, in request order
        self.critiques: dict[str, dict[str, Any]] = {}  # program id -> summary (text.summary) or {"note": why}
        self.best: dict[str, Any] | None = None  # {"id", "aggregate", "round"}

    # --- proposing ------------------------------------------------------------------------
    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        opts = self.options
        if self.stage == "done":
            return []
        if self.stage == "decompose":
            return [ask_text(view, rng, 0, "decompose", system=text.system(),
                             user=text.decompose_prompt(view.task, opts.max_subtasks))]
        if self.stage == "programs":
            return self._programs(view, rng)
        records = [view.store.get(i) for i in self.candidates]
        if self.stage == "episodes":
            return [evaluate(view, 0, [r for r in records if _trained(r)], "episodes", episodes=opts.episodes,
                             frames=opts.frames)]
        if self.stage == "critic":
            return [ask_text(view, rng, k, "critic", system=text.system(), context=[r], tag={"program": r.id},
                             user=text.critic_prompt(view.task, self.subtasks, r, _log(r), view.prompt.max_code_lines),
                             images=[f["png"] for f in _log(r).get("frames", [])])
                    for k, r in enumerate(r for r in records if _log(r))]
        summaries = [self.critiques[i] for i in self.candidates if "aggregate" in self.critiques.get(i, {})]
        return [ask_text(view, rng, 0, "reflect_subtasks", system=text.system(),
                         user=text.reflect_prompt(view.task, self.subtasks, summaries))]

    def _programs(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        best = view.store.get(self.best["id"]) if self.best else None
        out: list[Request] = []
        for k in range(view.candidates):
            before = view.store.get(self.candidates[k]) if k < len(self.candidates) else None
            parent = before if before is not None and not before.failed else best
            top = [best] if best is not None and best is not parent else []
            req = ask_program(view, rng, k, 0, parent=parent, top=top,
                              failures=[before] if before is not None and before.failed else [],
                              operator="rda_rewrite" if parent is not None else "rda_initial")
            extra = [text.terms_section(self.subtasks)]
            if parent is not None and "aggregate" in self.critiques.get(parent.id, {}):
                extra.append(text.summary_section(parent.id, self.critiques[parent.id], self.options.episodes))
            terms = reward_terms(parent) if parent is not None else None
            if parent is not None and terms is not None:
                extra.append(text.rewrite_terms_section(parent.id, self.subtasks, terms))
            extra = [x for x in extra if x]
            out.append(dataclasses.replace(req, user=req.user.rstrip() + "\n\n" + "\n\n".join(extra) + "\n"))
        return out

    # --- being told -------------------------------------------------------------------------
    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        stage = self.stage
        event: dict[str, Any] = {"event": "rda", "stage": stage, "round": self.round}
        answers = {o.request.tag.get("program", ""): o.text for o in outcomes if o.request.kind == "text"}
        if stage == "decompose":
            parsed = text.parse_subtasks(next(iter(answers.values()), ""), self.options.max_subtasks)
            # an unusable answer leaves the whole task as the one subtask, so the run goes on
            self.subtasks = parsed or [{"name": "task", "description": text.one_line(view.task.description)}]
            event["subtasks"], self.stage = list(self.subtasks), "programs"
        elif stage == "programs":
            records = [o.record for o in outcomes if o.request.kind == "program" and o.record is not None]
            self.candidates = [r.id for r in records]
            trained = [r.id for r in records if _trained(r)]
            for r in records:
                if r.duplicate_of is not None:  # its policy is its original's: rolled out and critiqued there
                    self.critiques[r.id] = {"note": f"not trained: it behaved identically to program {r.duplicate_of}"}
                elif not _trained(r):
                    self.critiques[r.id] = {"note": "not trained: " + text.one_line((r.error or {}).get("message", ""))}
            event["trained"] = trained
            # the paper's rewards have a term per subtask, and its revisions may add terms: a
            # mismatch is not rejected, it is logged here and named in the critic's and the
            # rewrite's prompts
            mismatched = {r.id: dict(zip(("missing", "unexpected"), text.term_mismatch(self.subtasks, terms)))
                          for r in records if (terms := reward_terms(r)) is not None}
            mismatched = {i: m for i, m in mismatched.items() if m["missing"] or m["unexpected"]}
            if mismatched:
                event["terms_mismatch"] = mismatched
            self.stage = "episodes" if trained else self._end_round()
        elif stage == "episodes":
            logged = [i for i in self.candidates if _log(view.store.get(i))]
            for i in self.candidates:
                error = view.store.get(i).evaluations.get("episodes", {}).get("error")
                if error and i not in self.critiques:
                    self.critiques[i] = {"note": "no episodes: " + text.one_line(error)}
            event["logged"] = logged
            self.stage = "critic" if logged else self._end_round()
        elif stage == "critic":
            names = [s["name"] for s in self.subtasks]
            for pid, answer in answers.items():
                scores, reasons = text.parse_critic(answer, names, len(_log(view.store.get(pid))["episodes"]))
                self.critiques[pid] = text.summary(names, scores, reasons)
                agg = self.critiques[pid]["aggregate"]
                if self.best is None or agg > self.best["aggregate"]:
                    self.best = {"id": pid, "aggregate": agg, "round": self.round}
            event["aggregates"] = {i: self.critiques[i]["aggregate"] for i in answers}
            event["best"] = dict(self.best) if self.best else None
            self.stage = self._end_round()
        elif stage == "reflect":
            self.subtasks = text.reflect(self.subtasks, next(iter(answers.values()), ""))
            event["subtasks"], self.stage = list(self.subtasks), "programs"
        return [event]

    def _end_round(self) -> str:
        """The stage after a round's last batch: reflect (if a critique came back and an
        iteration is left), the next programs, or done."""
        self.round += 1
        if self.round >= self.options.iterations:
            return "done"
        critiqued = any("aggregate" in self.critiques.get(i, {}) for i in self.candidates)
        return "reflect" if critiqued else "programs"

    def done(self, view: SearchView) -> str | None:
        if self.stage != "done":
            return None
        best = f"best by critic {self.best['id']} ({self.best['aggregate']:.2f})" if self.best else "no critique"
        return f"rda: {self.options.iterations} iterations; {best}"

    # --- offline answers -------------------------------------------------------------------
    def offline_text(self, request: OfflineRequest) -> str:
        role = request.request.role if isinstance(request.request, TextRequest) else ""
        if role not in ("decompose", "critic", "reflect_subtasks"):
            return super().offline_text(request)
        return offline_text(request.author.catalog, role, list(request.others))

    def offline_program(self, request: OfflineRequest) -> str | None:
        asked = request.request
        if not isinstance(asked, ProgramRequest) or asked.operator not in ("rda_initial", "rda_rewrite"):
            return None
        parent = read_genome(request.parent.code) if request.parent is not None else None
        genome, ops = (rewrite_genome(request.author, parent, request.rng) if asked.operator == "rda_rewrite"
                       else initial_genome(request.author, request.rng))
        return request.author.edit(genome, ops, request.mode)

    # --- memory -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "round": self.round, "subtasks": self.subtasks, "candidates": self.candidates,
                "critiques": self.critiques, "best": self.best}

    def load(self, state: dict[str, Any]) -> None:
        if state.get("stage") not in STAGES:
            raise ValueError(f"rda: unknown stage {state.get('stage')!r} in the checkpoint")
        self.stage, self.round = state["stage"], int(state["round"])
        self.subtasks = [dict(s) for s in state["subtasks"]]
        self.candidates = list(state["candidates"])
        self.critiques = dict(state["critiques"])
        self.best = state["best"]
        # a checkpoint is untrusted (a run directory may come from anyone): typed here, not
        # deep inside a later batch
        best = self.best
        fields = {
            "subtasks": all(isinstance(s.get("name"), str) and isinstance(s.get("description"), str)
                            for s in self.subtasks),
            "candidates": all(isinstance(c, str) for c in self.candidates),
            "critiques": all(isinstance(k, str) and isinstance(v, dict) for k, v in self.critiques.items()),
            "best": best is None or (isinstance(best, dict) and isinstance(best.get("id"), str)
                                     and _real(best.get("aggregate")) and isinstance(best.get("round"), int)),
        }
        bad = [k for k, ok in fields.items() if not ok]
        if bad:
            raise ValueError(f"rda: {bad[0]} in the checkpoint: {ascii(state[bad[0]])[:80]}")


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _trained(record: Any) -> bool:
    """Trained to a score by this run (a repeat holds its original's score, not its own policy)."""
    return record.error is None and record.success is not None and record.duplicate_of is None


def reward_terms(record: Any) -> list[str] | None:
    """The names of the terms ``record``'s reward returns, as its episodes log or its
    training recorded them (a scalar reward: ["reward"]); None for one never trained."""
    log = _log(record)
    if log:
        return [str(t) for t in log["terms"]]
    if record.eval_terms:
        return list(record.eval_terms)
    return ["reward"] if _trained(record) else None


def _log(record: Any) -> dict[str, Any]:
    """The record's ``episodes`` log, or {} when it has none (or an error)."""
    log = record.evaluations.get("episodes")
    return log if log and "episodes" in log else {}


# --- offline answers ----------------------------------------------------------------------
def subtask_terms(catalog: Catalog) -> list[str]:
    """The offline subtasks: dense terms (the approach), then required ones (the goal)."""
    dense = [t for t in catalog.dense_terms if t not in catalog.required_terms]
    return dense + list(catalog.required_terms)


def _kind(catalog: Catalog, name: str) -> str:
    return "required" if name in catalog.required_terms else "dense shaping"


def offline_text(catalog: Catalog, role: str, others: list[Any]) -> str:
    """The offline text for an RDA ``role``; ``others`` are the request's context records."""
    names = subtask_terms(catalog)
    if role == "decompose":
        lines = [f"{i + 1}. {n}: bring about what the catalog's {_kind(catalog, n)} term `{n}` rewards"
                 for i, n in enumerate(names)]
        return "Offline decomposition:\n" + "\n".join(lines)
    if role == "reflect_subtasks":
        lines = [f"{i + 1}. {n}: bring about what the catalog's {_kind(catalog, n)} term `{n}` rewards; "
                 f"done in an episode when `{n}` sums above {CRITIC_THRESHOLD:g}" for i, n in enumerate(names)]
        return "Offline reflection:\n" + "\n".join(lines)
    log = (others[0].evaluations.get("episodes", {}) if others else {}) or {}
    lines = []
    for e, episode in enumerate(log.get("episodes", [])):
        for name, total in episode["sums"].items():
            passed = total > CRITIC_THRESHOLD
            lines.append(f"episode {e + 1}, {name}: {int(passed)} | term sum {total:.4g} "
                         f"{'>' if passed else '<='} {CRITIC_THRESHOLD:g}")
    return "Offline critique:\n" + ("\n".join(lines) if lines else "no episodes to score")


def initial_genome(author: OfflineAuthor, rng: np.random.Generator) -> Edit:
    """A from-scratch genome whose terms are the offline subtasks, at catalog weights."""
    cat = author.catalog
    genome = author.random_genome(rng)
    genome["terms"] = {n: cat.term(n).weight for n in subtask_terms(cat)}
    return {**genome, "named": True}, ["rda_initial"]


def rewrite_genome(author: OfflineAuthor, parent: Genome | None, rng: np.random.Generator) -> Edit:
    """Every term of ``parent`` reweighted by a log-normal factor (sigma 0.5), names kept."""
    if parent is None:
        return initial_genome(author, rng)
    terms = {n: reweighted(w, rng) for n, w in parent["terms"].items()}
    return {**parent, "terms": terms, "named": True}, ["rda_rewrite"]
