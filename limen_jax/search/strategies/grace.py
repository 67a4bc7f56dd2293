"""GRACE (seed 000): evolve reward programs by how well they rank expert demonstrations.

A population of reward programs (``population``, default 20) is scored with no RL run by
the ``demos`` evaluation kind (:mod:`limen_jax.search.evaluation.demo_ranking`: ranking accuracy A of expert
over negative transitions). Each child's parent is drawn by a softmax over the
population's fitness; its prompt shows the parent's code and accuracy and, by the
paper's odds, the examples it gets most wrong (mis-ranked pairs of lowest margin, the
expert transitions it rewards least, or a whole expert trajectory with its per-step
rewards), rendered with :meth:`Task.describe_state`. The population keeps the best of
parents and children. After ``generations`` generations the best reward is trained with
PPO (the archive's fitness stays task success, as for every strategy), ``rounds`` times:
the run's last batch trains the final best. ``fitness="ppo"`` instead trains every child
(the population ranked by success).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from limen_jax.archive import ProgramRecord, program_id
from limen_jax.llm.prompts import build_system
from limen_jax.search.base import SearchView, StrategyBase, evaluate
from limen_jax.search.evaluation.demo_ranking import hard_pairs
from limen_jax.search.requests import Outcome, ProgramRequest, Request
from limen_jax.search.templates import render

FITNESS = ("demos", "ppo")
SCORE_LABEL = {"demos": "Ranking accuracy", "ppo": "Success rate"}  # the parent's fitness, as the prompt names it
SHOWN_EXPERT_STEPS = 12  # at most this many steps of a whole expert trajectory


class Grace(StrategyBase):
    name = "grace"
    lookahead = 0  # every generation reads the last one's scores

    @dataclasses.dataclass(frozen=True)
    class Options:
        """population: programs kept. generations: generations of children between PPO
        runs on the best (demos fitness). rounds: PPO runs on the best; the run lasts
        rounds x (generations + 1) batches (at most ``search.iterations`` + 1). fitness:
        the evaluation kind children are ranked by ("demos": the paper; "ppo": trained,
        ranked by success). temperature: of the
        softmax over fitness that draws parents. examples: mis-ranked pairs (and
        under-rewarded expert transitions) shown. p_trajectory, p_pairs, p_expert: the
        prompt's odds, cumulative thresholds on one uniform draw per child: below
        p_trajectory the pairs and a whole expert trajectory with the parent's rewards;
        below p_pairs the mis-ranked pairs only; below p_expert the expert transitions
        the parent rewards least only; else the code alone. learners: each PPO run's
        policy adds its rollouts to the negatives (the ``learner`` kind), after which
        the population is ranked again."""

        population: int = 20
        generations: int = 4
        rounds: int = 2
        fitness: str = "demos"
        temperature: float = 0.05
        examples: int = 4
        p_trajectory: float = 0.25
        p_pairs: float = 0.5
        p_expert: float = 0.75
        learners: bool = True

        def __post_init__(self) -> None:
            if self.fitness not in FITNESS:
                raise ValueError(f"fitness must be one of {FITNESS}, got {self.fitness!r}")
            if self.population < 1 or self.generations < 1 or self.rounds < 1 or self.temperature <= 0:
                raise ValueError("population, generations and rounds must be >= 1 and temperature > 0")
            if not 0 <= self.p_trajectory <= self.p_pairs <= self.p_expert <= 1:
                raise ValueError("the prompt odds need 0 <= p_trajectory <= p_pairs <= p_expert <= 1")

    def __init__(self, options: Options | None = None) -> None:
        super().__init__(options)
        self.population: list[str] = []  # program ids, best first
        self.fitness: dict[str, float] = {}
        self.notes: dict[str, dict[str, str]] = {}  # id -> rendered examples of its mistakes
        self.trained: list[dict[str, Any]] = []  # PPO runs of the best: {"round", "id", "of", ...}
        if self.options.fitness == "demos":  # rounds x (generations + a PPO batch), then stop
            self.max_iterations = self.options.rounds * (self.options.generations + 1) - 1

    # --- proposing ------------------------------------------------------------------
    def _train_round(self, view: SearchView) -> bool:
        """Whether batch ``view.iteration`` trains the best with PPO (demos fitness only): every
        ``generations + 1``-th batch, and the run's last one when no PPO run came before it
        (a short run still leaves a trained best)."""
        g, it = self.options.generations, view.iteration
        last = it == view.last and not self.trained
        return self.options.fitness == "demos" and (it % (g + 1) == g or last)

    def propose(self, view: SearchView, rng: np.random.Generator) -> list[Request]:
        if self._train_round(view) and self.population:
            best = view.store.get(self.population[0])
            return [ProgramRequest(
                id=program_id(view.iteration, 0), iteration=view.iteration, island=0, operator="train_best",
                parent_ids=(best.id,), context_ids=(), system="", user="", sections=(), rng_seed=0,
                evaluation="learner" if self.options.learners else "ppo", source="given", code=best.code,
                tag={"round": view.iteration // (self.options.generations + 1), "of": best.id},
            )]
        out: list[Request] = [self._child(view, rng, k) for k in range(view.candidates)]
        if self.options.learners and self.trained and not self.trained[-1].get("reranked") and self.population:
            # the negatives grew: rank the population again, beside the new children
            out.append(evaluate(view, 0, [view.store.get(i) for i in self.population], "demos"))
        return out

    def _parent(self, view: SearchView, rng: np.random.Generator) -> ProgramRecord | None:
        u = rng.random()  # drawn whether or not there is a population: a fixed stream
        if not self.population:
            return None
        f = np.array([self.fitness[i] for i in self.population])
        p = np.exp((f - f.max()) / self.options.temperature)
        pick = int(np.searchsorted(np.cumsum(p / p.sum()), u, side="right"))
        return view.store.get(self.population[min(pick, len(self.population) - 1)])

    def _child(self, view: SearchView, rng: np.random.Generator, k: int) -> ProgramRequest:
        from limen_jax.llm.prompts import _constraints, _functions
        from limen_jax.llm.rules import checker_rules
        from limen_jax.modes import REQUIRED

        parent = self._parent(view, rng)
        u = rng.random()
        seed = int(rng.integers(2**31 - 1))
        o = self.options
        notes = self.notes.get(parent.id, {}) if parent is not None else {}
        if parent is None:
            shown: tuple[str, ...] = ("demonstrations",)
            examples = notes_for_scratch(view)
            instruction = ("Study the expert and non-expert transitions above and write a reward that is high "
                           "on what the expert does and low on aimless play.")
        else:
            pick = (("pairs", "trajectory") if u < o.p_trajectory else ("pairs",) if u < o.p_pairs
                     else ("experts",) if u < o.p_expert else ())
            shown = tuple(s for s in pick if notes.get(s))
            examples = "\n\n".join(notes[s] for s in shown)
            instruction = ("Improve the reward so that it ranks every expert transition above the others: fix the "
                           "mistakes shown, keep what already works.")
            if "trajectory" in shown:
                instruction += " Make it climb along the expert trajectory, step by step, toward the goal."
        parts = tuple("observation" if f == "get_observation" else "reward" for f in REQUIRED[view.mode])
        negatives = "random play" + (", and rollouts of agents trained during the search" if self.trained else "")
        user = render(
            "grace", task_description=view.task.description.strip(), task_context=view.task.context.strip(),
            negatives=negatives, examples=examples, instruction=instruction, functions=_functions(parts),
            constraints=_constraints(parts), rules=checker_rules(view.max_obs_dim, view.max_work_vs_step),
            budget=view.budget,
            parent="" if parent is None else render(
                "grace_parent", code=parent.code.rstrip(),
                score=f"{SCORE_LABEL[o.fitness]}: {self.fitness[parent.id]:.3f}"),
        ) + "\n"
        return ProgramRequest(
            id=program_id(view.iteration, k), iteration=view.iteration, island=0,
            operator="mutate" if parent is not None else "from_scratch",
            parent_ids=(parent.id,) if parent is not None else (), context_ids=(), system=build_system(view.mode),
            user=user, sections=shown, rng_seed=seed, evaluation=self.options.fitness,
        )

    # --- being told -----------------------------------------------------------------
    def tell(self, view: SearchView, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for o in outcomes:
            if o.request.kind == "eval":
                for rec, res in zip(o.records, o.results):
                    if rec.id in self.fitness and hasattr(res, "rewards"):
                        self.fitness[rec.id] = float(res.accuracy)
                        self.notes[rec.id] = render_notes(view, rec, np.asarray(res.rewards), self.options.examples)
                if self.trained:
                    self.trained[-1]["reranked"] = True
                continue
            record = o.record
            if record is None or not isinstance(o.request, ProgramRequest):
                continue
            if o.request.operator == "train_best":
                entry = {"round": o.request.tag["round"], "id": record.id, "of": o.request.tag["of"],
                         "success": record.success, "error": (record.error or {}).get("message")}
                self.trained.append(entry)
                events.append({"event": "grace_round", **entry})
                continue
            value = self._value(record)
            if value is None:
                continue
            self.fitness[record.id] = value
            self.population.append(record.id)
            if o.results and hasattr(o.results[0], "rewards"):
                self.notes[record.id] = render_notes(view, record, np.asarray(o.results[0].rewards),
                                                     self.options.examples)
        order = sorted(self.population, key=lambda i: (-self.fitness[i], self.population.index(i)))
        self.population = order[: self.options.population]
        self.notes = {i: n for i, n in self.notes.items() if i in self.population}
        events.append({"event": "grace", "population": [[i, round(self.fitness[i], 4)] for i in self.population]})
        return events

    def _value(self, record: ProgramRecord) -> float | None:
        if record.error is not None or record.duplicate_of is not None:  # a repeat: its original is in already
            return None
        if self.options.fitness == "demos":
            return record.evaluations.get("demos", {}).get("accuracy")
        return record.success if record.evaluated else None

    def to_dict(self) -> dict[str, Any]:
        return {"population": list(self.population), "fitness": dict(self.fitness), "notes": self.notes,
                "trained": list(self.trained)}

    def load(self, state: dict[str, Any]) -> None:
        self.population = list(state["population"])
        self.fitness = {k: float(v) for k, v in state["fitness"].items()}
        self.notes = {k: dict(v) for k, v in state["notes"].items()}
        self.trained = list(state["trained"])


# --- rendering examples for the prompt -----------------------------------------------
def _step(view: SearchView, demos: Any, i: int, reward: float | None = None) -> str:
    t = demos.transitions
    take = lambda tree: jax.tree.map(lambda x: np.asarray(x)[i], tree)  # noqa: E731
    names = getattr(view.task, "action_names", None)
    a = np.asarray(t.action)[i]
    action = names[int(a)] if names is not None and np.ndim(a) == 0 else np.array2string(np.asarray(a), precision=3)
    r = "" if reward is None else f" -> reward {reward:.4g}"
    return (f"{view.task.describe_state(take(t.sim))} | action {action} | next: "
            f"{view.task.describe_state(take(t.next_sim))}{r}")


def render_notes(view: SearchView, record: ProgramRecord, rewards: np.ndarray, k: int) -> dict[str, str]:
    """The examples a child's prompt may show, as text: "pairs" (its k lowest-margin
    mis-ranked pairs), "experts" (the k expert transitions it rewards least), and
    "trajectory" (the expert episode holding its worst expert transition, every step's
    reward; at most SHOWN_EXPERT_STEPS steps ending at that transition)."""
    demos = view.demos()
    expert = demos.expert
    out: dict[str, str] = {}
    pairs = hard_pairs(rewards, expert, k)
    if pairs:
        lines = [f"{n + 1}. expert: {_step(view, demos, p.expert, p.r_expert)}\n"
                 f"   other ({demos.source[p.negative]}): {_step(view, demos, p.negative, p.r_negative)}"
                 for n, p in enumerate(pairs)]
        out["pairs"] = "## Mis-ranked pairs (the expert transition got no more reward than the other)\n\n" + \
            "\n".join(lines)
    e_idx = np.nonzero(expert)[0]
    low = e_idx[np.argsort(np.nan_to_num(rewards[e_idx], nan=-np.inf), kind="stable")[:k]]
    out["experts"] = "## Expert transitions your reward pays least\n\n" + "\n".join(
        f"- {_step(view, demos, int(i), float(rewards[i]))}" for i in low)
    worst = int(low[0])
    same = np.nonzero(expert & (demos.episode == demos.episode[worst]) & (demos.round == demos.round[worst]))[0]
    same = same[same <= worst][-SHOWN_EXPERT_STEPS:]
    out["trajectory"] = "## An expert trajectory with your reward at each step\n\n" + "\n".join(
        f"step {int(demos.step[i])}: {_step(view, demos, int(i), float(rewards[i]))}" for i in same)
    return out


def notes_for_scratch(view: SearchView) -> str:
    """The first generation's examples: the start of one expert episode and of one
    non-expert episode (GRACE's phase 1 reads sampled trajectories)."""
    demos = view.demos()
    blocks = []
    for source, title in (("expert", "An expert trajectory"), ("random", "A random-play trajectory")):
        idx = np.nonzero((demos.source == source) & (demos.episode == 0) & (demos.round == 0))[0]
        if len(idx):
            steps = "\n".join(f"step {int(demos.step[i])}: {_step(view, demos, int(i))}"
                              for i in idx[:SHOWN_EXPERT_STEPS])
            blocks.append(f"## {title}\n\n{steps}")
    return "\n\n".join(blocks)
