"""``tierbench run`` and ``tierbench report``: a sweep of training epochs over datasets, loaders and hot fractions
(on one process, or one per GPU under torchrun), and the tables and figures of its records (Figures 8, 10, 11)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from suite.cli import options
from suite.cli.options import DEFAULT_SCORER
from suite.errors import BadValue
from suite.sweep import RUNS_DIR


def _interrupted(sweep, rerun: bool) -> str:
    """The line that ends an interrupted sweep: what its CSV kept, and how to go on."""
    again = "run it again without --rerun" if rerun else "run the same command again"
    recorded, runs = len(sweep.recorded()), len(sweep.runs())
    counted = (f"{recorded} of {runs} cells" if sweep.rounds == 1
               else f"{recorded} of {runs} cell rounds ({len(sweep.cells)} cells x {sweep.rounds} rounds)")
    return (f"tierbench: interrupted: {counted} recorded in {sweep.path}; {again} to resume (finished cells are "
            "skipped)")


def _cmd_run(args) -> int:
    from suite.sweep.run import datasets_kept_open, plan_sweep, prepare_datasets, run_planned
    from suite.training import distributed
    from tiering.features.multi_gpu import check_shm_dir

    if args.and_then is not None and args.gpus is not None:
        raise BadValue("--and-then runs the second sweep in this one process: give it without --gpus")
    if args.and_then == args.experiment:
        raise BadValue(f"--and-then names the experiment --experiment runs ({args.experiment}): name another")
    if args.gpus is not None:
        try:
            check_shm_dir(args.shm_dir)  # before any process is launched or dataset prepared
        except ValueError as err:  # tiering's refusal of the directory --shm-dir names
            raise BadValue(str(err)) from None
    settings = dict(datasets=args.datasets, loaders=args.loaders, hot_fractions=args.hot_fractions,
                    host_fractions=args.host_fractions, fanouts=[args.fanout] if args.fanout else None,
                    samplings=args.sampling, epochs=args.epochs, warmup=args.warmup, rounds=args.rounds,
                    batch_size=args.batch_size, regime=args.regime, scorer=args.scorer, pipeline=args.pipeline,
                    batch_limit=args.minibatches, sampler_kernels=args.sampler_kernels, ogb_root=args.ogb_root)
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
    sweeps = [(args.experiment, settings)]
    if args.and_then is not None:  # a predefined experiment's own loaders and fractions, every other setting this one's
        sweeps.append((args.and_then, {**settings, "loaders": None, "hot_fractions": None, "host_fractions": None}))
    device = args.device
    if args.gpus is not None:
        device = distributed.init_process_group(args.device)
    reporter = distributed.rank() == 0
    try:
        planned = [plan_sweep(name, args.runs, **chosen, device=device) for name, chosen in sweeps]  # every check first
        for sweep in planned:
            if reporter and sweep.describe_kernels():
                print(sweep.describe_kernels(), flush=True)
        with datasets_kept_open() as opened:  # a dataset one sweep opened stays open, its table pinned, for the next
            for sweep in planned:
                try:
                    path, summary = run_planned(sweep, seed=args.seed, rerun=args.rerun, progress=not args.quiet,
                                                shm_dir=args.shm_dir, validate=args.validate, opened=opened)
                except KeyboardInterrupt:
                    if reporter and args.gpus is None:  # under --gpus, the process that launched the group says it
                        print(_interrupted(sweep, args.rerun), file=sys.stderr)
                    return 130
                if reporter:
                    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
                    print(f"records: {path}")
    finally:
        if args.gpus is not None:
            distributed.destroy_process_group()
    return 0


def _cmd_report(args) -> int:
    if args.records:
        from suite.figures import redraw

        if not args.figure:
            raise BadValue("--records needs --figure: which figure to draw from them")
        for path in redraw(args.figure, args.records, args.out):
            print(f"wrote {path}")
        return 0
    if args.figure in ("7", "9"):
        from suite.figures import redraw

        if not args.dataset:
            raise BadValue("--figure 7 or 9 needs --dataset")
        out = Path(args.out or f"out/profile/{args.dataset}")
        curves = out / f"fig{args.figure}-curves.csv"
        if not curves.exists():
            raise BadValue(f"{curves} does not exist: run `tierbench profile --dataset {args.dataset} --figure "
                           f"{args.figure}` first")
        for path in redraw(args.figure, curves, out):
            print(f"wrote {path}")
        return 0
    from suite.figures import SWEEP_NAMES, write_report

    if args.figure and args.figure not in SWEEP_NAMES:
        raise BadValue(f"--figure {args.figure} needs --records: the records (file or folder) its command wrote")
    if not args.experiment:
        raise BadValue("give --experiment (a sweep's name) or --figure 7|9 with --dataset")
    figure = f"fig{args.figure}" if args.figure else None
    for path in write_report(args.experiment, args.runs, args.out or f"out/{args.experiment}", figure):
        print(f"wrote {path}")
    return 0


def add_parsers(sub) -> None:
    """``run`` and ``report``."""
    sub.add_parser("run", help="a sweep of training epochs: datasets x loaders x hot fractions x fanouts",
                   arguments=_run_arguments).set_defaults(func=_cmd_run)
    sub.add_parser("report", help="tables and figures from records, without measuring: a sweep's (Figures 8, 10, 11), "
                   "a profile's (7 and 9), or any figure's with --records",
                   arguments=_report_arguments).set_defaults(func=_cmd_report)


def _run_arguments(run) -> None:
    """``run``'s options, which name the loaders and scorers of the registry and the regimes."""
    from suite.datasets.regime import REGIMES
    from suite.registry import (
        DEFAULT_HOST_FRACTION,
        LOADERS,
        SCORERS,
        disk_loaders,
        hot_tier_loaders,
    )

    run.take(options.ogb_root(), options.quiet(), options.minibatch_limit(), options.validation(),
             options.sampler_kernels())
    run.add_argument("--experiment", required=True, help="a predefined sweep (demo, fig8, fig10, fig11, pipeline, disk), or a "
                     "new name of letters, digits, '.', '_' and '-' (then give --datasets and --loaders); its records "
                     "are <runs>/<experiment>.csv")
    run.add_argument("--datasets", type=options.names, help=f"comma-separated; each {options.dataset_help()}")
    run.add_argument("--loaders", type=options.names, help=f"comma-separated, from {', '.join(LOADERS)}")
    run.add_argument("--hot-fractions", type=options.numbers, help="comma-separated shares of the rows in [0, 1] for "
                     f"the loaders with a hot tier ({', '.join(hot_tier_loaders())}), e.g. 0,0.05,0.1 (default: the "
                     "experiment's, else 0.1)")
    run.add_argument("--host-fractions", type=options.numbers, help="comma-separated host-memory budgets, as shares of "
                     f"the rows, for the loaders that read from disk ({', '.join(disk_loaders())}): disk-tiered's host "
                     "tier, mmap's page cache (emulated) (default: the experiment's, else "
                     f"{DEFAULT_HOST_FRACTION:g})")
    run.add_argument("--fanout", type=options.fanouts, help="fanouts for every cell (default: each dataset's)")
    # the sweep checks the ranges of --epochs, --warmup and --batch-size, with the option's name in its message
    run.add_argument("--epochs", type=options.integer, help="recorded epochs per cell, at least 1 (default: the "
                     "experiment's, else 1)")
    run.add_argument("--warmup", type=options.integer, help="unrecorded epochs per cell before them, 0 or more "
                     "(default: the experiment's, else 1)")
    run.add_argument("--rounds", type=options.integer, help="times every cell runs (warm-up and recorded epochs each "
                     "time), in the cells' order and then the reverse, by turns, so that a machine's drift over the "
                     "sweep moves every cell's mean alike, at least 1 (default: the experiment's, else 1)")
    run.add_argument("--batch-size", type=options.integer, help="seed nodes per minibatch in every cell (default: "
                     "--regime's)")
    run.add_argument("--regime", choices=REGIMES, help=options.REGIME_HELP + " (default: the experiment's, else paper)")
    run.add_argument("--device", default="cpu")
    run.add_argument("--scorer", default=DEFAULT_SCORER, choices=list(SCORERS), help="ordering used by the tiered loader")
    run.add_argument("--seed", type=options.seed, default=0)
    run.add_argument("--rerun", action="store_true", help="measure cells again even when recorded")
    run.add_argument("--and-then", metavar="EXPERIMENT", help="then, in this process, a second predefined sweep with "
                     "its own loaders and fractions and every other setting of this command, into its own records "
                     "(<runs>/<EXPERIMENT>.csv): a dataset the first sweep left open, its table pinned, is not opened "
                     "again, e.g. Figure 8 and then Figure 10 on papers-100m (not with --gpus)")
    run.add_argument("--pipeline", action="store_true", help="overlap sampling, gathering and training (recorded per row)")
    run.add_argument("--runs", default=RUNS_DIR, help="directory of the records CSVs (the committed ones are in "
                     "results/runs)")
    run.add_argument("--gpus", type=options.positive_int, help="run on G processes, one per GPU, launched with torchrun "
                     "(with --device cpu: G gloo processes standing in for GPUs)")
    run.add_argument("--sampling", type=options.names, help="comma-separated samplers: cpu, gpu (the fused GPU "
                     "sampler, the graph in GPU memory), uva (the same, the graph in pinned host memory), distributed "
                     "(with --gpus: collective sampling over a CSR split across processes); gpu and uva need "
                     "--device cuda (default: cpu, or with --gpus the experiment's)")
    run.add_argument("--shm-dir", default="/dev/shm", help="with --gpus: directory on a tmpfs for the host tier's "
                     "shared-memory segment (Docker's /dev/shm holds 64 MiB unless run with --shm-size)")


def _report_arguments(report) -> None:
    """``report``'s options, which name the figures of ``suite.figures``."""
    from suite.figures import FIGURES

    report.add_argument("--experiment", help="the sweep whose records to report")
    report.add_argument("--figure", choices=list(FIGURES), help="the figure to draw; with --records any of them")
    report.add_argument("--records", help="with --figure: draw it from these records (the CSV or folder its "
                        "command wrote), e.g. --figure policies --records results/policies/papers-s/policies-epochs.csv")
    report.add_argument("--dataset", help="with --figure 7 or 9")
    report.add_argument("--runs", default=RUNS_DIR, help="directory of the records CSVs (the committed ones: "
                        "--runs results/runs)")
    report.add_argument("--out", help="output directory (default out/<experiment>, or out/profile/<dataset> for "
                        "--figure 7 or 9)")
