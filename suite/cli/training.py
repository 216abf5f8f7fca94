"""``tierbench train`` and ``tierbench profile``: GraphSAGE training timed per stage, and the feature reuse of its
sampled minibatches (paper Figures 7 and 9)."""

from __future__ import annotations

import sys
from pathlib import Path

from suite.cli import options
from suite.cli.model_size import check_model_fits
from suite.cli.options import DEFAULT_HOT_FRACTION, DEFAULT_SCORER
from suite.cli.output import show


def _plan_paper_scale(cell, hidden: int, device) -> None:
    """For a paper-scale preset (``gpu_built``): the run's memory plan, shown and checked before the dataset is
    opened (``suite.datasets.memory_plan``)."""
    from suite.datasets.cache import cache_root
    from suite.datasets.memory_plan import check, render, this_machine
    from suite.sweep.cells import is_paper_scale, run_needs_of

    if not is_paper_scale(cell.dataset):
        return
    needs = run_needs_of(cell, hidden)
    machine = this_machine(cache_root())
    print(render(f"{cell.dataset} with loader {cell.loader}, {cell.sampling} sampling: what the run needs", needs,
                 machine))
    check(cell.dataset, needs, machine, needs_gpu=device.type == "cuda")


def _cmd_train(args) -> int:
    import torch

    from suite.datasets import regime as regimes
    from suite.datasets.regime import default_fanouts
    from suite.figures.training import write_training_report
    from suite.sweep.cells import Cell, check_batch_limit
    from suite.sweep.run import cell_variant, open_dataset, train_cell
    from suite.sweep.sampler_choice import sampler_kernels
    from suite.training.sampling import check_device, check_kernels, describe_sampling, launched_kernels
    from suite.training.trainer import majority_accuracy

    hot_fraction = options.loader_hot_fraction(args.loader, args.hot_fraction)
    check_batch_limit(args.minibatches)
    device = torch.device(args.device)  # checked by main
    args.scorer = options.loader_scorer(args.loader, args.scorer)
    fanouts = tuple(args.fanout or default_fanouts(args.dataset))
    batch_size, regime = regimes.resolve(args.dataset, args.regime, args.batch_size)
    cell = Cell(args.dataset, args.loader, hot_fraction, fanouts, args.scorer or "none", args.sampling,
                batch_size=batch_size, regime=regime)
    check_device(args.sampling, device)
    choice = sampler_kernels(args.sampler_kernels, [args.sampling], device)
    args.sampler_kernels = choice.kernels
    check_kernels(args.sampling, args.sampler_kernels, device)
    kernels = launched_kernels(args.sampling, args.sampler_kernels)
    if choice.line([args.sampling]):
        print(choice.line([args.sampling]))
    sampled_by = {"sampling": args.sampling, **({"sampler_kernels": kernels} if kernels else {})}
    _plan_paper_scale(cell, args.hidden, device)
    try:
        dataset = open_dataset(cell, args.ogb_root, progress=not args.quiet)
    except KeyboardInterrupt:  # a cache entry being built is removed on the way out (suite.datasets.cache)
        print(f"tierbench: interrupted: opening {args.dataset} before training; no epoch ran, nothing written",
              file=sys.stderr)
        return 130
    check_model_fits(dataset, len(fanouts), args.hidden, device)
    majority = majority_accuracy(dataset)
    print(
        f"{dataset}\nloader {args.loader} (hot fraction {hot_fraction}), {describe_sampling(args.sampling, kernels)}, fanouts {fanouts}, "
        f"{regimes.describe(args.dataset, batch_size, regime)}, device {device}; majority-class valid accuracy "
        f"{majority:.3f}"
    )

    finished = []

    def report(r) -> None:
        finished.append(r)
        print(
            f"epoch {r.epoch}: {r.batches} of {r.epoch_batches} minibatches  loss {r.loss:.3f}  "
            f"valid acc {'-' if r.valid_accuracy is None else format(r.valid_accuracy, '.3f')}  "
            f"sample {r.sample_s:.2f}s gather {r.gather_s:.2f}s train {r.train_s:.2f}s  epoch {r.epoch_s:.2f}s  "
            f"hit ratio {r.hit_ratio:.3f}  PCIe model {r.pcie_payload_bytes / 1e6:.1f} MB"
        )

    settings = {"dataset": args.dataset, "scorer": args.scorer or "none", "fanouts": ",".join(map(str, fanouts)),
                "batch_size": batch_size, "regime": regime, **sampled_by, "loader": args.loader,
                "hot_fraction": hot_fraction, "batch_limit": args.minibatches,
                "majority_valid_accuracy": majority}
    try:
        train_cell(cell, dataset, epochs=args.epochs, device=device, seed=args.seed, pipeline=args.pipeline,
                   progress=not args.quiet, variant=cell_variant(cell, dataset, device), on_epoch=report,
                   batch_limit=args.minibatches, validate=args.validate, sampler_kernels=args.sampler_kernels,
                   model=dict(hidden=args.hidden, dropout=args.dropout, lr=args.lr))
    except KeyboardInterrupt:  # the epochs that finished are kept, as a sweep keeps its finished cells
        kept = "nothing written"
        if args.out and finished:
            paths = write_training_report(finished, settings, args.out, device)
            kept = f"their records are in {' and '.join(map(str, paths))}"
        elif finished:
            kept = "their records are printed above (--out writes them)"
        print(f"tierbench: interrupted: training {args.dataset} after {len(finished)} of {args.epochs} epochs; "
              f"{kept}", file=sys.stderr)
        return 130
    if args.out:
        for path in write_training_report(finished, settings, args.out, device):
            print(f"wrote {path}")
    return 0


def _cmd_profile(args) -> int:
    from suite.experiments.reuse import measure
    from suite.figures import redraw

    out = Path(args.out or f"out/profile/{args.dataset}")
    curves = measure(
        args.dataset, args.figure, out, fanouts=args.fanout, epochs=args.epochs, batch_size=args.batch_size,
        regime=args.regime, seed=args.seed, ogb_root=args.ogb_root, progress=not args.quiet,
    )
    md, csv, png = redraw(str(args.figure), curves, out)
    show([md, csv, curves, png])
    return 0


def add_parsers(sub) -> None:
    """``train`` and ``profile``."""
    sub.add_parser("train", help="train GraphSAGE and time sampling, gathering and training",
                   arguments=_train_arguments).set_defaults(func=_cmd_train)
    sub.add_parser("profile", help="measure feature reuse under sampling (paper Figures 7 and 9)",
                   arguments=_profile_arguments).set_defaults(func=_cmd_profile)


def _train_arguments(train) -> None:
    """``train``'s options, which name the loaders and scorers of the registry."""
    from suite.registry import LOADERS, SCORERS, hot_tier_loaders, reordered_loaders
    from suite.training.sampling import SINGLE_PROCESS

    train.take(options.dataset(), options.sampler_kernels(),
               options.minibatches("neighbours per layer from the seeds out, e.g. 12,12,12 (default: the dataset's)",
                                   "seed of the model and the minibatches"),
               options.ogb_root(), options.quiet(), options.minibatch_limit(), options.validation())
    train.add_argument("--epochs", type=options.positive_int, default=3, help="training epochs")
    train.add_argument("--scorer", choices=list(SCORERS), help="train on the dataset reordered by this scorer "
                       f"(default: {DEFAULT_SCORER} for {', '.join(reordered_loaders())}, which needs a reordered "
                       "dataset; the original order for the other loaders)")
    train.add_argument("--loader", default="in-memory", choices=list(LOADERS), help="how features reach the model "
                       "(README: Feature loaders)")
    train.add_argument("--hot-fraction", type=options.fraction, help="share of rows kept in GPU memory, for the "
                       f"loaders with a hot tier ({', '.join(hot_tier_loaders())}; default {DEFAULT_HOT_FRACTION})")
    train.add_argument("--pipeline", action="store_true", help="overlap sampling, gathering and training")
    train.add_argument("--sampling", default="cpu", choices=SINGLE_PROCESS,
                       help="who samples: cpu (numba), gpu (the fused GPU sampler, the graph in GPU memory) or uva "
                       "(the same, the graph in pinned host memory); gpu and uva need --device cuda")
    train.add_argument("--hidden", type=options.positive_int, default=256, help="GraphSAGE hidden width")
    train.add_argument("--dropout", type=options.probability, default=0.5, help="dropout probability, in [0, 1)")
    train.add_argument("--lr", type=options.positive_float, default=3e-3, help="Adam learning rate")
    train.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    train.add_argument("--out", help="write train-<dataset>.md and .csv into this directory")


def _profile_arguments(profile) -> None:
    """``profile``'s options, with the regimes minibatches are drawn in."""
    profile.take(options.dataset(),
                 options.minibatches("figure 7 only: fanouts (default: the dataset's training fanouts)",
                                     "seed of the minibatches"),
                 options.ogb_root(), options.quiet())
    profile.add_argument("--figure", type=int, required=True, choices=[7, 9], help="7: reuse by scorer; 9: reuse by "
                         "sampling depth")
    profile.add_argument("--epochs", type=options.positive_int, default=1, help="epochs of sampling to count over")
    profile.add_argument("--out", help="output directory (default out/profile/<dataset>)")
