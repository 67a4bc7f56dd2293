"""The response cache: record every LLM answer, replay a run without the API.

One append-only JSONL file per run (``<run dir>/llm_cache.jsonl``), one line per answer.
A line is keyed by ``sha256([system, user, sample])`` where ``sample`` is
``"<rng_seed>:<occurrence>"``: the request's seed, and how many times this process has
already asked the same (system, user, seed). The key ignores the model, so a cache
recorded with one model replays under any configuration that builds the same prompts.
A request with images has their digest appended to ``user`` in the key; the images
themselves are not written to the file (only their count).

- :class:`CachingClient` wraps the run's client: a cached answer is reused (a resumed run
  pays nothing twice), a new one is appended and fsynced before it is returned.
- :class:`ReplayClient` answers only from the cache and raises :class:`CacheMiss`
  otherwise.

A line torn by ``kill -9`` is skipped with a warning when the file is read; a line that
parses but is not an answer as the cache writes it (no ``key``, a ``text`` that is no
string, a negative or NaN cost: a forged file) is refused, :class:`CacheError`.

The file is also the run's ledger (:class:`~limen_jax.llm.cap.Ledger`): every fresh call is one line, so
its dollars, tokens, retries and failures are summed from the file, and spend made in an
iteration that never finished is still counted after a resume.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import math
import os
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from limen_jax.llm.cap import Ledger
from limen_jax.llm.client import Client, ClientError, Completion
from limen_jax.llm.offline import OfflineAuthor

log = logging.getLogger(__name__)

CACHE_FILENAME = "llm_cache.jsonl"
FORMAT_VERSION = 1


class CacheMiss(ClientError):
    """The replay cache has no answer for a request."""


MAX_LINE_BYTES = 64 * 2**20  # one cache line: a prompt and its answer are tens of KB


class CacheError(ValueError):
    """A cache line that is not an answer as the cache writes it (a forged or foreign file);
    the message is one line naming the file, the line and the field."""


_USAGE_INTS = ("input_tokens", "output_tokens", "retries")


def _checked_entry(entry: Any, where: str) -> tuple[str, Completion]:
    """(key, answer) of one parsed cache line, every field the ledger or a replay uses typed:
    ``key`` a string, ``text`` a string, ``error`` null or a string, tokens and retries whole
    numbers >= 0, ``cost_usd`` a finite number >= 0. :class:`CacheError` otherwise."""
    if not isinstance(entry, dict):
        raise CacheError(f"{where}: not a JSON object")
    if not isinstance(entry.get("key"), str) or not entry["key"]:
        raise CacheError(f"{where}: key: missing or not a string")
    answer = entry.get("response")
    if not isinstance(answer, dict):
        raise CacheError(f"{where}: response: missing or not a JSON object")
    if not isinstance(answer.get("text"), str):
        raise CacheError(f"{where}: response.text: not a string")
    if answer.get("error") is not None and not isinstance(answer["error"], str):
        raise CacheError(f"{where}: response.error: neither null nor a string")
    for name in _USAGE_INTS:
        v = answer.get(name, 0)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**63:
            raise CacheError(f"{where}: response.{name}: not a whole number >= 0")
    cost = answer.get("cost_usd", 0.0)
    if not isinstance(cost, int | float) or isinstance(cost, bool) or not math.isfinite(cost) or cost < 0:
        raise CacheError(f"{where}: response.cost_usd: not a finite number >= 0")
    if answer.get("cached") and cost:
        raise CacheError(f"{where}: response.cached: a replayed answer costs nothing, this one ${cost}")
    for name, kind in (("model", str), ("cached", bool), ("metadata", dict)):
        if name in answer and not isinstance(answer[name], kind):
            raise CacheError(f"{where}: response.{name}: not a {kind.__name__}")
    try:
        return entry["key"], Completion.from_dict(answer)
    except (TypeError, ValueError) as exc:
        raise CacheError(f"{where}: response: {exc}") from None


def _keyed_user(user: str, images: Sequence[str]) -> str:
    """The user prompt as the key sees it: with the images' digest when there are any (the
    same text with other pictures is another question); unchanged without images."""
    if not images:
        return user
    digest = hashlib.sha256("\n".join(images).encode("ascii")).hexdigest()
    return f"{user}\n[{len(images)} images, sha256 {digest}]"


def cache_key(system: str, user: str, sample: str) -> str:
    """sha256 hex digest of the prompt and the sample label (model-agnostic)."""
    payload = json.dumps([system, user, sample], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """Responses by key, backed by an append-only JSONL file (created on first write).

    Later lines win over earlier ones with the same key (a retried error is superseded).
    Thread-safe: the loop may ask for several candidates at once.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._entries: dict[str, Completion] = {}
        self._asked: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()
        self.skipped_lines = 0
        self.ledger = Ledger()
        self.by_model: dict[str, Ledger] = {}  # the ledger split by the model that answered
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        """Read every line: one cut by a kill (not JSON) is skipped and counted; a line that is
        JSON but not an answer as :meth:`put` writes it is refused (:class:`CacheError`
        naming the file, the line and the field), so that no forged cost or answer gets in."""
        if not self.path.is_file():  # a FIFO would hang the read, a folder fail it
            raise CacheError(f"{self.path}: not a regular file (a FIFO, a folder or a device)")
        with self.path.open("rb") as f:
            for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
                where = f"{self.path}:{number}"
                if len(raw) > MAX_LINE_BYTES:  # read no further: a line is one prompt and its answer
                    raise CacheError(f"{where}: longer than {MAX_LINE_BYTES >> 20} MiB: not a line the cache writes")
                if not raw.strip():
                    continue
                try:
                    entry = json.loads(raw.decode("utf-8", "replace"))
                except (json.JSONDecodeError, RecursionError) as err:
                    self.skipped_lines += 1
                    log.warning("%s: skipping unreadable cache line (%s)", where, err)
                    continue
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise CacheError(f"{where}: not UTF-8 text") from None
                key, response = _checked_entry(entry, where)
                self._entries[key] = response
                self._count(response)

    def __len__(self) -> int:
        return len(self._entries)

    def next_key(self, system: str, user: str, images: Sequence[str], seed: int) -> tuple[str, str]:
        """(key, sample label) for this prompt; counts it as asked once more."""
        keyed = _keyed_user(user, images)
        prompt = cache_key(system, keyed, "")
        with self._lock:
            occurrence = self._asked[(prompt, seed)]
            self._asked[(prompt, seed)] += 1
        sample = f"{seed}:{occurrence}"
        return cache_key(system, keyed, sample), sample

    def get(self, key: str) -> Completion | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, sample: str, system: str, user: str, images: Sequence[str],
            response: Completion) -> None:
        """Append one entry (with its prompt, for inspection) and fsync it."""
        entry: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "key": key,
            "sample": sample,
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "system": system,
            "user": user,
            "response": response.to_dict(),
        }
        if images:  # the pictures themselves stay out of the cache file
            entry["images"] = len(images)
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
            self._count(response)

    def _count(self, response: Completion) -> None:
        self.ledger.add(response)
        if not response.cached:
            self.by_model.setdefault(response.model, Ledger()).add(response)


def _as_cache(cache: ResponseCache | str | os.PathLike[str]) -> ResponseCache:
    return cache if isinstance(cache, ResponseCache) else ResponseCache(cache)


class CachingClient:
    """Wraps the run's client: answers from the cache when it can, records every new answer.

    A cached answer comes back with ``cached=True`` and no cost (nothing is paid again; the
    first answer's cost stays in the cache's :class:`~limen_jax.llm.cap.Ledger`). A cached
    *error* is not reused: the call is made again and the new answer supersedes it. An
    unexpected exception from the client (anything but a :class:`ClientError`) is recorded
    as an error answer, so that a replay meets the same failure instead of a CacheMiss.

    inner: the client, or the offline stand-in for a run answered offline (the stand-in
    and the strategy write each answer from the request, :func:`limen_jax.run.ask.answer`, and
    pass it as ``by``).
    """

    def __init__(self, inner: Client | OfflineAuthor, cache: ResponseCache | str | os.PathLike[str]) -> None:
        self.inner = inner
        self.cache = _as_cache(cache)
        self.name = inner.name
        self.hits = 0
        self.misses = 0

    @property
    def offline(self) -> OfflineAuthor | None:
        """The offline stand-in when the run is answered offline (every call then brings its
        answer as ``by``), else None."""
        return self.inner if isinstance(self.inner, OfflineAuthor) else None

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0, *,
                 by: Client | None = None) -> Completion:
        """The cached answer to the prompt, else ``by``'s (default: the wrapped client's), recorded."""
        key, sample = self.cache.next_key(system, user, images, seed)
        hit = self.cache.get(key)
        if hit is not None and hit.error is None:
            self.hits += 1
            return _replayed(hit)
        self.misses += 1
        client = by or self.inner
        if isinstance(client, OfflineAuthor):
            raise ClientError("an offline run's answers are written per request (limen_jax.run.ask.answer): "
                              "this call brought none")
        try:
            response = client.complete(system, user, images, seed)
        except ClientError:  # BudgetExceeded, a refused request: nothing was answered
            raise
        except Exception as exc:  # a crash in the client: an answer-less call, on record
            response = Completion(text="", error=f"{type(exc).__name__}: {exc}",
                                  metadata={"exception": type(exc).__name__})
        self.cache.put(key, sample, system, user, images, response)
        return response


def _replayed(hit: Completion) -> Completion:
    return dataclasses.replace(hit, cached=True, usage=dataclasses.replace(hit.usage, cost_usd=0.0))


class ReplayClient:
    """Answers only from a recorded cache; no network, no key. Raises :class:`CacheMiss`."""

    name = "replay"

    def __init__(self, cache: ResponseCache | str | os.PathLike[str]) -> None:
        if not isinstance(cache, ResponseCache) and not Path(cache).exists():
            raise FileNotFoundError(f"replay cache {cache} does not exist")
        self.cache = _as_cache(cache)

    def complete(self, system: str, user: str, images: Sequence[str] = (), seed: int = 0) -> Completion:
        key, sample = self.cache.next_key(system, user, images, seed)
        hit = self.cache.get(key)
        if hit is None:
            raise CacheMiss(
                f"no recorded answer for sample {sample} (key {key[:12]}) in {self.cache.path} "
                f"({len(self.cache)} entries). Replay needs the same task, configuration, seed and prompt "
                "templates as the recorded run."
            )
        return _replayed(hit)
