"""A third tier below host memory: feature rows read from disk (data tiering's tiers over Marius's disk, Marius §3-4).

* ``table``: ``DiskTable``, rows of a ``.npy`` file by large sequential
  reads, bypassing the page cache where the filesystem allows;
* ``tiered``: ``DiskTieredLoader``, the hottest rows in GPU memory, the next
  in host memory, the rest read from disk on demand.
"""

from tiering.disk.table import DiskTable
from tiering.disk.tiered import DiskTieredLoader

__all__ = ["DiskTable", "DiskTieredLoader"]
