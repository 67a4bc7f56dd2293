"""PPO's minibatch shuffle: a uniformly random permutation for any batch size."""

import collections

import jax
import numpy as np
import pytest

from limen_jax.rl.ppo import shuffle

jitted = jax.jit(shuffle, static_argnums=1)


@pytest.mark.parametrize("n", [1, 2, 5, 1000, 4096, 5000, 163_840])
def test_every_index_comes_out_exactly_once(n):
    perm = np.asarray(jitted(jax.random.key(3), n))
    assert perm.dtype == np.int32
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))


def test_all_orders_of_four_are_equally_likely():
    draws = np.asarray(jax.jit(jax.vmap(lambda k: shuffle(k, 4)))(jax.random.split(jax.random.key(0), 24_000)))
    counts = collections.Counter(map(tuple, draws.tolist()))
    assert len(counts) == 24
    # each order has probability 1/24: 1000 expected, standard deviation ~31
    assert all(850 < c < 1150 for c in counts.values()), counts


def test_where_an_index_lands_is_uniform_when_keys_are_few_bits():
    # n = 2**18 packs 18 index bits beside 14 random ones: 4 rounds must still mix well
    n, draws = 1 << 18, 40
    where = np.stack([np.argsort(np.asarray(jitted(jax.random.key(s), n)))[:8] for s in range(draws)])
    # the first 8 indices land in each quarter of the range ~80 times of 320
    quarters = np.bincount((where // (n // 4)).ravel(), minlength=4)
    assert quarters.min() > 50, quarters
    # and different keys give different permutations
    assert len({tuple(w) for w in where.tolist()}) == draws
