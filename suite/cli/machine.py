"""``tierbench doctor``, ``tierbench costs``, ``tierbench gpubench``, ``tierbench samplerbench`` and ``tierbench
gpu-suite``: this machine, the fixed cost of its minibatches, its GPU's gather bandwidth, the CPU and GPU neighbour
samplers' rates, and a first GPU visit in one resumable command."""

from __future__ import annotations

from pathlib import Path

from suite.cli import options
from suite.cli.options import DEFAULT_HOT_FRACTION, DEFAULT_SCORER
from suite.cli.output import show
from suite.errors import BadValue


def _cmd_doctor(args) -> int:
    from suite.measure.doctor import format_profile, host_tier_bytes_of, run_doctor

    host_tier_bytes = args.host_tier_bytes
    if args.dataset:
        hot_fraction = DEFAULT_HOT_FRACTION if args.hot_fraction is None else args.hot_fraction
        host_tier_bytes = host_tier_bytes_of(args.dataset, hot_fraction)
        print(f"host tier: the cold rows of {args.dataset} at {hot_fraction:.0%} hot, {host_tier_bytes:,} bytes")
    elif args.hot_fraction is not None:
        raise BadValue("--hot-fraction sizes the host tier of a --dataset: give the dataset too")
    profile, path = run_doctor(args.out, host_tier_bytes=host_tier_bytes, measure=not args.no_measure,
                               device=args.device)
    print(format_profile(profile))
    print(f"wrote {path}")
    return 0


def _cmd_costs(args) -> int:
    from suite.experiments.costs import measure, read_records, refit, summary
    from suite.figures.costs import render
    from suite.io.provenance import machine_profile_name
    from suite.sweep.sampler_choice import sampler_kernels
    from suite.training.sampling import check_single_process

    if args.from_records:
        if not args.machine:
            raise BadValue("--from-records fits the records again into a profile: give it with --machine PATH")
        measured = refit(args.from_records, args.machine)
        print(summary(measured))
        print(f"fitted {measured.path} again into {args.machine}")
        return 0
    if not args.dataset:
        raise BadValue("give --dataset to time its minibatches, or --from-records to fit measured ones again")
    check_single_process(args.sampling, args.device)  # before the kernels are chosen and named
    choice = sampler_kernels(args.sampler_kernels, [args.sampling], args.device)
    if choice.line([args.sampling]):
        print(choice.line([args.sampling]))
    profile = args.machine or f"{args.machines}/{machine_profile_name(args.device)}"
    hot_fraction = options.loader_hot_fraction(args.loader, args.hot_fraction)
    scorer = options.loader_scorer(args.loader, args.scorer)
    path = measure(args.dataset, args.out or f"out/costs/{args.dataset}", profile, device=args.device,
                   loader=args.loader, hot_fraction=hot_fraction, scorer=scorer, sampling=args.sampling,
                   sampler_kernels=choice.kernels, batch_sizes=args.batch_sizes, repeats=args.repeats,
                   operators=args.operators, compile_model=args.compile, progress=not args.quiet)
    print(summary(read_records(path)))
    for written in render(path, path.parent):
        print(f"wrote {written}")
    print(f"left {profile} as it was: a --compile run writes records only (the profile keeps an eager model's fits)"
          if args.compile else f"wrote the fits into {profile}")
    return 0


def _cmd_gpubench(args) -> int:
    import torch

    if torch.device(args.device).type != "cuda":
        raise BadValue(f"gpubench measures a CUDA GPU, not {args.device}: give --device cuda or cuda:N")
    from suite.experiments.gpu import measure, read_records, summary
    from suite.figures.gpu import render
    from suite.sweep.gpu_suite import device_folder, visible_gpu

    out = args.out or device_folder("out/gpu", visible_gpu()) / "microbench"
    measured = measure(out, args.device, table_bytes=int(args.table_gib * 2**30), repeat=args.repeat,
                       progress=not args.quiet)
    paths = render(measured, out)
    print(summary(read_records(measured)[0].table))
    for path in paths:
        print(f"wrote {path}")
    return 0


def _cmd_samplerbench(args) -> int:
    import shlex

    from suite.datasets import load_dataset
    from suite.experiments.sampler_bench import measure
    from suite.figures.sampler_bench import render
    from suite.sweep.gpu_suite import device_folder, visible_gpu

    out = Path(args.out) if args.out else device_folder("out/gpu", visible_gpu()) / "sampler-bench"
    dataset = load_dataset(args.dataset, ogb_root=args.ogb_root, progress=not args.quiet)
    command = "tierbench " + shlex.join(args.argv)
    measured = measure(dataset, out, args.device, seeds=args.seeds, batch_size=args.batch_size, repeat=args.repeat,
                       command=command)
    show(render(measured, out))
    return 0


def _cmd_gpu_suite(args) -> int:
    from suite.sweep.gpu_suite import run_suite

    if args.skip and args.only:
        raise BadValue("give --skip or --only, not both")
    return run_suite(args.out, dry_run=args.dry_run, rerun=args.rerun, skip=args.skip, only=args.only,
                     max_minutes=args.max_minutes)


def add_parsers(sub) -> None:
    """``doctor``, ``gpubench`` and ``gpu-suite``."""
    doctor = sub.add_parser("doctor", help="check this machine before a sweep and write its profile (JSON)")
    doctor.add_argument("--out", default="out/machines", help="directory of the machine profiles (the committed ones "
                        "are in results/machines)")
    tier = doctor.add_mutually_exclusive_group()
    tier.add_argument("--host-tier-bytes", type=options.host_bytes,
                      help="try cudaHostRegister at this size (default 1 GiB)")
    tier.add_argument("--dataset", help="try cudaHostRegister at the size of this preset's cold rows")
    doctor.add_argument("--hot-fraction", type=options.fraction, help="with --dataset: share of rows in GPU memory "
                        f"(default {DEFAULT_HOT_FRACTION})")
    doctor.add_argument("--no-measure", action="store_true", help="skip measuring the bandwidth ceilings")
    doctor.add_argument("--device", help="the GPU the ceilings are measured on (default: the current one)")
    doctor.set_defaults(func=_cmd_doctor)

    sub.add_parser("costs", help="the fixed cost of one minibatch per stage across batch sizes, into the machine "
                   "profile (what `tierbench plan` adds to its bound)", parents=[options.quiet()],
                   arguments=_costs_arguments).set_defaults(func=_cmd_costs)

    gpubench = sub.add_parser("gpubench", help="gather microbenchmarks on a GPU (cold, hot, alignment, model check)",
                              parents=[options.quiet()])
    gpubench.add_argument("--out", help="output directory (default out/gpu/<device>/microbench)")
    gpubench.add_argument("--device", default="cuda", help="the GPU measured: cuda or cuda:N")
    gpubench.add_argument("--table-gib", type=options.positive_float, default=4.0, help="size of the host buffer the "
                          "tables view, in GiB")
    gpubench.add_argument("--repeat", type=options.positive_int, default=5, help="timed runs per measurement (the "
                          "best is kept)")
    gpubench.set_defaults(func=_cmd_gpubench)

    bench = sub.add_parser("samplerbench", help="sampled edges per second of the CPU sampler and the fused GPU sampler "
                           "(graph in GPU memory, and over UVA; numba-cuda and CUDA C++ kernels): one hop and a "
                           "(12,12,12) minibatch",
                           parents=[options.quiet()])
    bench.take(options.dataset(), options.ogb_root())
    bench.add_argument("--out", help="output directory (default out/gpu/<device>/sampler-bench)")
    bench.add_argument("--device", default="cuda", help="cuda or cuda:N: every sampler; cpu: the CPU sampler "
                       "alone")
    bench.add_argument("--seeds", type=options.positive_int, default=100_000, help="seeds of the one-hop case "
                       "(fanout 12)")
    bench.add_argument("--batch-size", type=options.positive_int, default=1024, help="seeds of the (12,12,12) "
                       "minibatch")
    bench.add_argument("--repeat", type=options.positive_int, default=5, help="timed runs per case (the best is kept)")
    bench.set_defaults(func=_cmd_samplerbench)

    suite = sub.add_parser("gpu-suite", help="doctor, GPU tests, gpubench, Figures 8 and 10, reports: one resumable "
                           "command")
    suite.add_argument("--out", default="out/gpu", help="results go into OUT/<device>/, the machine profile into "
                       "OUT/../machines")
    suite.add_argument("--dry-run", action="store_true", help="print each step, its command and whether it would run")
    suite.add_argument("--rerun", nargs="+", default=[], metavar="STEP", help="run these steps again even if done")
    suite.add_argument("--skip", nargs="+", default=[], metavar="STEP", help="leave these steps out of this run")
    suite.add_argument("--only", nargs="+", default=[], metavar="STEP", help="run only these steps (those done "
                       "earlier count as done for their inputs), e.g. the paper-scale ones")
    suite.add_argument("--max-minutes", type=options.positive_float,
                       help="start no step whose estimate would end past this budget")
    suite.set_defaults(func=_cmd_gpu_suite)


def _costs_arguments(costs) -> None:
    """``costs``' options, with the fused sampler's kernels (``tiering.sampling.fused``, which imports torch) and the
    registry's scorers."""
    from suite.registry import SCORERS, reordered_loaders

    costs.add_argument("--dataset", help="the preset whose minibatches are timed (papers-s on a GPU)")
    costs.add_argument("--from-records", metavar="DIR", help="time nothing: fit the records an earlier run wrote in "
                       "DIR (a GPU visit's, committed) again into the profile --machine names")
    costs.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    costs.add_argument("--loader", default="uva", help="the feature loader gathering (default uva: every row over "
                       "zero-copy)")
    costs.add_argument("--hot-fraction", type=options.fraction, help="share of rows the loader keeps in GPU memory, "
                       f"for a loader with a hot tier (default {DEFAULT_HOT_FRACTION}); the planned epochs' fraction "
                       "times the gathers they make")
    costs.add_argument("--scorer", choices=list(SCORERS), help="gather from the dataset reordered by this scorer "
                       f"(default: {DEFAULT_SCORER} for {', '.join(reordered_loaders())}, which need one)")
    costs.add_argument("--sampling", default="cpu", help="the sampler drawing the minibatches: cpu (numba; the "
                       "default), gpu (the fused GPU sampler, the graph in GPU memory) or uva (the same, the graph in "
                       "pinned host memory); gpu and uva need --device cuda")
    costs.take(options.sampler_kernels())
    costs.add_argument("--batch-sizes", type=options.positive_int, nargs="+", default=[8, 16, 32, 64, 128, 256, 512,
                       1024, 2048, 4096], help="seeds per minibatch, at least two sizes (default 8 to 4096)")
    costs.add_argument("--repeats", type=options.positive_int, default=5, help="timed minibatches per size")
    costs.add_argument("--operators", type=options.count, default=0, help="minibatches per size to run again under "
                       "torch's profiler after the timed ones: each stage's operators, host and device time and "
                       "kernels, into costs-operators.csv (default 0: none)")
    costs.add_argument("--compile", action="store_true", help="train the model as torch.compile makes it (dynamic "
                       "shapes; compiled on untimed minibatches first): the train stage's fixed cost, compiled")
    costs.add_argument("--machines", default="out/machines", help="where this machine's profile is (tierbench "
                       "doctor's --out)")
    costs.add_argument("--machine", help="the machine profile to add the fits to (default: this machine's in "
                       "--machines)")
    costs.add_argument("--out", help="records directory (default out/costs/DATASET)")
