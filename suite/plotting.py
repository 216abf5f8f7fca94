"""Figures: headless rendering, one look for all of them, and crash-safe saving with the provenance line (rules 2, 5, 8)."""

from __future__ import annotations

from . import atomic
from .provenance import caption


def pyplot():
    """``(plt, sns)`` set up for files, not screens, with tierbench's theme."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid")
    return plt, sns


def save_figure(fig, path, record: dict) -> None:
    """Write ``fig`` as a PNG through a temporary file, with the device / revision / time line at its foot."""
    import matplotlib.pyplot as plt

    fig.text(0.01, 0.01, caption(record), fontsize=7, color="0.4")
    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
