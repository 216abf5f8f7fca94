"""``tierbench profile``: measured reuse as Figure 7 or 9, by the figure's number.

``tierbench profile --dataset NAME --figure 7|9`` measures it
(``suite.figures.fig7``, ``fig9``; ``tox -e fig7``, ``tox -e fig9``), and
``tierbench report --figure 7|9 --dataset NAME`` draws it again from its
curves.
"""

from __future__ import annotations

from pathlib import Path

from suite.figures import fig7, fig9
from suite.figures.reuse import open_run, replot

PROFILE_FIGURES = {7: fig7, 9: fig9}
"""The figures of measured reuse by number: each module's ``measure(run)`` writes it, ``plot(curves, name)`` draws
it."""


def _figure(figure: int):
    if figure not in PROFILE_FIGURES:
        raise ValueError(f"figure must be {' or '.join(map(str, PROFILE_FIGURES))}, got {figure}")
    return PROFILE_FIGURES[figure]


def profile_figure(name: str, figure: int, out_dir, *, fanouts=None, epochs: int = 1, batch_size: int | None = None,
                   regime: str = "paper", seed: int = 0, ogb_root=None, progress: bool = True) -> list[Path]:
    """Measure reuse on ``name`` and write Figure 7 or 9's table, curves and plot into ``out_dir``."""
    module = _figure(figure)
    run = open_run(name, figure, out_dir, fanouts=fanouts, epochs=epochs, batch_size=batch_size, regime=regime, seed=seed,
                   ogb_root=ogb_root, progress=progress)
    return module.measure(run)


def replot_figure(out_dir, figure: int, name: str) -> Path:
    """Draw Figure 7 or 9 of dataset ``name`` again from the curves CSV in ``out_dir``."""
    return replot(out_dir, figure, name, _figure(figure).plot)
