"""Reward terms in the feedback: each term's curve in the prompt, and a farmed term named."""

import pathlib

import numpy as np

from limen_jax.archive.store import ProgramRecord
from limen_jax.llm.feedback import curve_points, farmed_term, term_curve, training_feedback
from limen_jax.llm.prompts import PromptConfig, build_prompt, parent_feedback


def test_curve_points_and_term_curve_exact():
    assert curve_points([1, 2, 3, 4], points=2) == [1.5, 3.5]
    assert curve_points([0, None, float("nan"), 4, 5], points=3) == [0.0, None, 4.5]
    assert curve_points([float(i) for i in range(20)]) == [0.5 + 2 * i for i in range(10)]
    assert term_curve("turn", [0, 2, 4, 6]) == "`turn`: 0, 2, 4, 6 (max 6, mean 3, min 0)"
    assert term_curve("turn", [None, None]) == "`turn`: no data"


def _record(success, curves, feedback=None):
    return ProgramRecord("it0001-c00", "code", success=success, success_per_seed=[success],
                         curves=curves, feedback=feedback or {})  # fmt: skip


def test_farmed_term_needs_rising_return_and_near_zero_success():
    curves = {"return": [1, 5, 20, 38], "success": [0, 0, 0, 0], "reward/goal": [1, 0, 0, 0],
              "reward/turn": [0, 5, 20, 38]}  # fmt: skip
    text = farmed_term(_record(0.016, curves))
    assert text == (
        "return rose from 1 to 38 while success stayed at 0.016: the policy collects reward without solving the "
        "task (reward hacking); the term `turn` grew most (its sum per episode rose from 0 to 38): it pays for "
        "behaviour that does not lead to success; remove it, bound it, or make it potential-based"
    )
    assert farmed_term(_record(0.5, curves)) is None  # it succeeds
    assert farmed_term(_record(0.0, {**curves, "return": [38, 20, 5, 1]})) is None  # return fell
    scalar = farmed_term(_record(0.0, {"return": [1, 5, 20, 38]}))
    assert scalar is not None and scalar.endswith("remove or bound it")
    # a scalar reward's feedback has no terms entry (it is what it was before terms)
    assert "terms" not in training_feedback(_record(0.0, {"return": [1, 2], "success": [0, 0]}))


def test_the_prompt_shows_each_terms_curve():
    curves = {"return": [0.0] * 20, "success": [0.0] * 20, "reward/turn": [float(i) for i in range(20)]}
    parent = _record(0.0, curves)
    for record in (parent, _record(0.0, curves, training_feedback(parent))):  # computed, and as the loop stores it
        fb = parent_feedback(record)
        assert fb["terms"] == (
            "- Reward terms, each one's sum per episode over training (10 points, first to last):\n"
            "  - `turn`: 0.5, 2.5, 4.5, 6.5, 8.5, 10.5, 12.5, 14.5, 16.5, 18.5 (max 19, mean 9.5, min 0)"
        )

    class Task:
        description, context = "d", "c"

    prompt = build_prompt(Task(), "full", np.random.default_rng(0), parent=parent,
                          config=PromptConfig(section_prob=1.0))  # fmt: skip
    assert "  - `turn`: 0.5, 2.5, 4.5" in prompt.user
    plain = build_prompt(Task(), "full", np.random.default_rng(0), parent=_record(0.0, {"return": [0.0, 1.0]}),
                         config=PromptConfig(section_prob=1.0))  # fmt: skip
    assert "Reward terms" not in plain.user and "- Plateau:" in plain.user


SPIN = pathlib.Path(__file__).with_name("spin_interface.py")


def test_feedback_names_the_farmed_term_of_the_reference_easy_interface():
    """The reference's published xland_easy reward, as terms: PPO learns to spin."""
    import limen_jax
    from limen_jax.program import compile_interface
    from limen_jax.rl import PPOConfig, run_cascade

    task = limen_jax.make("xland_easy")
    iface = compile_interface(SPIN.read_text(), task, name="spin")
    assert iface.reward_terms == ("pickup", "turn_toward")
    config = PPOConfig.preset("xland_easy", "cpu")
    steps = 32 * config.steps_per_update
    (res,) = run_cascade(task, [iface], config=config, short_steps=steps, full_steps=steps, seeds=[0], threshold=0.0)
    # what the loop copies to the record (loop._score), then the feedback it stores
    record = ProgramRecord("it0001-c00", iface.source, success=res.success,
                           success_per_seed=[float(x) for x in res.success_per_seed],
                           curves={k: [float(x) for x in v] for k, v in res.curves.items()},
                           eval_terms=res.eval_terms, stage="full")  # fmt: skip
    assert res.success <= 0.05 and res.eval_terms["turn_toward"] > 25  # it spins
    feedback = training_feedback(record)
    assert "collects reward without solving the task (reward hacking); the term `turn_toward` grew most" in (
        feedback["trend"]
    )
    assert feedback["terms"].splitlines()[2].startswith("  - `turn_toward`: ")
