"""``tierbench sar``: full-batch GraphSAGE on several gloo workers, vanilla domain parallelism against SAR
(SAR)."""

from __future__ import annotations

import argparse

from suite.cli import options
from suite.cli.model_size import check_model_fits
from suite.cli.output import show


def _cmd_sar(args) -> int:
    import torch

    from suite.datasets.presets import get_preset
    from suite.experiments import sar
    from suite.figures.sar import render
    from suite.training import distributed

    options = dict(epochs=args.epochs, hidden=args.hidden, layers=args.layers, lr=args.lr, seed=args.seed)
    out = args.out or f"out/sar/{args.dataset}"
    runs = args.runs or f"{out}/runs"
    if distributed.launched_by_torchrun():  # the command that launched it checked the settings
        sar.run_workers(args.dataset, runs, args.aggregation, timeout_s=args.timeout, **options)
        return 0
    check_model_fits(get_preset(args.dataset), args.layers, args.hidden, torch.device("cpu"))  # each worker's copy

    def argv_of(workers: int, aggregation: str, runs_dir) -> list[str]:
        spelled = [f"--{key} {value}" for key, value in options.items()]
        return ["sar", "--dataset", args.dataset, "--workers", str(workers), "--aggregation", aggregation,
                *" ".join(spelled).split(), "--runs", str(runs_dir), "--timeout", str(args.timeout), "-q"]

    show(render(sar.measure(args.dataset, out, workers=args.workers, runs_dir=runs, minibatch=not args.no_minibatch,
                            rerun=args.rerun, progress=not args.quiet, argv_of=argv_of, **options), out))
    return 0


def add_parsers(sub) -> None:
    """``sar``."""
    sar = sub.add_parser("sar", help="full-batch GraphSAGE on W gloo workers (torchrun), vanilla domain parallelism "
                         "against SAR: peak memory per worker, epoch time, accuracy (SAR Figure 1)",
                         parents=[options.dataset(real_ogb=False), options.quiet()])
    sar.add_argument("--workers", type=options.positive_int, nargs="+", default=[1, 2, 4],
                     help="worker counts, each a run")
    sar.add_argument("--epochs", type=options.positive_int, default=3, help="full-batch epochs per aggregation")
    sar.add_argument("--hidden", type=options.positive_int, default=256, help="GraphSAGE hidden width")
    sar.add_argument("--layers", type=options.positive_int, default=3, help="GraphSAGE layers")
    sar.add_argument("--lr", type=options.positive_float, default=0.01, help="Adam's learning rate")
    sar.add_argument("--seed", type=options.seed, default=0, help="seed of the METIS partition and the model")
    sar.add_argument("--timeout", type=options.positive_int, default=600, help="seconds a worker waits for the others "
                     "before it fails")
    sar.add_argument("--no-minibatch", action="store_true", help="skip the minibatch training beside it")
    sar.add_argument("--rerun", action="store_true", help="run again the worker counts already recorded with these "
                     "settings in --runs (which are otherwise reused)")
    sar.add_argument("--aggregation", choices=["vanilla", "sar"], default="sar", help=argparse.SUPPRESS)  # a worker's
    sar.add_argument("--out", help="output directory (default out/sar/<dataset>)")
    sar.add_argument("--runs", help="directory of each worker count's records (default <out>/runs)")
    sar.set_defaults(func=_cmd_sar)
