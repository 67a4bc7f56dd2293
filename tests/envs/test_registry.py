"""Finding tasks and their facts: entry points, register(), families, module:Class; and
the engine names no bundled task."""

from __future__ import annotations

import ast
import importlib.metadata
import pathlib
import re

import jax.numpy as jnp
import pytest
from flax import struct

import limen_jax as lj
from limen_jax import registry
from limen_jax.config import EvolveConfig
from limen_jax.rl import PPOConfig
from limen_jax.task import DEFAULT_BUDGETS, Budget

ENGINE = pathlib.Path(lj.__file__).resolve().parent


class _Sim(struct.PyTreeNode):
    x: object


class Flip(lj.Task):
    """A one-step coin task with its own facts."""

    name = "flip_for_registry_tests"
    description = "flip a coin"
    episode_length = 1
    action_space = lj.Discrete(2)
    ppo_presets = {"cpu": {"num_envs": 8, "minibatches": 2, "rollout_len": 4}}
    budgets = {"cpu": Budget(full_steps=321, iterations=4, candidates=5, seeds=6)}

    def reset(self, key):
        return lj.TaskState(sim=_Sim(jnp.float32(0)), done=jnp.asarray(False), success=jnp.asarray(False))

    def step(self, state, action):
        return lj.TaskState(sim=state.sim, done=jnp.asarray(True), success=action == 1)

    def default_observation(self, sim):
        return jnp.zeros(1, jnp.float32)

    def sparse_reward(self, sim, action, next_sim):
        return jnp.float32(0)

    @property
    def context(self):
        return "a coin"


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTERED", {})
    monkeypatch.setattr(registry, "_FAMILIES", {})
    monkeypatch.setattr(registry, "_BUILT", {})


def test_the_bundled_suite_registers_through_entry_points():
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="limen_jax.tasks")}
    assert eps["xland_easy"] == "limen_envs.xland:XLandEasy" and len(eps) >= 10
    assert set(eps) <= set(lj.registered_tasks())
    assert registry.describe("xland_easy").startswith("XLand-MiniGrid 9x9 room")
    fams = {ep.name for ep in importlib.metadata.entry_points(group="limen_jax.task_families")}
    assert {"playground", "brax"} <= fams and set(registry.families()) >= {"playground", "brax"}


def test_facts_come_from_the_task(clean_registry):
    lj.register("flip", Flip)
    assert lj.make("flip").name == Flip.name
    ppo = PPOConfig.preset("flip", "cpu")
    assert (ppo.num_envs, ppo.minibatches, ppo.rollout_len) == (8, 2, 4)
    assert PPOConfig.preset("flip", "paper") == PPOConfig()  # no paper preset declared: the defaults
    cpu = EvolveConfig.preset_for("flip", "cpu")
    assert (cpu.cascade.full_steps, cpu.search.iterations, cpu.search.candidates, cpu.search.seeds) == (321, 4, 5, 6)
    paper = EvolveConfig.preset_for("flip", "paper")
    assert paper.cascade.full_steps == DEFAULT_BUDGETS["paper"].full_steps
    with pytest.raises(ValueError, match="already registered"):
        lj.register("flip", Flip)
    with pytest.raises(ValueError, match="already registered"):
        lj.register("xland_easy", Flip)  # an entry point's name is taken too


def test_bundled_facts_match_the_paper():
    assert PPOConfig.preset("xland_hard", "paper").network == "gru"
    assert PPOConfig.preset("go1_push", "paper").actor_hidden == (512, 256, 128)
    hard = EvolveConfig.preset_for("xland_hard", "paper").cascade
    assert (hard.short_steps, hard.full_steps, hard.threshold) == (3_000_000, 5_000_000, 0.01)


def test_unknown_names_get_defaults_or_a_clear_error(clean_registry):
    assert PPOConfig.preset("no_such_task") == PPOConfig()
    assert EvolveConfig.preset_for("no_such_task").cascade.full_steps == DEFAULT_BUDGETS["cpu"].full_steps
    with pytest.raises(KeyError, match="unknown task 'no_such_task'.*xland_easy.*playground:<env>"):
        lj.make("no_such_task")
    with pytest.raises(KeyError, match="no module"):
        lj.make("no_such_module:Thing")


def test_module_class_names_families_and_hand_built_tasks(clean_registry):
    assert isinstance(lj.make(f"{__name__}:Flip"), Flip)
    seen = []

    def family(env: str):
        seen.append(env)
        return type(f"Flip_{env}", (Flip,), {"name": f"coin:{env}", "budgets": {"cpu": Budget(7, 1, 1, 1)}})

    registry.register_family("coin", family)
    assert lj.make("coin:heads").name == "coin:heads" and seen == ["heads"]
    assert EvolveConfig.preset_for("coin:tails").cascade.full_steps == 7
    # a task built by hand (never by name) still has its facts found by its name
    hand = type("Hand", (Flip,), {"name": "hand_built", "ppo_presets": {"cpu": {"num_envs": 4, "minibatches": 1}}})
    hand()
    assert PPOConfig.preset("hand_built").num_envs == 4


def test_the_engine_names_no_bundled_task():
    """Outside docstrings, comments and CLI help examples, limen_jax/ never names a bundled
    task, a task family of the suite or limen_envs."""
    pattern = re.compile(r"limen_envs|xland|go1|panda", re.IGNORECASE)
    allowed: set[tuple[str, str]] = set()
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            first = body[0] if isinstance(body, list) and body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                first.value.value = ""  # a docstring
            if isinstance(node, ast.keyword) and node.arg == "help":
                node.value = ast.Constant("")
        code = ast.unparse(tree)
        for m in pattern.finditer(code):
            line = code[code.rfind("\n", 0, m.start()) + 1 : code.find("\n", m.end())].strip()
            if not any(path.name == f and snippet in line for f, snippet in allowed):
                found.append(f"{path.relative_to(ENGINE)}: {line}")
    assert found == []
