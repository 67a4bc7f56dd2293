"""Benchmark scripts called by these tests write their records to a temporary folder,
never to benchmarks/results/ (the committed records docs/results.md is rendered from)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _records_elsewhere(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("LIMEN_JAX_RESULTS", str(tmp_path_factory.mktemp("records")))
