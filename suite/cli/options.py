"""The options several ``tierbench`` subcommands share, and the types that check every numeric option.

A value an option's type refuses ends the command in one line, ``tierbench: error: argument --epochs: must be at
least 1, got '0'``, before any work.  The shared options are declared once, in parent parsers that a subcommand
take in (``_Parser.take``).  The presets and regimes they name are imported when a subcommand's options are added,
not when this module is.
"""

from __future__ import annotations

import argparse
import math
import sys

from suite.measure.host_memory import physical_bytes

DEFAULT_SCORER = "wrpr"  # weighted reverse PageRank, the scorer Data Tiering §3.1 trains with
DEFAULT_HOT_FRACTION = 0.1

REGIME_HELP = ("the batch's regime (suite/datasets/regime.py): paper, a batch whose footprint (the share of the "
               "graph one minibatch touches) matches the paper's batch on the graph the dataset imitates; unscaled, "
               "the paper's 1024 seeds as they are; --batch-size overrides both")
OGB_ROOT_HELP = "directory holding real OGB datasets (as ogb lays them out; nothing is downloaded)"


def loader_hot_fraction(name: str, hot_fraction: float | None) -> float:
    """The share of rows loader ``name`` keeps in GPU memory: ``hot_fraction`` (default ``DEFAULT_HOT_FRACTION``) for
    a loader with a hot tier, else all or none of them (``--hot-fraction`` given to such a loader is ignored, with a
    warning)."""
    from suite.registry import hot_tier_loaders, loader

    spec = loader(name)
    if spec.hot_tier:
        return DEFAULT_HOT_FRACTION if hot_fraction is None else hot_fraction
    if hot_fraction is not None:
        print(f"tierbench: warning: --hot-fraction {hot_fraction} is ignored: loader {name} has no hot tier (it keeps "
              f"{spec.gpu_share:.0%} of the rows in GPU memory); the loaders with one are "
              f"{', '.join(hot_tier_loaders())}", file=sys.stderr)
    return spec.gpu_share


def loader_scorer(name: str, scorer: str | None) -> str | None:
    """The scorer whose order loader ``name`` reads the dataset in: ``scorer``, else ``DEFAULT_SCORER`` for a loader
    that needs a dataset reordered hottest-first (said in a line), else None (the original order)."""
    from suite.registry import loader

    if scorer is None and loader(name).reordered:
        print(f"loader {name} needs a dataset reordered hottest-first: using --scorer {DEFAULT_SCORER} "
              f"(weighted reverse PageRank; --scorer chooses another)")
        return DEFAULT_SCORER
    return scorer


def dataset_help(real_ogb: bool = True) -> str:
    """``--dataset``'s help: the presets, and for a command that takes ``--ogb-root`` the real ogbn-* datasets."""
    from suite.datasets.presets import PRESETS

    presets = f"a preset ({', '.join(PRESETS)})"
    return f"{presets}, or ogbn-* with --ogb-root" if real_ogb else presets


# ----------------------------------------------------------------- types
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


def integer(text: str) -> int:
    """Any integer: for the options whose range the command checks later, with a message of its own."""
    return _number(text, int)


MAX_SEED = 2**32 - 1  # a 32-bit seed, which numpy's, torch's and numba's generators all take
MAX_FANOUT = 2**31 - 1  # the samplers count neighbours in int64: a larger fanout only overflows them

positive_int = _checked(int, lambda v: v >= 1, "must be at least 1")  # epochs, sizes, repeats, processes
count = _checked(int, lambda v: v >= 0, "must be at least 0")  # partitions read ahead, iterations
seed = _checked(int, lambda v: 0 <= v <= MAX_SEED, f"must be at least 0 and at most {MAX_SEED}")  # of minibatches, models
positive_float = _checked(float, lambda v: v > 0, "must be above 0")  # learning rate, sizes in GiB, tolerances
fraction = _checked(float, lambda v: 0 <= v <= 1, "must be in [0, 1]")  # a share of rows: hot fractions
edge_share = _checked(float, lambda v: 0 < v <= 1, "must be above 0 and at most 1")  # a share of the edges
probability = _checked(float, lambda v: 0 <= v < 1, "is a probability in [0, 1)")  # dropout, damping


def fanouts(text: str) -> tuple[int, ...]:
    """Comma-separated neighbour counts, each at most ``MAX_FANOUT`` (the sweep checks that each is at least 1,
    with its other settings)."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"fanouts are comma-separated integers such as 12,12,12, got {text!r}") from None
    if not all(value <= MAX_FANOUT for value in values):
        raise argparse.ArgumentTypeError(f"fanouts are neighbour counts of at most {MAX_FANOUT}, got {text!r}")
    return values


def positive_fanouts(text: str) -> tuple[int, ...]:
    """``fanouts``, each at least 1."""
    values = fanouts(text)
    if not all(value >= 1 for value in values):
        raise argparse.ArgumentTypeError(f"fanouts are neighbour counts of at least 1, got {text!r}")
    return values


def host_bytes(text: str) -> int:
    """A size in bytes of host memory, at most this machine's RAM (doctor checks that it is not negative)."""
    value = _number(text, int)
    ram = physical_bytes()
    if value > ram:
        raise argparse.ArgumentTypeError(f"must be at most this machine's RAM, {ram:,} bytes, got {text!r}")
    return value


def numbers(text: str) -> list[float]:
    """Comma-separated numbers (their range is the command's to check)."""
    try:
        return [_number(part, float) for part in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers such as 0,0.05,0.1, got {text!r}") from None


def names(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


# ----------------------------------------------------------------- parents
def parent_parser() -> argparse.ArgumentParser:
    """A parser of options that subcommands take in (``_Parser.take``)."""
    return argparse.ArgumentParser(add_help=False)


def quiet() -> argparse.ArgumentParser:
    """``-q``: no progress bars."""
    parent = parent_parser()
    parent.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    return parent


def dataset(real_ogb: bool = True) -> argparse.ArgumentParser:
    """``--dataset NAME``, required; ``real_ogb``: the command also takes ``--ogb-root`` and a real ogbn-* dataset."""
    parent = parent_parser()
    parent.add_argument("--dataset", required=True, help=dataset_help(real_ogb))
    return parent


def ogb_root() -> argparse.ArgumentParser:
    """``--ogb-root DIR``, where real OGB datasets are read from."""
    parent = parent_parser()
    parent.add_argument("--ogb-root", help=OGB_ROOT_HELP)
    return parent


def minibatches(fanout_help: str, seed_help: str) -> argparse.ArgumentParser:
    """How minibatches are drawn: ``--fanout``, ``--batch-size``, ``--regime`` and ``--seed``."""
    from suite.datasets.regime import REGIMES

    parent = parent_parser()
    parent.add_argument("--fanout", type=positive_fanouts, help=fanout_help)
    parent.add_argument("--batch-size", type=positive_int, help="seed nodes per minibatch (default: --regime's)")
    parent.add_argument("--regime", choices=REGIMES, default="paper", help=REGIME_HELP)
    parent.add_argument("--seed", type=seed, default=0, help=seed_help)
    return parent


def minibatch_limit() -> argparse.ArgumentParser:
    """``--minibatches N``: time only the first N minibatches of every epoch (and of every validation pass)."""
    parent = parent_parser()
    parent.add_argument("--minibatches", type=integer, help="time only the first N minibatches of every epoch, "
                        "at least 1, and validate on their seeds alone (recorded per row: batches, epoch_batches, "
                        "batch_limit; default: whole epochs)")
    return parent


def validation() -> argparse.ArgumentParser:
    """``--no-validation``: no validation pass after each epoch."""
    parent = parent_parser()
    parent.add_argument("--no-validation", dest="validate", action="store_false", help="skip the validation pass "
                        "after each epoch (its accuracy is recorded empty; epoch times never include the pass)")
    return parent


def sampler_kernels() -> argparse.ArgumentParser:
    """``--sampler-kernels``: which kernels the fused GPU sampler launches (``tiering.sampling.fused.KERNELS``), or
    ``measured`` (``suite.sweep.sampler_choice``)."""
    from suite.sweep.sampler_choice import CHOICES, MEASURED

    parent = parent_parser()
    parent.add_argument("--sampler-kernels", default=MEASURED, choices=CHOICES, help="the fused GPU sampler's "
                        "kernels, for gpu and uva sampling: numba (numba-cuda), cupy (the same kernels in CUDA C++, "
                        "launched by CuPy), or measured (the default): the set `tierbench samplerbench` measured "
                        "faster on this GPU (its records in out/gpu or results/gpu), else numba")
    return parent


def traces(epochs: int, epochs_help: str) -> list[argparse.ArgumentParser]:
    """The options of a command that records an access trace of sampled minibatches and replays it."""
    parent = parent_parser()
    parent.add_argument("--epochs", type=positive_int, default=epochs, help=epochs_help)
    parent.add_argument("--trace-dir", help="where traces are kept (default: traces/ in the dataset cache)")
    return [dataset(), parent,
            minibatches("fanouts (default: the dataset's training fanouts)", "seed of the traced minibatches"),
            ogb_root(), quiet()]
