"""Extracting the program from LLM replies (pure text, no JAX)."""

from __future__ import annotations

import pytest

from limen_jax.program import ProgramError, extract_code

PROGRAM = """\
import jax.numpy as jnp

def get_observation(state):
    return state.agent.position.astype(jnp.float32)

def compute_reward(state, action, next_state):
    return jnp.float32(0.0)
"""


def fenced(code: str, tag: str = "python") -> str:
    return f"```{tag}\n{code}```\n"


def test_single_fenced_block() -> None:
    reply = "Here is my interface:\n\n" + fenced(PROGRAM) + "\nIt observes the position."
    assert extract_code(reply) == PROGRAM


def test_picks_the_block_that_defines_the_functions() -> None:
    snippet = fenced("pos = state.agent.position  # an example\n")
    draft = fenced(PROGRAM.replace("0.0", "1.0"))
    reply = "First, a snippet:\n" + snippet + "A draft:\n" + draft + "Final version:\n" + fenced(PROGRAM)
    assert extract_code(reply) == PROGRAM  # the last complete block wins


def test_joins_one_block_per_function() -> None:
    head, obs_part, rew_part = PROGRAM.split("\n\n")
    reply = fenced(head + "\n") + "Observation:\n" + fenced(obs_part + "\n") + "Reward:\n" + fenced(rew_part)
    code = extract_code(reply)
    assert "import jax.numpy as jnp" in code
    assert "def get_observation" in code and "def compute_reward" in code
    compile(code, "<test>", "exec")


def test_unclosed_fence_from_a_truncated_reply() -> None:
    assert extract_code("Sure:\n```python\n" + PROGRAM) == PROGRAM


def test_bare_code_with_prose_around() -> None:
    reply = "Here is the program.\n\n" + PROGRAM + "\nThis rewards nothing yet.\nHope it helps!\n"
    assert extract_code(reply) == PROGRAM


def test_ignores_non_python_blocks_and_normalises_newlines() -> None:
    reply = fenced('{"obs_dim": 2}', "json") + fenced(PROGRAM, "py").replace("\n", "\r\n")
    assert extract_code(reply) == PROGRAM


def test_dedents_an_indented_block() -> None:
    indented = "".join("    " + line if line.strip() else line for line in PROGRAM.splitlines(keepends=True))
    assert extract_code("  ```python\n" + indented + "  ```\n") == PROGRAM


def test_required_names_follow_the_mode() -> None:
    obs_only = PROGRAM.split("def compute_reward")[0].rstrip() + "\n"
    reply = fenced(obs_only)
    assert extract_code(reply, ["get_observation"]) == obs_only


@pytest.mark.parametrize(
    "reply", ["", "I cannot help with that.", fenced("x = 1\n"), fenced("def helper(x):\n    return x\n")]
)
def test_no_program_is_an_extract_error(reply: str) -> None:
    with pytest.raises(ProgramError) as info:
        extract_code(reply)
    assert info.value.stage == "extract"
    assert "```python" in info.value.message
