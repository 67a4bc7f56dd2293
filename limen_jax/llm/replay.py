"""The response cache: record every LLM answer, replay a run without the API.

One append-only JSONL file per run (``<run dir>/llm_cache.jsonl``), one line per answer.
A line is keyed by ``sha256([system, user, sample])`` where ``sample`` is
``"<rng_seed>:<occurrence>"``: the request's seed, and how many times this process has
already asked the same (system, user, seed). The key ignores the model, so a cache
recorded with one model replays under any configuration that builds the same prompts.
A request with images has their digest appended to ``user`` in the key; the images
themselves are not written to the file (only their count).

- :class:`CachingMutator` wraps a live mutator: a cached answer is reused (a resumed run
  pays nothing twice), a new one is appended and fsynced before it is returned.
- :class:`ReplayMutator` answers only from the cache and raises :class:`CacheMiss`
  otherwise.

A line torn by ``kill -9`` is skipped with a warning when the file is read.

The file is also the run's ledger (:class:`Ledger`): every fresh call is one line, so
its dollars, tokens, retries and failures are summed from the file, and spend made in an
iteration that never finished is still counted after a resume.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from limen_jax.llm.mutator import MutationRequest, MutationResponse, Mutator, MutatorError

log = logging.getLogger(__name__)

CACHE_FILENAME = "llm_cache.jsonl"
FORMAT_VERSION = 1


class CacheMiss(MutatorError):
    """The replay cache has no answer for a request."""


def _keyed_user(request: MutationRequest) -> str:
    """The user prompt as the key sees it: with the images' digest when there are any (the
    same text with other pictures is another question); unchanged without images."""
    images = request.images
    if not images:
        return request.user
    digest = hashlib.sha256("\n".join(images).encode("ascii")).hexdigest()
    return f"{request.user}\n[{len(images)} images, sha256 {digest}]"


def cache_key(system: str, user: str, sample: str) -> str:
    """sha256 hex digest of the prompt and the sample label (model-agnostic)."""
    payload = json.dumps([system, user, sample], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclasses.dataclass
class Ledger:
    """What the calls recorded in a cache cost: fresh calls only (a replayed or cached
    answer costs nothing again). calls: answers received; failed_calls: calls that gave
    up (``error`` set); retries: attempts beyond the first, summed."""

    calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, response: MutationResponse) -> None:
        if response.cached:
            return
        self.calls += response.error is None
        self.failed_calls += response.error is not None
        self.retries += int(response.retries)
        self.input_tokens += int(response.input_tokens)
        self.output_tokens += int(response.output_tokens)
        self.cost_usd += float(response.cost_usd)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "cost_usd": round(self.cost_usd, 6)}


class ResponseCache:
    """Responses by key, backed by an append-only JSONL file (created on first write).

    Later lines win over earlier ones with the same key (a retried error is superseded).
    Thread-safe: the loop may ask for several candidates at once.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._entries: dict[str, MutationResponse] = {}
        self._asked: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()
        self.skipped_lines = 0
        self.ledger = Ledger()
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        with self.path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    response = MutationResponse.from_dict(entry["response"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                    self.skipped_lines += 1
                    log.warning("%s:%d: skipping unreadable cache line (%s)", self.path, number, err)
                    continue
                self._entries[entry["key"]] = response
                self.ledger.add(response)

    def __len__(self) -> int:
        return len(self._entries)

    def next_key(self, request: MutationRequest) -> tuple[str, str]:
        """(key, sample label) for this request; counts it as asked once more."""
        prompt = cache_key(request.system, _keyed_user(request), "")
        with self._lock:
            occurrence = self._asked[(prompt, request.rng_seed)]
            self._asked[(prompt, request.rng_seed)] += 1
        sample = f"{request.rng_seed}:{occurrence}"
        return cache_key(request.system, _keyed_user(request), sample), sample

    def get(self, key: str) -> MutationResponse | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, sample: str, request: MutationRequest, response: MutationResponse) -> None:
        """Append one entry (with its prompt, for inspection) and fsync it."""
        entry: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "key": key,
            "sample": sample,
            "task": request.task_name,
            "mode": request.mode,
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "system": request.system,
            "user": request.user,
            "response": response.to_dict(),
        }
        if request.images:  # the pictures themselves stay out of the cache file
            entry["images"] = len(request.images)
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("ab+") as f:
                # after a torn write the file may not end in a newline: start a fresh line
                end = f.seek(0, os.SEEK_END)
                if end > 0:
                    f.seek(end - 1)
                    if f.read(1) != b"\n":
                        line = b"\n" + line
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self._entries[key] = response
            self.ledger.add(response)


def _as_cache(cache: ResponseCache | str | os.PathLike[str]) -> ResponseCache:
    return cache if isinstance(cache, ResponseCache) else ResponseCache(cache)


class CachingMutator:
    """Wraps a live mutator: answers from the cache when it can, records every new answer.

    A cached answer comes back with ``cached=True`` and ``cost_usd=0`` (nothing is paid
    again; the first answer's cost stays in the cache's :class:`Ledger`). A cached *error*
    is not reused: the call is made again and the new answer supersedes it. An unexpected
    exception from the inner mutator (anything but a :class:`MutatorError`) is recorded
    as an error answer, so that a replay meets the same failure instead of a CacheMiss.
    """

    def __init__(self, inner: Mutator, cache: ResponseCache | str | os.PathLike[str]) -> None:
        self.inner = inner
        self.cache = _as_cache(cache)
        self.name = inner.name
        self.hits = 0
        self.misses = 0

    def propose(self, request: MutationRequest) -> MutationResponse:
        key, sample = self.cache.next_key(request)
        hit = self.cache.get(key)
        if hit is not None and hit.error is None:
            self.hits += 1
            return dataclasses.replace(hit, cached=True, cost_usd=0.0)
        self.misses += 1
        try:
            response = self.inner.propose(request)
        except MutatorError:  # BudgetExceeded, a refused request: nothing was answered
            raise
        except Exception as exc:  # a crash in the client: an answer-less call, on record
            response = MutationResponse(text="", error=f"{type(exc).__name__}: {exc}",
                                        metadata={"exception": type(exc).__name__})
        self.cache.put(key, sample, request, response)
        return response


class ReplayMutator:
    """Answers only from a recorded cache; no network, no key. Raises :class:`CacheMiss`."""

    name = "replay"

    def __init__(self, cache: ResponseCache | str | os.PathLike[str]) -> None:
        if not isinstance(cache, ResponseCache) and not Path(cache).exists():
            raise FileNotFoundError(f"replay cache {cache} does not exist")
        self.cache = _as_cache(cache)

    def propose(self, request: MutationRequest) -> MutationResponse:
        key, sample = self.cache.next_key(request)
        hit = self.cache.get(key)
        if hit is None:
            raise CacheMiss(
                f"no recorded answer for task {request.task_name!r}, mode {request.mode!r}, sample {sample} "
                f"(key {key[:12]}) in {self.cache.path} ({len(self.cache)} entries). Replay needs the "
                "same task, configuration, seed and prompt templates as the recorded run."
            )
        return dataclasses.replace(hit, cached=True, cost_usd=0.0)
