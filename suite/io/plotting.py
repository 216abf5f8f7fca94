"""Figures: headless rendering, one look for all of them, and crash-safe saving with the provenance line."""

from __future__ import annotations

from pathlib import Path

from suite.io import atomic
from suite.io.provenance import caption


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


def write_table_and_figure(out_dir, stem: str, markdown: str, table, fig, record: dict, *, figure_stem: str | None = None,
                           **csv_options) -> list[Path]:
    """``<stem>.md`` holding ``markdown``, ``<stem>.csv`` holding ``table`` and ``<figure_stem or stem>.png``, all crash-safe."""
    out_dir = Path(out_dir)
    paths = [out_dir / f"{stem}.md", out_dir / f"{stem}.csv", out_dir / f"{figure_stem or stem}.png"]
    atomic.write_text(paths[0], markdown)
    atomic.write_csv(paths[1], table, **csv_options)
    save_figure(fig, paths[2], record)
    return paths
