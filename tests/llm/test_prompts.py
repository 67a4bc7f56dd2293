from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from limen_jax.archive import ProgramRecord
from limen_jax.llm.prompts import (
    SECTIONS,
    PromptConfig,
    build_prompt,
    build_system,
    performance_bracket,
)
from limen_jax.llm.templates import load_template, template_names

ALL = PromptConfig(section_prob=1.0)
HEADINGS = {
    "top_programs": "### Best programs discovered so far",
    "diverse_programs": "### Diverse programs from different MAP-Elites cells",
    "failures": "### Recent failures",
    "training_feedback": "### Training feedback (parent)",
}


@dataclasses.dataclass
class FakeTask:
    name: str = "xland_easy"
    description: str = "Pick up the blue pyramid."
    context: str = "## State\n- `state.agent.position`: int32[2]\n- `state.grid`: int32[9, 9, 2]"


PARENT_CODE = "def get_observation(state):\n    return state.grid\n\n\n\ndef compute_reward(s, a, n):\n    return 1.0"
PARENT = ProgramRecord(
    "it0002-c00",
    PARENT_CODE,
    obs_dim=81,
    reward_ast_size=12,
    success_per_seed=[0.25, 0.75, 0.5],
    success=0.5,
    final_return=2.5,
    stage="full",
    curves={"success": [0.0, 0.1, 0.3, 0.5, 0.5, 0.5, 0.5, 0.5]},
)
TOP = [ProgramRecord("top1", "# top one", obs_dim=20, reward_ast_size=30, success=0.8, stage="full"), PARENT]
DIVERSE = [ProgramRecord("div1", "# diverse one", obs_dim=300, reward_ast_size=200, success=0.1, stage="full")]
TRACE = "\n".join(f"  frame {i}" for i in range(40)) + "\nValueError: reward is constant on all sampled states"
FAILS = [
    ProgramRecord(
        "bad1",
        "def get_observation(state):\n    return 0",
        error={"stage": "validate", "message": "reward is constant", "trace": TRACE},
    )
]


def evolve(seed: int = 0, config: PromptConfig = ALL, mode: str = "full", **kw):
    args = dict(parent=PARENT, top=TOP, diverse=DIVERSE, failures=FAILS)
    args.update(kw)
    return build_prompt(FakeTask(), mode, np.random.default_rng(seed), config=config, **args)


def test_templates_are_packaged_files():
    names = set(template_names())
    for required in (
        "system",
        "from_scratch",
        "evolve",
        "parent",
        "top_programs",
        "diverse_programs",
        "failures",
        "training_feedback",
        "guidance_low",
        "guidance_mid",
        "guidance_high",
    ):
        assert required in names
    assert load_template("system").startswith("You are an expert reinforcement learning engineer.")
    with pytest.raises(FileNotFoundError):
        load_template("nope")


def test_system_prompt_per_mode():
    full, obs, rew = build_system("full"), build_system("obs_only"), build_system("reward_only")
    assert "1. get_observation(state)\n2. compute_reward(state, action, next_state)" in full
    assert "Observation design:" in full and "Reward design:" in full
    assert "the checker enforces exactly those" in full
    assert "Do not write compute_reward" in obs and "Reward design:" not in obs and "Observation design:" in obs
    assert "Do not write get_observation" in rew and "Observation design:" not in rew and "Reward design:" in rew
    with pytest.raises(ValueError, match="unknown mode"):
        build_system("sparse")


def test_from_scratch_prompt():
    p = build_prompt(FakeTask(), "full", np.random.default_rng(0), config=ALL)
    assert p.bracket is None and p.sections == ()
    assert p.user.startswith("## Task\n\nPick up the blue pyramid.\n\n## State\n- `state.agent.position`")
    assert "Design get_observation(state) and compute_reward(state, action, next_state) so that" in p.user
    assert "- get_observation returns a 1D jnp.float32 vector" in p.user
    assert "- compute_reward returns a scalar jnp.float32" in p.user
    assert "Parent Program" not in p.user and "## Feedback" not in p.user
    assert "\n\n\n" not in p.user and "\x00" not in p.user
    # failures may appear even without a parent (a first generation that all crashed)
    q = build_prompt(FakeTask(), "full", np.random.default_rng(0), failures=FAILS, config=ALL)
    assert q.sections == ("failures",) and "## Feedback" in q.user and "reward is constant" in q.user


def test_mode_specific_wording_in_user_prompts():
    obs = evolve(mode="obs_only")
    assert "write an improved interface: get_observation(state)." in obs.user
    assert "compute_reward returns" not in obs.user and "get_observation returns" in obs.user
    rew = build_prompt(FakeTask(), "reward_only", np.random.default_rng(0))
    assert "Design compute_reward(state, action, next_state) so that" in rew.user
    assert "Reward design:" in rew.user and "Observation design:" not in rew.user
    assert "get_observation returns" not in rew.user


def test_evolve_prompt_has_every_section_when_all_are_kept():
    p = evolve()
    assert set(p.sections) == set(SECTIONS) and p.bracket == "mid"
    for heading in HEADINGS.values():
        assert p.user.count(heading) == 1
    assert f"---BEGIN CODE---\n{PARENT.code}\n---END CODE---" in p.user  # parent code verbatim
    assert "Success rate: 0.50 (per seed: 0.25, 0.75, 0.50)\nReward: 2.5\nObservation dimension: 81" in p.user
    assert "## Improvement guidance\n\nThe parent succeeds sometimes (success rate 0.5)" in p.user
    assert p.user.index("## Parent Program") < p.user.index("## Feedback") < p.user.index("## Improvement guidance")
    assert p.user.index("## Improvement guidance") < p.user.index("## Instructions")
    # the parent is not repeated among the top programs
    assert "#### Program top1" in p.user and "#### Program it0002-c00" not in p.user
    assert "#### Program div1" in p.user
    assert "- Per-seed success: 0.25, 0.75, 0.50" in p.user and "success plateaued" in p.user
    positions = [p.user.index(HEADINGS[s]) for s in p.sections]
    assert positions == sorted(positions)  # p.sections reports the order used


def test_failure_traces_are_included_and_cut_to_the_last_lines():
    p = evolve(config=PromptConfig(section_prob=1.0, max_trace_lines=5))
    assert '#### Program bad1 failed at stage "validate"' in p.user
    assert "Error: reward is constant" in p.user
    assert "ValueError: reward is constant on all sampled states" in p.user
    assert "frame 36" in p.user and "frame 35" not in p.user
    assert "(36 earlier lines cut)" in p.user
    assert "def get_observation(state):\n    return 0" in p.user


def test_sampling_is_reproducible_and_seed_dependent():
    half = PromptConfig(section_prob=0.5)
    assert evolve(3, half) == evolve(3, half)
    variants = {(evolve(s, half).sections, evolve(s, half).user) for s in range(8)}
    assert len(variants) > 3
    assert evolve(0).sections != evolve(1).sections  # same sections, another order
    assert sorted(evolve(0).sections) == sorted(evolve(1).sections)


def test_section_choice_follows_the_documented_draws():
    config = PromptConfig(section_prob=0.5)
    rng = np.random.default_rng(11)
    keep, order = rng.random(4) < 0.5, rng.permutation(4)
    expected = tuple(SECTIONS[i] for i in order if keep[i])
    assert evolve(11, config).sections == expected
    # the same randomness is consumed whatever is available
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    build_prompt(FakeTask(), "full", a)
    build_prompt(FakeTask(), "full", b, parent=PARENT, top=TOP, diverse=DIVERSE, failures=FAILS)
    assert a.bit_generator.state == b.bit_generator.state


def test_no_sections_drops_the_feedback_heading():
    p = evolve(config=PromptConfig(section_prob=0.0))
    assert p.sections == () and "## Feedback" not in p.user and "## Improvement guidance" in p.user
    assert "\n\n\n" not in p.user.replace(PARENT.code, "")


def test_guidance_brackets():
    assert [performance_bracket(s) for s in (None, 0.0, 0.19, 0.2, 0.69, 0.7, 1.0)] == [
        "low",
        "low",
        "low",
        "mid",
        "mid",
        "high",
        "high",
    ]
    low = evolve(parent=dataclasses.replace(PARENT, success=0.05, success_per_seed=[0.05]))
    high = evolve(parent=dataclasses.replace(PARENT, success=0.9, success_per_seed=[0.9]))
    assert low.bracket == "low" and "The parent rarely succeeds (success rate 0.05)" in low.user
    assert high.bracket == "high" and "The parent succeeds most of the time (success rate 0.9)" in high.user


def test_stored_feedback_is_used_when_complete():
    fb = {"trend": "TREND-X", "per_seed": "SPREAD-X", "plateau": "PLATEAU-X"}
    p = evolve(parent=dataclasses.replace(PARENT, feedback=fb))
    assert "- Learning-curve trend: TREND-X\n- Per-seed success: SPREAD-X\n- Plateau: PLATEAU-X" in p.user
    no_curves = evolve(parent=dataclasses.replace(PARENT, curves={}))
    assert "training_feedback" not in no_curves.sections


def test_long_programs_are_cut_but_the_parent_is_not():
    long_code = "\n".join(f"x{i} = {i}" for i in range(300))
    other = ProgramRecord("long", long_code, obs_dim=5, reward_ast_size=5, success=0.9, stage="full")
    parent = dataclasses.replace(PARENT, code=long_code)
    p = evolve(parent=parent, top=[other], config=PromptConfig(section_prob=1.0, max_code_lines=10))
    assert "# ... (290 more lines cut)" in p.user
    assert long_code in p.user  # the parent, whole


def test_prompts_state_the_checkers_rules_from_the_policy_and_the_budget():
    from limen_jax.llm.prompts import budget_text
    from limen_jax.program.names import ALLOWED_MODULES, FORBIDDEN_NAMES

    prompt = build_prompt(FakeTask(), "full", np.random.default_rng(0), budget=budget_text(150_000, 2))
    for module in ALLOWED_MODULES:
        assert f"`{module}`" in prompt.user
    for name in ("open", "getattr", "eval"):
        assert name in FORBIDDEN_NAMES and f"`{name}`" in prompt.user
    assert "class definitions" in prompt.user and "`try`/`except`" in prompt.user
    assert "150,000 environment steps per seed on 2 seed(s)" in prompt.user
    assert "Only jax and jax.numpy imports" not in prompt.user  # the old, wrong rule (math is allowed)


def test_sections_are_not_dropped_at_random_by_default():
    parent = ProgramRecord("p", "def f(): pass", success=0.5, success_per_seed=[0.5], stage="full",
                           obs_dim=3, reward_ast_size=4, curves={"success": [0.1, 0.3, 0.5, 0.5]})
    top = [ProgramRecord(f"t{i}", "x = 1", success=0.6, stage="full", obs_dim=3, reward_ast_size=4) for i in range(2)]
    fail = [ProgramRecord("f", "x = 1", error={"stage": "policy", "message": "no"})]
    for seed in range(20):
        prompt = build_prompt(FakeTask(), "full", np.random.default_rng(seed), parent=parent, top=top[:1],
                              diverse=top[1:], failures=fail)
        assert sorted(prompt.sections) == sorted(SECTIONS)
