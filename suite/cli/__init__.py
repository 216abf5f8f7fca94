"""The ``tierbench`` command.

    tierbench datasets list                       presets, their shapes, and whether they are cached (sizes checked)
    tierbench datasets generate NAME [NAME ...]   build cache entries (synthetic, or a real ogbn-* with --ogb-root)
    tierbench datasets info NAME [NAME ...]       statistics from the manifests; --out DIR writes a table and a figure
    tierbench datasets verify NAME [NAME ...]     every file of the entries and their reordered ones against its SHA-256
    tierbench datasets cost NAME [NAME ...]       time, peak memory and size of building and preparing, and a projection
    tierbench prepare --dataset NAME --scorer S   score, reorder and cache a dataset (S: see prepare --help)
    tierbench scorers --dataset NAME --out DIR    score concentration and scoring/reordering speed tables
    tierbench train --dataset NAME --epochs K     GraphSAGE training, timed per stage, with validation accuracy
    tierbench profile --dataset NAME --figure 7|9 measured feature reuse by scorer (paper Figures 7 and 9)
    tierbench policies --dataset NAME             every placement policy against Belady's bound and the static optimum
    tierbench plan --dataset NAME --gpu-memory M  the policy and hot fraction to use in M of GPU memory, projected
    tierbench disk --dataset NAME                 disk-backed loaders on traced minibatches, against the disk's ceilings
    tierbench bucket-orders --out DIR             partition swaps of BETA, Hilbert and row-major orderings (Marius)
    tierbench bucket-train --dataset NAME         link prediction through the partition buffer, per ordering (Marius)
    tierbench sar --dataset NAME                  full-batch training, vanilla domain parallelism against SAR
    tierbench doctor                              preflight: versions, GPUs, PCIe links, pinning, ceilings -> out/machines
    tierbench gpubench --out DIR                  gather microbenchmarks against same-run peers (needs a GPU)
    tierbench samplerbench --dataset NAME         sampled edges/s of the CPU and the fused GPU sampler (GPU memory, UVA)
    tierbench gpu-suite [--dry-run]               a first GPU visit in one resumable command -> out/gpu/<device>
    tierbench run --experiment fig8|fig10|demo    a sweep of training epochs over loaders and hot fractions
    tierbench run --experiment fig11 --gpus G     the same on G processes, one per GPU (torchrun, DDP)
    tierbench report --experiment NAME            tables and figures from a sweep's records (Figures 8, 10, 11)
    tierbench report --figure 7|9 --dataset NAME  redraw Figure 7 or 9 from its CSV
    tierbench report --figure F --records PATH    draw any figure again from the records its command wrote

Every subcommand's --help lists its options with their defaults.  A user error (``suite.errors.UserError``, a value
an option's type refuses) and running out of memory end the command with one line, "tierbench: error: ...", and exit
status 2; any other exception is a bug, and shows its traceback.  Each module of this package adds one family of
subcommands and holds their handlers; ``suite.cli.options`` holds the options they share and the types that check them.
"""

from __future__ import annotations

import argparse
import logging
import sys

from suite.cli import datasets, disk, machine, policies, sar, sweeps, training
from suite.cli.output import check_destinations, writing_into
from suite.errors import UserError


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, and each option's default after its help (unless it has none, is a flag, or the help
    already says it)."""

    def _get_help_string(self, action):
        if (action.default is None or isinstance(action.default, bool) or action.default == []
                or "default" in (action.help or "")):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """tierbench's parser and its subcommands': defaults shown in --help, a bad option reported in one line.

    ``arguments(parser)``, where given, adds the parser's options when they are first needed (``complete``): when
    the subcommand is parsed or its help or usage printed, never while the whole parser is built.  Options whose
    choices and help come from the registry, the regimes or the figures (which import torch and numba) are added so,
    and each handler imports what it runs: ``tierbench --help`` takes a fraction of a second."""

    def __init__(self, *args, formatter_class=_HelpFormatter, arguments=None, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)
        self._arguments = arguments

    def complete(self) -> "_Parser":
        """Add the options ``arguments`` adds, once; the parser."""
        arguments, self._arguments = self._arguments, None
        if arguments is not None:
            arguments(self)
        return self

    def take(self, *parents: argparse.ArgumentParser) -> None:
        """The options of ``parents`` (``suite.cli.options``), as ``parents=`` would have added them."""
        for parent in parents:
            self._add_container_actions(parent)

    def parse_known_args(self, args=None, namespace=None):
        self.complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self):
        self.complete()
        return super().format_usage()

    def format_help(self):
        self.complete()
        return super().format_help()

    def error(self, message):
        self.exit(2, f"tierbench: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tierbench", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log what is being done")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (datasets, training, policies, disk, sar, machine, sweeps):
        group.add_parsers(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    from suite.measure.devices import resolve_device

    args.argv = list(sys.argv[1:] if argv is None else argv)  # what --gpus relaunches under torchrun
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        check_destinations(args)  # before any work: an output folder that is a file, or not writable
        if getattr(args, "device", None) is not None:
            resolve_device(args.device)  # before any work: CUDA asked for where there is none, or no such device
        with writing_into(args):
            return args.func(args)
    except UserError as err:
        message = str(err)
    except MemoryError as err:  # host RAM, and tiering's HotTierTooLarge and PlacementTooLarge
        message = str(err) or "out of host memory"
    except torch.OutOfMemoryError as err:
        message = (f"{str(err).splitlines()[0]} (out of GPU memory while running; lower --batch-size or the hot "
                   "fraction)")
    print(f"tierbench: error: {message}", file=sys.stderr)
    return 2
