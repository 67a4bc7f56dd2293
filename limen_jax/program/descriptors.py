"""Archive descriptors of a program: observation dimension and reward AST size.

The observation dimension comes from tracing (checks.py); the reward's complexity is
the number of AST nodes (``ast.walk``) of its ``compute_reward`` definition, helpers
excluded, so it measures what the LLM wrote in the reward itself.
"""

from __future__ import annotations

import ast


def function_node(tree: ast.Module, name: str) -> ast.AST | None:
    """The last top-level definition of ``name``: a ``def``, or the value of ``name = lambda ...``."""
    found: ast.AST | None = None
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            found = stmt
        elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found = stmt.value
    return found


def ast_size(node: ast.AST | None) -> int:
    """Number of nodes under ``node`` (itself included); 0 for None."""
    return 0 if node is None else sum(1 for _ in ast.walk(node))


def reward_ast_size(source_or_tree: str | ast.Module) -> int:
    """AST node count of ``compute_reward`` (0 when the program does not define it)."""
    tree = ast.parse(source_or_tree) if isinstance(source_or_tree, str) else source_or_tree
    return ast_size(function_node(tree, "compute_reward"))
