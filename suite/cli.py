"""The ``tierbench`` command.

    tierbench datasets list                       presets, their shapes, and whether they are cached
    tierbench datasets generate NAME [NAME ...]   build cache entries (synthetic, or a real ogbn-* with --ogb-root)
    tierbench datasets info NAME [NAME ...]       statistics from the manifests; --out DIR writes a table and a figure
    tierbench prepare --dataset NAME --scorer S   score, reorder and cache a dataset (S: degree, rpr, wrpr)
    tierbench scorers --dataset NAME --out DIR    score concentration and scoring/reordering speed tables
    tierbench train --dataset NAME --epochs K     GraphSAGE training, timed per stage, with validation accuracy
    tierbench profile --dataset NAME --figure 7|9 measured feature reuse by scorer (paper Figures 7 and 9)
    tierbench doctor                              preflight: versions, GPUs, PCIe links, pinning, ceilings -> results/machines
    tierbench gpubench --out DIR                  gather microbenchmarks against same-run peers (needs a GPU)
    tierbench gpu-suite [--dry-run]               a first GPU visit in one resumable command -> results/gpu/<device>
    tierbench run --experiment fig8|fig10|demo    a sweep of training epochs over loaders and hot fractions
    tierbench run --experiment fig11 --gpus G     the same on G processes, one per GPU (torchrun, DDP)
    tierbench report --experiment NAME            tables and figures from a sweep's records (Figures 8, 10, 11)
    tierbench report --figure 7|9 --dataset NAME  redraw Figure 7 or 9 from its CSV
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys

import pandas as pd

from .datasets import PRESETS, DatasetFileError, entry_path, prepare_dataset
from .datasets.cache import MANIFEST, read_manifest
from .datasets.build import regenerate_hint


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
                "size (est.)": _human_bytes(p.estimated_bytes()),
                "cached": (entry_path(p.name) / MANIFEST).exists(),
            }
        )
    print(pd.DataFrame(rows).to_string(index=False))
    print("\nReal OGB datasets: tierbench datasets generate ogbn-NAME --ogb-root DIR (never downloads).")
    return 0


def _cmd_generate(args) -> int:
    for name in args.names:
        entry = prepare_dataset(name, ogb_root=args.ogb_root, force=args.force, progress=not args.quiet)
        print(f"{name}: {entry}")
    return 0


def _cmd_info(args) -> int:
    from .datasets.summary import summarize, write_summary

    manifests = {}
    for name in args.names:
        entry = entry_path(name, args.ogb_root)
        manifests[name] = read_manifest(entry, regenerate_hint(name, args.ogb_root))
        manifests[name]["path"] = str(entry)
    table = summarize(manifests)
    print(table.to_string())
    if args.out:
        for path in write_summary(manifests, args.out, ogb_root=args.ogb_root):
            print(f"wrote {path}")
    return 0


def _cmd_prepare(args) -> int:
    from .datasets.reordered import prepare_reordered, scorer_params

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
    from .scorer_report import write_scorer_report

    for path in write_scorer_report(args.dataset, args.out, ogb_root=args.ogb_root, progress=not args.quiet):
        print(f"wrote {path}")
    return 0


def _fanouts(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"fanouts are comma-separated integers such as 12,12,12, got {text!r}") from None


def _cmd_train(args) -> int:
    import torch

    from .datasets import load_dataset
    from .datasets.reordered import load_reordered
    from .loaders import create_loader
    from .train import Trainer, default_fanouts, majority_accuracy
    from .train_report import write_training_report

    if args.scorer:
        dataset = load_reordered(args.dataset, args.scorer, ogb_root=args.ogb_root, progress=not args.quiet)
    else:
        dataset = load_dataset(args.dataset, ogb_root=args.ogb_root, progress=not args.quiet)
    fanouts = args.fanout or default_fanouts(args.dataset)
    device = torch.device(args.device)
    loader = create_loader(args.loader, dataset, args.hot_fraction, device, progress=not args.quiet)
    trainer = Trainer(
        dataset, loader, fanouts, batch_size=args.batch_size, hidden=args.hidden, dropout=args.dropout,
        lr=args.lr, seed=args.seed,
    )
    majority = majority_accuracy(dataset)
    print(
        f"{dataset}\nloader {args.loader} (hot fraction {args.hot_fraction}), fanouts {fanouts}, batch {args.batch_size}, "
        f"device {device}; majority-class valid accuracy {majority:.3f}"
    )
    results = []
    for epoch in range(args.epochs):
        results.append(trainer.train_epoch(epoch, progress=not args.quiet, pipeline=args.pipeline))
        r = results[-1]
        print(
            f"epoch {r.epoch}: loss {r.loss:.3f}  valid acc {r.valid_accuracy:.3f}  "
            f"sample {r.sample_s:.2f}s gather {r.gather_s:.2f}s train {r.train_s:.2f}s  epoch {r.epoch_s:.2f}s  "
            f"hit ratio {r.hit_ratio:.3f}  PCIe model {r.pcie_payload_bytes / 1e6:.1f} MB"
        )
    loader.close()
    if args.out:
        settings = {"dataset": args.dataset, "scorer": args.scorer or "none", "fanouts": ",".join(map(str, fanouts)),
                    "batch_size": args.batch_size, "loader": args.loader, "hot_fraction": args.hot_fraction,
                    "majority_valid_accuracy": majority}
        for path in write_training_report(results, settings, args.out, device):
            print(f"wrote {path}")
    return 0


def _cmd_profile(args) -> int:
    from .profile import profile_figure

    out = args.out or f"results/profile/{args.dataset}"
    paths = profile_figure(
        args.dataset, args.figure, out, fanouts=args.fanout, epochs=args.epochs, batch_size=args.batch_size,
        seed=args.seed, ogb_root=args.ogb_root, progress=not args.quiet,
    )
    print(paths[0].read_text())
    for path in paths:
        print(f"wrote {path}")
    return 0


def _cmd_gpubench(args) -> int:
    import torch

    if not torch.cuda.is_available():
        raise ValueError("gpubench needs a CUDA GPU and none is visible here; no GPU numbers were made")
    from .gpu_bench import run_gpu_benchmarks
    from .gpu_suite import device_folder, visible_gpu

    out = args.out or device_folder("results/gpu", visible_gpu()) / "microbench"
    paths, summary = run_gpu_benchmarks(out, args.device, table_bytes=int(args.table_gib * 2**30), repeat=args.repeat,
                                        progress=not args.quiet)
    print(summary)
    for path in paths:
        print(f"wrote {path}")
    return 0


def _cmd_gpu_suite(args) -> int:
    from .gpu_suite import run_suite

    return run_suite(args.out, dry_run=args.dry_run, rerun=args.rerun, skip=args.skip, max_minutes=args.max_minutes)


def _cmd_doctor(args) -> int:
    from .doctor import format_profile, host_tier_bytes_of, run_doctor

    host_tier_bytes = args.host_tier_bytes
    if args.dataset:
        hot_fraction = 0.1 if args.hot_fraction is None else args.hot_fraction
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


def _cmd_run(args) -> int:
    from tiering.multi_gpu import check_shm_dir

    from . import distributed
    from .harness import prepare_datasets, run_sweep, sweep_cells

    if args.gpus is not None:
        check_shm_dir(args.shm_dir)  # before any process is launched or dataset prepared
    sweep = dict(datasets=args.datasets, loaders=args.loaders, hot_fractions=args.hot_fractions,
                 fanouts=[args.fanout] if args.fanout else None, samplings=args.sampling)
    if args.gpus is not None and not distributed.launched_by_torchrun():
        if args.gpus < 1:
            raise ValueError(f"--gpus must be at least 1, got {args.gpus}")
        # datasets are generated and reordered here, once, before the processes open them
        prepare_datasets(sweep_cells(args.experiment, **sweep, scorer=args.scorer), args.ogb_root, not args.quiet)
        command = distributed.torchrun_command(args.gpus, args.argv)
        print(f"launching {args.gpus} processes: {' '.join(command[1:])}", flush=True)
        return subprocess.run(command, check=False).returncode
    device = args.device
    if args.gpus is not None:
        device = distributed.init_process_group(args.device)
    reporter = distributed.rank() == 0
    try:
        path, summary = run_sweep(
            args.experiment, args.runs, **sweep, epochs=args.epochs, warmup=args.warmup, batch_size=args.batch_size,
            device=device, scorer=args.scorer, seed=args.seed, pipeline=args.pipeline, rerun=args.rerun,
            ogb_root=args.ogb_root, progress=not args.quiet, shm_dir=args.shm_dir,
        )
    finally:
        if args.gpus is not None:
            distributed.destroy_process_group()
    if reporter:
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print(f"records: {path}")
    return 0


def _cmd_report(args) -> int:
    if args.figure in ("7", "9"):
        from .profile import replot

        if not args.dataset:
            raise ValueError("--figure 7 or 9 needs --dataset")
        print(f"wrote {replot(args.out or f'results/profile/{args.dataset}', int(args.figure), args.dataset)}")
        return 0
    from .report import write_report

    if not args.experiment:
        raise ValueError("give --experiment (a sweep's name) or --figure 7|9 with --dataset")
    figure = f"fig{args.figure}" if args.figure else None
    for path in write_report(args.experiment, args.runs, args.out, figure):
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tierbench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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

    prepare = sub.add_parser("prepare", help="score a dataset's nodes, reorder it hottest-first, and cache the result")
    prepare.add_argument("--dataset", required=True, help="a preset name, or ogbn-* with --ogb-root")
    prepare.add_argument("--scorer", required=True, choices=["degree", "rpr", "wrpr"])
    prepare.add_argument("--damping", type=float, help="rpr, wrpr: damping factor (default 0.85)")
    prepare.add_argument("--iterations", type=int, help="wrpr: number of updates (default 5)")
    prepare.add_argument("--tol", type=float, help="rpr: L1 change to stop at (default 1e-10)")
    prepare.add_argument("--max-iter", type=int, help="rpr: most updates (default 1000)")
    prepare.add_argument("--ogb-root", help="directory holding real OGB datasets")
    prepare.add_argument("--force", action="store_true", help="rebuild even when the reordered entry exists")
    prepare.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    prepare.set_defaults(func=_cmd_prepare)

    scorers = sub.add_parser("scorers", help="compare the scorers on a dataset: concentration and speed tables")
    scorers.add_argument("--dataset", required=True)
    scorers.add_argument("--out", required=True, help="directory for the tables and the figure")
    scorers.add_argument("--ogb-root")
    scorers.add_argument("-q", "--quiet", action="store_true")
    scorers.set_defaults(func=_cmd_scorers)

    train = sub.add_parser("train", help="train GraphSAGE and time sampling, gathering and training")
    train.add_argument("--dataset", required=True)
    train.add_argument("--epochs", type=int, default=3)
    train.add_argument("--scorer", choices=["degree", "rpr", "wrpr"], help="train on the dataset reordered by this scorer")
    train.add_argument("--fanout", type=_fanouts, help="neighbours per layer from the seeds out, e.g. 12,12,12")
    train.add_argument("--batch-size", type=int, default=1024)
    train.add_argument("--loader", default="in-memory", help="in-memory, cpu-gather, uva, uva-naive, degree-cache, tiered")
    train.add_argument("--hot-fraction", type=float, default=0.1, help="share of rows in GPU memory (degree-cache, tiered)")
    train.add_argument("--pipeline", action="store_true", help="overlap sampling, gathering and training")
    train.add_argument("--hidden", type=int, default=256)
    train.add_argument("--dropout", type=float, default=0.5)
    train.add_argument("--lr", type=float, default=3e-3)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    train.add_argument("--ogb-root")
    train.add_argument("--out", help="write train-<dataset>.md and .csv into this directory")
    train.add_argument("-q", "--quiet", action="store_true")
    train.set_defaults(func=_cmd_train)

    profile = sub.add_parser("profile", help="measure feature reuse under sampling (paper Figures 7 and 9)")
    profile.add_argument("--dataset", required=True)
    profile.add_argument("--figure", type=int, required=True, choices=[7, 9])
    profile.add_argument("--fanout", type=_fanouts, help="figure 7 only: fanouts (default: the dataset's training fanouts)")
    profile.add_argument("--epochs", type=int, default=1, help="epochs of sampling to count over")
    profile.add_argument("--batch-size", type=int, help="seeds per minibatch (default: 1024 scaled to the imitated dataset's size)")
    profile.add_argument("--seed", type=int, default=0)
    profile.add_argument("--ogb-root")
    profile.add_argument("--out", help="output directory (default results/profile/<dataset>)")
    profile.add_argument("-q", "--quiet", action="store_true")
    profile.set_defaults(func=_cmd_profile)

    doctor = sub.add_parser("doctor", help="check this machine before a sweep and write its profile (JSON)")
    doctor.add_argument("--out", default="results/machines", help="directory of the machine profiles")
    tier = doctor.add_mutually_exclusive_group()
    tier.add_argument("--host-tier-bytes", type=int, help="try cudaHostRegister at this size (default 1 GiB)")
    tier.add_argument("--dataset", help="try cudaHostRegister at the size of this preset's cold rows")
    doctor.add_argument("--hot-fraction", type=float, help="with --dataset: share of rows in GPU memory (default 0.1)")
    doctor.add_argument("--no-measure", action="store_true", help="skip measuring the bandwidth ceilings")
    doctor.add_argument("--device", help="the GPU the ceilings are measured on (default: the current one)")
    doctor.set_defaults(func=_cmd_doctor)

    gpubench = sub.add_parser("gpubench", help="gather microbenchmarks on a GPU (cold, hot, alignment, model check)")
    gpubench.add_argument("--out", help="output directory (default results/gpu/<device>/microbench)")
    gpubench.add_argument("--device", default="cuda")
    gpubench.add_argument("--table-gib", type=float, default=4.0, help="size of the host buffer the tables view")
    gpubench.add_argument("--repeat", type=int, default=5, help="timed runs per measurement (the best is kept)")
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
    run.add_argument("--experiment", required=True, help="fig8, fig10, demo, or a new name (then give what to sweep)")
    run.add_argument("--datasets", type=_names, help="comma-separated dataset names")
    run.add_argument("--loaders", type=_names, help="comma-separated loader names")
    run.add_argument("--hot-fractions", type=_floats, help="comma-separated, e.g. 0,0.05,0.1")
    run.add_argument("--fanout", type=_fanouts, help="fanouts for every cell (default: each dataset's)")
    run.add_argument("--epochs", type=int, help="recorded epochs per cell")
    run.add_argument("--warmup", type=int, help="unrecorded epochs per cell before them")
    run.add_argument("--batch-size", type=int, default=1024)
    run.add_argument("--device", default="cpu")
    run.add_argument("--scorer", default="wrpr", choices=["degree", "rpr", "wrpr"], help="ordering used by the tiered loader")
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
    run.add_argument("--ogb-root")
    run.add_argument("-q", "--quiet", action="store_true")
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
        return args.func(args)
    except (DatasetFileError, KeyError, ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"tierbench: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
