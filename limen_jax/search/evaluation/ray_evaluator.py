"""The Ray evaluator: batches trained by Ray actors, one per accelerator (or CPU slice).

``python -m limen_jax.evolve --evaluator ray [--ray-address auto|ray://host:port]``, or
``lj.evolve(task, cfg, evaluator=RayEvaluator(...))``. The driver keeps the search (the
strategy, the archive, every LLM call, the run directory); each actor is an
:class:`~limen_jax.search.evaluation.remote.EvalWorker` that trains whole batches with the batched
trainer and keeps its compiled trainers warm. Jobs travel as plain data (artifacts and
specs, :mod:`limen_jax.search.evaluation.remote`), results come back as :class:`EvalBatch` objects.

Scheduling: a job of a kind whose interfaces train apart (``ppo``, ``retrain``: the kind's
``splits``) is split over the actors, contiguous parts of its candidates
(:func:`~limen_jax.search.evaluation.jobs.split_job`), part i on actor i, and the parts' answers are
joined in order: one batch keeps every GPU busy, and trains as it would in one piece. Any
other job goes to a free actor: the one that compiled it ahead (``prepare`` compiles on
the actor that ran the last job, beside the batch it trains), else the one freed last,
whose compiled trainers are warm; as many jobs are in flight as there are actors, so the
jobs of one batch (one per evaluation kind, eval requests) train side by side. Faults: an
actor's process that dies is restarted by Ray and its call retried there
(``max_restarts``, ``max_task_retries``); an actor that is gone for good is replaced and
its job resubmitted to another (``resubmits``). Each job's future is set once, so a
retried batch is never scored twice. An exception raised in an actor reaches the loop
as Ray's ``RayTaskError``, which subclasses its cause, so
:func:`~limen_jax.search.faults.is_engine_error` classifies it as in this process.

Ray is an optional dependency (``pip install -e ".[ray]"``); nothing imports it until a
RayEvaluator is built. Worker processes import limen_jax as installed on their node; a
source tree on ``PYTHONPATH`` reaches them through the job's ``runtime_env``.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import os
import re
import sys
import threading
from typing import Any

from limen_jax.search.evaluation.jobs import EvalBatch, EvalJob, merge_batches, split_job, updates_of, watchdog_budget
from limen_jax.search.evaluation.remote import EvalWorker, job_to_wire


class RayEvaluator:
    """Jobs trained by ``actors`` Ray actors (see the module).

    address: a running cluster ("auto", "ray://host:port"); None starts a local one (or
        uses the Ray this process already initialised).
    actors: at most how many (one is started at once, another when a job finds every actor
        busy); default one per GPU of the cluster, else one per ``cpus_per_actor`` of its
        CPUs.
    cpus_per_actor / gpus_per_actor: each actor's Ray resources (gpus_per_actor default:
        1 on a cluster with GPUs, else 0).
    max_restarts / max_task_retries: Ray's restarts of a dead actor's process and retries
        of the call it was running. resubmits: how often a job whose actor is gone for
        good goes to a fresh actor before its future fails.
    split: split a job of a splitting kind over the actors (False: whole jobs only); default
        (None): split where actors have compute of their own, i.e. on GPUs or on a cluster
        given by ``address``; a local Ray on this machine's CPUs sends whole jobs, because
        there the actors share the same cores and a split only repeats each compile in
        every actor.
    init: extra ``ray.init`` arguments.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        actors: int | None = None,
        cpus_per_actor: float = 1.0,
        gpus_per_actor: float | None = None,
        max_restarts: int = 2,
        max_task_retries: int = 2,
        resubmits: int = 2,
        split: bool | None = None,
        init: dict[str, Any] | None = None,
    ) -> None:
        check_settings(address, actors)  # before Ray starts
        import ray

        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            self._owns_ray = True
            start_ray(ray, _init_args(address, actors, cpus_per_actor, init or {}))
        res = ray.cluster_resources()
        gpus = float(res.get("GPU", 0.0))
        self.gpus_per_actor = (1.0 if gpus else 0.0) if gpus_per_actor is None else float(gpus_per_actor)
        if actors is None:
            per = gpus / self.gpus_per_actor if self.gpus_per_actor else float(res.get("CPU", 1)) / cpus_per_actor
            actors = int(per)
        if actors < 1:
            raise ValueError(f"the Ray cluster has room for no actor ({res}); lower cpus_per_actor/gpus_per_actor")
        # two threads per actor: a batch trains while the next one compiles (one run at a time:
        # a job goes only to a free actor)
        self._options = dict(num_cpus=cpus_per_actor, num_gpus=self.gpus_per_actor, max_restarts=max_restarts,
                             max_task_retries=max_task_retries, max_concurrency=2)  # fmt: skip
        self._remote = ray.remote(EvalWorker)
        self._sys_path = [p for p in sys.path if p]
        # one actor now (it imports and compiles ahead while the driver asks and checks), more
        # when a job finds every actor busy: an actor that no job needs costs a process's
        # start-up and holds a GPU for nothing
        self.max_actors = int(actors)
        self.actors = [self._new_actor()]
        self.resubmits = int(resubmits)
        self.split = bool(split) if split is not None else bool(self.gpus_per_actor > 0 or address)
        self.per_update_s: float | None = None  # as InProcessEvaluator: the watchdog's learned pace
        self._cv = threading.Condition()
        # (job, its wire form, its future, resubmissions so far, the actor it prefers or None)
        self._queue: collections.deque[tuple[EvalJob, dict[str, Any], cf.Future[EvalBatch], int, int | None]] = \
            collections.deque()
        self._free = [0]
        self._preferred: int | None = None  # the actor that compiled the next job ahead
        self._last: int | None = None
        self._compiling: list[Any] = []
        self._closed = False
        self.resubmitted = 0  # jobs that went to a fresh actor after theirs was lost

    def _new_actor(self) -> Any:
        return self._remote.options(**self._options).remote(self._sys_path)

    # --- the seam -----------------------------------------------------------------------

    def submit(self, job: EvalJob) -> cf.Future[EvalBatch]:
        parts = self._parts(job)
        if len(parts) == 1:
            return self._submit(job, None)
        return _joined([self._submit(part, i) for i, part in enumerate(parts)])

    def _parts(self, job: EvalJob) -> list[EvalJob]:
        """``job`` split over the actors there may be, or ``[job]``."""
        from limen_jax.search.evaluation.kind_registry import evaluation_kind

        try:
            splits = getattr(evaluation_kind(job.kind), "splits", False)
        except ValueError:  # an unknown kind: the worker says so, as for a whole job
            splits = False
        if not (self.split and splits and self.max_actors > 1 and len(job.interfaces) > 1):
            return [job]
        return split_job(job, self.max_actors)

    def _submit(self, job: EvalJob, prefer: int | None) -> cf.Future[EvalBatch]:
        future: cf.Future[EvalBatch] = cf.Future()
        try:
            wire = job_to_wire(job)
        except Exception as exc:  # an interface that cannot travel: the evaluator's fault, told to the loop
            future.set_exception(exc)
            return future
        with self._cv:
            if self._closed:
                raise RuntimeError("the Ray evaluator is closed")
            self._queue.append((job, wire, future, 0, prefer))
            self._dispatch()
        return future

    def prepare(self, job: EvalJob) -> None:
        """Compile ``job`` ahead on the actor that will get it: the one that compiled or ran
        the last job (warm), on a thread of its own beside any batch it trains, as the
        in-process evaluator does; the job goes there when it is submitted and that actor is
        free. A job that will be split: part i on actor i (started now if it is not yet)."""
        parts = self._parts(job)
        try:
            wires = [job_to_wire(part) for part in parts]
        except Exception:  # the submission reports it
            return
        with self._cv:
            if self._closed:
                return
            self._compiling = [r for r in self._compiling if not _done(self._ray, r)]
            if len(parts) > 1:
                while len(self.actors) < len(parts):
                    self.actors.append(self._new_actor())
                    self._free.append(len(self.actors) - 1)
                self._compiling += [self.actors[i].compile.remote(w) for i, w in enumerate(wires)]
                return
            i = next((j for j in (self._preferred, self._last) if j is not None), self._free[-1] if self._free else 0)
            self._preferred = i
            self._compiling.append(self.actors[i].compile.remote(wires[0]))

    def close(self, wait: bool = True) -> None:
        """Cancel the jobs not started, wait for the compiles ahead (``wait``), stop the
        actors, and shut Ray down if this evaluator started it."""
        with self._cv:
            self._closed = True
            while self._queue:
                self._queue.popleft()[2].cancel()  # a split job's joined future fails with it
            compiling, self._compiling = self._compiling, []
        if wait and compiling:
            self._ray.wait(compiling, num_returns=len(compiling), timeout=600)
        for actor in self.actors:
            self._ray.kill(actor)
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False

    def __enter__(self) -> RayEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- dispatch -----------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Hand queued jobs to free actors, starting one more while there is room (the lock
        is held)."""
        while self._queue and not self._free and len(self.actors) < self.max_actors:
            self.actors.append(self._new_actor())
            self._free.append(len(self.actors) - 1)
        while self._queue and self._free:
            job, wire, future, tries, prefer = self._queue.popleft()
            if tries == 0 and not future.set_running_or_notify_cancel():
                continue
            # a part: the actor that compiled it ahead; a whole job: the actor that compiled it
            # ahead, else the one freed last (its trainers are warm)
            if prefer is not None and prefer in self._free:
                i = prefer
            else:
                i = self._preferred if self._preferred in self._free else self._free[-1]
                self._preferred = None if i == self._preferred else self._preferred
            self._free.remove(i)
            self._last = i
            ref = self.actors[i].run.remote(wire, watchdog_budget(job, self.per_update_s))
            threading.Thread(target=self._collect, args=(i, ref, job, wire, future, tries, prefer), daemon=True,
                             name="limen-ray-collect").start()  # fmt: skip

    def _collect(self, i: int, ref: Any, job: EvalJob, wire: dict[str, Any], future: cf.Future[EvalBatch],
                 tries: int, prefer: int | None) -> None:  # fmt: skip
        from ray.exceptions import ActorDiedError, ActorUnavailableError

        try:
            batch = self._ray.get(ref)
        except (ActorDiedError, ActorUnavailableError) as exc:  # restarts spent: a fresh actor, the job again
            with self._cv:
                if not self._closed:
                    self.actors[i] = self._new_actor()
                if tries < self.resubmits and not self._closed:
                    self.resubmitted += 1
                    self._queue.appendleft((job, wire, future, tries + 1, prefer))
                else:
                    future.set_exception(exc)
                self._free.append(i)
                self._dispatch()
            return
        except BaseException as exc:  # a RayTaskError subclasses its cause: classified as in this process
            self._release(i)
            future.set_exception(exc)
            return
        if job.watchdog_s > 0 and batch.batch_error is None:  # a clean batch's pace: the next one's norm
            self.per_update_s = batch.wall_s / max(1, updates_of(job))
        self._release(i)
        future.set_result(batch)

    def _release(self, i: int) -> None:
        with self._cv:
            self._free.append(i)
            if not self._closed:
                self._dispatch()


def _joined(parts: list[cf.Future[EvalBatch]]) -> cf.Future[EvalBatch]:
    """One future for a split job's parts: their answers merged in order once all are in,
    or the first part's exception; cancelling it cancels the parts not started."""
    joined: cf.Future[EvalBatch] = cf.Future()
    lock, left = threading.Lock(), [len(parts)]

    def one_done(_: cf.Future[EvalBatch]) -> None:
        with lock:
            left[0] -= 1
            if left[0] or joined.done():
                return
        failed = next((f for f in parts if f.cancelled() or f.exception() is not None), None)
        if failed is None:
            joined.set_result(merge_batches([f.result() for f in parts]))
        elif failed.cancelled():
            joined.cancel()
        else:
            joined.set_exception(failed.exception())  # type: ignore[arg-type]

    joined.add_done_callback(lambda f: [p.cancel() for p in parts] if f.cancelled() else None)
    for part in parts:
        part.add_done_callback(one_done)
    return joined


def _done(ray: Any, ref: Any) -> bool:
    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)


# auto, local, HOST:PORT, ray://HOST[:PORT]; a host is a name, an IPv4 or a bracketed IPv6 address
_ADDRESS = re.compile(r"auto|local|(ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}|ray://[A-Za-z0-9_.-]+")


def check_settings(address: str | None, actors: int | None) -> None:
    """ValueError, one line, for an address Ray would not take or fewer than one actor."""
    if address is not None and not _ADDRESS.fullmatch(address):
        raise ValueError(f"Ray address {address!r} (--ray-address): expected auto, local, HOST:PORT "
                         "or ray://HOST:PORT")
    if actors is not None and actors < 1:
        raise ValueError(f"Ray actors (--ray-actors): at least 1, got {actors}")


TOKEN_PATH = os.path.join("~", ".ray", "auth_token")  # where Ray keeps its cluster token (RAY_AUTH_TOKEN_PATH aside)


def start_ray(ray: Any, args: dict[str, Any]) -> None:
    """``ray.init(**args)``, keeping what it opens to what was asked.

    A local cluster asked to run on a loopback address (``_node_ip_address``) gets it: Ray
    replaces a loopback node address with the machine's LAN address and listens on every
    interface unless it believes it runs on a laptop (its ``ENABLE_RAY_CLUSTER`` switch,
    off on macOS and Windows), so the switch is off while the cluster starts; then the GCS,
    the raylet and the workers listen on that address only. The token file Ray writes
    for a new cluster (``~/.ray/auth_token``, mode 0644 as Ray writes it) is made private
    (0600) in a private folder: anyone holding it can run code on the cluster.
    """
    import ipaddress

    from ray._private import ray_constants

    folder = os.path.dirname(os.path.expanduser(TOKEN_PATH))
    if not os.path.exists(folder):
        os.makedirs(folder, mode=0o700, exist_ok=True)
    node_ip = args.get("_node_ip_address")
    loopback = False
    if node_ip and "address" not in args:
        try:
            loopback = node_ip == "localhost" or ipaddress.ip_address(node_ip).is_loopback
        except ValueError:
            loopback = False
    saved = ray_constants.ENABLE_RAY_CLUSTER
    if loopback:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(**args)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
    private_token()


def private_token() -> None:
    """The Ray token file readable by its owner only (when there is one and it is ours)."""
    path = os.path.expanduser(TOKEN_PATH)
    try:
        st = os.lstat(path)
    except OSError:
        return
    if st.st_uid == os.getuid() and not os.path.islink(path) and st.st_mode & 0o077:
        os.chmod(path, 0o600)


def _init_args(address: str | None, actors: int | None, cpus_per_actor: float, extra: dict[str, Any]) -> dict[str, Any]:
    """``ray.init`` arguments: a local cluster on the loopback address without a dashboard
    (Ray's token authentication stays on: docs/security.md), or the given address; a
    source tree on PYTHONPATH travels to the workers."""
    args: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
    if address:
        args["address"] = address
    else:
        args["_node_ip_address"] = "127.0.0.1"
        if actors is not None:
            args["num_cpus"] = max(1, int(round(actors * cpus_per_actor)))
    if os.environ.get("PYTHONPATH"):
        args["runtime_env"] = {"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}}
    return {**args, **extra}
