"""``tierbench disk``, ``tierbench bucket-orders`` and ``tierbench bucket-train``: features read from disk, by the
disk-backed loaders and through Marius's partition buffer (Marius §4)."""

from __future__ import annotations

from suite.cli import options
from suite.cli.options import DEFAULT_HOT_FRACTION
from suite.cli.output import show


def _cmd_disk(args) -> int:
    from suite.experiments.disk import measure
    from suite.figures.disk import render

    out = args.out or f"out/disk/{args.dataset}"
    show(render(measure(args.dataset, out, hot_fraction=args.hot_fraction, in_flight=args.in_flight,
                        batches=args.batches, progress=not args.quiet), out))
    return 0


def _cmd_bucket_orders(args) -> int:
    from suite.experiments.bucket_orders import measure
    from suite.figures.bucket_orders import render

    show(render(measure(args.out), args.out))
    return 0


def _cmd_bucket_train(args) -> int:
    from suite.experiments.bucket_training import measure
    from suite.figures.bucket_training import render

    out = args.out or f"out/marius/{args.dataset}"
    show(render(measure(args.dataset, out, partitions=args.partitions, capacity=args.capacity,
                        edge_fractions=args.edge_fraction, prefetches=args.prefetch, repeats=args.repeats,
                        warmup=args.warmup,
                        seed=args.seed, progress=not args.quiet), out))
    return 0


def add_parsers(sub) -> None:
    """``disk``, ``bucket-orders`` and ``bucket-train``."""
    disk = sub.add_parser("disk", help="the disk-backed loaders (mmap, disk-tiered) on the gathers of a traced epoch's "
                          "minibatches, cold and warm, against the disk's sequential and random-read ceilings",
                          parents=[options.dataset(real_ogb=False), options.quiet()])
    disk.add_argument("--hot-fraction", type=options.fraction, default=DEFAULT_HOT_FRACTION,
                      help="disk-tiered's top tier")
    disk.add_argument("--in-flight", type=options.positive_int, default=32, help="disk reads outstanding at a time")
    disk.add_argument("--batches", type=options.positive_int, default=50,
                      help="minibatches of the traced epoch to measure")
    disk.add_argument("--out", help="output directory (default out/disk/<dataset>)")
    disk.set_defaults(func=_cmd_disk)

    orders = sub.add_parser("bucket-orders", help="partition swaps per epoch of the BETA, Hilbert and row-major "
                            "edge-bucket orderings against the lower bound (Marius)")
    orders.add_argument("--out", default="out/marius", help="output directory")
    orders.set_defaults(func=_cmd_bucket_orders)

    buckets = sub.add_parser("bucket-train", help="epochs of link prediction through Marius's partition buffer, "
                             "per edge-bucket ordering, with and without prefetching (Marius)",
                             parents=[options.dataset(real_ogb=False), options.quiet()])
    buckets.add_argument("--partitions", type=options.positive_int, default=16,
                         help="p: partitions of the feature table")
    buckets.add_argument("--capacity", type=options.positive_int, default=4, help="c: partitions in the host buffer")
    buckets.add_argument("--edge-fraction", type=options.edge_share, nargs="+", default=[0.002, 0.02],
                         help="shares of the edges one epoch trains, each a setting of its own")
    buckets.add_argument("--prefetch", type=options.count, nargs="+", default=[0, 1],
                         help="partitions read ahead (0: synchronous swaps)")
    buckets.add_argument("--repeats", type=options.positive_int, default=2, help="timed epochs per setting, "
                         "alternating (the table shows their median and range)")
    buckets.add_argument("--warmup", type=options.count, default=1, help="untimed epochs per setting before them")
    buckets.add_argument("--seed", type=options.seed, default=0,
                         help="seed of the edges drawn, the model and the negatives")
    buckets.add_argument("--out", help="output directory (default out/marius/<dataset>)")
    buckets.set_defaults(func=_cmd_bucket_train)
