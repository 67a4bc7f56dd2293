"""Mutation prompts (paper Appendix B), assembled from the template files in ``prompts/``.

Every piece of wording lives in a ``prompts/*.md`` file (``$name`` placeholders,
:class:`string.Template`); this module only chooses, fills and orders them:

- system: ``system.md`` with the mode's task statement (``mode_<mode>.md``) and the
  design principles of the functions the mode asks for (``principles_*.md``);
- user, first generation: ``from_scratch.md``; later: ``evolve.md`` with the parent
  (``parent.md``), optional feedback sections and improvement guidance chosen by the
  parent's performance bracket (``guidance_{low,mid,high}.md``).

Optional sections (top programs, diverse programs, recent failures, training feedback)
are each kept with probability ``section_prob`` and shuffled, using the caller's
Generator; every call draws the same amount of randomness (4 uniforms and one
permutation) whatever is available, so the run's random stream does not depend on the
archive's contents.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from limen_jax.archive.store import ProgramRecord
from limen_jax.llm.feedback import FEEDBACK_KEYS, reward_terms_text, training_feedback
from limen_jax.llm.templates import load_template, render
from limen_jax.modes import PROGRAM_MODES as MODES
from limen_jax.modes import REQUIRED, SIGNATURES

SECTIONS: tuple[str, ...] = ("top_programs", "diverse_programs", "failures", "training_feedback")
Bracket = Literal["low", "mid", "high"]

# The wording for each function a mode asks for (limen_jax.modes.REQUIRED) lives in the
# *_observation.md and *_reward.md files.
_PART = {"get_observation": "observation", "compute_reward": "reward"}


class TaskInfo(Protocol):
    """What the prompts need from a task (satisfied by :class:`limen_jax.task.Task`)."""

    name: str
    description: str

    @property
    def context(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class PromptConfig:
    """section_prob: probability of keeping each available optional section (1: all are
        shown; lower it to sample sections at random, as the paper did).
    num_top / num_diverse / num_failures: at most this many programs per section.
    max_code_lines: code of other programs and failures is cut after this many lines
        (the parent is always shown whole). max_trace_lines: the last lines of an error
        trace that are kept. low_below / high_from: success thresholds of the guidance
        brackets (low: success < low_below; high: success >= high_from)."""

    section_prob: float = 1.0
    num_top: int = 3
    num_diverse: int = 3
    num_failures: int = 3
    max_code_lines: int = 150
    max_trace_lines: int = 25
    low_below: float = 0.2
    high_from: float = 0.7

    def __post_init__(self) -> None:
        if not 0.0 <= self.section_prob <= 1.0:
            raise ValueError("section_prob must be in [0, 1]")
        if not 0.0 <= self.low_below <= self.high_from <= 1.0:
            raise ValueError("need 0 <= low_below <= high_from <= 1")


@dataclasses.dataclass(frozen=True)
class Prompt:
    """system, user: the two messages. sections: optional sections included, in order.
    bracket: the guidance bracket used (None for a from-scratch prompt)."""

    system: str
    user: str
    sections: tuple[str, ...] = ()
    bracket: Bracket | None = None


# --- templates ----------------------------------------------------------------------------


# --- formatting -----------------------------------------------------------------------------


def _num(x: float | None) -> str:
    return "not measured" if x is None else f"{x:.4g}"


def _success(record: ProgramRecord) -> str:
    if record.success is None:
        return "not measured" + _repeat(record)
    text = f"{record.success:.2f}"
    if len(record.success_per_seed) > 1:
        text += " (per seed: " + ", ".join(f"{s:.2f}" for s in record.success_per_seed) + ")"
    return text + _repeat(record)


def _repeat(record: ProgramRecord) -> str:
    """What a repeat's result is (" " and a sentence), "" for any other program."""
    return "" if record.duplicate_of is None else " " + render("repeat", original=record.duplicate_of)


def _head(text: str, n: int) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) <= n:
        return "\n".join(lines)
    return "\n".join(lines[:n] + [f"# ... ({len(lines) - n} more lines cut)"])


def _tail(text: str, n: int) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) <= n:
        return "\n".join(lines)
    return "\n".join([f"... ({len(lines) - n} earlier lines cut)"] + lines[-n:])


def _scores(record: ProgramRecord) -> dict[str, str]:
    return {
        "id": record.id,
        "success_rate": _success(record),
        "final_return": _num(record.final_return),
        "obs_dim": "unknown" if record.obs_dim is None else str(record.obs_dim),
        "reward_ast_size": "unknown" if record.reward_ast_size is None else str(record.reward_ast_size),
    }


def _programs(records: Sequence[ProgramRecord], config: PromptConfig) -> str:
    return "\n\n".join(
        render("program", **_scores(r), code=_head(r.code, config.max_code_lines) or "# (no code)") for r in records
    )


def _failures(records: Sequence[ProgramRecord], config: PromptConfig) -> str:
    blocks = []
    for r in records:
        err = r.error or {}
        blocks.append(
            render(
                "failure",
                id=r.id,
                stage=str(err.get("stage", "unknown")),
                message=(str(err.get("message", "")).strip() or "(no message)") + _repeat(r),
                trace=_tail(str(err.get("trace", "") or ""), config.max_trace_lines) or "(no trace)",
                code=_head(r.code, config.max_code_lines) or "# (no code was extracted from the answer)",
            )
        )
    return "\n\n".join(blocks)


def performance_bracket(success: float | None, config: PromptConfig = PromptConfig()) -> Bracket:
    """ "low" below ``low_below``, "high" from ``high_from``, else "mid" (None counts as 0)."""
    s = 0.0 if success is None else success
    return "low" if s < config.low_below else "high" if s >= config.high_from else "mid"


def parent_feedback(parent: ProgramRecord) -> dict[str, str] | None:
    """The parent's training feedback: ``parent.feedback`` if it holds the three sentences
    (trend, per_seed, plateau as strings), else computed from its curves; with "terms",
    its reward terms' curves (10 points, max / mean / min; "" for a scalar reward)."""
    if all(isinstance(parent.feedback.get(k), str) for k in FEEDBACK_KEYS):
        out: dict[str, str] | None = {k: str(parent.feedback[k]) for k in FEEDBACK_KEYS}
    else:
        out = training_feedback(parent)
    return None if out is None else {**out, "terms": reward_terms_text(parent)}


# --- prompts --------------------------------------------------------------------------------


def budget_text(steps: int, seeds: int) -> str:
    """The training budget as the prompts state it."""
    return render("budget", steps=f"{steps:,}", seeds=str(seeds))


def _check_mode(mode: str) -> tuple[str, ...]:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    return tuple(_PART[f] for f in REQUIRED[mode])


def build_system(mode: str = "full") -> str:
    parts = _check_mode(mode)
    return (
        render(
            "system",
            mode_task=load_template(f"mode_{mode}").strip(),
            principles="\n\n".join(load_template(f"principles_{p}").strip() for p in parts),
        )
        + "\n"
    )


def _functions(parts: tuple[str, ...]) -> str:
    return " and ".join(SIGNATURES[f] for p in parts for f, part in _PART.items() if part == p)


def _constraints(parts: tuple[str, ...]) -> str:
    return "\n".join(load_template(f"constraints_{p}").strip() for p in parts)


def build_prompt(
    task: TaskInfo,
    mode: str,
    rng: np.random.Generator,
    *,
    parent: ProgramRecord | None = None,
    top: Sequence[ProgramRecord] = (),
    diverse: Sequence[ProgramRecord] = (),
    failures: Sequence[ProgramRecord] = (),
    config: PromptConfig = PromptConfig(),
    budget: str = "",
    max_obs_dim: int = 512,
    max_work_vs_step: float = 100.0,
) -> Prompt:
    """The (system, user) prompt for one mutation.

    task: supplies ``description`` and ``context`` (markdown: state fields, actions).
    mode: "full", "obs_only" or "reward_only" (which functions to write).
    rng: the run's host Generator; consumed by exactly 4 uniforms and one permutation.
    parent: the program to improve; None gives the from-scratch prompt.
    top, diverse: candidates for the "best programs" and "other cells" sections (the
        parent and duplicates are dropped; at most ``num_top`` / ``num_diverse`` shown).
    failures: recent failed records, newest first, shown with their error traces.
    budget: the training-budget sentence (:func:`budget_text`); "" leaves it out.
    max_obs_dim, max_work_vs_step: the checker's observation limit and cost budget (x the
    work of one environment step), stated with its other rules.
    """
    from limen_jax.llm.rules import checker_rules

    parts = _check_mode(mode)
    keep = rng.random(len(SECTIONS)) < config.section_prob
    order = rng.permutation(len(SECTIONS))

    skip = {parent.id} if parent is not None else set()
    top_list = [r for r in top if r.id not in skip][: config.num_top]
    feedback = parent_feedback(parent) if parent is not None else None
    available = {
        "top_programs": parent is not None and bool(top_list),
        "diverse_programs": parent is not None and bool(diverse),
        "failures": bool(failures),
        "training_feedback": feedback is not None,
    }
    chosen = [SECTIONS[i] for i in order if keep[i] and available[SECTIONS[i]]]
    if "top_programs" in chosen:
        skip |= {r.id for r in top_list}
    diverse_list = [r for r in diverse if r.id not in skip][: config.num_diverse]
    if not diverse_list and "diverse_programs" in chosen:
        chosen.remove("diverse_programs")

    blocks = []
    for name in chosen:
        if name == "top_programs":
            blocks.append(render(name, programs=_programs(top_list, config)))
        elif name == "diverse_programs":
            blocks.append(render(name, programs=_programs(diverse_list, config)))
        elif name == "failures":
            blocks.append(render(name, failures=_failures(failures[: config.num_failures], config)))
        else:
            assert feedback is not None
            blocks.append(render(name, **feedback))
    feedback_text = render("feedback", sections="\n\n".join(blocks)) if blocks else ""

    common = {
        "task_description": task.description.strip(),
        "task_context": task.context.strip(),
        "feedback": feedback_text,
        "functions": _functions(parts),
        "constraints": _constraints(parts),
        "rules": checker_rules(max_obs_dim, max_work_vs_step),
        "budget": budget,
    }
    system = build_system(mode)
    if parent is None:
        design = "\n\n".join(load_template(f"design_{p}").strip() for p in parts)
        return Prompt(system, render("from_scratch", **common, design=design) + "\n", tuple(chosen), None)

    bracket = performance_bracket(parent.success, config)
    scores = _scores(parent)
    user = render(
        "evolve",
        **common,
        parent=render("parent", **scores, code=parent.code.rstrip()),
        guidance=render(f"guidance_{bracket}", success_rate=_num(parent.success)),
    )
    return Prompt(system, user + "\n", tuple(chosen), bracket)


def contract(mode: str, budget: str = "", max_obs_dim: int = 512, max_work_vs_step: float = 100.0) -> dict[str, str]:
    """What every program prompt states whatever else it shows (a strategy's own template
    fills these): ``functions`` to write, their ``constraints``, the checker's ``rules``,
    the ``budget`` sentence."""
    from limen_jax.llm.rules import checker_rules

    parts = _check_mode(mode)
    return {"functions": _functions(parts), "constraints": _constraints(parts),
            "rules": checker_rules(max_obs_dim, max_work_vs_step), "budget": budget}
