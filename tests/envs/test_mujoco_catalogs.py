"""Offline-mutator catalogs of the MuJoCo tasks: every block compiles against real
transitions, and the programs the mutator writes pass the checker."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from limen_jax.llm.offline import OfflineAuthor, render
from limen_jax.program import ProgramError, compile_interface, compile_many


@pytest.mark.parametrize("fixture", ["go1", "panda", "ant"])
def test_catalog_programs_pass_the_checker(fixture, request):
    roll = request.getfixturevalue(fixture)
    task = roll.task
    catalog = task.offline_catalog()
    assert catalog is not None and catalog.required_features and catalog.required_terms
    _, sample = roll.run(jax.random.key(3), steps=4)

    # every feature and every term at once: each block is valid JAX on the real state
    everything = {"features": [f.name for f in catalog.features], "terms": {t.name: t.weight for t in catalog.terms}}
    iface = compile_interface(render(catalog, everything), task, name="all", sample=sample)
    obs = np.asarray(jax.vmap(iface.observe)(sample.sim))
    assert obs.shape == (len(sample.action), iface.obs_dim) and np.isfinite(obs).all()

    # what a run proposes: first programs and their children keep the required pieces
    # (checked side by side, one sandboxed worker each, as the loop checks a batch; two
    # rounds: each program is one more worker that imports MJX and builds the task)
    mutator = OfflineAuthor(catalog)
    rng = np.random.default_rng(0)
    sources = []
    for _ in range(2):
        genome = mutator.random_genome(rng)
        child, _ = mutator.mutate(genome, rng)
        for g in (genome, child):
            assert set(catalog.required_features) <= set(g["features"])
            assert set(catalog.required_terms) <= set(g["terms"])
            sources.append(render(catalog, g))
    rejected = [str(r) for r in compile_many(sources, task, sample=sample) if isinstance(r, ProgramError)]
    assert not rejected, rejected


def test_catalog_constants_follow_task_parameters(go1, panda):
    assert "PUSH_INTERVAL = 30" in go1.task.with_params(push_interval=30).offline_catalog().prelude
    assert "RADIUS = 0.2" in panda.task.with_params(radius=0.2).offline_catalog().prelude
