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

``papers-xs`` (262,144 nodes) is the demo's graph, built in seconds;
``papers-s`` and ``products-s`` build on a 2-core, 24 GB machine in well
under two minutes; ``papers-m`` and ``papers-l`` are meant for the GPU machine
(16 cores, 128 GB): 8.6 M and 16.8 M nodes, 4.3 GB and 8.6 GB of features.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from suite.errors import UnknownName

GENERATORS = ("dcsbm", "rmat")

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

    def __post_init__(self):
        if self.generator not in GENERATORS:
            raise ValueError(f"generator must be one of {GENERATORS}, got {self.generator!r}")
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

    def key(self) -> str:
        """A short hash of all parameters: changing any of them makes a new cache entry."""
        blob = json.dumps(self.params(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def estimated_bytes(self) -> int:
        """The entry's arrays: features, CSR (before duplicates are removed), labels and splits."""
        entries = self.num_nodes * self.avg_degree
        return int(self.num_nodes * self.feature_dim * 4 + entries * 4 + (self.num_nodes + 1) * 8
                   + self.num_nodes * 8 + self.num_labeled * 8)


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
        _papers("papers-s", 1 << 20),
        _papers("papers-m", 1 << 23),
        _papers("papers-l", 1 << 24),
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
