"""Reward programs that return a dict of named terms: checked, exported, summed."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from limen_jax.interface import MAX_REWARD_TERMS
from limen_jax.program import ProgramError, compile_interface, compile_many, interface_from_artifacts
from limen_jax.task import Task, Transition

HEAD = "import jax\nimport jax.numpy as jnp\n\n"
OBS = "def get_observation(state):\n    return state.agent.position.astype(jnp.float32)\n\n"


def program(body: str) -> str:
    return HEAD + OBS + "def compute_reward(state, action, next_state):\n" + body + "\n"


# written in the order progress, goal; exported sorted: goal, progress
TERMS = program(
    "    moved = jnp.abs(next_state.agent.position - state.agent.position).sum().astype(jnp.float32)\n"
    "    return {'progress': 0.5 * moved, 'goal': (action == 3).astype(jnp.float32)}"
)


def _take(sample: Transition, i: int) -> Transition:
    return jax.tree.map(lambda x: x[i], sample)


def test_a_dict_reward_checks_and_its_terms_are_exported_sorted(easy_task: Task, easy_sample: Transition) -> None:
    iface = compile_interface(TERMS, easy_task, sample=easy_sample)
    assert iface.reward_terms == ("goal", "progress")
    terms = jax.vmap(iface.terms)(easy_sample.sim, easy_sample.action, easy_sample.next_sim)
    moved = np.abs(np.asarray(easy_sample.next_sim.agent.position) - np.asarray(easy_sample.sim.agent.position))
    np.testing.assert_array_equal(terms[:, 0], (np.asarray(easy_sample.action) == 3).astype(np.float32))
    np.testing.assert_array_equal(terms[:, 1], 0.5 * moved.sum(1).astype(np.float32))
    one = _take(easy_sample, 0)
    assert float(iface.reward(one.sim, one.action, one.next_sim)) == float(np.asarray(terms[0]).sum())
    # the run directory's path back: the stored artifact and the names rebuild the same terms
    again = interface_from_artifacts(
        easy_task, easy_sample, obs=iface.obs_artifact, reward=iface.reward_artifact, obs_dim=iface.obs_dim,
        reward_ast_size=iface.reward_ast_size, source=iface.source, name="again", reward_terms=iface.reward_terms,
    )  # fmt: skip
    np.testing.assert_array_equal(jax.vmap(again.terms)(easy_sample.sim, easy_sample.action, easy_sample.next_sim),
                                  terms)  # fmt: skip
    with pytest.raises(ProgramError, match="signature"):  # names of another shape do not fit the artifact
        interface_from_artifacts(
            easy_task, easy_sample, obs=iface.obs_artifact, reward=iface.reward_artifact, obs_dim=iface.obs_dim,
            reward_ast_size=0, source="", name="x", reward_terms=("goal",),
        )  # fmt: skip
    with pytest.raises(ProgramError, match="term names"):
        interface_from_artifacts(
            easy_task, easy_sample, obs=iface.obs_artifact, reward=iface.reward_artifact, obs_dim=iface.obs_dim,
            reward_ast_size=0, source="", name="x", reward_terms=("progress", "goal"),  # not sorted
        )  # fmt: skip


def test_a_scalar_reward_has_no_terms(easy_task: Task, easy_sample: Transition) -> None:
    iface = compile_interface(program("    return (action == 3).astype(jnp.float32)"), easy_task, sample=easy_sample)
    assert iface.reward_terms == () and iface.terms is None


NINE = ", ".join(f"'t{i}': (action == {i % 6}).astype(jnp.float32)" for i in range(MAX_REWARD_TERMS + 1))
BAD = {
    "too_many": (program(f"    return {{{NINE}}}"), "shape", "between 1 and 8 named terms"),
    "empty": (program("    return {}"), "shape", "between 1 and 8"),
    "bad_name": (program("    return {'two words': (action == 3).astype(jnp.float32)}"), "shape", "'two words'"),
    "long_name": (program(f"    return {{'{'x' * 33}': (action == 3).astype(jnp.float32)}}"), "shape", "32 characters"),
    "vector_term": (program("    return {'pos': next_state.agent.position.astype(jnp.float32)}"), "shape",
                    "term `pos` has shape (2,)"),
    "int_term": (program("    return {'hit': (action == 3).astype(jnp.int32)}"), "dtype", "term `hit` has dtype int32"),
    "nan_term": (program("    return {'ok': (action == 3).astype(jnp.float32), 'bad': jnp.log(-1.0 - action)}"),
                 "nonfinite", "term `bad`"),
    "nested": (program("    return {'a': {'b': (action == 3).astype(jnp.float32)}}"), "shape", "term `a` is a dict"),
}  # fmt: skip


def test_bad_term_programs_are_rejected_with_the_term_named(easy_task: Task, easy_sample: Transition) -> None:
    results = compile_many([s for s, _, _ in BAD.values()], easy_task, sample=easy_sample, workers=2)
    for (name, (_, stage, text)), result in zip(BAD.items(), results, strict=True):
        assert isinstance(result, ProgramError), name
        assert (result.stage, text in result.message) == (stage, True), (name, result.stage, result.message)


def test_the_rules_state_the_term_limit() -> None:
    from limen_jax.llm.rules import checker_rules

    assert "a plain dict of at most 8 named scalar terms" in checker_rules()
