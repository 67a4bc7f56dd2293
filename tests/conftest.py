"""Makes ``tests/`` importable for shared helpers (``mujoco_extra``); sizes the suite's
process pool (pyproject's ``-n auto``)."""

import os

import pytest

# Each test process holds a JAX runtime and its compiled fixtures (up to ~3 GB resident
# in the serial run) and the checker's tests start their own sandboxed workers: one
# process per core, at most four.
MAX_TEST_PROCESSES = 4


def pytest_xdist_auto_num_workers(config):
    return max(1, min(len(os.sched_getaffinity(0)), MAX_TEST_PROCESSES))


@pytest.fixture(autouse=True)
def _benchmark_records_elsewhere(tmp_path_factory, monkeypatch):
    """A benchmark script a test calls (tests/benchmarks, the strategies benchmark's tests)
    writes its record to a temporary folder, never to benchmarks/results/ (the committed
    records docs/results.md is rendered from)."""
    monkeypatch.setenv("LIMEN_JAX_RESULTS", str(tmp_path_factory.mktemp("records")))
