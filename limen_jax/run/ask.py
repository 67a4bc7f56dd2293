"""Carrying out a batch's asks: the loop's LLM and checker I/O.

Every program and text request of a batch is asked at once (a thread pool,
``concurrency`` calls in flight); each program answer is checked as it comes back, in a
sandboxed worker process of its own, side by side with the others. Programs the
strategy already holds (``source="given"``) are checked without a call, and the task's
default interface (``source="default"``) needs neither. Nothing here raises for a bad
candidate: each child ends as a record (rejected or trainable). What stops the run comes
back as :attr:`Prepared.stop` (a :class:`~limen_jax.search.faults.RunStop`), so that a
batch already training can finish and be checkpointed first.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import re
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from limen_jax.archive import ProgramRecord, ProgramStore
from limen_jax.modes import REQUIRED
from limen_jax.search.faults import Rejection, RunStop, describe, rejection_of, systematic
from limen_jax.search.requests import EvalRequest, ProgramRequest, Request, TextRequest

if TYPE_CHECKING:
    from limen_jax.llm.client import Completion

DEFAULT_CODE = "# the task's default observation and sparse reward\n"


@dataclasses.dataclass
class Child:
    """One candidate: its request, its record, and its compiled interface when it is
    trainable."""

    request: ProgramRequest
    record: ProgramRecord
    interface: Any = None
    fault: BaseException | None = None  # an unexpected checker exception (engine's)
    text: str = ""  # the raw answer


@dataclasses.dataclass
class TextAnswer:
    """The answer to a text request: ``text`` ("" when none came, ``error`` says why)."""

    request: TextRequest
    text: str = ""
    error: str | None = None


@dataclasses.dataclass
class Prepared:
    """A batch ready to evaluate. requests: everything the strategy asked, in order;
    children / texts: the program and text answers; evals: the evaluation requests.
    llm_s: wall seconds until every answer was in; check_s: seconds spent checking;
    start / end: wall-clock bounds of the preparation."""

    iteration: int
    requests: list[Request]
    children: list[Child] = dataclasses.field(default_factory=list)
    texts: list[TextAnswer] = dataclasses.field(default_factory=list)
    llm_s: float = 0.0
    check_s: float = 0.0
    start: float = 0.0
    end: float = 0.0
    stop: RunStop | None = None

    @property
    def trainable(self) -> list[Child]:
        return [c for c in self.children if c.interface is not None]

    @property
    def evals(self) -> list[EvalRequest]:
        return [r for r in self.requests if isinstance(r, EvalRequest)]


def answer(client: Any, request: ProgramRequest | TextRequest, store: ProgramStore, mode: str,
           strategy: Any) -> Any:
    """The run's answer to ``request`` (a :class:`~limen_jax.llm.client.Completion`) from
    ``client`` (a :class:`~limen_jax.llm.replay.CachingClient`). Offline, the strategy
    writes it (:func:`~limen_jax.search.base.offline_answer`: its own text and operators,
    else the stand-in's generic operators) from the request and the records it names, and
    the cache records it like any model's."""
    from limen_jax.search.base import OfflineRequest, offline_answer

    images = request.images if isinstance(request, TextRequest) else ()
    by = None
    if client.offline is not None:
        if isinstance(request, TextRequest):
            parent, others = None, [store.get(i) for i in request.context_ids]
        else:
            parent = store.get(request.parent_id) if request.parent_id else None
            others = [store.get(i) for i in (*request.parent_ids[1:], *request.context_ids)]
        offline = OfflineRequest(request, parent, tuple(others), mode, client.offline,
                                 np.random.default_rng(request.rng_seed))
        by = client.offline.answering(offline_answer(strategy, offline))
    return client.complete(request.system, request.user, images, request.rng_seed, by=by)


def extracted_code(text: str, mode: str) -> str:
    """The program in an answer as the checker extracts it ("" when there is none), so a
    rejected candidate is shown as code, never as the raw reply with its fences."""
    from limen_jax.program import ProgramError, extract_code

    try:
        return extract_code(text, REQUIRED[mode])
    except ProgramError:
        return ""
    except Exception:  # an extractor bug must not cost more than this candidate's code
        return ""


_FENCED = re.compile(r"^[ \t]*```.*?(?:^[ \t]*```[ \t]*$|\Z)", re.M | re.S)
MAX_ANSWER = 1_000_000  # characters of an answer searched for its thought (answers are a few KB)


def thought_of(text: str) -> str:
    """The answer's text around its code (its reasoning, a design thought): every fenced
    block removed, blank runs folded; linear in the answer's first MAX_ANSWER characters."""
    prose = _FENCED.sub("", text[:MAX_ANSWER].replace("\r\n", "\n"))
    return re.sub(r"\n{3,}", "\n\n", prose).strip()


def asks_llm(request: Request) -> TypeGuard[ProgramRequest | TextRequest]:
    """Whether ``request`` is answered by the LLM: a text, or a program it writes."""
    return isinstance(request, TextRequest) or (isinstance(request, ProgramRequest) and request.source == "llm")


def ask_and_check(
    requests: Sequence[Request],
    *,
    mutator: Callable[[], Any],
    task: Any,
    mode: str,
    store: ProgramStore,
    concurrency: int | None = None,
    limits: Any = None,
    log: Callable[..., None] = lambda event, **kw: None,
    mutator_name: Callable[[], str] = lambda: "custom",
    iteration: int = 0,
    strategy: Any = None,
) -> Prepared:
    """Carry out the program and text requests of a batch; see the module docs.
    ``mutator()`` gives the run's client (built on first use: a batch that asks the LLM
    nothing never builds one); ``strategy`` writes its requests' answers in an offline run
    (None: :class:`~limen_jax.search.base.StrategyBase`'s defaults)."""
    from limen_jax.llm import ClientError
    from limen_jax.search.base import StrategyBase

    start = time.time()
    prepared = Prepared(requests[0].iteration if requests else iteration, list(requests), start=start)
    asks = [r for r in requests if asks_llm(r)]
    _log_prompts(asks, log)
    stops: list[BaseException] = []
    checks = _Checks(task, mode, limits)
    name = mutator_name() if asks else ""
    pool = cf.ThreadPoolExecutor(max_workers=max(1, min(concurrency or len(asks), len(asks) or 1)),
                                 thread_name_prefix="limen-llm")
    try:
        m: Any = mutator() if asks else None
        author = strategy if strategy is not None else StrategyBase()
        futures = {id(r): pool.submit(answer, m, r, store, mode, author) for r in asks}
        for request in requests:
            if isinstance(request, EvalRequest):
                continue
            if isinstance(request, ProgramRequest) and request.source != "llm":
                prepared.children.append(_held(request, task, checks, len(prepared.children)))
                continue
            try:
                response = futures[id(request)].result()
            except ClientError as exc:  # budget cap, replay miss, refused request: stop
                stops.append(exc)
                continue
            except Exception as exc:  # a crash in a custom mutator: no answer, not the program's fault
                _no_answer(prepared, request, describe(exc))
                continue
            prepared.llm_s = time.time() - start
            _answered(prepared, request, response, name, log, checks)
        checks.collect(prepared.children)
    except BaseException:  # an interrupt: nothing waits for calls or checks still in flight
        pool.shutdown(wait=False, cancel_futures=True)
        checks.abandon()
        raise
    pool.shutdown()
    checks.close()
    prepared.check_s = checks.seconds()
    prepared.end = time.time()
    prepared.stop = _stop(prepared, stops)
    return prepared


def _log_prompts(asks: Sequence[Request], log: Callable[..., None]) -> None:
    for r in asks:
        if isinstance(r, ProgramRequest):
            log("prompt", id=r.id, iteration=r.iteration, island=r.island, parent=r.parent_id,
                parents=list(r.parent_ids), context=list(r.context_ids), operator=r.operator,
                sections=list(r.sections), system=r.system, user=r.user)
        elif isinstance(r, TextRequest):
            log("prompt", id=r.id, iteration=r.iteration, kind="text", role=r.role, context=list(r.context_ids),
                system=r.system, user=r.user)


class _Checks:
    """The batch's checks, each in a sandboxed worker process of its own, side by side
    while later answers arrive; :meth:`collect` puts each checked child in its place."""

    def __init__(self, task: Any, mode: str, limits: Any) -> None:
        from limen_jax.program import default_workers

        self.task, self.mode, self.limits = task, mode, limits
        self._pool = cf.ThreadPoolExecutor(max_workers=default_workers(), thread_name_prefix="limen-check")
        self._pending: list[tuple[int, cf.Future[Child]]] = []
        self._first = time.time()

    def submit(self, index: int, request: ProgramRequest, record: ProgramRecord, text: str,
               metadata: dict[str, Any], truncated: bool) -> None:
        if not self._pending:
            self._first = time.time()
        self._pending.append((index, self._pool.submit(_check, request, record, text, metadata, self.task,
                                                       self.mode, self.limits, truncated)))

    def collect(self, children: list[Child]) -> None:
        for index, future in self._pending:
            children[index] = future.result()

    def seconds(self) -> float:
        """Seconds from the first check's submission until now (0.0 when nothing was checked)."""
        return time.time() - self._first if self._pending else 0.0

    def close(self) -> None:
        self._pool.shutdown()

    def abandon(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _held(request: ProgramRequest, task: Any, checks: _Checks, index: int) -> Child:
    """A program the strategy holds: the task's default (no check), or its given code (checked)."""
    if request.source == "default":
        return _default_child(request, task)
    record = _record(request, {"mutator": "given"})
    checks.submit(index, request, record, request.code, {}, False)
    return Child(request, record)


def _no_answer(prepared: Prepared, request: Request, message: str) -> None:
    """No answer came for ``request``: the machinery's fault (blame "infra"), never the program's."""
    if isinstance(request, TextRequest):
        prepared.texts.append(TextAnswer(request, error=message))
    elif isinstance(request, ProgramRequest):
        record = _record(request, {})
        record.error = Rejection("mutator", message, blame="infra").to_dict()
        prepared.children.append(Child(request, record))


def _answered(prepared: Prepared, request: Request, response: Completion, name: str, log: Callable[..., None],
              checks: _Checks) -> None:
    """Log an answer and file it: a text, a failed call, or a program sent to be checked."""
    usage = response.usage
    metadata = {
        "mutator": name, "model": response.model, "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens, "cost_usd": usage.cost_usd, "cached": response.cached,
        "retries": usage.retries,
    }
    truncated = bool(response.metadata.get("truncated")) or response.metadata.get("stop_reason") == "max_tokens"
    if truncated:
        metadata["truncated"] = True
    log("response", id=request.id, text=response.text, error=response.error, **metadata)
    if isinstance(request, TextRequest):
        prepared.texts.append(TextAnswer(request, response.text if not response.error else "", response.error))
        return
    assert isinstance(request, ProgramRequest)
    record = _record(request, metadata)
    if response.error:
        record.error = Rejection("mutator", response.error, blame="infra").to_dict()
        prepared.children.append(Child(request, record))
        return
    record.thought = thought_of(response.text)
    prepared.children.append(Child(request, record, text=response.text))
    checks.submit(len(prepared.children) - 1, request, record, response.text, response.metadata, truncated)


def _stop(prepared: Prepared, stops: list[BaseException]) -> RunStop | None:
    """Why the run cannot go on after this batch's asks, or None."""
    from limen_jax.llm import BudgetExceeded

    if stops:
        first = stops[0]
        return RunStop("budget" if isinstance(first, BudgetExceeded) else "mutator", describe(first))
    asked = [rejection_of(c.record) for c in prepared.children if c.request.source == "llm"]
    asked += [Rejection("mutator", t.error, blame="infra") if t.error else None for t in prepared.texts]
    infra = [r for r in asked if r is not None and r.blame == "infra"]
    if asked and len(infra) == len(asked):
        return RunStop("outage", f"no answer from the LLM for any request of the batch: {infra[-1].message}")
    checked = [c for c in prepared.children if not _infra(c.record)]
    same = systematic([c.fault for c in checked]) if checked and all(c.fault for c in checked) else None
    return RunStop("engine", f"the checker failed the same way on every candidate: {same}") if same else None


def _infra(record: ProgramRecord) -> bool:
    """Whether ``record`` was rejected for want of an answer (the machinery's fault)."""
    rejection = rejection_of(record)
    return rejection is not None and rejection.blame == "infra"


def _record(request: ProgramRequest, metadata: dict[str, Any]) -> ProgramRecord:
    return ProgramRecord(id=request.id, code="", iteration=request.iteration, island=request.island,
                         parent_ids=list(request.parent_ids), metadata={**metadata, "operator": request.operator})


def _default_child(request: ProgramRequest, task: Any) -> Child:
    from limen_jax.interface import default_interface

    iface = default_interface(task)
    record = ProgramRecord(id=request.id, code=DEFAULT_CODE, iteration=request.iteration, island=request.island,
                           obs_dim=iface.obs_dim, reward_ast_size=0,
                           metadata={"mutator": "none (sparse baseline)", "source": "default",
                                     "operator": request.operator})
    return Child(request, record, iface)


def _check(request: ProgramRequest, record: ProgramRecord, text: str, metadata: dict[str, Any], task: Any,
           mode: str, limits: Any, truncated: bool) -> Child:
    """The guarded checker path: a ProgramError rejects the program (fed back to the LLM);
    any other exception is the checker's fault: checked once more (a passing fault of the
    machinery, such as a race between threads, must not cost the candidate; the first is
    noted in the record's metadata), and if it fails again it costs this candidate only
    (recorded with its traceback, never shown to the LLM)."""
    from limen_jax.llm.prompts import render
    from limen_jax.program import ProgramError, compile_interface

    kwargs = {"limits": limits} if limits is not None else {}
    first: str | None = None
    while True:
        try:
            iface = compile_interface(text, task, mode=mode, name=request.id, **kwargs)
            break
        except ProgramError as exc:
            record.code = extracted_code(text, mode)
            rejection = Rejection(exc.stage, exc.message, exc.trace)
            if truncated:
                limit = metadata.get("max_tokens", "max_tokens")
                rejection = dataclasses.replace(rejection, stage="truncated",
                                                message=render("truncated", limit=str(limit), message=exc.message))
            record.error = rejection.to_dict()
            return Child(request, record, text=text)
        except Exception as exc:
            if first is None:
                first = f"{describe(exc)}\n{_trace_tail()}"
                continue
            record.code = extracted_code(text, mode)
            record.error = Rejection("checker", describe(exc), _trace_tail(), "engine").to_dict()
            return Child(request, record, fault=exc, text=text)
    if first is not None:
        record.metadata["checker_fault_retried"] = first
    record.code, record.obs_dim, record.reward_ast_size = iface.source, iface.obs_dim, iface.reward_ast_size
    return Child(request, record, iface, text=text)


def _trace_tail(lines: int = 40) -> str:
    """The last ``lines`` lines of the traceback being handled (where an engine fault came from)."""
    return "\n".join(traceback.format_exc().rstrip().splitlines()[-lines:])
