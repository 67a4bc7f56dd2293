"""The demonstrations of one search run (:mod:`limen_jax.demos`), kept in its run dir's
``demos.npz``: what the ``demos`` evaluation kind and the pre-screen rank programs on,
and what strategies read through their view."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


class RunDemos:
    """The run's demonstrations, checked, read or built, and extended. rd: the run's
    :class:`~limen_jax.rundir.RunDir`; given: ``search.demos`` (a file to copy in) or
    None; seed: the run's seed, for demonstrations built from the task."""

    def __init__(self, rd: Any, task: Any, given: str | None, seed: int) -> None:
        self._rd, self._task, self._given, self._seed = rd, task, given, seed
        self._demos: Any = None  # the demonstrations, loaded when first needed
        self._given_demos: Any = None  # ``given``, read (and so checked) by check()

    def check(self) -> None:
        """Read ``search.demos`` now, when the run will copy it in, so that a bad file is
        refused (ValueError, one line naming it) before any batch rather than at the
        first one that ranks programs."""
        from limen_jax import demos

        if self._given and not (self._rd.path / demos.FILENAME).exists():
            self._given_demos = demos.load_demos(self._given, self._task)

    def check_buildable(self, needs: str) -> None:
        """ValueError when the run would build its demonstrations from the task's scripted
        expert and the task has none; ``needs``: what needs them, for the message. Said
        before any LLM call, not after the first batch's."""
        from limen_jax import demos

        if self._given or (self._rd.path / demos.FILENAME).exists() or demos.has_expert(self._task):
            return
        raise ValueError(f"{needs}: task {self._task.name!r} has no scripted expert to build demonstrations from; "
                         "supply them with --demos PATH (python -m limen_jax.demos --from-policy writes them from "
                         "a trained policy)")

    def get(self) -> Any:
        """The run's demonstrations, built or read when first needed: the run dir's
        ``demos.npz``; else ``search.demos`` (copied in); else the task's scripted expert
        and random play, seeded by the run's seed."""
        if self._demos is None:
            from limen_jax import demos

            path = self._rd.path / demos.FILENAME
            if path.exists():
                self._demos = demos.load_demos(path, self._task)
            else:
                self._demos = self._given_demos if self._given else demos.build_demos(self._task, self._seed)
                self._demos.save(path)
                self._rd.log("demos", path=demos.FILENAME, source=self._given or "expert+random",
                             **self._demos.counts())
        return self._demos

    def extend(self, more: Any, round: int) -> None:
        """Add transitions an evaluation brought back (a result's ``demos``: a learner's
        rollouts) to the run's set, tagged with ``round``; what an earlier attempt of the
        same round added (a resumed batch) is replaced, not doubled."""
        from limen_jax import demos

        current = self.get()
        tagged = dataclasses.replace(more, round=np.full(len(more), round, np.int32))
        self._demos = demos.without(current, more.source[0], round).extend(tagged)
        self._demos.save(self._rd.path / demos.FILENAME)
        self._rd.log("demos", path=demos.FILENAME, source=str(more.source[0]), round=round, added=len(more),
                     **self._demos.counts())
