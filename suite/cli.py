"""The ``tierbench`` command.

    tierbench datasets list                       presets, their shapes, and whether they are cached
    tierbench datasets generate NAME [NAME ...]   build cache entries (synthetic, or a real ogbn-* with --ogb-root)
    tierbench datasets info NAME [NAME ...]       statistics from the manifests; --out DIR writes a table and a figure
    tierbench datasets cost NAME [NAME ...]       time, peak memory and size of building and preparing, and a projection
    tierbench prepare --dataset NAME --scorer S   score, reorder and cache a dataset (S: see prepare --help)
    tierbench scorers --dataset NAME --out DIR    score concentration and scoring/reordering speed tables
    tierbench train --dataset NAME --epochs K     GraphSAGE training, timed per stage, with validation accuracy
    tierbench profile --dataset NAME --figure 7|9 measured feature reuse by scorer (paper Figures 7 and 9)
    tierbench policies --dataset NAME             every placement policy against Belady's bound and the static optimum
    tierbench plan --dataset NAME --gpu-memory M  the policy and hot fraction to use in M of GPU memory, projected
    tierbench disk --dataset NAME                 disk-backed loaders on traced minibatches, against the disk's ceilings
    tierbench bucket-orders --out DIR             partition swaps of BETA, Hilbert and row-major orderings (seeds/003)
    tierbench bucket-train --dataset NAME         link prediction through the partition buffer, per ordering (seeds/003)
    tierbench sar --dataset NAME                  full-batch training, vanilla domain parallelism against SAR (seeds/002)
    tierbench doctor                              preflight: versions, GPUs, PCIe links, pinning, ceilings -> results/machines
    tierbench gpubench --out DIR                  gather microbenchmarks against same-run peers (needs a GPU)
    tierbench gpu-suite [--dry-run]               a first GPU visit in one resumable command -> results/gpu/<device>
    tierbench run --experiment fig8|fig10|demo    a sweep of training epochs over loaders and hot fractions
    tierbench run --experiment fig11 --gpus G     the same on G processes, one per GPU (torchrun, DDP)
    tierbench report --experiment NAME            tables and figures from a sweep's records (Figures 8, 10, 11)
    tierbench report --figure 7|9 --dataset NAME  redraw Figure 7 or 9 from its CSV

Every subcommand's --help lists its options with their defaults.  A user error ends the command with one line,
"tierbench: error: ...", and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import math
import subprocess
import sys

import pandas as pd
import torch

from suite.datasets import PRESETS, DatasetFileError, entry_path, prepare_dataset
from suite.datasets.build import regenerate_hint
from suite.datasets.cache import describe_root, entry_bytes, is_complete, read_manifest
from suite.datasets.regime import REGIMES
from suite.measure.devices import resolve_device
from suite.registry import (
    DEFAULT_HOST_FRACTION,
    LOADERS,
    SCORERS,
    disk_loaders,
    hot_tier_loaders,
    loader,
    reordered_loaders,
    scorer_params,
)
from suite.training.errors import PeerLost, WorkersFailed

DEFAULT_SCORER = "wrpr"  # weighted reverse PageRank, the scorer seeds/000 §3.1 trains with
DEFAULT_HOT_FRACTION = 0.1


def _human_bytes(n: float) -> str:
    units = ("B", "KB", "MB", "GB", "TB")
    k = 0
    while n >= 1000 and k < len(units) - 1:
        n /= 1000
        k += 1
    return f"{n:.1f} {units[k]}"


def _cmd_list(args) -> int:
    rows = []
    for p in PRESETS.values():
        entry = entry_path(p.name)
        cached = is_complete(entry)
        rows.append(
            {
                "name": p.name,
                "imitates": p.imitates,
                "generator": p.generator,
                "nodes": p.num_nodes,
                "avg degree (drawn)": p.avg_degree,
                "symmetric": p.symmetric,
                "D": p.feature_dim,
                "C": p.num_classes,
                "labelled": f"{p.num_labeled / p.num_nodes:.1%}",
                "size": _human_bytes(entry_bytes(entry)) if cached else f"~{_human_bytes(p.estimated_bytes())} (est.)",
                "cached": cached,
            }
        )
    print(f"dataset cache: {describe_root()}\n")
    print(pd.DataFrame(rows).to_string(index=False))
    print("\nsize: what a cached entry takes on disk, or an estimate (features + CSR) for one not built yet.")
    print("Real OGB datasets: tierbench datasets generate ogbn-NAME --ogb-root DIR (never downloads).")
    return 0


def _cmd_generate(args) -> int:
    print(f"dataset cache: {describe_root()}")
    for name in args.names:
        entry = prepare_dataset(name, ogb_root=args.ogb_root, force=args.force, progress=not args.quiet)
        print(f"{name}: {entry} ({_human_bytes(entry_bytes(entry))})")
    return 0


def _cmd_info(args) -> int:
    from suite.figures.datasets import summarize, write_summary

    manifests = {}
    for name in args.names:
        entry = entry_path(name, args.ogb_root)
        if not is_complete(entry):
            root = f" --ogb-root {args.ogb_root}" if args.ogb_root else ""
            raise ValueError(f"{name} is not in the dataset cache {describe_root()}: build it with "
                             f"`tierbench datasets generate {name}{root}`")
        manifests[name] = read_manifest(entry, regenerate_hint(name, args.ogb_root))
        manifests[name]["path"] = str(entry)
    table = summarize(manifests)
    print(table.to_string())
    if args.out:
        for path in write_summary(manifests, args.out, ogb_root=args.ogb_root):
            print(f"wrote {path}")
    return 0


def _cmd_cost(args) -> int:
    from suite.experiments.build_cost import measure
    from suite.figures.build_cost import render

    print(f"dataset cache: {describe_root()}")
    _show(render(measure(args.names, args.out, one_thread=args.one_thread, progress=not args.quiet), args.out))
    return 0


def _cmd_prepare(args) -> int:
    from suite.datasets.reordered import prepare_reordered

    overrides = {"damping": args.damping, "iterations": args.iterations, "tol": args.tol, "max_iter": args.max_iter}
    applicable = {k: v for k, v in overrides.items() if k in scorer_params(args.scorer)}
    ignored = sorted(k for k, v in overrides.items() if v is not None and k not in applicable)
    if ignored:
        raise ValueError(f"scorer {args.scorer} takes no {', '.join('--' + k.replace('_', '-') for k in ignored)}")
    entry = prepare_reordered(
        args.dataset, args.scorer, applicable, ogb_root=args.ogb_root, force=args.force, progress=not args.quiet
    )
    manifest = read_manifest(entry, "")
    source = manifest["source"]
    print(
        f"{args.dataset} reordered by {args.scorer} {source['params']}: {entry}\n"
        f"  scoring {source['score_seconds']:.2f} s, reordering {source['reorder_seconds']:.2f} s; "
        f"top 10% of nodes hold {manifest['score_mass_top10']:.1%} of the score, top 25% {manifest['score_mass_top25']:.1%}"
    )
    return 0


def _cmd_scorers(args) -> int:
    from suite.experiments.scorers import measure
    from suite.figures.scorers import render

    for path in render(measure(args.dataset, args.out, ogb_root=args.ogb_root, progress=not args.quiet), args.out):
        print(f"wrote {path}")
    return 0


def _fanouts(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"fanouts are comma-separated integers such as 12,12,12, got {text!r}") from None


def _number(text: str, kind):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _checked(kind, within, requirement: str):
    """An option's type: a ``kind`` number for which ``within(value)`` holds, else "<requirement>, got ..."."""

    def parse(text: str):
        value = _number(text, kind)
        if not within(value):
            raise argparse.ArgumentTypeError(f"{requirement}, got {text!r}")
        return value

    return parse


_positive_int = _checked(int, lambda v: v >= 1, "must be at least 1")  # epochs, sizes, repeats
_count = _checked(int, lambda v: v >= 0, "must be at least 0")  # partitions read ahead
_positive_float = _checked(float, lambda v: v > 0, "must be above 0")  # learning rate, sizes in GiB
_fraction = _checked(float, lambda v: 0 <= v <= 1, "must be in [0, 1]")  # a share of rows: hot fractions
_edge_share = _checked(float, lambda v: 0 < v <= 1, "must be above 0 and at most 1")  # a share of the edges
_dropout = _checked(float, lambda v: 0 <= v < 1, "is a probability in [0, 1)")


def _warn(message: str) -> None:
    print(f"tierbench: warning: {message}", file=sys.stderr)


def _loader_hot_fraction(name: str, hot_fraction: float | None) -> float:
    """The share of rows loader ``name`` keeps in GPU memory: ``hot_fraction`` for a loader with a hot tier, else all or
    none of them (``--hot-fraction`` given to such a loader is ignored, with a warning)."""
    spec = loader(name)
    if spec.hot_tier:
        return DEFAULT_HOT_FRACTION if hot_fraction is None else hot_fraction
    if hot_fraction is not None:
        _warn(f"--hot-fraction {hot_fraction} is ignored: loader {name} has no hot tier (it keeps {spec.gpu_share:.0%} "
              f"of the rows in GPU memory); the loaders with one are {', '.join(hot_tier_loaders())}")
    return spec.gpu_share


def _cmd_train(args) -> int:
    from suite.datasets import regime as regimes
    from suite.datasets.regime import default_fanouts
    from suite.figures.training import write_training_report
    from suite.sweep.cells import Cell
    from suite.sweep.run import open_dataset, train_cell
    from suite.training.trainer import majority_accuracy

    hot_fraction = _loader_hot_fraction(args.loader, args.hot_fraction)
    device = torch.device(args.device)  # checked by main
    if args.scorer is None and loader(args.loader).reordered:
        args.scorer = DEFAULT_SCORER
        print(f"loader {args.loader} needs a dataset reordered hottest-first: using --scorer {DEFAULT_SCORER} "
              f"(weighted reverse PageRank; --scorer chooses another)")
    fanouts = tuple(args.fanout or default_fanouts(args.dataset))
    batch_size, regime = regimes.resolve(args.dataset, args.regime, args.batch_size)
    cell = Cell(args.dataset, args.loader, hot_fraction, fanouts, args.scorer or "none", batch_size=batch_size,
                regime=regime)
    dataset = open_dataset(cell, args.ogb_root, progress=not args.quiet)
    majority = majority_accuracy(dataset)
    print(
        f"{dataset}\nloader {args.loader} (hot fraction {hot_fraction}), fanouts {fanouts}, "
        f"{regimes.describe(args.dataset, batch_size, regime)}, device {device}; majority-class valid accuracy "
        f"{majority:.3f}"
    )

    def report(r) -> None:
        print(
            f"epoch {r.epoch}: loss {r.loss:.3f}  valid acc {r.valid_accuracy:.3f}  "
            f"sample {r.sample_s:.2f}s gather {r.gather_s:.2f}s train {r.train_s:.2f}s  epoch {r.epoch_s:.2f}s  "
            f"hit ratio {r.hit_ratio:.3f}  PCIe model {r.pcie_payload_bytes / 1e6:.1f} MB"
        )

    results = train_cell(cell, dataset, epochs=args.epochs, device=device, seed=args.seed, pipeline=args.pipeline,
                         progress=not args.quiet, on_epoch=report,
                         model=dict(hidden=args.hidden, dropout=args.dropout, lr=args.lr))
    if args.out:
        settings = {"dataset": args.dataset, "scorer": args.scorer or "none", "fanouts": ",".join(map(str, fanouts)),
                    "batch_size": batch_size, "regime": regime, "loader": args.loader, "hot_fraction": hot_fraction,
                    "majority_valid_accuracy": majority}
        for path in write_training_report(results, settings, args.out, device):
            print(f"wrote {path}")
    return 0


def _show(paths) -> None:
    """Print a report's table (its first file) and where every file of it went."""
    print(paths[0].read_text())
    for path in paths:
        print(f"wrote {path}")


def _cmd_profile(args) -> int:
    from suite.figures.profile import profile_figure

    out = args.out or f"results/profile/{args.dataset}"
    paths = profile_figure(
        args.dataset, args.figure, out, fanouts=args.fanout, epochs=args.epochs, batch_size=args.batch_size,
        regime=args.regime, seed=args.seed, ogb_root=args.ogb_root, progress=not args.quiet,
    )
    _show(paths)
    return 0


def _cmd_policies(args) -> int:
    from suite.figures.policies import policies_report

    out = args.out or f"results/policies/{args.dataset}"
    paths = policies_report(
        args.dataset, out, epochs=args.epochs, presample_epochs=args.presample_epochs, fanouts=args.fanout,
        batch_size=args.batch_size, regime=args.regime, seed=args.seed, trace_dir=args.trace_dir,
        ogb_root=args.ogb_root, progress=not args.quiet,
    )
    _show(paths)
    return 0


def _cmd_plan(args) -> int:
    from suite.experiments.plan import measure, read_records
    from suite.figures.plan import render

    out = args.out or f"out/plan/{args.dataset}"
    planned = measure(
        args.dataset, args.gpu_memory, out, machine_path=args.machine, epochs=args.epochs, fanouts=args.fanout,
        batch_size=args.batch_size, regime=args.regime, seed=args.seed, trace_dir=args.trace_dir,
        ogb_root=args.ogb_root, progress=not args.quiet,
    )
    _show(render(planned, out))
    print(read_records(planned)[0].facts["recommendation"])
    return 0


def _cmd_disk(args) -> int:
    from suite.experiments.disk import measure
    from suite.figures.disk import render

    out = args.out or f"results/disk/{args.dataset}"
    _show(render(measure(args.dataset, out, hot_fraction=args.hot_fraction, in_flight=args.in_flight,
                         batches=args.batches, progress=not args.quiet), out))
    return 0


def _cmd_bucket_orders(args) -> int:
    from suite.experiments.bucket_orders import measure
    from suite.figures.bucket_orders import render

    _show(render(measure(args.out), args.out))
    return 0


def _cmd_bucket_train(args) -> int:
    from suite.experiments.bucket_training import measure
    from suite.figures.bucket_training import render

    out = args.out or f"results/marius/{args.dataset}"
    _show(render(measure(args.dataset, out, partitions=args.partitions, capacity=args.capacity,
                         edge_fractions=args.edge_fraction, prefetches=args.prefetch, repeats=args.repeats,
                         seed=args.seed, progress=not args.quiet), out))
    return 0


def _cmd_sar(args) -> int:
    from suite.experiments import sar
    from suite.figures.sar import render
    from suite.training import distributed

    options = dict(epochs=args.epochs, hidden=args.hidden, layers=args.layers, lr=args.lr, seed=args.seed)
    out = args.out or f"results/sar/{args.dataset}"
    runs = args.runs or f"{out}/runs"
    if distributed.launched_by_torchrun():
        sar.run_workers(args.dataset, runs, args.aggregation, timeout_s=args.timeout, **options)
        return 0

    def argv_of(workers: int, aggregation: str, runs_dir) -> list[str]:
        spelled = [f"--{key} {value}" for key, value in options.items()]
        return ["sar", "--dataset", args.dataset, "--workers", str(workers), "--aggregation", aggregation,
                *" ".join(spelled).split(), "--runs", str(runs_dir), "--timeout", str(args.timeout), "-q"]

    _show(render(sar.measure(args.dataset, out, workers=args.workers, runs_dir=runs, minibatch=not args.no_minibatch,
                             rerun=args.rerun, progress=not args.quiet, argv_of=argv_of, **options), out))
    return 0


def _cmd_gpubench(args) -> int:
    if torch.device(args.device).type != "cuda":
        raise ValueError(f"gpubench measures a CUDA GPU, not {args.device}: give --device cuda or cuda:N")
    from suite.experiments.gpu import measure, read_records, summary
    from suite.figures.gpu import render
    from suite.sweep.gpu_suite import device_folder, visible_gpu

    out = args.out or device_folder("results/gpu", visible_gpu()) / "microbench"
    measured = measure(out, args.device, table_bytes=int(args.table_gib * 2**30), repeat=args.repeat,
                       progress=not args.quiet)
    paths = render(measured, out)
    print(summary(read_records(measured)[0].table))
    for path in paths:
        print(f"wrote {path}")
    return 0


def _cmd_gpu_suite(args) -> int:
    from suite.sweep.gpu_suite import run_suite

    return run_suite(args.out, dry_run=args.dry_run, rerun=args.rerun, skip=args.skip, max_minutes=args.max_minutes)


def _cmd_doctor(args) -> int:
    from suite.measure.doctor import format_profile, host_tier_bytes_of, run_doctor

    host_tier_bytes = args.host_tier_bytes
    if args.dataset:
        hot_fraction = DEFAULT_HOT_FRACTION if args.hot_fraction is None else args.hot_fraction
        host_tier_bytes = host_tier_bytes_of(args.dataset, hot_fraction)
        print(f"host tier: the cold rows of {args.dataset} at {hot_fraction:.0%} hot, {host_tier_bytes:,} bytes")
    elif args.hot_fraction is not None:
        raise ValueError("--hot-fraction sizes the host tier of a --dataset: give the dataset too")
    profile, path = run_doctor(args.out, host_tier_bytes=host_tier_bytes, measure=not args.no_measure,
                               device=args.device)
    print(format_profile(profile))
    print(f"wrote {path}")
    return 0


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",")]


def _names(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


def _interrupted(sweep, rerun: bool) -> str:
    """The line that ends an interrupted sweep: what its CSV kept, and how to go on."""
    again = "run it again without --rerun" if rerun else "run the same command again"
    return (f"tierbench: interrupted: {len(sweep.recorded())} of {len(sweep.cells)} cells recorded in {sweep.path}; "
            f"{again} to resume (finished cells are skipped)")


def _cmd_run(args) -> int:
    from suite.sweep.run import plan_sweep, prepare_datasets, run_sweep
    from suite.training import distributed
    from tiering.features.multi_gpu import check_shm_dir

    if args.gpus is not None:
        if args.gpus < 1:
            raise ValueError(f"--gpus must be at least 1, got {args.gpus}")
        check_shm_dir(args.shm_dir)  # before any process is launched or dataset prepared
    settings = dict(datasets=args.datasets, loaders=args.loaders, hot_fractions=args.hot_fractions,
                    host_fractions=args.host_fractions,
                    fanouts=[args.fanout] if args.fanout else None, samplings=args.sampling, epochs=args.epochs,
                    warmup=args.warmup, batch_size=args.batch_size, regime=args.regime, scorer=args.scorer,
                    pipeline=args.pipeline,
                    ogb_root=args.ogb_root)
    if args.gpus is not None and not distributed.launched_by_torchrun():
        sweep = plan_sweep(args.experiment, args.runs, **settings, device=args.device, processes=args.gpus)
        try:
            # datasets are generated and reordered here, once, before the processes open them
            prepare_datasets(sweep.cells, args.ogb_root, not args.quiet)
            command = distributed.torchrun_command(args.gpus, args.argv)
            print(f"launching {args.gpus} processes: {' '.join(command[1:])}", flush=True)
            return subprocess.run(command, check=False).returncode
        except KeyboardInterrupt:
            print(_interrupted(sweep, args.rerun), file=sys.stderr)
            return 130
    device = args.device
    if args.gpus is not None:
        device = distributed.init_process_group(args.device)
    reporter = distributed.rank() == 0
    try:
        sweep = plan_sweep(args.experiment, args.runs, **settings, device=device)  # every check, before any cell
        try:
            path, summary = run_sweep(args.experiment, args.runs, **settings, device=device, seed=args.seed,
                                      rerun=args.rerun, progress=not args.quiet, shm_dir=args.shm_dir)
        except KeyboardInterrupt:
            if reporter and args.gpus is None:  # under --gpus, the process that launched the group says it
                print(_interrupted(sweep, args.rerun), file=sys.stderr)
            return 130
    finally:
        if args.gpus is not None:
            distributed.destroy_process_group()
    if reporter:
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print(f"records: {path}")
    return 0


def _cmd_report(args) -> int:
    if args.figure in ("7", "9"):
        from suite.figures.profile import replot_figure

        if not args.dataset:
            raise ValueError("--figure 7 or 9 needs --dataset")
        print(f"wrote {replot_figure(args.out or f'results/profile/{args.dataset}', int(args.figure), args.dataset)}")
        return 0
    from suite.sweep.report import write_report

    if not args.experiment:
        raise ValueError("give --experiment (a sweep's name) or --figure 7|9 with --dataset")
    figure = f"fig{args.figure}" if args.figure else None
    for path in write_report(args.experiment, args.runs, args.out, figure):
        print(f"wrote {path}")
    return 0


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, and each option's default after its help (unless it has none, is a flag, or the help
    already says it)."""

    def _get_help_string(self, action):
        if (action.default is None or isinstance(action.default, bool) or action.default == []
                or "default" in (action.help or "")):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """tierbench's parser and its subcommands': defaults shown in --help, a bad option reported in one line."""

    def __init__(self, *args, formatter_class=_HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def error(self, message):
        self.exit(2, f"tierbench: error: {message} (see {self.prog} --help)\n")


DATASET_HELP = f"a preset ({', '.join(PRESETS)}), or ogbn-* with --ogb-root"
REGIME_HELP = ("the batch's regime (suite/datasets/regime.py): paper, a batch whose footprint (the share of the "
               "graph one minibatch touches) matches the paper's batch on the graph the dataset imitates; unscaled, "
               "the paper's 1024 seeds as they are; --batch-size overrides both")
OGB_ROOT_HELP = "directory holding real OGB datasets (as ogb lays them out; nothing is downloaded)"


def _scorer_param_help(name: str, what: str) -> str:
    """Which scorers take parameter ``name`` and its default in each (from the scorers' defaults)."""
    takers = {scorer: spec.defaults[name] for scorer, spec in SCORERS.items() if name in spec.defaults}
    if len(set(takers.values())) == 1:
        defaults = f"{next(iter(takers.values())):g}"
    else:
        defaults = ", ".join(f"{value:g} for {scorer}" for scorer, value in takers.items())
    return f"{', '.join(takers)}: {what} (default {defaults})"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tierbench", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log what is being done")
    sub = parser.add_subparsers(dest="command", required=True)

    datasets = sub.add_parser("datasets", help="list, generate and inspect datasets")
    dsub = datasets.add_subparsers(dest="action", required=True)
    dsub.add_parser("list", help="the synthetic presets").set_defaults(func=_cmd_list)

    def with_names(p):
        p.add_argument("names", nargs="+", metavar="NAME", help="a preset name, or ogbn-* with --ogb-root")
        p.add_argument("--ogb-root", help="directory holding real OGB datasets (as ogb lays them out)")
        return p

    gen = with_names(dsub.add_parser("generate", help="build cache entries"))
    gen.add_argument("--force", action="store_true", help="rebuild even when a complete entry exists")
    gen.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    gen.set_defaults(func=_cmd_generate)

    info = with_names(dsub.add_parser("info", help="statistics of cached datasets"))
    info.add_argument("--out", help="write summary.md, summary.csv and degree-ccdf.png into this directory")
    info.set_defaults(func=_cmd_info)

    cost = dsub.add_parser("cost", help="build and prepare presets in child processes: time, peak memory, size, "
                           "and a projection")
    cost.add_argument("names", nargs="+", metavar="NAME", help="a preset name (each is rebuilt, as with --force)")
    cost.add_argument("--out", default="results/datasets", help="directory for build-cost.md, .csv and .png")
    cost.add_argument("--one-thread", metavar="NAME", help="also measure NAME with one numba thread, for the "
                      "projection to 16 cores")
    cost.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    cost.set_defaults(func=_cmd_cost)

    prepare = sub.add_parser("prepare", help="score a dataset's nodes, reorder it hottest-first, and cache the result")
    prepare.add_argument("--dataset", required=True, help=DATASET_HELP)
    prepare.add_argument("--scorer", required=True, choices=list(SCORERS), help="how nodes are scored (seeds/000 §3.1): "
                         + ", ".join(f"{name}, {spec.label}" for name, spec in SCORERS.items()))
    prepare.add_argument("--damping", type=float, help=_scorer_param_help("damping", "damping factor"))
    prepare.add_argument("--iterations", type=int, help=_scorer_param_help("iterations", "number of updates"))
    prepare.add_argument("--tol", type=float, help=_scorer_param_help("tol", "L1 change to stop at"))
    prepare.add_argument("--max-iter", type=int, help=_scorer_param_help("max_iter", "most updates"))
    prepare.add_argument("--ogb-root", help=OGB_ROOT_HELP)
    prepare.add_argument("--force", action="store_true", help="rebuild even when the reordered entry exists")
    prepare.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    prepare.set_defaults(func=_cmd_prepare)

    scorers = sub.add_parser("scorers", help="compare the scorers on a dataset: concentration and speed tables")
    scorers.add_argument("--dataset", required=True, help=DATASET_HELP)
    scorers.add_argument("--out", required=True, help="directory for the tables and the figure")
    scorers.add_argument("--ogb-root", help=OGB_ROOT_HELP)
    scorers.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    scorers.set_defaults(func=_cmd_scorers)

    train = sub.add_parser("train", help="train GraphSAGE and time sampling, gathering and training")
    train.add_argument("--dataset", required=True, help=DATASET_HELP)
    train.add_argument("--epochs", type=_positive_int, default=3, help="training epochs")
    train.add_argument("--scorer", choices=list(SCORERS), help="train on the dataset reordered by this scorer "
                       f"(default: {DEFAULT_SCORER} for {', '.join(reordered_loaders())}, which needs a reordered "
                       "dataset; the original order for the other loaders)")
    train.add_argument("--fanout", type=_fanouts, help="neighbours per layer from the seeds out, e.g. 12,12,12 "
                       "(default: the dataset's)")
    train.add_argument("--batch-size", type=_positive_int, help="seed nodes per minibatch (default: --regime's)")
    train.add_argument("--regime", choices=REGIMES, default="paper", help=REGIME_HELP)
    train.add_argument("--loader", default="in-memory", choices=list(LOADERS), help="how features reach the model "
                       "(README: Feature loaders)")
    train.add_argument("--hot-fraction", type=_fraction, help="share of rows kept in GPU memory, for the "
                       f"loaders with a hot tier ({', '.join(hot_tier_loaders())}; default {DEFAULT_HOT_FRACTION})")
    train.add_argument("--pipeline", action="store_true", help="overlap sampling, gathering and training")
    train.add_argument("--hidden", type=_positive_int, default=256, help="GraphSAGE hidden width")
    train.add_argument("--dropout", type=_dropout, default=0.5, help="dropout probability, in [0, 1)")
    train.add_argument("--lr", type=_positive_float, default=3e-3, help="Adam learning rate")
    train.add_argument("--seed", type=int, default=0, help="seed of the model and the minibatches")
    train.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    train.add_argument("--ogb-root", help=OGB_ROOT_HELP)
    train.add_argument("--out", help="write train-<dataset>.md and .csv into this directory")
    train.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    train.set_defaults(func=_cmd_train)

    profile = sub.add_parser("profile", help="measure feature reuse under sampling (paper Figures 7 and 9)")
    profile.add_argument("--dataset", required=True, help=DATASET_HELP)
    profile.add_argument("--figure", type=int, required=True, choices=[7, 9], help="7: reuse by scorer; 9: reuse by "
                         "sampling depth")
    profile.add_argument("--fanout", type=_fanouts, help="figure 7 only: fanouts (default: the dataset's training fanouts)")
    profile.add_argument("--epochs", type=_positive_int, default=1, help="epochs of sampling to count over")
    profile.add_argument("--batch-size", type=_positive_int, help="seeds per minibatch (default: --regime's)")
    profile.add_argument("--regime", choices=REGIMES, default="paper", help=REGIME_HELP)
    profile.add_argument("--seed", type=int, default=0, help="seed of the minibatches")
    profile.add_argument("--ogb-root", help=OGB_ROOT_HELP)
    profile.add_argument("--out", help="output directory (default results/profile/<dataset>)")
    profile.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    profile.set_defaults(func=_cmd_profile)

    def with_trace_options(p, epochs_help):
        p.add_argument("--dataset", required=True, help=DATASET_HELP)
        p.add_argument("--epochs", type=_positive_int, default=p.get_default("epochs"), help=epochs_help)
        p.add_argument("--fanout", type=_fanouts, help="fanouts (default: the dataset's training fanouts)")
        p.add_argument("--batch-size", type=_positive_int, help="seeds per minibatch (default: --regime's)")
        p.add_argument("--regime", choices=REGIMES, default="paper", help=REGIME_HELP)
        p.add_argument("--seed", type=int, default=0, help="seed of the traced minibatches")
        p.add_argument("--trace-dir", help="where traces are kept (default: traces/ in the dataset cache)")
        p.add_argument("--ogb-root", help=OGB_ROOT_HELP)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
        return p

    policies = sub.add_parser("policies", help="replay every placement policy against a recorded access trace: "
                              "hit ratio and PCIe bytes against capacity, beside Belady's bound and the static optimum")
    policies.set_defaults(epochs=3)
    with_trace_options(policies, "epochs traced and replayed")
    policies.add_argument("--presample-epochs", type=_positive_int, default=1, help="epochs PreSC pre-samples")
    policies.add_argument("--out", help="output directory (default results/policies/<dataset>)")
    policies.set_defaults(func=_cmd_policies)

    plan = sub.add_parser("plan", help="project data-loading time per policy and hot fraction within a GPU memory "
                          "budget, and recommend one")
    plan.set_defaults(epochs=1)
    with_trace_options(plan, "epochs traced")
    plan.add_argument("--gpu-memory", required=True, help="GPU memory to plan for: 40GB, 24GiB, ...")
    plan.add_argument("--machine", help="a machine profile of `tierbench doctor` (default: the newest GPU one in "
                      "results/machines; none: nominal link numbers, labelled so)")
    plan.add_argument("--out", help="output directory (default out/plan/<dataset>)")
    plan.set_defaults(func=_cmd_plan)

    disk = sub.add_parser("disk", help="the disk-backed loaders (mmap, disk-tiered) on the gathers of a traced epoch's "
                          "minibatches, cold and warm, against the disk's sequential and random-read ceilings")
    disk.add_argument("--dataset", required=True, help=DATASET_HELP)
    disk.add_argument("--hot-fraction", type=float, default=DEFAULT_HOT_FRACTION, help="disk-tiered's top tier")
    disk.add_argument("--in-flight", type=_positive_int, default=32, help="disk reads outstanding at a time")
    disk.add_argument("--batches", type=_positive_int, default=50, help="minibatches of the traced epoch to measure")
    disk.add_argument("--out", help="output directory (default results/disk/<dataset>)")
    disk.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    disk.set_defaults(func=_cmd_disk)

    orders = sub.add_parser("bucket-orders", help="partition swaps per epoch of the BETA, Hilbert and row-major "
                            "edge-bucket orderings against the lower bound (seeds/003, Marius)")
    orders.add_argument("--out", default="results/marius", help="output directory")
    orders.set_defaults(func=_cmd_bucket_orders)

    buckets = sub.add_parser("bucket-train", help="epochs of link prediction through Marius's partition buffer, "
                             "per edge-bucket ordering, with and without prefetching (seeds/003)")
    buckets.add_argument("--dataset", required=True, help=DATASET_HELP)
    buckets.add_argument("--partitions", type=_positive_int, default=16, help="p: partitions of the feature table")
    buckets.add_argument("--capacity", type=_positive_int, default=4, help="c: partitions in the host buffer")
    buckets.add_argument("--edge-fraction", type=_edge_share, nargs="+", default=[0.002, 0.02],
                         help="shares of the edges one epoch trains, each a setting of its own")
    buckets.add_argument("--prefetch", type=_count, nargs="+", default=[0, 1],
                         help="partitions read ahead (0: synchronous swaps)")
    buckets.add_argument("--repeats", type=_positive_int, default=2, help="epochs per setting, alternating")
    buckets.add_argument("--seed", type=int, default=0, help="seed of the edges drawn, the model and the negatives")
    buckets.add_argument("--out", help="output directory (default results/marius/<dataset>)")
    buckets.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    buckets.set_defaults(func=_cmd_bucket_train)

    sar = sub.add_parser("sar", help="full-batch GraphSAGE on W gloo workers (torchrun), vanilla domain parallelism "
                         "against SAR: peak memory per worker, epoch time, accuracy (seeds/002 Figure 1)")
    sar.add_argument("--dataset", required=True, help=DATASET_HELP)
    sar.add_argument("--workers", type=_positive_int, nargs="+", default=[1, 2, 4], help="worker counts, each a run")
    sar.add_argument("--epochs", type=_positive_int, default=3, help="full-batch epochs per aggregation")
    sar.add_argument("--hidden", type=_positive_int, default=256, help="GraphSAGE hidden width")
    sar.add_argument("--layers", type=_positive_int, default=3, help="GraphSAGE layers")
    sar.add_argument("--lr", type=_positive_float, default=0.01, help="Adam's learning rate")
    sar.add_argument("--seed", type=int, default=0, help="seed of the METIS partition and the model")
    sar.add_argument("--timeout", type=_positive_int, default=600, help="seconds a worker waits for the others "
                     "before it fails")
    sar.add_argument("--no-minibatch", action="store_true", help="skip the minibatch training beside it")
    sar.add_argument("--rerun", action="store_true", help="run again the worker counts already recorded with these "
                     "settings in --runs (which are otherwise reused)")
    sar.add_argument("--aggregation", choices=["vanilla", "sar"], default="sar", help=argparse.SUPPRESS)  # a worker's
    sar.add_argument("--out", help="output directory (default results/sar/<dataset>)")
    sar.add_argument("--runs", help="directory of each worker count's records (default <out>/runs)")
    sar.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sar.set_defaults(func=_cmd_sar)

    doctor = sub.add_parser("doctor", help="check this machine before a sweep and write its profile (JSON)")
    doctor.add_argument("--out", default="results/machines", help="directory of the machine profiles")
    tier = doctor.add_mutually_exclusive_group()
    tier.add_argument("--host-tier-bytes", type=int, help="try cudaHostRegister at this size (default 1 GiB)")
    tier.add_argument("--dataset", help="try cudaHostRegister at the size of this preset's cold rows")
    doctor.add_argument("--hot-fraction", type=_fraction, help="with --dataset: share of rows in GPU memory "
                        f"(default {DEFAULT_HOT_FRACTION})")
    doctor.add_argument("--no-measure", action="store_true", help="skip measuring the bandwidth ceilings")
    doctor.add_argument("--device", help="the GPU the ceilings are measured on (default: the current one)")
    doctor.set_defaults(func=_cmd_doctor)

    gpubench = sub.add_parser("gpubench", help="gather microbenchmarks on a GPU (cold, hot, alignment, model check)")
    gpubench.add_argument("--out", help="output directory (default results/gpu/<device>/microbench)")
    gpubench.add_argument("--device", default="cuda", help="the GPU measured: cuda or cuda:N")
    gpubench.add_argument("--table-gib", type=_positive_float, default=4.0, help="size of the host buffer the tables "
                          "view, in GiB")
    gpubench.add_argument("--repeat", type=_positive_int, default=5, help="timed runs per measurement (the best is "
                          "kept)")
    gpubench.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    gpubench.set_defaults(func=_cmd_gpubench)

    suite = sub.add_parser("gpu-suite", help="doctor, GPU tests, gpubench, Figures 8 and 10, reports: one resumable "
                           "command")
    suite.add_argument("--out", default="results/gpu", help="results go into OUT/<device>/ (default results/gpu)")
    suite.add_argument("--dry-run", action="store_true", help="print each step, its command and whether it would run")
    suite.add_argument("--rerun", nargs="+", default=[], metavar="STEP", help="run these steps again even if done")
    suite.add_argument("--skip", nargs="+", default=[], metavar="STEP", help="leave these steps out of this run")
    suite.add_argument("--max-minutes", type=float, help="start no step whose estimate would end past this budget")
    suite.set_defaults(func=_cmd_gpu_suite)

    run = sub.add_parser("run", help="a sweep of training epochs: datasets x loaders x hot fractions x fanouts")
    run.add_argument("--experiment", required=True, help="a predefined sweep (demo, fig8, fig10, fig11, pipeline, disk), or a "
                     "new name of letters, digits, '.', '_' and '-' (then give --datasets and --loaders); its records "
                     "are <runs>/<experiment>.csv")
    run.add_argument("--datasets", type=_names, help=f"comma-separated; each {DATASET_HELP}")
    run.add_argument("--loaders", type=_names, help=f"comma-separated, from {', '.join(LOADERS)}")
    run.add_argument("--hot-fractions", type=_floats, help="comma-separated shares of the rows in [0, 1] for the loaders "
                     f"with a hot tier ({', '.join(hot_tier_loaders())}), e.g. 0,0.05,0.1 (default: the experiment's, "
                     "else 0.1)")
    run.add_argument("--host-fractions", type=_floats, help="comma-separated host-memory budgets, as shares of the "
                     f"rows, for the loaders that read from disk ({', '.join(disk_loaders())}): disk-tiered's host tier, "
                     "mmap's page cache (emulated) (default: the experiment's, else "
                     f"{DEFAULT_HOST_FRACTION:g})")
    run.add_argument("--fanout", type=_fanouts, help="fanouts for every cell (default: each dataset's)")
    run.add_argument("--epochs", type=int, help="recorded epochs per cell, at least 1 (default: the experiment's, else 1)")
    run.add_argument("--warmup", type=int, help="unrecorded epochs per cell before them, 0 or more (default: the "
                     "experiment's, else 1)")
    run.add_argument("--batch-size", type=int, help="seed nodes per minibatch in every cell (default: --regime's)")
    run.add_argument("--regime", choices=REGIMES, help=REGIME_HELP + " (default: the experiment's, else paper)")
    run.add_argument("--device", default="cpu")
    run.add_argument("--scorer", default=DEFAULT_SCORER, choices=list(SCORERS), help="ordering used by the tiered loader")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--rerun", action="store_true", help="measure cells again even when recorded")
    run.add_argument("--pipeline", action="store_true", help="overlap sampling, gathering and training (recorded per row)")
    run.add_argument("--runs", default="results/runs", help="directory of the records CSVs")
    run.add_argument("--gpus", type=int, help="run on G processes, one per GPU, launched with torchrun (with "
                     "--device cpu: G gloo processes standing in for GPUs)")
    run.add_argument("--sampling", type=_names, help="with --gpus: comma-separated samplers, cpu, uva (needs a GPU), "
                     "distributed (collective sampling over a CSR split across processes)")
    run.add_argument("--shm-dir", default="/dev/shm", help="with --gpus: directory on a tmpfs for the host tier's "
                     "shared-memory segment (Docker's /dev/shm holds 64 MiB unless run with --shm-size)")
    run.add_argument("--ogb-root", help=OGB_ROOT_HELP)
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    run.set_defaults(func=_cmd_run)

    report = sub.add_parser("report", help="tables and figures from records (Figures 8 and 10) or profiles (7 and 9)")
    report.add_argument("--experiment", help="the sweep whose records to report")
    report.add_argument("--figure", choices=["7", "8", "9", "10", "11"])
    report.add_argument("--dataset", help="with --figure 7 or 9")
    report.add_argument("--runs", default="results/runs")
    report.add_argument("--out", help="output directory (default results/<experiment>, or the profile's)")
    report.set_defaults(func=_cmd_report)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what --gpus relaunches under torchrun
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if getattr(args, "device", None) is not None:
            resolve_device(args.device)  # before any work: CUDA asked for where there is none, or no such device
        return args.func(args)
    except (DatasetFileError, KeyError, ValueError, MemoryError, PeerLost, WorkersFailed) as err:
        # MemoryError: HotTierTooLarge, host RAM; PeerLost, WorkersFailed: a multi-process run that ended early
        message = err.args[0] if isinstance(err, KeyError) and err.args else (str(err) or "out of host memory")
    except torch.OutOfMemoryError as err:
        message = (f"{str(err).splitlines()[0]} (out of GPU memory while running; lower --batch-size or the hot "
                   "fraction)")
    print(f"tierbench: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
