"""The offline stand-in: deterministic, keeps the goal term, emits checkable programs."""

import numpy as np
import pytest

import limen_jax as lj
from limen_jax.archive import ProgramRecord
from limen_jax.llm.offline import OfflineAuthor, read_genome, render


@pytest.fixture(scope="module")
def easy():
    return lj.make("xland_easy")


def program(author, parent=None, others=(), seed=0, mode="full"):
    return author.program(parent.code if parent else None, [r.code for r in others], mode,
                          np.random.default_rng(seed))


def test_from_scratch_is_small_deterministic_and_keeps_goal(easy):
    mut = OfflineAuthor(easy.offline_catalog())
    a, b = program(mut, seed=7), program(mut, seed=7)
    assert a == b and a.startswith("Offline edit (from_scratch).\n\n```python\n")
    genome = read_genome(a)
    assert genome is not None and "goal" in genome["terms"]
    assert 2 <= len(genome["features"]) <= 4
    texts = {program(mut, seed=s) for s in range(8)}
    assert len(texts) > 4  # different seeds explore different programs


def test_mutations_edit_the_parent_and_never_drop_required_terms(easy):
    cat = easy.offline_catalog()
    mut = OfflineAuthor(cat)
    parent_genome = {"features": ["agent_pos", "direction"], "terms": {"goal": 10.0}}
    parent = ProgramRecord(id="p", code=render(cat, parent_genome))
    rng = np.random.default_rng(0)
    seen_ops = set()
    for _ in range(200):
        child, ops = mut.mutate(parent_genome, rng)
        assert "goal" in child["terms"] and child["features"]
        assert child != parent_genome
        seen_ops |= {op.split(":")[0] for op in ops}
    assert seen_ops == {"add_feature", "remove_feature", "add_term", "remove_term", "reweight"}
    other = {"features": ["pyramid_rel", "direction"], "terms": {"goal": 10.0, "approach_pyramid": 0.5}}
    crossed = [mut.mutate(parent_genome, np.random.default_rng(s), other)[0] for s in range(20)]
    assert any("pyramid_rel" in g["features"] or "approach_pyramid" in g["terms"] for g in crossed)
    out = program(mut, parent=parent, seed=3)
    assert read_genome(out) != parent_genome and out.startswith("Offline edit (") and "from_scratch" not in out
    # a parent written by an LLM holds no genome: a fresh program, drawn as from scratch
    foreign = ProgramRecord(id="q", code="def get_observation(state):\n    return state\n")
    assert program(mut, parent=foreign, seed=3) == program(mut, seed=3)


def test_render_respects_mode_and_weights(easy):
    cat = easy.offline_catalog()
    g = {"features": ["agent_pos"], "terms": {"goal": 12.5, "step_cost": 0.01}}
    full = render(cat, g)
    assert "def get_observation" in full and "def compute_reward" in full
    # named terms: rollout, the viewer and the reward reflection see each one
    assert '"goal": jnp.asarray(12.5 * t_goal, dtype=jnp.float32)' in full
    assert '"step_cost": jnp.asarray(0.01 * t_step_cost, dtype=jnp.float32)' in full
    assert "def compute_reward" not in render(cat, g, "obs_only")
    assert "def get_observation" not in render(cat, g, "reward_only")
    assert read_genome("no header here") is None
    assert read_genome("# limen-genome: {broken") is None


def test_read_genome_refuses_tampered_genomes():
    # a program of a run directory is untrusted: a genome line that nests too deeply or holds
    # other types than names and finite weights is no genome (the offline mutator would stop
    # the run as an "LLM outage" on a RecursionError, TypeError or ValueError)
    head = "# limen-genome: "
    for line in ('{"features": ' + "[" * 100_000 + "]" * 100_000 + ', "terms": {}}',
                 '{"features": [1, null], "terms": {"goal": 1.0}}',
                 '{"features": ["a"], "terms": {"goal": "abc"}}',
                 '{"features": ["a"], "terms": {"goal": [1]}}',
                 '{"features": ["a"], "terms": {"goal": true}}',
                 '{"features": ["a"], "terms": {"goal": 1e400}}',
                 '{"features": ["a"], "terms": {"goal": NaN}}'):
        assert read_genome("import jax\n" + head + line + "\n") is None
    assert read_genome(head + '{"features": ["a"], "terms": {"goal": 2}}') == {"features": ["a"], "terms": {"goal": 2}}


def test_priors_steer_draws_and_required_pieces_stay():
    from limen_jax.catalog import Catalog, Feature, Term

    feats = (Feature("req", "f_req = state"), Feature("likely", "f_likely = state", prior=50.0),
             *(Feature(f"x{i}", f"f_x{i} = state", prior=0.5) for i in range(8)))
    terms = (Term("goal", "t_goal = 1.0"), Term("dense", "t_dense = 1.0"), Term("extra", "t_extra = 1.0"))
    cat = Catalog("", feats, terms, required_features=("req",), required_terms=("goal",), dense_terms=("dense",),
                  seed_features=(1, 1), seed_terms=(0, 0))
    mut = OfflineAuthor(cat)
    rng = np.random.default_rng(0)
    firsts = [mut.random_genome(rng) for _ in range(100)]
    assert all(g["features"][0] == "req" and g["terms"] == {"goal": 1.0, "dense": 1.0} for g in firsts)
    assert sum("likely" in g["features"] for g in firsts) >= 80  # odds 50 : 4
    # removal goes by 1 / prior: the promising feature survives, "req" and the last dense term always do
    parent = {"features": ["req", "likely", "x0", "x1"], "terms": {"goal": 1.0, "dense": 1.0}}
    for _ in range(100):
        child, ops = mut.mutate(parent, rng)
        assert "req" in child["features"] and {"goal", "dense"} <= set(child["terms"])
        if "remove_feature:likely" in ops:
            raise AssertionError("removed the 50x feature before the 0.5x ones")


def test_a_genome_of_more_terms_than_a_reward_may_name_renders_their_sum(easy, monkeypatch):
    import limen_jax.llm.offline as offline

    monkeypatch.setattr(offline, "MAX_REWARD_TERMS", 3)  # the bundled catalogs of go1 and Cartpole hold more than 8
    cat = easy.offline_catalog()
    names = [t.name for t in cat.terms][:4]
    code = render(cat, {"features": ["agent_pos"], "terms": dict.fromkeys(names, 1.0)})
    assert f"    return jnp.asarray(1 * t_{names[0]} + 1 * t_{names[1]}" in code and "return {" not in code
    assert "    return {" in render(cat, {"features": ["agent_pos"], "terms": dict.fromkeys(names[:3], 1.0)})
