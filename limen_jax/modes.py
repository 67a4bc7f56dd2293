"""The search modes (the paper's ablations), one literal for every package.

A program mode says which functions a candidate writes; a search mode adds the two
baselines that write nothing (``sparse``) or write from scratch every time
(``independent``, whose programs are "full").
"""

from __future__ import annotations

from typing import Literal, get_args

ProgramMode = Literal["full", "obs_only", "reward_only"]
Mode = Literal["full", "obs_only", "reward_only", "sparse", "independent"]
PROGRAM_MODES: tuple[str, ...] = get_args(ProgramMode)
MODES: tuple[str, ...] = get_args(Mode)


def program_mode(mode: str) -> ProgramMode:
    """The functions a search mode's candidates write."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    return "full" if mode in ("sparse", "independent") else mode  # type: ignore[return-value]
