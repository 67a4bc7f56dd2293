"""Every parser of LLM text answers in linear time: an adversarial answer (hundreds of
thousands of newlines, spaces, digits, backticks) is parsed in well under a second, and a
normal answer as before (tests/evolve/test_rda_parts.py, test_forge.py, test_mcts.py,
test_requests.py and tests/program/test_program_extract.py pin those)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from limen_jax.program import ProgramError
from limen_jax.program.extract import extract_code
from limen_jax.run.ask import thought_of
from limen_jax.search.strategies import rda_text
from limen_jax.search.strategies.forge import parse_components
from limen_jax.search.strategies.mcts import first_line, parse_v_self

HUGE = [
    "\n" * 200_000, " " * 400_000, "1" * 60_000, "\t" * 200_000 + "x", "`" * 300_000, "```\n" * 50_000,
    "```python\n" + "  ```x\n" * 50_000, "```" + "a" * 200_000, "```" + " " * 200_000 + "a", ". " * 200_000,
    "1. " + " " * 200_000 + "\n", "1. a:" + " " * 200_000 + "\n", "episode " + " " * 200_000,
    "episode 1 " + "!" * 200_000, "episode " + "1" * 60_000 + " a: 0.5", "episode 1, a: " + "1" * 60_000 + "x",
    "episode 1, a: 0.5 " * 20_000, "score" + " " * 200_000 + "x", "score: " + "*" * 200_000,
    "score " * 60_000, "1." * 200_000, "thought" + " " * 200_000, "- " * 200_000,
]

PARSERS: dict[str, Callable[[str], Any]] = {
    "rda decomposition": lambda t: rda_text.parse_subtasks(t, 8),
    "rda reflection": lambda t: rda_text.reflect([{"name": "a", "description": "d"}], t),
    "rda critic": lambda t: rda_text.parse_critic(t, ["a", "b"], 4),
    "forge plan": lambda t: parse_components(t, 8),
    "mcts verification score": parse_v_self,
    "mcts thought": first_line,
    "thought_of": thought_of,
    "extract_code": lambda t: extract_code(t, ("get_observation", "compute_reward")),
}


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_adversarial_answers_parse_in_linear_time(parser: str) -> None:
    fn = PARSERS[parser]
    for text in HUGE:
        start = time.perf_counter()
        with contextlib.suppress(ProgramError):  # extract_code: no program in it
            fn(text)
        seconds = time.perf_counter() - start
        assert seconds < 1.0, (parser, text[:20], len(text), seconds)


def test_normal_answers_parse_as_before() -> None:
    text = "1. reach: get to the key\n2) **open_door** - open it\n  3. Reach: again\nprose\n"
    assert rda_text.parse_subtasks(text, 8) == [{"name": "reach", "description": "get to the key"},
                                                {"name": "open_door", "description": "open it"}]
    scores, reasons = rda_text.parse_critic(
        "Episode 1, reach: 0.8 | close\nepisode #2 - `open_door`: .25 - stuck at the door\nepisode 2, reach = 1\n"
        f"episode {'9' * 5000}, reach: 1\n", ["reach", "open_door"], 2)
    assert scores.tolist() == [[0.8, 0.0], [1.0, 0.25]]
    assert reasons == [["close", "not scored"], ["no reason given", "stuck at the door"]]
    assert parse_components("Plan:\n1. distance to goal\n- a ```fence```\n* x  \n", 8) == [
        "distance to goal", "a '''fence'''", "x"]
    assert parse_v_self("reasoning 0.9 ... Score: **0.4**") == 0.4
    assert parse_v_self("I'd say 3 then -0.5") == -0.5
    assert first_line("\n **Thought: use the key**\nmore") == "use the key"
