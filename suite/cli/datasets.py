"""``tierbench datasets list|generate|info|verify|cost``, ``tierbench prepare`` and ``tierbench scorers``: the dataset
cache, its reordered entries, and how the scorers that reorder them compare."""

from __future__ import annotations

import sys

from suite.cli import options
from suite.cli.output import show
from suite.datasets.errors import DatasetFileError
from suite.errors import BadValue


def _human_bytes(n: float) -> str:
    units = ("B", "KB", "MB", "GB", "TB")
    k = 0
    while n >= 1000 and k < len(units) - 1:
        n /= 1000
        k += 1
    return f"{n:.1f} {units[k]}"


def _cmd_list(args) -> int:
    import pandas as pd

    from suite.datasets import PRESETS, entry_path
    from suite.datasets.build import regenerate_hint
    from suite.datasets.cache import (
        describe_root,
        entry_bytes,
        entry_problem,
        is_complete,
    )

    rows, problems = [], []
    for p in PRESETS.values():
        entry = entry_path(p.name)
        cached = is_complete(entry)
        problem = entry_problem(entry, regenerate_hint(p.name), checksums=False) if cached else None
        if problem:
            problems.append(problem)
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
                "size": _human_bytes(entry_bytes(entry)) if cached else f"~{_human_bytes(p.disk_bytes)} (est.)",
                "cached": "damaged" if problem else cached,
            }
        )
    print(f"dataset cache: {describe_root()}\n")
    print(pd.DataFrame(rows).to_string(index=False))
    print("\nsize: what a cached entry takes on disk, or an estimate (features + CSR) for one not built yet; "
          "the gpu_built presets' entries (papers-100m, papers-xs-gpu-built) hold no feature table: it is made in "
          "memory whenever one is opened.")
    print("cached: True once built with every file of the size its manifest records, damaged when one is not "
          "(`tierbench datasets verify NAME` also checks their SHA-256).")
    for problem in problems:
        print(f"damaged: {problem}")
    print("Real OGB datasets: tierbench datasets generate ogbn-NAME --ogb-root DIR (never downloads).")
    return 0


def _verified(hint: str, progress: bool):
    """An ``on_reuse`` for the cache's builders: checks a reused entry's every checksum, and keeps the entries it
    checked."""
    from suite.datasets.cache import entry_problem

    reused = []

    def check(entry) -> None:
        problem = entry_problem(entry, hint, checksums=True, progress=progress)
        if problem:
            raise DatasetFileError(problem)
        reused.append(entry)

    return check, reused


def _show_build_plan(name: str) -> None:
    """For a preset built on the GPU machine (paper scale): what its build needs of this machine, before it is
    checked (``suite.datasets.memory_plan``)."""
    from suite.datasets.build import is_real_ogb
    from suite.datasets.cache import cache_root
    from suite.datasets.memory_plan import build_needs, render, this_machine
    from suite.datasets.presets import get_preset

    if not is_real_ogb(name) and get_preset(name).gpu_built:
        machine = this_machine(cache_root())
        needs = build_needs(get_preset(name), on_gpu=machine.gpu_bytes is not None)
        print(render(f"{name}: what its build and reordering need", needs, machine))


def _cmd_generate(args) -> int:
    from suite.datasets import prepare_dataset
    from suite.datasets.build import regenerate_hint
    from suite.datasets.cache import describe_root, entry_bytes

    print(f"dataset cache: {describe_root()}")
    done = []
    for name in args.names:
        _show_build_plan(name)
        check, reused = _verified(regenerate_hint(name, args.ogb_root), not args.quiet)
        try:
            entry = prepare_dataset(name, ogb_root=args.ogb_root, force=args.force, progress=not args.quiet,
                                    on_reuse=check)
        except KeyboardInterrupt:  # the build's directory is removed on the way out (cache.build_entry)
            ready = f"; {', '.join(done)} ready" if done else ""
            print(f"tierbench: interrupted: generating {name}; its partial build was removed and the cache holds "
                  f"what it held before{ready}", file=sys.stderr)
            return 130
        done.append(name)
        how = "; reused cached entry, checksums verified" if reused else ""
        print(f"{name}: {entry} ({_human_bytes(entry_bytes(entry))}){how}")
    return 0


def _cached_entry(name: str, ogb_root):
    """The complete cache entry of dataset ``name``; ``BadValue`` saying how to build it where there is none."""
    from suite.datasets import entry_path
    from suite.datasets.cache import describe_root, is_complete

    entry = entry_path(name, ogb_root)
    if not is_complete(entry):
        root = f" --ogb-root {ogb_root}" if ogb_root else ""
        raise BadValue(f"{name} is not in the dataset cache {describe_root()}: build it with "
                       f"`tierbench datasets generate {name}{root}`")
    return entry


def _cmd_info(args) -> int:
    from suite.datasets.build import regenerate_hint
    from suite.datasets.cache import (
        entry_problem,
        read_manifest,
    )
    from suite.experiments.datasets import measure, summarize
    from suite.figures.datasets import render

    manifests = {}
    for name in args.names:
        entry = _cached_entry(name, args.ogb_root)
        hint = regenerate_hint(name, args.ogb_root)
        problem = entry_problem(entry, hint, checksums=False)  # statistics of a damaged entry would mislead
        if problem:
            raise DatasetFileError(problem)
        manifests[name] = read_manifest(entry, hint)
        manifests[name]["path"] = str(entry)
    table = summarize(manifests)
    print(table.to_string())
    if args.out:
        for path in render(measure(manifests, args.out, ogb_root=args.ogb_root), args.out):
            print(f"wrote {path}")
    return 0


def _reordered_entries(name: str) -> list:
    """The complete reordered entries of dataset ``name`` in the cache, one per scorer and parameters."""
    from suite.datasets.cache import cache_root, is_complete
    from suite.registry import SCORERS

    return sorted(path for scorer in SCORERS for path in cache_root().glob(f"{name}.{scorer}-*") if is_complete(path))


def _cmd_verify(args) -> int:
    from suite.datasets.build import regenerate_hint
    from suite.datasets.cache import (
        describe_root,
        entry_bytes,
        entry_problem,
    )
    from suite.datasets.reordered import reordered_hint

    found = []
    for name in args.names:
        entry = _cached_entry(name, args.ogb_root)
        found.append((entry, regenerate_hint(name, args.ogb_root)))
        found += [(path, reordered_hint(name, path.name[len(name) + 1:].rsplit("-", 1)[0], args.ogb_root))
                  for path in _reordered_entries(name)]
    print(f"dataset cache: {describe_root()}")
    damaged = 0
    for path, hint in found:
        problem = entry_problem(path, hint, checksums=True, progress=not args.quiet)
        damaged += problem is not None
        print(f"{path.name}: {problem}" if problem else f"{path.name}: ok ({_human_bytes(entry_bytes(path))})")
    if damaged:
        raise DatasetFileError(f"{damaged} of {len(found)} entries are damaged (above: the file, and the command that "
                               "rebuilds the entry)")
    return 0


def _cmd_cost(args) -> int:
    from suite.datasets.cache import describe_root
    from suite.experiments.build_cost import measure
    from suite.figures.build_cost import render

    print(f"dataset cache: {describe_root()}")
    show(render(measure(args.names, args.out, one_thread=args.one_thread, progress=not args.quiet), args.out))
    return 0


def _cmd_prepare(args) -> int:
    from suite.datasets.cache import read_manifest
    from suite.datasets.reordered import prepare_reordered, reordered_hint
    from suite.registry import scorer_params

    overrides = {"damping": args.damping, "iterations": args.iterations, "tol": args.tol, "max_iter": args.max_iter}
    applicable = {k: v for k, v in overrides.items() if k in scorer_params(args.scorer)}
    ignored = sorted(k for k, v in overrides.items() if v is not None and k not in applicable)
    if ignored:
        raise BadValue(f"scorer {args.scorer} takes no {', '.join('--' + k.replace('_', '-') for k in ignored)}")
    check, reused = _verified(reordered_hint(args.dataset, args.scorer, args.ogb_root), not args.quiet)
    entry = prepare_reordered(args.dataset, args.scorer, applicable, ogb_root=args.ogb_root, force=args.force,
                              progress=not args.quiet, on_reuse=check)
    manifest = read_manifest(entry, "")
    source = manifest["source"]
    how = "; reused cached entry, checksums verified" if reused else ""
    print(
        f"{args.dataset} reordered by {args.scorer} {source['params']}: {entry}{how}\n"
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


def _scorer_param_help(name: str, what: str) -> str:
    """Which scorers take parameter ``name`` and its default in each (from the scorers' defaults)."""
    from suite.registry import SCORERS

    takers = {scorer: spec.defaults[name] for scorer, spec in SCORERS.items() if name in spec.defaults}
    if len(set(takers.values())) == 1:
        defaults = f"{next(iter(takers.values())):g}"
    else:
        defaults = ", ".join(f"{value:g} for {scorer}" for scorer, value in takers.items())
    return f"{', '.join(takers)}: {what} (default {defaults})"


def add_parsers(sub) -> None:
    """``datasets`` (``list``, ``generate``, ``info``, ``verify``, ``cost``), ``prepare`` and ``scorers``."""
    datasets = sub.add_parser("datasets", help="list, generate, inspect and verify datasets")
    dsub = datasets.add_subparsers(dest="action", required=True)
    dsub.add_parser("list", help="the synthetic presets, and whether each is cached with every file of the size its "
                    "manifest records").set_defaults(func=_cmd_list)

    names = options.parent_parser()
    names.add_argument("names", nargs="+", metavar="NAME", help="a preset name, or ogbn-* with --ogb-root")

    gen = dsub.add_parser("generate", help="build cache entries", parents=[names, options.ogb_root(), options.quiet()])
    gen.add_argument("--force", action="store_true", help="rebuild even when a complete entry exists (an entry "
                     "that exists is otherwise reused once its checksums match its manifest)")
    gen.set_defaults(func=_cmd_generate)

    info = dsub.add_parser("info", help="statistics of cached datasets (their files' sizes checked)",
                           parents=[names, options.ogb_root()])
    info.add_argument("--out", help="write summary.md, summary.csv and degree-ccdf.png into this directory")
    info.set_defaults(func=_cmd_info)

    dsub.add_parser("verify", help="check every file of cached datasets and of their reordered entries against the "
                    "size and SHA-256 their manifest records", parents=[names, options.ogb_root(), options.quiet()]
                    ).set_defaults(func=_cmd_verify)

    cost = dsub.add_parser("cost", help="build and prepare presets in child processes: time, peak memory, size, "
                           "and a projection", parents=[options.quiet()])
    cost.add_argument("names", nargs="+", metavar="NAME", help="a preset name (each is rebuilt, as with --force; "
                      "papers-100m and papers-100m-half are projected from a measured one instead)")
    cost.add_argument("--out", default="out/datasets", help="directory for build-cost.md, .csv and .png")
    cost.add_argument("--one-thread", metavar="NAME", help="also measure NAME with one numba thread, for the "
                      "projection to 16 cores")
    cost.set_defaults(func=_cmd_cost)

    prepare = sub.add_parser("prepare", help="score a dataset's nodes, reorder it hottest-first, and cache the result",
                             arguments=_prepare_arguments)
    prepare.set_defaults(func=_cmd_prepare)

    scorers = sub.add_parser("scorers", help="compare the scorers on a dataset: concentration and speed tables",
                             parents=[options.dataset(), options.ogb_root(), options.quiet()])
    scorers.add_argument("--out", required=True, help="directory for the tables and the figure")
    scorers.set_defaults(func=_cmd_scorers)


def _prepare_arguments(prepare) -> None:
    """``prepare``'s options, which name the scorers of the registry."""
    from suite.registry import SCORERS

    prepare.take(options.dataset(), options.ogb_root(), options.quiet())
    prepare.add_argument("--scorer", required=True, choices=list(SCORERS), help="how nodes are scored (Data Tiering §3.1): "
                         + ", ".join(f"{name}, {spec.label}" for name, spec in SCORERS.items()))
    prepare.add_argument("--damping", type=options.probability, help=_scorer_param_help("damping", "damping factor"))
    prepare.add_argument("--iterations", type=options.count, help=_scorer_param_help("iterations", "number of updates"))
    prepare.add_argument("--tol", type=options.positive_float, help=_scorer_param_help("tol", "L1 change to stop at"))
    prepare.add_argument("--max-iter", type=options.positive_int, help=_scorer_param_help("max_iter", "most updates"))
    prepare.add_argument("--force", action="store_true", help="rebuild even when the reordered entry exists (one "
                         "that exists is otherwise reused once its checksums match its manifest)")
