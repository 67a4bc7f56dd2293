"""Archive descriptors of a program: observation dimension and reward AST size.

The observation dimension comes from tracing (checks.py); the reward's complexity is
the number of AST nodes (``ast.walk``) of its ``compute_reward`` definition plus those
of the top-level helpers it calls, directly or through other helpers (each counted
once), so moving reward code into a helper does not move a program to another bin.
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


def _top_level_functions(tree: ast.Module) -> dict[str, ast.AST]:
    names = {s.name for s in tree.body if isinstance(s, ast.FunctionDef)}
    names |= {t.id for s in tree.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Lambda)
              for t in s.targets if isinstance(t, ast.Name)}
    return {n: node for n in names if (node := function_node(tree, n)) is not None}


def reward_ast_size(source_or_tree: str | ast.Module) -> int:
    """AST node count of ``compute_reward`` and the top-level helpers it reaches (0 when
    the program does not define it)."""
    tree = ast.parse(source_or_tree) if isinstance(source_or_tree, str) else source_or_tree
    functions = _top_level_functions(tree)
    if "compute_reward" not in functions:
        return 0
    seen, todo = {"compute_reward"}, ["compute_reward"]
    while todo:
        for node in ast.walk(functions[todo.pop()]):
            if isinstance(node, ast.Name) and node.id in functions and node.id not in seen:
                seen.add(node.id)
                todo.append(node.id)
    return sum(ast_size(functions[n]) for n in seen)
