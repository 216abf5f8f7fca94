"""The cells of a sweep: which loader runs on which dataset at which hot fraction, fanouts and sampling.

A sweep is the product of datasets x fanouts x loaders x samplings x hot
fractions, each dataset at the batch of its regime (``suite.datasets.regime``:
footprint-matched to the paper's by default, or the paper's batch unscaled,
or a batch given by hand), with each loader's traits from ``suite.registry`` applied: a
loader with a hot tier runs at every hot fraction, any other once at its
fixed share (``in-memory`` 1, the rest 0); a loader that needs a reordered
dataset gets the sweep's scorer, every other the dataset in its original
order (``scorer`` "none"), as the paper's baselines do.  The predefined
sweeps are ``suite.experiments.sweeps.EXPERIMENTS``; the whole sweep is
checked here before its first cell runs.
"""

from __future__ import annotations

import dataclasses
import numbers

from suite.datasets import entry_path, get_preset
from suite.datasets import regime as regimes
from suite.datasets.build import is_real_ogb
from suite.datasets.cache import cache_root
from suite.datasets.memory_plan import (
    PlanDoesNotFit,
    RunSetting,
    check,
    run_needs,
    this_machine,
)
from suite.datasets.regime import default_fanouts
from suite.errors import BadValue
from suite.experiments.sweeps import EXPERIMENTS
from suite.registry import (
    DEFAULT_HOST_FRACTION,
    LOADERS,
    SCORERS,
    loader,
    reordered_loaders,
)
from suite.sweep import sampler_choice
from suite.training.sampling import GRAPH_MEMORY, SAMPLING, check_device, check_kernels
from tiering.sampling.fused import DEFAULT_KERNELS


@dataclasses.dataclass(frozen=True)
class Cell:
    dataset: str
    loader: str
    hot_fraction: float
    fanouts: tuple[int, ...]
    scorer: str
    sampling: str = "cpu"
    batch_size: int = regimes.PAPER_BATCH
    regime: str = "unscaled"  # which regime batch_size is in: "paper", "unscaled" or "fixed" (suite.datasets.regime)
    host_fraction: float | None = None  # a disk loader's rows in host memory, as a share of the table; None: others

    def describe(self) -> str:
        hot = f" hot {self.hot_fraction:.0%}" if loader(self.loader).hot_tier else ""
        sampling = f" {self.sampling} sampling" if self.sampling != "cpu" else ""
        host = f" host {self.host_fraction:.0%}" if self.host_fraction is not None else ""
        return f"{self.dataset} {self.loader}{hot}{host}{sampling} batch {self.batch_size}"


def cells(datasets, loaders, hot_fractions, fanouts, scorer: str = "wrpr", samplings=("cpu",), regime: str = "paper",
          batch_size: int | None = None, host_fractions=(DEFAULT_HOST_FRACTION,)) -> list[Cell]:
    """The sweep's cells; each dataset's batch is ``batch_size`` where given, else its ``regime``'s; a loader that
    reads from disk runs at every host budget of ``host_fractions``."""
    out = []
    for dataset in datasets:
        batch = regimes.resolve(dataset, regime, batch_size)
        for fanout in fanouts:
            for name in loaders:
                spec = loader(name)
                for sampling in samplings:
                    for hot in spec.hot_fractions(hot_fractions):
                        for host in host_fractions if spec.disk else [None]:
                            resolved = tuple(fanout) if fanout else default_fanouts(dataset)
                            out.append(Cell(dataset, name, hot, resolved, scorer if spec.reordered else "none",
                                            sampling, *batch, host_fraction=host))
    return out


def sweep_cells(experiment: str, *, datasets=None, loaders=None, hot_fractions=None, fanouts=None, samplings=None,
                scorer: str = "wrpr", regime: str | None = None, batch_size: int | None = None,
                host_fractions=None) -> list[Cell]:
    """The cells of a sweep: a predefined experiment's, with any setting given here replacing its own."""
    preset = EXPERIMENTS.get(experiment, {})
    settings = {
        "datasets": datasets or preset.get("datasets"),
        "loaders": loaders or preset.get("loaders"),
        "hot_fractions": hot_fractions if hot_fractions is not None else preset.get("hot_fractions", [0.1]),
        "fanouts": fanouts or preset.get("fanouts", [None]),
        "samplings": samplings or preset.get("samplings", ["cpu"]),
        "regime": regime or preset.get("regime", "paper"),
        "host_fractions": host_fractions if host_fractions is not None else preset.get(
            "host_fractions", [DEFAULT_HOST_FRACTION]),
    }
    if not settings["datasets"] or not settings["loaders"]:
        raise BadValue(f"experiment {experiment!r} is not predefined ({', '.join(EXPERIMENTS)}): give datasets and loaders")
    for name in dict.fromkeys(settings["loaders"]):
        if name not in LOADERS:
            raise BadValue(f"unknown loader {name!r}; choose from {', '.join(LOADERS)}")
    if settings["regime"] not in regimes.REGIMES:
        raise BadValue(f"unknown regime {settings['regime']!r}; choose from {', '.join(regimes.REGIMES)} (--regime)")
    return cells(**settings, scorer=scorer, batch_size=batch_size)


def check_count(value, least: int, option: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BadValue(f"{option} must be an integer of at least {least}, got {value!r}")
    return value


def check_batch_limit(batch_limit: int | None) -> int | None:
    """The minibatches each epoch stops at (``--minibatches``), at least 1; None: whole epochs."""
    return None if batch_limit is None else check_count(batch_limit, 1, "minibatches per epoch (--minibatches)")


def _check_dataset(name: str, ogb_root) -> None:
    """Refuse a dataset that is neither a preset nor a real OGB dataset under ``ogb_root``, without building it."""
    if is_real_ogb(name):
        entry_path(name, ogb_root)  # needs --ogb-root and a name ogb knows
    else:
        get_preset(name)


def _check_shares(fractions, kind: str) -> None:
    """Refuse any of ``fractions`` (``kind`` "hot" or "host") that is not a share of the rows, in [0, 1]."""
    for fraction in fractions:
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 <= fraction <= 1:
            raise BadValue(f"{kind} fractions are shares of the rows, in [0, 1]; got {fraction!r} "
                           f"(--{kind}-fractions)")


def check_cells(todo: list[Cell], hot_fractions, scorer, ogb_root, device, distributed: bool) -> None:
    """Refuse any setting of the sweep that its cells could not run with, naming it and the valid choices."""
    for name in dict.fromkeys(cell.dataset for cell in todo):
        _check_dataset(name, ogb_root)
    if any(LOADERS[cell.loader].reordered for cell in todo) and scorer not in SCORERS:
        raise BadValue(f"the {'/'.join(reordered_loaders())} loader needs a dataset reordered by a scorer, got "
                       f"scorer {scorer!r}; choose from {', '.join(SCORERS)} (--scorer)")
    _check_shares(hot_fractions, "hot")
    _check_shares(dict.fromkeys(cell.host_fraction for cell in todo if cell.host_fraction is not None), "host")
    for cell in todo:
        if LOADERS[cell.loader].hot_tier and cell.host_fraction is not None and cell.hot_fraction + cell.host_fraction > 1:
            raise BadValue(f"{cell.loader}'s GPU and host tiers are shares of one table: hot fraction "
                           f"{cell.hot_fraction:g} + host fraction {cell.host_fraction:g} is more than 1 "
                           "(--hot-fractions, --host-fractions)")
    for fanout in {cell.fanouts for cell in todo}:
        if not fanout or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in fanout):
            raise BadValue(f"fanouts are one or more neighbour counts of at least 1, got {fanout!r} (--fanout)")
    for sampling in dict.fromkeys(cell.sampling for cell in todo):
        if sampling not in SAMPLING:
            raise BadValue(f"unknown sampling {sampling!r}; choose from {', '.join(SAMPLING)} (--sampling)")
        if sampling == "distributed" and not distributed:
            raise BadValue("distributed sampling is for multi-process runs: add --gpus G (or give another --sampling)")
        check_device(sampling, device)
    check_memory_plans(todo, device)


def check_sampler_kernels(todo: list[Cell], option: str, device, launcher: bool = False) -> sampler_choice.KernelChoice:
    """The fused GPU sampler's kernels for ``option`` (``suite.sweep.sampler_choice.CHOICES``) in the cells that
    sample with it; the CUDA C++ ones refused in one line where no cell samples with the fused sampler, or where those
    cells could not launch them (``suite.training.sampling.check_kernels``: no CUDA device, no CuPy).  Cells sampled
    otherwise (``cpu``, ``distributed``) run beside them in the same sweep.  In the ``launcher`` of a process group,
    which never touches a GPU itself, ``measured`` is left for each process to resolve."""
    samplings = list(dict.fromkeys(cell.sampling for cell in todo))
    fused = [sampling for sampling in samplings if sampling in GRAPH_MEMORY]
    if not fused and option not in (sampler_choice.MEASURED, DEFAULT_KERNELS):
        raise BadValue(f"--sampler-kernels {option} chooses the fused GPU sampler's kernels, which no cell of this "
                       f"sweep runs ({', '.join(samplings)} sampling): add --sampling {' or '.join(GRAPH_MEMORY)}")
    if launcher and option == sampler_choice.MEASURED:
        return sampler_choice.KernelChoice(option, "resolved by each process of the group")
    choice = sampler_choice.sampler_kernels(option, samplings, device)
    for sampling in fused:
        check_kernels(sampling, choice.kernels, device)
    return choice


def is_paper_scale(dataset: str) -> bool:
    """Whether ``dataset`` is a ``gpu_built`` preset, whose runs are planned against memory first."""
    return not is_real_ogb(dataset) and get_preset(dataset).gpu_built


def run_needs_of(cell: Cell, hidden: int = RunSetting.hidden) -> list:
    """What training ``cell`` on its paper-scale dataset needs of the machine (``suite.datasets.memory_plan``), with a
    model of ``hidden`` units (the trainer's default unless told)."""
    setting = RunSetting(cell.loader, cell.hot_fraction, cell.sampling, cell.batch_size, tuple(cell.fanouts),
                         hidden)
    return run_needs(get_preset(cell.dataset), setting)


def check_memory_plans(todo: list[Cell], device) -> None:
    """Every cell on a paper-scale dataset (``gpu_built``) against this machine's memory, before any dataset is
    opened (``suite.datasets.memory_plan``): the first that does not fit is refused, naming the cell and both sizes."""
    paper_scale = [cell for cell in todo if is_paper_scale(cell.dataset)]
    if not paper_scale:
        return
    machine = this_machine(cache_root())
    for cell in paper_scale:
        try:
            check(cell.dataset, run_needs_of(cell), machine, needs_gpu=str(device).startswith("cuda"))
        except PlanDoesNotFit as err:
            raise PlanDoesNotFit(f"cell {cell.describe()}: {err}") from None


