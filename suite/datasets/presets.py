"""Named synthetic datasets, each shaped like the graph it imitates.

Shapes follow docs/design.md and the OGB datasets used in Data Tiering (Table 1):

* **papers-like** (ogbn-papers100M): directed, ~30 list entries per node
  (3.2B edges / 111M nodes, counted both ways as in Data Tiering), feature width
  128, 172 classes, ~1.4% of nodes labelled (1.1% train, 0.1% valid, 0.2%
  test; the rest carry no label, NaN in the OGB file, as in the real one).
  Degree concentration matched to the paper's §5.2 figure: the top 1% of
  nodes hold 32% of the edges of ogbn-papers100M.  For a Pareto propensity
  with tail index alpha the top fraction p holds p**(1 - 1/alpha) of the
  mass, so alpha = 1.33 would give 32% at p = 1%; removing duplicate edges
  trims the hubs, so the presets use alpha = 1.2 (degree exponent 2.2) and
  draw 38 entries per node to keep ~30 after duplicates go (measured values
  are in each dataset's manifest: ``tierbench datasets info``).
* **products-like** (ogbn-products): symmetric, average degree ~50, feature
  width 100, 47 classes, 8% train / 1.6% valid / the rest test, strong label
  homophily (co-purchased products share a category).  The degree exponent
  2.5 is an assumption: we know of no published concentration figure.
* **graph500**: R-MAT with the Graph500 parameters (undirected, edge factor
  16), a generic skewed graph.
* **tiny**: a few thousand nodes, for CI; enough labels per class to learn.

``papers-xs`` (262,144 nodes) is the demo's graph, built in seconds; ``papers-xs-gpu-built`` is the same graph
(with the same labels and splits) built the way ``papers-100m`` is, its table made when it is opened: the paper-scale
route at a size CI and a first GPU command run in seconds;
``papers-s`` and ``products-s`` build on a 2-core, 24 GB machine in well
under two minutes; ``papers-m`` and ``papers-l`` are meant for the GPU machine
(16 cores, 128 GB): 8.6 M and 16.8 M nodes, 4.3 GB and 8.6 GB of features.

``papers-100m`` is ogbn-papers100M's own size: its 111,059,956 nodes and
OGB's 1.6B directed edges (14.55 drawn per node, the papers presets' degree
exponent), a 57 GB float32 feature table; ``papers-100m-half`` is the same
graph with float16 features (28 GB).  Both are built on the GPU machine
(``gpu_built``), their feature table generated into pinned host memory and
never written to disk; only the CSR is cached (``csr_bytes``, ~7 GB).  Their
memory plan (``suite.datasets.memory_plan``) is checked before anything is
allocated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib

import numpy as np

from suite.errors import UnknownName

GENERATORS = ("dcsbm", "rmat")
FEATURE_DTYPES = {"float32": 4, "float16": 2}
"""The feature tables' element types, and their bytes per element."""
PAPERS_100M_NODES = 111_059_956
PAPERS_100M_EDGES = 1_615_685_872
"""ogbn-papers100M's nodes and directed edges, from OGB's dataset page (each edge once; Data Tiering counts them both
ways, 3.2B)."""

@dataclasses.dataclass(frozen=True)
class Preset:
    """Everything that determines a synthetic dataset; its hash keys the cache."""

    name: str
    imitates: str  # the graph it is shaped like; suite.datasets.regime.IMITATED has the paper's setting on it
    generator: str  # "dcsbm" or "rmat"
    num_nodes: int  # for rmat, a power of two
    avg_degree: float  # list entries per node before duplicates are removed
    symmetric: bool
    feature_dim: int
    num_classes: int
    train_fraction: float
    valid_fraction: float
    test_fraction: float  # labelled test nodes; nodes outside the splits carry no label
    degree_exponent: float = 2.5  # dcsbm: exponent of the power-law propensities
    homophily: float = 0.7  # dcsbm: chance an edge stays inside its class
    class_skew: float = 0.8  # class sizes proportional to (k + 1) ** -class_skew
    # features: own-class weight and neighbours' mean-class weight against unit noise; with these,
    # nearest-centroid accuracy on papers-like data is ~0.30 from a node's own features and ~0.54
    # with the mean of its neighbours' features added (majority class: 0.10)
    signal: float = 0.1
    neighbor_signal: float = 0.2
    seed: int = 0
    feature_dtype: str = "float32"
    gpu_built: bool = False  # paper scale: built on the GPU machine, features kept in pinned host memory only

    def __post_init__(self):
        if self.generator not in GENERATORS:
            raise ValueError(f"generator must be one of {GENERATORS}, got {self.generator!r}")
        if self.feature_dtype not in FEATURE_DTYPES:
            raise ValueError(f"feature_dtype must be one of {tuple(FEATURE_DTYPES)}, got {self.feature_dtype!r}")
        if self.gpu_built and self.generator != "dcsbm":
            raise ValueError(f"a gpu_built preset draws its graph with the dcsbm generator, got {self.generator!r}")
        if self.generator == "rmat" and self.num_nodes & (self.num_nodes - 1):
            raise ValueError(f"rmat needs a power-of-two num_nodes, got {self.num_nodes}")
        total = self.train_fraction + self.valid_fraction + self.test_fraction
        if not 0 < total <= 1:
            raise ValueError(f"split fractions must add up to at most 1, got {total}")

    @property
    def num_labeled(self) -> int:
        return int(round(self.num_nodes * (self.train_fraction + self.valid_fraction + self.test_fraction)))

    def params(self) -> dict:
        return dataclasses.asdict(self)

    def sub_seed(self, purpose: str) -> int:
        """The seed of one independent random part of the dataset (``"graph"``, ``"splits"``, ``"features"``)."""
        return int(np.random.SeedSequence([self.seed, zlib.crc32(purpose.encode())]).generate_state(1, np.uint64)[0])

    def key(self) -> str:
        """A short hash of what the arrays depend on: changing any of it makes a new cache entry.

        ``gpu_built`` says how the arrays are built, not what they are, and is left out; ``feature_dtype`` enters
        only when it is not float32, the one type of every entry built before the type was a parameter, so that
        their keys (and the records naming them) stay."""
        params = self.params()
        del params["gpu_built"]
        if params["feature_dtype"] == "float32":
            del params["feature_dtype"]
        blob = json.dumps(params, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    @property
    def drawn_edges(self) -> int:
        """The edges the generator draws: a symmetric preset adds each both ways, so half its list entries."""
        return round(self.num_nodes * self.avg_degree / (2 if self.symmetric else 1))

    @property
    def list_entries(self) -> int:
        """The list entries drawn (duplicates, removed in the build, included): an upper bound on the CSR's."""
        return round(self.num_nodes * self.avg_degree)

    @property
    def row_bytes(self) -> int:
        return self.feature_dim * FEATURE_DTYPES[self.feature_dtype]

    @property
    def feature_bytes(self) -> int:
        return self.num_nodes * self.row_bytes

    @property
    def csr_arrays_bytes(self) -> tuple[int, int]:
        """``indptr`` (int64, N + 1) and ``indices`` (int32 below 2**31 nodes, else int64) of the drawn entries."""
        index_bytes = 4 if self.num_nodes < 2**31 else 8
        return (self.num_nodes + 1) * 8, self.list_entries * index_bytes

    @property
    def csr_bytes(self) -> int:
        return sum(self.csr_arrays_bytes)

    @property
    def label_bytes(self) -> int:
        """Labels (int64 per node) and the splits' ids (int64 per labelled node)."""
        return self.num_nodes * 8 + self.num_labeled * 8

    @property
    def train_size(self) -> int:
        return round(self.num_nodes * self.train_fraction)

    def estimated_bytes(self) -> int:
        """The dataset's arrays: features, CSR (before duplicates are removed), labels and splits."""
        return self.feature_bytes + self.csr_bytes + self.label_bytes

    @property
    def disk_bytes(self) -> int:
        """What its cache entry holds, estimated: every array, the feature table only when not ``gpu_built``."""
        return self.estimated_bytes() - (self.feature_bytes if self.gpu_built else 0)


def _papers(name: str, num_nodes: int) -> Preset:
    return Preset(
        name=name,
        imitates="ogbn-papers100M",
        generator="dcsbm",
        num_nodes=num_nodes,
        avg_degree=38.0,
        symmetric=False,
        feature_dim=128,
        num_classes=172,
        train_fraction=0.011,
        valid_fraction=0.0011,
        test_fraction=0.0019,
        degree_exponent=2.2,
        homophily=0.6,
    )


_PAPERS_100M = dataclasses.replace(_papers("papers-100m", PAPERS_100M_NODES),
                                   avg_degree=round(PAPERS_100M_EDGES / PAPERS_100M_NODES, 2), gpu_built=True)

_TINY = Preset(
    name="tiny",
    imitates="ogbn-products (CI size)",
    generator="dcsbm",
    num_nodes=4096,
    avg_degree=12.0,
    symmetric=True,
    feature_dim=32,
    num_classes=8,
    train_fraction=0.3,
    valid_fraction=0.1,
    test_fraction=0.6,
    homophily=0.8,
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        _TINY,
        dataclasses.replace(_TINY, name="tiny-rmat", imitates="Graph500 (CI size)", generator="rmat", avg_degree=16.0),
        Preset(
            name="products-s",
            imitates="ogbn-products",
            generator="dcsbm",
            num_nodes=250_000,
            avg_degree=50.0,
            symmetric=True,
            feature_dim=100,
            num_classes=47,
            train_fraction=0.08,
            valid_fraction=0.016,
            test_fraction=0.904,
            degree_exponent=2.5,
            homophily=0.8,
        ),
        _papers("papers-xs", 1 << 18),
        dataclasses.replace(_papers("papers-xs-gpu-built", 1 << 18), gpu_built=True),
        _papers("papers-s", 1 << 20),
        _papers("papers-m", 1 << 23),
        _papers("papers-l", 1 << 24),
        _PAPERS_100M,
        dataclasses.replace(_PAPERS_100M, name="papers-100m-half", feature_dtype="float16"),
        Preset(
            name="graph500-s",
            imitates="Graph500 scale 20, edge factor 16",
            generator="rmat",
            num_nodes=1 << 20,
            avg_degree=32.0,  # edge factor 16, counted both ways
            symmetric=True,
            feature_dim=128,
            num_classes=64,
            train_fraction=0.05,
            valid_fraction=0.01,
            test_fraction=0.04,
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownName(
            f"unknown dataset {name!r}; synthetic presets are {', '.join(PRESETS)}, "
            f"and real OGB datasets are named ogbn-*"
        ) from None
