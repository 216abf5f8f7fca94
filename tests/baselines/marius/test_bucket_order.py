"""Edge-bucket orderings (Marius §4): every bucket exactly once while its partitions are buffered, swaps counted,
BETA near the lower bound and below Hilbert."""

from __future__ import annotations

import itertools

import pytest

from baselines.marius.bucket_order import ORDERS, beta_order, bucket_order, swap_lower_bound

SETTINGS = [(p, c) for p in range(3, 17) for c in range(2, p)]


@pytest.mark.parametrize("name", ORDERS)
@pytest.mark.parametrize("p, c", SETTINGS)
def test_every_bucket_is_processed_once_while_both_its_partitions_are_in_the_buffer(name, p, c):
    order = bucket_order(name, p, c)
    assert len(order.states) == len(order.buckets)
    seen = [bucket for buckets in order.buckets for bucket in buckets]
    assert sorted(seen) == [(i, j) for i in range(p) for j in range(p)]
    for state, buckets in zip(order.states, order.buckets):
        assert len(state) == len(set(state)) == c and all(0 <= x < p for x in state)
        assert all(i in state and j in state for i, j in buckets)
    assert order.swaps >= swap_lower_bound(p, c)


@pytest.mark.parametrize("p, c", SETTINGS)
def test_beta_swaps_one_partition_at_a_time_and_never_more_than_hilbert(p, c):
    beta = beta_order(p, c)
    assert all(len(set(b) - set(a)) == 1 for a, b in zip(beta.states, beta.states[1:]))
    assert beta.swaps == len(beta.states) - 1
    assert beta.swaps <= bucket_order("hilbert", p, c).swaps


def test_the_seeds_example_p6_c3_and_its_bound():
    """Marius's example: 6 partitions, a buffer of 3; the bound is ceil((15 - 3) / 2) = 6."""
    order = beta_order(6, 3)
    assert swap_lower_bound(6, 3) == 6
    assert order.states[:4] == [(0, 1, 2), (0, 1, 3), (0, 1, 4), (0, 1, 5)]
    assert order.swaps == 7


def test_with_a_buffer_of_two_beta_meets_the_bound():
    """c = 2: every swap brings one new pair, so p (p - 1) / 2 - 1 swaps are needed and BETA makes exactly that."""
    for p in range(3, 17):
        assert beta_order(p, 2).swaps == swap_lower_bound(p, 2) == p * (p - 1) // 2 - 1


@pytest.mark.parametrize("p, c", [(4, 1), (4, 4), (3, 5)])
def test_a_buffer_that_cannot_work_is_refused(p, c):
    for name in ORDERS:
        with pytest.raises(ValueError, match="2 <= c < p"):
            bucket_order(name, p, c)
    with pytest.raises(ValueError, match="ordering must be one of"):
        bucket_order("zigzag", 6, 3)


def test_hilbert_visits_neighbouring_buckets_one_after_another():
    from baselines.marius.bucket_order import curve_sequence

    sequence = curve_sequence("hilbert", 8)
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in itertools.pairwise(sequence))
