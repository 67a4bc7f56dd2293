"""The AST policy on programs that must pass, and on the errors' own format (no JAX runs)."""

from __future__ import annotations

import pickle

import pytest
from limen_envs import interfaces

from limen_jax.program import STAGES, ProgramError
from limen_jax.program.descriptors import reward_ast_size
from limen_jax.program.policy import check_policy

ALLOWED = {
    "future_and_aliases": """
from __future__ import annotations
import math
import jax
import jax.numpy as jnp
from jax import lax, nn, random
from jax import numpy as np2
import jax.scipy.special as sps
""",
    "annotations_and_private_helpers": """
import jax.numpy as jnp
def _helper(x: jnp.ndarray, *, scale: float = 2.0) -> jnp.ndarray:
    return x * scale
def get_observation(state: "State") -> jnp.ndarray:
    return _helper(state.agent.position).astype(jnp.float32)
""",
    "module_constants": """
import math
import jax.numpy as jnp
SIZE = 9
DIRS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]], dtype=jnp.int32)
CELLS = jnp.arange(81).reshape(9, 9)
EYE = jnp.eye(4)
SCALE = 1.0 / math.sqrt(2 * SIZE)
OFFSETS = []
for dy in (-1, 0, 1):
    for dx in (-1, 0, 1):
        OFFSETS.append((dy, dx))
TABLE = {"pyramid": (5, 3), "ball": (3, 1)}
""",
    "main_guard_is_dropped": """
import jax.numpy as jnp
def get_observation(state):
    return jnp.zeros(3)
if __name__ == "__main__":
    import os
    print(open("/etc/passwd").read())
""",
    "jit_decorator_and_shadowed_builtins": """
import jax
import jax.numpy as jnp
@jax.jit
def get_observation(state):
    type = state.grid[:, :, 0]
    input = type.reshape(-1)[:3]
    return input.astype(jnp.float32)
""",
    "lax_control_flow": """
import jax
import jax.numpy as jnp
def get_observation(state):
    x = jax.lax.fori_loop(0, 4, lambda i, c: c + i, 0.0)
    y = jax.lax.cond(state.step_num > 3, lambda: 1.0, lambda: 0.0)
    return jnp.where(state.step_num > 3, jnp.ones(3), jnp.zeros(3)) + x + y
""",
}


@pytest.mark.parametrize("source", ALLOWED.values(), ids=ALLOWED.keys())
def test_allowed_programs_pass(source: str) -> None:
    check_policy(source)


def test_harmless_habits_are_normalised_away() -> None:
    tree = check_policy(ALLOWED["main_guard_is_dropped"])
    assert len(tree.body) == 2
    tree = check_policy(ALLOWED["jit_decorator_and_shadowed_builtins"])
    assert not any(getattr(node, "decorator_list", None) for node in tree.body)


@pytest.mark.parametrize("task", ["xland_easy", "xland_medium", "xland_hard"])
def test_reference_interfaces_pass_the_policy(task: str) -> None:
    source = interfaces.path(task).read_text()
    tree = check_policy(source)
    # the size counts the helpers compute_reward calls (issue 12): 421, 875, 956 nodes
    assert 20 <= reward_ast_size(tree) <= 1200


def test_reference_interface_path_helper() -> None:
    assert interfaces.path("xland_easy").name == "xland_easy.py"
    with pytest.raises(KeyError, match="xland_easy"):
        interfaces.path("no_such_task")


def test_reward_ast_size_counts_only_compute_reward() -> None:
    small = "def compute_reward(s, a, n):\n    return a\n"
    helper = "def helper(x):\n    return x + x + x + x\n"
    # FunctionDef, arguments, 3 x arg, Return, Name, Load
    assert reward_ast_size(small) == reward_ast_size(helper + small) == 8
    # Lambda, arguments, 3 x arg, Name, Load
    assert reward_ast_size("compute_reward = lambda s, a, n: a\n") == 7
    assert reward_ast_size("def get_observation(s):\n    return s\n") == 0


def test_several_violations_are_reported_together() -> None:
    source = "import os\nimport sys\ndef f(x):\n    return x.__class__\n"
    with pytest.raises(ProgramError) as info:
        check_policy(source)
    err = info.value
    assert err.stage == "policy"
    assert "line 1" in err.message and "line 2" in err.message and "line 4" in err.message
    assert err.trace.splitlines() == ["line 1: import os", "line 2: import sys", "line 4: return x.__class__"]


def test_program_error_format() -> None:
    err = ProgramError("trace", "bad at /usr/lib/python3.11/site-packages/jax/_src/core.py:12", "x\n" * 40)
    assert "/usr/lib" not in err.message and "<jax>" in err.message
    assert len(err.trace.splitlines()) == 15
    assert err.to_dict() == {"stage": "trace", "message": err.message, "trace": err.trace}
    assert err.feedback().startswith("Rejected at stage 'trace': bad at <jax>")
    again = pickle.loads(pickle.dumps(err))
    assert again.to_dict() == err.to_dict()
    assert len(STAGES) == 13
    with pytest.raises(ValueError):
        ProgramError("nonsense", "x")


def test_list_extend_is_not_mistaken_for_jax_extend() -> None:
    """`features.extend([...])` is ordinary Python (evolved interfaces use it); `jax.extend` is not allowed."""
    check_policy("def f(state):\n    xs = []\n    xs.extend([1, 2])\n    return xs\n")
    for source in ("import jax\nx = jax.extend\n", "from jax import extend\n", "import jax.extend\n"):
        with pytest.raises(ProgramError) as info:
            check_policy(source)
        assert info.value.stage == "policy" and "jax.extend" in info.value.message
