"""The LLM seam knows no strategy: limen_jax/llm/ code names none of the shipped strategies,
their text roles or their program operators, and holds none of their prompts."""

from __future__ import annotations

import ast
from pathlib import Path

import limen_jax.llm
from limen_jax.search.strategy_registry import strategy_names
from limen_jax.search.templates import template_names

LLM = Path(limen_jax.llm.__file__).parent
ROLES = {"plan", "verify", "self_verify", "align", "critique", "decompose", "critic", "reflect_subtasks"}
OPERATORS = {"m1_restructure", "m2_retune", "c3_crossover", "r4_reason", "d5_diverge", "repair", "rda_initial",
             "rda_rewrite", "component", "combine", "reflect", "train_best"}
PREFIXES = ("mcts_", "forge_", "rda_", "grace")  # the strategies' prompt templates


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def named(path: Path) -> set[str]:
    """Every string constant (docstrings left out) and identifier in the module's code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            words.add(node.value)
        elif isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.arg):
            words.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            words.add(node.name)
        elif isinstance(node, ast.alias):
            words.update(node.name.split("."))
    return words


def test_the_check_sees_what_it_looks_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""Answers the plan role."""\n\ndef f(align):\n    return {"role": "plan", "x": mcts_m1}\n')
    words = named(probe)
    assert {"plan", "align", "mcts_m1"} <= words and "Answers the plan role." not in words


def test_llm_code_names_no_strategy_role_or_operator():
    strategies = set(strategy_names())
    assert {"mcts", "forge", "rda", "grace", "eureka"} <= strategies
    for path in sorted(LLM.glob("*.py")):
        words = named(path)
        assert not words & (ROLES | OPERATORS | strategies), (path.name, sorted(words & (ROLES | OPERATORS)))
        assert not [w for w in words if w.startswith(PREFIXES)], path.name


def test_strategy_prompts_live_with_the_strategies():
    assert not [p.name for p in (LLM / "prompts").glob("*.md") if p.name.startswith(PREFIXES)]
    names = set(template_names())
    assert {"mcts_verify", "forge_planner", "rda_critic", "grace", "grace_parent"} <= names
