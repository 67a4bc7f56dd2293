"""The ``rda`` strategy's text: its prompts (``prompts/rda_*.md``) and the parsers of the
answers (pure functions of strings and plain data).

A subtask is ``{"name": identifier, "description": one line}``; its name is the reward
term that pays for it. LLM text that goes back into a prompt (descriptions, the critic's
reasons) is cut to one line without code fences, so it cannot open a block of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from limen_jax.search.templates import load_template, render

Subtask = dict[str, str]
STEPS_SHOWN = 20  # per-step rows per episode in the critic's prompt (the paper's critic sees 20 frames)
MAX_LINE = 300  # characters of an untrusted line kept
MAX_ANSWER = 200_000  # characters of an answer parsed (a decomposition or critique is a few KB)
MAX_PARSED_LINE = 2_000  # characters of one answer line matched
# Matched one stripped line at a time, and written so that no two neighbouring repeats can
# take the same character: the time is linear in the answer, whatever the answer holds.
_NAME = r"([A-Za-z_][A-Za-z0-9_]{0,31})"
_SUBTASK_LINE = re.compile(rf"\d+\s*[.)]\s*[*`\"']*{_NAME}[*`\"']*\s*[:\-\u2013\u2014]+\s*(.+)")
_CRITIC_LINE = re.compile(
    rf"episode\s*(?:#\s*)?(\d{{1,9}})\W+{_NAME}[*`\"']*\s*[:=\-\u2013\u2014]+\s*(\d+(?:\.\d+)?|\.\d+)\s*"
    r"(?:[|:;,\-\u2013\u2014]\s*(.*))?$",
    re.I)


def _lines(text: str | None) -> list[str]:
    """An answer's lines, stripped, each cut to MAX_PARSED_LINE, of its first MAX_ANSWER characters."""
    return [line.strip()[:MAX_PARSED_LINE] for line in (text or "")[:MAX_ANSWER].split("\n")]


def _subtask_lines(text: str | None) -> list[tuple[str, str]]:
    """(name, description) of each ``N. name: description`` line."""
    found = (_SUBTASK_LINE.match(line) for line in _lines(text))
    return [(m.group(1), m.group(2)) for m in found if m]


def one_line(text: str) -> str:
    """Untrusted text as one line: fences and newlines gone, at most MAX_LINE characters."""
    return " ".join(str(text).replace("```", "'''").split())[:MAX_LINE]


def system() -> str:
    return load_template("rda_system").strip()


def subtask_lines(subtasks: Sequence[Subtask]) -> str:
    return "\n".join(f"{i + 1}. {s['name']}: {s['description']}" for i, s in enumerate(subtasks))


def parse_subtasks(text: str, max_subtasks: int) -> list[Subtask]:
    """The numbered ``N. name: description`` lines of ``text``, in order; names are
    lower-cased, duplicates dropped, at most ``max_subtasks`` kept ([] when none parse)."""
    out: list[Subtask] = []
    for name, description in _subtask_lines(text):
        name = name.lower()
        if name not in {s["name"] for s in out} and len(out) < max_subtasks:
            out.append({"name": name, "description": one_line(description)})
    return out


def reflect(subtasks: Sequence[Subtask], text: str) -> list[Subtask]:
    """``subtasks`` with each description the answer gives for its name (the first such
    line); names, order and count never change, unanswered ones keep their description."""
    given: dict[str, str] = {}
    for name, description in _subtask_lines(text):
        given.setdefault(name.lower(), one_line(description))
    return [{"name": s["name"], "description": given.get(s["name"]) or s["description"]} for s in subtasks]


def parse_critic(text: str, names: Sequence[str], episodes: int) -> tuple[np.ndarray, list[list[str]]]:
    """Scores float64[episodes, len(names)] in [0, 1] and reasons [episode][subtask] from the
    critic's ``episode E, name: score | reason`` lines (the first line per pair counts);
    a pair the answer does not score gets 0 and the reason "not scored"."""
    index = {n: j for j, n in enumerate(names)}
    scores = np.zeros((episodes, len(names)))
    reasons = [["not scored"] * len(names) for _ in range(episodes)]
    seen: set[tuple[int, int]] = set()
    for line in _lines(text):
        found = _CRITIC_LINE.search(line)
        if found is None:
            continue
        ep, name, score, reason = found.groups(default="")
        e, j = int(ep) - 1, index.get(name.lower())
        if j is None or not 0 <= e < episodes or (e, j) in seen:
            continue
        seen.add((e, j))
        scores[e, j] = min(max(float(score), 0.0), 1.0)
        reasons[e][j] = one_line(reason) or "no reason given"
    return scores, reasons


def summary(names: Sequence[str], scores: np.ndarray, reasons: list[list[str]]) -> dict[str, Any]:
    """A candidate's critique aggregated: each subtask's mean score over episodes, the
    reasons given where an episode scored below 0.5 (distinct, first two), the mean of
    the subtask means (``aggregate``)."""
    means = scores.mean(0) if scores.size else np.zeros(len(names))
    failing = {n: list(dict.fromkeys(reasons[e][j] for e in range(scores.shape[0]) if scores[e, j] < 0.5))[:2]
               for j, n in enumerate(names)}
    return {"aggregate": float(means.mean()) if len(names) else 0.0,
            "scores": {n: float(m) for n, m in zip(names, means, strict=True)}, "failing": failing}


def term_mismatch(subtasks: Sequence[Subtask], terms: Sequence[str]) -> tuple[list[str], list[str]]:
    """(missing, unexpected): the subtasks no term of ``terms`` is named after (subtask
    order) and the terms named after no subtask (their order). ([], []) when they match."""
    names = [s["name"] for s in subtasks]
    return [n for n in names if n not in terms], [t for t in terms if t not in names]


def mismatch_text(subtasks: Sequence[Subtask], terms: Sequence[str]) -> str:
    """The mismatch between a reward's terms (identifiers, as the checker allows them) and
    the subtasks in words, "" when they match: "no term for subtask `a`; the term `b` is
    named after no subtask"; a scalar reward (the one term "reward") is said to be one."""
    missing, unexpected = term_mismatch(subtasks, terms)
    ticks = lambda names: ", ".join(f"`{n}`" for n in names)  # noqa: E731
    subtask_s = f"subtask{'s' if len(missing) > 1 else ''} {ticks(missing)}"
    if unexpected == ["reward"] == list(terms):
        return f"it returns a single value (logged as `reward`), with no term for {subtask_s}"
    parts = []
    if missing:
        parts.append(f"no term for {subtask_s}")
    if unexpected:
        parts.append(f"the term{'s' if len(unexpected) > 1 else ''} {ticks(unexpected)} "
                     f"{'are' if len(unexpected) > 1 else 'is'} named after no subtask")
    return "; ".join(parts)


def critic_terms_note(subtasks: Sequence[Subtask], terms: Sequence[str]) -> str:
    """The critic's line on a reward whose terms do not match the subtasks ("" if they do)."""
    detail = mismatch_text(subtasks, terms)
    return render("rda_critic_terms", mismatch=detail) if detail else ""


def rewrite_terms_section(program_id: str, subtasks: Sequence[Subtask], terms: Sequence[str]) -> str:
    """The rewrite prompt's section on a predecessor whose terms do not match the
    subtasks ("" if they do): what is missing and what is extra, named."""
    detail = mismatch_text(subtasks, terms)
    if not detail:
        return ""
    return render("rda_rewrite_terms", id=program_id, mismatch=detail, count=str(len(subtasks)))


def decompose_prompt(task: Any, max_subtasks: int) -> str:
    return render("rda_decompose", task=task.description, max_subtasks=str(max_subtasks))


def terms_section(subtasks: Sequence[Subtask]) -> str:
    return render("rda_terms", count=str(len(subtasks)), subtasks=subtask_lines(subtasks))


def summary_section(program_id: str, summ: dict[str, Any], episodes: int) -> str:
    lines = []
    for name, score in summ["scores"].items():
        why = "; ".join(summ["failing"].get(name, []))
        lines.append(f"- {name}: {score:.2f}" + (f" (failing: {why})" if why else ""))
    return render("rda_summary", id=program_id, episodes=str(episodes), scores="\n".join(lines))


def renderer_line(log: dict[str, Any]) -> str:
    """What the critic is told about frames: which are attached (episode, step), or why
    none are and that it judges from the logs only."""
    frames, view = log.get("frames") or [], log.get("renderer") or {}
    if frames:
        by_episode: dict[int, list[str]] = {}
        for f in frames:
            by_episode.setdefault(int(f["episode"]), []).append(str(f["step"]))
        where = "; ".join(f"episode {e + 1} at steps {', '.join(ts)}" for e, ts in sorted(by_episode.items()))
        return (f"Frames: {len(frames)} rendered frames are attached, in this order: {where} (the frame at step t "
                "shows the state before step t; at the episode's length, its final state).")
    if view.get("available"):
        return "Frames: none attached (none were asked for): logs only."
    return f"Frames: none attached; the task has no renderer here ({one_line(view.get('note', ''))}): logs only."


def episode_block(e: int, episode: dict[str, Any], names: Sequence[str]) -> str:
    """Episode ``e`` (from 0) of an ``episodes`` log: outcome, term sums, a step table."""
    n = int(episode["length"])
    head = (f"### Episode {e + 1}: {'success' if episode['success'] else 'no success'}, {n} steps, "
            f"return {episode['return']:.4g}\nterm sums: "
            + ", ".join(f"{k} {episode['sums'][k]:.4g}" for k in names))
    rows = sorted({int(round(x)) for x in np.linspace(0, n - 1, min(STEPS_SHOWN, n))}) if n else []
    table = ["step " + " ".join(names)] + [
        f"{t} " + " ".join(f"{episode['steps'][k][t]:.4g}" for k in names) for t in rows]
    return head + "\n" + "\n".join(table)


def critic_prompt(task: Any, subtasks: Sequence[Subtask], record: Any, log: dict[str, Any], max_lines: int) -> str:
    """The critic's prompt for one candidate: the task, subtasks, renderer line, a line
    naming the terms missing or unexpected when the reward's terms are not the subtasks,
    its reward code and every episode of its ``episodes`` log."""
    names = list(log["terms"])
    code = record.code.rstrip().splitlines()
    code = code[:max_lines] + ([f"# ... ({len(code) - max_lines} more lines cut)"] if len(code) > max_lines else [])
    logs = "\n\n".join(episode_block(e, ep, names) for e, ep in enumerate(log["episodes"]))
    return render("rda_critic", task=task.description, subtasks=subtask_lines(subtasks),
                  episodes=str(len(log["episodes"])), steps_shown=str(STEPS_SHOWN),
                  renderer=renderer_line(log), terms=critic_terms_note(subtasks, names), code="\n".join(code),
                  logs=logs)


def reflect_prompt(task: Any, subtasks: Sequence[Subtask], summaries: Sequence[dict[str, Any]]) -> str:
    """The reflection's prompt: each subtask's mean score over the round's critiqued
    candidates and the distinct reasons for low scores (first three)."""
    lines = []
    for i, s in enumerate(subtasks):
        name = s["name"]
        mean = float(np.mean([m["scores"].get(name, 0.0) for m in summaries])) if summaries else 0.0
        why = list(dict.fromkeys(r for m in summaries for r in m["failing"].get(name, [])))[:3]
        lines.append(f"{i + 1}. {name}: {s['description']}\n   mean completion {mean:.2f}"
                     + (f"; failing: {'; '.join(why)}" if why else ""))
    return render("rda_reflect", task=task.description, candidates=str(len(summaries)),
                  subtasks="\n".join(lines), count=str(len(subtasks)))
