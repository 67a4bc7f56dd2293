"""Per-task catalogs of observation features and reward terms for the offline mutator.

A catalog is source code in pieces. Each feature is a block of statements inside
``get_observation(state)`` that assigns ``f_<name>`` (any shape; it is flattened), each
reward term a block inside ``compute_reward(state, action, next_state)`` that assigns
``t_<name>`` (a scalar; the weight multiplies it). ``prelude`` holds the constants and
helper functions the blocks share. The offline mutator assembles programs from these
pieces and edits them (add, remove, reweight, crossover); the result is ordinary
source that goes through the same validation as an LLM's answer.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Feature:
    """An observation block; ``code`` assigns ``f_<name>`` from ``state``; ``prior`` as
    for :class:`Term`."""

    name: str
    code: str
    prior: float = 1.0


@dataclasses.dataclass(frozen=True)
class Term:
    """A reward block; ``code`` assigns ``t_<name>`` from ``state, action, next_state``.

    weight: the default weight; the sign of a penalty lives in the code, so weights
    stay positive and reweighting never flips a term's meaning.
    prior: relative odds that the mutator draws this piece when it adds one (and for a
    from-scratch program). Priors stand in for the domain knowledge an LLM brings from
    the task description: the current subgoal's offset is likelier to help than a
    distractor's.
    """

    name: str
    code: str
    weight: float = 1.0
    prior: float = 1.0


@dataclasses.dataclass(frozen=True)
class Catalog:
    """Everything the offline mutator may combine for one task.

    required_features: features every program keeps (e.g. a robot's joint state, without
        which no policy can act), so that no offspring loses what control needs.
    required_terms: terms every program keeps (e.g. the goal bonus), so that no
        offspring loses the task's success signal.
    dense_terms: shaping terms that vary under random play; a from-scratch program draws
        one and no edit removes the last one, since a reward that pays only on success is
        constant on the checker's sample of random-play transitions wherever random play
        rarely succeeds.
    seed_features / seed_terms: how many optional features / terms a from-scratch
        program draws (a first generation is deliberately small).
    """

    prelude: str
    features: tuple[Feature, ...]
    terms: tuple[Term, ...]
    required_features: tuple[str, ...] = ()
    required_terms: tuple[str, ...] = ()
    dense_terms: tuple[str, ...] = ()
    seed_features: tuple[int, int] = (2, 4)
    seed_terms: tuple[int, int] = (0, 1)

    def term(self, name: str) -> Term:
        return next(t for t in self.terms if t.name == name)
