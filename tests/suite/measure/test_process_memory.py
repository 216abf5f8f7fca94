"""A process's peak resident memory over a stretch of work: what the work holds at its highest, and not what
earlier work freed."""

import numpy as np
import pytest

from suite.measure.process_memory import PeakMemory, resident_bytes

MB = 1 << 20


def test_the_peak_counts_what_the_work_held_at_its_highest():
    with PeakMemory() as peak:
        held = np.ones(200 * MB // 8)  # 200 MB, touched
        del held
        small = np.ones(10 * MB // 8)
    assert 195 * MB <= peak.added_bytes <= 260 * MB
    assert peak.peak_bytes >= peak.start_bytes + peak.added_bytes - MB
    assert small.sum() > 0


def test_memory_freed_before_the_work_does_not_count_in_it():
    pieces = [np.ones(64 * 1024 // 8) for _ in range(3000)]  # 190 MB of blocks on the allocator's heap
    loaded = resident_bytes()
    kept = pieces[::16]  # the heap stays in use above the freed blocks: the allocator would keep them resident
    del pieces
    with PeakMemory() as peak:
        pass
    assert peak.start_bytes < loaded - 150 * MB
    assert peak.added_bytes < 20 * MB
    assert len(kept) == 188


@pytest.mark.parametrize("size_mb", [50, 120])
def test_added_bytes_grow_with_the_work(size_mb):
    with PeakMemory() as peak:
        block = np.ones(size_mb * MB // 8)
        block[::512] += 1
    assert (size_mb - 5) * MB <= peak.added_bytes <= (size_mb + 40) * MB
