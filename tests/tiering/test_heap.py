"""The indexed max-heap of cached rows (``tiering.heap``): what ``offer`` admits, and which row it evicts."""

import numpy as np

from tiering.heap import offer


def test_offer_fills_free_slots_then_evicts_the_top_row_for_a_sooner_key_and_says_which():
    rows, capacity = 6, 2
    heap, where, key = np.empty(capacity, np.int64), np.full(rows, -1, np.int64), np.zeros(rows, np.int64)
    size, admitted, evicted = offer(heap, key, where, 0, capacity, 3, 10)
    assert (size, admitted, evicted) == (1, True, -1)
    size, admitted, evicted = offer(heap, key, where, size, capacity, 1, 20)
    assert (size, admitted, evicted) == (2, True, -1)
    assert offer(heap, key, where, size, capacity, 4, 20) == (2, False, -1)  # not strictly sooner than row 1's 20
    size, admitted, evicted = offer(heap, key, where, size, capacity, 5, 5)
    assert (size, admitted, evicted) == (2, True, 1)  # row 1, next used last, made way
    assert where[1] == -1 and where[5] >= 0 and where[3] >= 0 and heap[0] == 3
    assert offer(np.empty(1, np.int64), key, np.full(rows, -1, np.int64), 0, 0, 2, 1) == (0, False, -1)
