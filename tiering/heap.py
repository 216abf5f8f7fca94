"""An indexed max-heap of cached rows, ordered by a key per row: the row a cache would evict first is on top.

The lookahead loader (``tiering.features.lookahead``) and the policy lab's
replays of Belady's MIN and of the lookahead cache keep their rows in one.  Rows with equal keys
are ordered by id, the larger on top, so which row is evicted never depends
on the order the heap was built in.  ``where[v]`` is row v's place in the
heap (-1: not in it); every operation is O(log C).
"""

from __future__ import annotations

import numba


@numba.njit(cache=True, nogil=True, inline="always")
def above(key, u, v):
    """Whether row ``u`` is evicted before row ``v``: the later key, or on equal keys the larger id."""
    return key[u] > key[v] or (key[u] == key[v] and u > v)


@numba.njit(cache=True, nogil=True)
def _swap(heap, where, i, j):
    heap[i], heap[j] = heap[j], heap[i]
    where[heap[i]] = i
    where[heap[j]] = j


@numba.njit(cache=True, nogil=True)
def sift_up(heap, key, where, i):
    """Restore the heap after the key of ``heap[i]`` rose."""
    while i > 0 and above(key, heap[i], heap[(i - 1) // 2]):
        _swap(heap, where, i, (i - 1) // 2)
        i = (i - 1) // 2


@numba.njit(cache=True, nogil=True)
def sift_down(heap, key, where, i, size):
    """Restore the first ``size`` entries of the heap after the key of ``heap[i]`` fell."""
    while True:
        top = i
        for child in (2 * i + 1, 2 * i + 2):
            if child < size and above(key, heap[child], heap[top]):
                top = child
        if top == i:
            return
        _swap(heap, where, i, top)
        i = top


@numba.njit(cache=True, nogil=True)
def push(heap, key, where, size, v, k):
    """Add row ``v`` with key ``k`` to a heap of ``size`` rows; the new size."""
    heap[size] = v
    where[v] = size
    key[v] = k
    sift_up(heap, key, where, size)
    return size + 1


@numba.njit(cache=True, nogil=True)
def replace_top(heap, key, where, size, v, k):
    """Evict the top row for row ``v`` with key ``k``."""
    where[heap[0]] = -1
    heap[0] = v
    where[v] = 0
    key[v] = k
    sift_down(heap, key, where, 0, size)


@numba.njit(cache=True, nogil=True)
def offer(heap, key, where, size, capacity, v, k):
    """Admit row ``v`` with key ``k`` into a cache of ``capacity`` rows holding ``size``: into a free slot, else in
    place of the top row if ``k`` is strictly sooner than its key.  ``(new size, whether it was admitted, the row it
    evicted or -1)``."""
    if size < capacity:
        return push(heap, key, where, size, v, k), True, -1
    if size > 0 and k < key[heap[0]]:
        evicted = heap[0]
        replace_top(heap, key, where, size, v, k)
        return size, True, evicted
    return size, False, -1
