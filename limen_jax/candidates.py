"""Asking for a batch and checking the answers: the loop's LLM and checker I/O.

All proposals of a batch are asked at once (a thread pool, ``concurrency`` calls in
flight); each answer is checked as it comes back, in a sandboxed worker process of its
own, side by side with the others. Nothing here raises for a bad candidate: each child
ends as a record (rejected or trainable). What stops the run comes back as
:attr:`Prepared.stop` (a :class:`~limen_jax.search.faults.RunStop`), so that a batch
already training can finish and be checkpointed first.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from limen_jax.archive import ProgramRecord, ProgramStore
from limen_jax.search import Proposal
from limen_jax.search.faults import RunStop, describe, systematic

# The functions each program mode must define (for extracting a rejected answer's code).
_REQUIRED = {"full": ["get_observation", "compute_reward"], "obs_only": ["get_observation"],
             "reward_only": ["compute_reward"]}


@dataclasses.dataclass
class Child:
    """One candidate: its proposal (None for the sparse baseline), its record, and its
    compiled interface when it is trainable."""

    proposal: Proposal | None
    record: ProgramRecord
    interface: Any = None
    fault: BaseException | None = None  # an unexpected checker exception (engine's)


@dataclasses.dataclass
class Prepared:
    """A batch ready to train. llm_s: wall seconds until every answer was in; check_s:
    seconds spent checking; start / end: wall-clock bounds of the preparation."""

    iteration: int
    proposals: list[Proposal]
    children: list[Child]
    llm_s: float = 0.0
    check_s: float = 0.0
    start: float = 0.0
    end: float = 0.0
    stop: RunStop | None = None

    @property
    def trainable(self) -> list[Child]:
        return [c for c in self.children if c.interface is not None]


def request_for(proposal: Proposal, store: ProgramStore, task_name: str, mode: str) -> Any:
    """The mutator request of ``proposal`` (parent and context records from ``store``)."""
    from limen_jax.llm import MutationRequest

    return MutationRequest(
        system=proposal.system, user=proposal.user, task_name=task_name, mode=mode,  # type: ignore[arg-type]
        parent=store.get(proposal.parent_id) if proposal.parent_id else None,
        others=[store.get(i) for i in proposal.context_ids], rng_seed=proposal.rng_seed,
    )


def extracted_code(text: str, mode: str) -> str:
    """The program in an answer as the checker extracts it ("" when there is none), so a
    rejected candidate is shown as code, never as the raw reply with its fences."""
    from limen_jax.program import ProgramError, extract_code

    try:
        return extract_code(text, _REQUIRED[mode])
    except ProgramError:
        return ""
    except Exception:  # an extractor bug must not cost more than this candidate's code
        return ""


def ask_and_check(
    proposals: Sequence[Proposal],
    *,
    mutator: Any,
    task: Any,
    mode: str,
    store: ProgramStore,
    concurrency: int | None = None,
    limits: Any = None,
    log: Callable[..., None] = lambda event, **kw: None,
    mutator_name: str = "custom",
) -> Prepared:
    """Ask ``mutator`` for every proposal at once, check each answer; see module docs."""
    from limen_jax.llm import BudgetExceeded, MutatorError
    from limen_jax.program import default_workers

    start = time.time()
    prepared = Prepared(proposals[0].iteration if proposals else 0, list(proposals), [], start=start)
    requests = [request_for(p, store, task.name, mode) for p in proposals]
    for p in proposals:
        log("prompt", id=p.id, iteration=p.iteration, island=p.island, parent=p.parent_id,
            operator=p.operator, sections=list(p.sections), system=p.system, user=p.user)
    stops: list[BaseException] = []
    workers = max(1, min(concurrency or len(proposals), len(proposals) or 1))
    checkers = cf.ThreadPoolExecutor(max_workers=default_workers(), thread_name_prefix="limen-check")
    checks: list[tuple[int, cf.Future[Child]]] = []
    first_check = time.time()
    with cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="limen-llm") as pool:
        futures = [pool.submit(mutator.propose, r) for r in requests]
        for proposal, future in zip(proposals, futures):
            record = ProgramRecord(id=proposal.id, code="", iteration=proposal.iteration, island=proposal.island,
                                   parent_ids=[proposal.parent_id] if proposal.parent_id else [])
            try:
                response = future.result()
            except MutatorError as exc:  # budget cap, replay miss, refused request: stop
                stops.append(exc)
                continue
            except Exception as exc:  # a crash in a custom mutator: no answer, not the program's fault
                record.error = {"stage": "mutator", "message": describe(exc), "trace": "", "blame": "infra"}
                prepared.children.append(Child(proposal, record))
                continue
            prepared.llm_s = time.time() - start
            if not checks:
                first_check = time.time()
            record.metadata = {
                "mutator": mutator_name, "model": response.model, "input_tokens": response.input_tokens,
                "output_tokens": response.output_tokens, "cost_usd": response.cost_usd, "cached": response.cached,
                "retries": response.retries,
            }
            truncated = bool(response.metadata.get("truncated")) or response.metadata.get("stop_reason") == "max_tokens"
            if truncated:
                record.metadata["truncated"] = True
            log("response", id=proposal.id, text=response.text, error=response.error, **record.metadata)
            if response.error:
                record.error = {"stage": "mutator", "message": response.error, "trace": "", "blame": "infra"}
                prepared.children.append(Child(proposal, record))
                continue
            # checked in a sandboxed worker process each, side by side, while later answers arrive
            checks.append((len(prepared.children), checkers.submit(
                _check, proposal, record, response, task, mode, limits, truncated)))
            prepared.children.append(Child(proposal, record))
        for index, check in checks:
            prepared.children[index] = check.result()
    checkers.shutdown()
    if checks:
        prepared.check_s = time.time() - first_check
    prepared.end = time.time()
    prepared.llm_s = max(prepared.llm_s, 0.0)
    if stops:
        first = stops[0]
        kind = "budget" if isinstance(first, BudgetExceeded) else "mutator"
        prepared.stop = RunStop(kind, describe(first))
    elif prepared.children and all((c.record.error or {}).get("blame") == "infra" for c in prepared.children):
        prepared.stop = RunStop("outage", "no answer from the LLM for any candidate of the batch: "
                                          f"{prepared.children[-1].record.error['message']}")  # type: ignore[index]
    else:
        checked = [c for c in prepared.children if (c.record.error or {}).get("blame") != "infra"]
        same = systematic([c.fault for c in checked]) if checked and all(c.fault for c in checked) else None
        if same:
            prepared.stop = RunStop("engine", f"the checker failed the same way on every candidate: {same}")
    return prepared


def _check(proposal: Proposal, record: ProgramRecord, response: Any, task: Any, mode: str, limits: Any,
           truncated: bool) -> Child:
    """The guarded checker path: a ProgramError rejects the program (fed back to the LLM);
    any other exception is the checker's fault and costs this candidate only."""
    from limen_jax.llm.prompts import render
    from limen_jax.program import ProgramError, compile_interface

    kwargs = {"limits": limits} if limits is not None else {}
    try:
        iface = compile_interface(response.text, task, mode=mode, name=proposal.id, **kwargs)
    except ProgramError as exc:
        record.code = extracted_code(response.text, mode)
        record.error = {**exc.to_dict(), "blame": "program"}
        if truncated:
            limit = response.metadata.get("max_tokens", "max_tokens")
            record.error["stage"] = "truncated"
            record.error["message"] = render("truncated", limit=str(limit), message=exc.message)
        return Child(proposal, record)
    except Exception as exc:
        record.code = extracted_code(response.text, mode)
        record.error = {"stage": "checker", "message": describe(exc), "trace": "", "blame": "engine"}
        return Child(proposal, record, fault=exc)
    record.code, record.obs_dim, record.reward_ast_size = iface.source, iface.obs_dim, iface.reward_ast_size
    return Child(proposal, record, iface)
