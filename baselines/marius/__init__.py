"""Marius's disk tier (Marius §4): edge-bucket orderings and the partition buffer they drive.

* ``bucket_order``: BETA against Hilbert and row-major orderings of the
  p x p edge buckets, with the lower bound on partition swaps;
* ``partition_buffer``: c partitions of an on-disk feature table in host
  memory, swapped in an ordering's sequence, the next read in the background.
"""

from baselines.marius.bucket_order import ORDERS, BucketOrder, bucket_order, swap_lower_bound
from baselines.marius.partition_buffer import PartitionBuffer, PartitionNotBuffered

__all__ = ["ORDERS", "BucketOrder", "bucket_order", "swap_lower_bound", "PartitionBuffer", "PartitionNotBuffered"]
