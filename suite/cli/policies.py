"""``tierbench policies`` and ``tierbench plan``: placement policies replayed on a recorded access trace, and the
policy and hot fraction a GPU memory budget calls for."""

from __future__ import annotations

from pathlib import Path

from suite.cli import options
from suite.cli.output import show


def _cmd_policies(args) -> int:
    from suite.experiments.policies import measure
    from suite.figures import policies

    out = Path(args.out or f"out/policies/{args.dataset}")
    records = measure(
        args.dataset, out, epochs=args.epochs, presample_epochs=args.presample_epochs, fanouts=args.fanout,
        batch_size=args.batch_size, regime=args.regime, seed=args.seed, trace_dir=args.trace_dir,
        ogb_root=args.ogb_root, progress=not args.quiet,
    )
    show([*policies.render(records, out), records])
    return 0


def _cmd_plan(args) -> int:
    from suite.experiments.plan import measure, read_records
    from suite.figures.plan import render

    out = args.out or f"out/plan/{args.dataset}"
    planned = measure(
        args.dataset, args.gpu_memory, out, machine_path=args.machine, epochs=args.epochs, fanouts=args.fanout,
        batch_size=args.batch_size, regime=args.regime, sampling=args.sampling, seed=args.seed,
        trace_dir=args.trace_dir, ogb_root=args.ogb_root, progress=not args.quiet,
    )
    show(render(planned, out))
    print(read_records(planned)[0].facts["recommendation"])
    return 0


def add_parsers(sub) -> None:
    """``policies`` and ``plan``."""
    sub.add_parser("policies", help="replay every placement policy against a recorded access trace: hit ratio and "
                   "PCIe bytes against capacity, beside Belady's bound and the static optimum",
                   arguments=_policies_arguments).set_defaults(func=_cmd_policies)
    sub.add_parser("plan", help="project data-loading time per policy and hot fraction within a GPU memory budget, "
                   "and recommend one", arguments=_plan_arguments).set_defaults(func=_cmd_plan)


def _policies_arguments(policies) -> None:
    """``policies``'s options, with the regimes its traces are drawn in."""
    policies.take(*options.traces(3, "epochs traced and replayed"))
    policies.add_argument("--presample-epochs", type=options.positive_int, default=1, help="epochs PreSC pre-samples")
    policies.add_argument("--out", help="output directory (default out/policies/<dataset>)")


def _plan_arguments(plan) -> None:
    """``plan``'s options, with the regimes its trace is drawn in."""
    plan.take(*options.traces(1, "epochs traced"))
    plan.add_argument("--gpu-memory", required=True, help="GPU memory to plan for: 40GB, 24GiB, ...")
    plan.add_argument("--machine", help="a machine profile of `tierbench doctor`, or a folder of them, its newest GPU "
                      "one taken (default: the newest GPU one in "
                      "out/machines or results/machines; none: nominal link numbers, labelled so)")
    plan.add_argument("--sampling", default="cpu", help="the sampler of the planned epochs: cpu (the default), gpu or "
                      "uva; the profile's fixed costs are those `tierbench costs` timed with the same --sampling")
    plan.add_argument("--out", help="output directory (default out/plan/<dataset>)")
