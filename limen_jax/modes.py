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


# The one table of what each program mode's candidates define: function name -> signature.
SIGNATURES: dict[str, str] = {
    "get_observation": "get_observation(state)",
    "compute_reward": "compute_reward(state, action, next_state)",
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "full": ("get_observation", "compute_reward"),
    "obs_only": ("get_observation",),
    "reward_only": ("compute_reward",),
}


def strategy_for(mode: str, strategy: str) -> str:
    """The strategy a search mode runs: the baselines have their own, the ablations the
    configured one."""
    return {"sparse": "sparse", "independent": "independent"}.get(mode, strategy)
