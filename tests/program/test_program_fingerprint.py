"""The behavioural fingerprint: equal for programs that differ only in how they are written,
different for programs that compute something else, at the stated precision; the
near-duplicate measures; and the JSON that crosses from the worker."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from limen_jax.interface import mix
from limen_jax.program import Limits, check_sample, compile_many
from limen_jax.program.fingerprint import (
    BITS,
    Fingerprint,
    column_digest,
    fingerprint,
    quantise,
    reward_rank_correlation,
    shared_features,
    similarity,
)
from limen_jax.task import Task

BASE = '''import jax.numpy as jnp

SCALE = 0.5


def get_observation(state):
    p = state.agent.position.astype(jnp.float32)
    d = state.agent.direction.astype(jnp.float32)
    mix = p[0] / 3.0 + p[1] / 7.0 + d / 11.0
    return jnp.stack([mix, p[0] * SCALE, d / 3.0]).astype(jnp.float32)


def compute_reward(state, action, next_state):
    p = next_state.agent.position.astype(jnp.float32)
    turned = (next_state.agent.direction != state.agent.direction).astype(jnp.float32)
    return (p[0] / 3.0 + p[1] / 7.0 + 0.1 * turned - 0.01).astype(jnp.float32)
'''

# The same behaviour, written otherwise: names, comments, constant spellings, definitions
# and independent statements reordered, additions regrouped, the reward split into terms.
COSMETIC = {
    "renamed_and_commented": '''import jax.numpy as jnp

HALF = .5  # the position scale


def compute_reward(s, a, s2):
    # direction change, then position
    spun = (s2.agent.direction != s.agent.direction).astype(jnp.float32)
    where = s2.agent.position.astype(jnp.float32)
    return (where[0] / 3.0 + where[1] / 7.0 + 0.1 * spun - 0.01).astype(jnp.float32)


def get_observation(s):
    heading = s.agent.direction.astype(jnp.float32)
    at = s.agent.position.astype(jnp.float32)
    blend = at[0] / 3.0 + at[1] / 7.0 + heading / 11.0
    return jnp.stack([blend, at[0] * HALF, heading / 3.0]).astype(jnp.float32)
''',
    "constant_one_half": BASE.replace("SCALE = 0.5", "SCALE = 1 / 2"),
    "constant_inline": BASE.replace("p[0] * SCALE", "p[0] * 5e-1"),
    # 0.1 and 0.1000000000001 are the same float32
    "constant_same_float32": BASE.replace("0.1 * turned", "0.1000000000001 * turned"),
    "regrouped_sums": BASE.replace("p[0] / 3.0 + p[1] / 7.0 + d / 11.0", "p[0] / 3.0 + (p[1] / 7.0 + d / 11.0)")
    .replace("(p[0] / 3.0 + p[1] / 7.0 + 0.1 * turned - 0.01)", "(p[0] / 3.0 + (p[1] / 7.0 + (0.1 * turned - 0.01)))"),
    "dict_reward": BASE.replace(
        "    return (p[0] / 3.0 + p[1] / 7.0 + 0.1 * turned - 0.01).astype(jnp.float32)",
        "    return {'position': (p[0] / 3.0 + p[1] / 7.0).astype(jnp.float32),\n"
        "            'turn': (0.1 * turned - 0.01).astype(jnp.float32)}",
    ),
}

# Other behaviour: what must fingerprint apart.
CHANGED = {
    "constant": BASE.replace("SCALE = 0.5", "SCALE = 0.5005"),  # 1e-3 relative
    "reward_constant": BASE.replace("0.1 * turned", "0.5 * turned"),
    "observation_order": BASE.replace("[mix, p[0] * SCALE, d / 3.0]", "[p[0] * SCALE, mix, d / 3.0]"),
    "bfloat16": BASE.replace("mix = p[0] / 3.0", "mix = (p[0] / 3.0).astype(jnp.bfloat16).astype(jnp.float32)"),
}


@pytest.fixture(scope="module")
def checked(easy_task: Task):
    names = ["base", *COSMETIC, *CHANGED]
    sources = [BASE, *COSMETIC.values(), *CHANGED.values()]
    results = compile_many(sources, easy_task, names=names, workers=2)
    ifaces = dict(zip(names, results))
    bad = {n: r for n, r in ifaces.items() if not hasattr(r, "fingerprint")}
    assert not bad, {n: r.feedback() for n, r in bad.items()}
    return ifaces


def test_cosmetic_variants_share_the_fingerprint(checked) -> None:
    base = checked["base"].fingerprint
    assert base.mode == "full" and len(base.obs_columns) == 3 and len(base.reward) == 112  # 64 + 32 + 16
    for name in COSMETIC:
        assert checked[name].fingerprint.digest == base.digest, name
        assert similarity(checked[name].fingerprint, base)["same"] is True


def test_regrouped_sums_differ_in_the_last_bits_yet_match(checked, easy_task: Task) -> None:
    """The boundary's easy side: float32 outputs that differ in their last bits."""
    s = check_sample(easy_task, Limits())
    a, b = checked["base"], checked["regrouped_sums"]
    obs_a, obs_b = (np.asarray(jax.vmap(i.observe)(s.sim)) for i in (a, b))
    rew_a, rew_b = (np.asarray(jax.vmap(i.reward)(s.sim, s.action, s.next_sim)) for i in (a, b))
    assert (obs_a != obs_b).any() and (rew_a != rew_b).any()
    np.testing.assert_allclose(obs_a, obs_b, rtol=1e-6)
    assert a.fingerprint.digest == b.fingerprint.digest


def test_other_behaviour_fingerprints_apart(checked) -> None:
    digests = {name: checked[name].fingerprint.digest for name in ["base", *CHANGED]}
    assert len(set(digests.values())) == len(digests), digests


def test_near_duplicate_measures_on_checked_programs(checked) -> None:
    base = checked["base"].fingerprint
    reordered = similarity(checked["observation_order"].fingerprint, base)
    assert reordered == {"same": False, "observation_permuted": True, "shared_features": 1.0,
                         "reward_rank_correlation": 1.0}  # fmt: skip
    # one feature of three recomputed in bfloat16: the others still match
    bf16 = similarity(checked["bfloat16"].fingerprint, base)
    assert bf16["observation_permuted"] is False and bf16["shared_features"] == pytest.approx(2 / 3)
    assert bf16["reward_rank_correlation"] == 1.0
    # a bigger turn bonus reorders some transitions, not most
    rho = similarity(checked["reward_constant"].fingerprint, base)["reward_rank_correlation"]
    assert 0.9 < rho < 1.0


def test_a_mode_is_part_of_the_fingerprint(easy_task: Task, checked) -> None:
    (obs_only,) = compile_many([BASE], easy_task, mode="obs_only", workers=1)
    (reward_only,) = compile_many([BASE], easy_task, mode="reward_only", workers=1)
    base = checked["base"].fingerprint
    assert obs_only.fingerprint.mode == "obs_only" and obs_only.fingerprint.reward == ()
    assert obs_only.fingerprint.obs_columns == base.obs_columns and obs_only.fingerprint.digest != base.digest
    assert reward_only.fingerprint.obs_columns == () and reward_only.fingerprint.reward == base.reward
    # an ablation of a full interface is not the program the checker fingerprinted
    assert mix(easy_task, checked["base"], "obs_only").fingerprint is None


# --- the precision, on exact inputs ------------------------------------------------------


def test_quantise_scales_each_column_by_its_largest_power_of_two() -> None:
    # largest |x| 3.0 < 2**2: step 2**(2 - BITS)
    exponent, grid = quantise(np.array([3.0, -1.5, 0.0, 2.0 ** (2 - BITS) * 10.4], np.float32))
    assert exponent == 2 and grid.tolist() == [3 * 2 ** (BITS - 2), -3 * 2 ** (BITS - 3), 0, 10]
    assert quantise(np.zeros(3, np.float32))[1].tolist() == [0, 0, 0]
    assert quantise(np.array([-0.0, 0.25], np.float32))[1].tolist() == [0, 2**BITS // 2]


def test_a_few_ulps_match_and_a_grid_step_does_not() -> None:
    x = np.array([0.3, 0.71, -0.55, 0.9], np.float32)  # mid-cell values: away from grid boundaries
    ulps = np.nextafter(np.nextafter(x, np.float32(2)), np.float32(2))  # two ulps up
    assert (ulps != x).all() and column_digest(ulps) == column_digest(x)
    step = x.copy()
    step[2] += np.float32(2.0 ** (0 - BITS) * 1.01)  # one grid step in one value (scale 2**0)
    assert column_digest(step) != column_digest(x)
    assert column_digest(2 * x) != column_digest(x)  # same grid values, another scale


def test_the_digest_covers_shape_order_and_the_reward_total_not_its_terms() -> None:
    obs = np.array([[0.5, 1.0], [0.25, 2.0], [0.0, 3.0]], np.float32)
    reward = np.array([1.0, -0.5, 0.25], np.float32)
    fp = fingerprint("full", obs, reward)
    assert fingerprint("full", obs, reward).digest == fp.digest and len(fp.digest) == 32
    assert fingerprint("full", obs[:, ::-1], reward).digest != fp.digest
    assert fingerprint("full", obs[:, :1], reward).digest != fp.digest
    assert fingerprint("obs_only", obs, None).digest != fp.digest
    terms = np.stack([reward - 0.25, np.full(3, 0.25, np.float32)], axis=1)
    split = fingerprint("full", obs, terms)
    assert split.digest == fp.digest and split.reward == (1.0, -0.5, 0.25)


# --- near duplicates and JSON, on exact inputs -------------------------------------------


def test_rank_correlation_and_shared_features_by_hand() -> None:
    def fp(columns=(), reward=()):
        return Fingerprint("0" * 32, "full", tuple(columns), tuple(reward))

    # ranks (1, 2, 3, 4) and (1, 3, 2, 4): rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert reward_rank_correlation(fp(reward=[0.1, 0.2, 0.3, 0.4]), fp(reward=[1, 5, 2, 9])) == pytest.approx(0.8)
    assert reward_rank_correlation(fp(reward=[1, 2, 3]), fp(reward=[30, 20, 10])) == pytest.approx(-1.0)
    # ties take their mean rank: (1.5, 1.5, 3) against (1, 2, 3): rho = 1.5 / sqrt(1.5 * 2) = sqrt(3) / 2
    assert reward_rank_correlation(fp(reward=[0, 0, 1]), fp(reward=[1, 2, 3])) == pytest.approx(3**0.5 / 2)
    assert reward_rank_correlation(fp(reward=[1, 1]), fp(reward=[1, 2])) is None  # constant
    assert reward_rank_correlation(fp(), fp(reward=[1, 2])) is None
    a, b = "a" * 16, "b" * 16
    assert shared_features(fp([a, b, b]), fp([b, a, b])) == 1.0
    assert shared_features(fp([a, b, b]), fp([b, a])) == pytest.approx(2 / 3)
    assert shared_features(fp([a]), fp()) is None
    assert similarity(fp([a, b]), fp([b, a, a]))["observation_permuted"] is False


def test_fingerprint_json_round_trips_and_refuses_malformed_data() -> None:
    fp = fingerprint("reward_only", None, np.array([0.5, -1.0], np.float32))
    assert Fingerprint.from_json(fp.to_json()) == fp
    good = fp.to_json()
    for bad in (None, [], {**good, "extra": 1}, {**good, "digest": "xyz"}, {**good, "mode": "sparse"},
                {**good, "obs_columns": ["zz"]}, {**good, "reward": [float("nan")]}, {**good, "reward": ["1"]},
                {**good, "reward": [True]}):  # fmt: skip
        with pytest.raises(ValueError):
            Fingerprint.from_json(bad)
