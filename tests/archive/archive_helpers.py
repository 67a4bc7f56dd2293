"""Shared helpers for the archive tests (imported by basename: tests/ is not a package)."""

from __future__ import annotations

from limen_jax.archive import GridSpec, ProgramRecord

# 2x2 bins: obs dims 1-50 | 51-100, reward AST sizes 0-24 | 25+.
TINY = GridSpec(obs_edges=(1, 51, 101), ast_bin_width=25, num_ast_bins=2)


def rec(
    pid: str, success: float | None, obs_dim: int = 10, ast: int = 3, island: int = 0, **kw: object
) -> ProgramRecord:
    """An evaluated record (or a rejected one when success is None)."""
    stage = "full" if success is not None else "rejected"
    return ProgramRecord(
        pid, f"# {pid}", island=island, obs_dim=obs_dim, reward_ast_size=ast, success=success, stage=stage, **kw
    )  # type: ignore[arg-type]
