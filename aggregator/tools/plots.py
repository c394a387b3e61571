"""Figures (matplotlib, headless Agg backend): the error of each trust model against n.

The figure is log-log: the local error grows like √n (a straight line of slope 1/2), the central one is
flat at √2/ε; one colour per ε, solid lines for the formulas and markers for the simulated points.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .compare import ErrorCurve

__all__ = ["Marker", "plot_error_curves", "plot_path"]

#: A labelled point to draw on top of the curves, e.g. the demo's own run: (label, n, sd).
Marker = tuple[str, float, float]


def plot_path(path: str | Path) -> Path:
    """Where a figure asked for as ``path`` is written: ``.png`` added when the name has no suffix
    (``out`` → ``out.png``); ``ValueError`` if its folder does not exist (it is never created silently)."""
    path = Path(path)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"cannot write the plot to {path}: the folder {folder} does not exist; create it first")
    return path


def plot_error_curves(
    curves: Sequence[ErrorCurve],
    path: str | Path,
    *,
    title: str = "count error",
    markers: Sequence[Marker] = (),
    ylabel: str = "standard deviation of the estimated count",
) -> Path:
    """Draw ``curves`` (and ``markers``) to :func:`plot_path` of ``path`` (PNG, or any format matplotlib
    knows by the suffix); return the path written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = plot_path(path)
    epsilons = sorted({c.epsilon for c in curves})
    colours = {eps: plt.get_cmap("viridis")(i / max(1, len(epsilons) - 1) * 0.85) for i, eps in enumerate(epsilons)}
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    for curve in curves:
        central = curve.model.startswith("central")
        shuffled = curve.model.startswith("shuffled")
        style = "--" if central else (":" if shuffled else "-")
        colour = colours[curve.epsilon]
        ax.plot(
            curve.n,
            curve.analytic,
            style,
            color=colour,
            lw=1.6,
            label=f"{curve.model}, ε = {curve.epsilon:g}",
        )
        shape = "s" if central else ("^" if shuffled else "o")
        ax.plot(curve.measured_n, curve.measured, shape, color=colour, ms=5, mfc="none")
    for label, n, sd in markers:
        ax.plot([n], [sd], "*", ms=14, color="crimson", zorder=5)
        ax.annotate(label, (n, sd), textcoords="offset points", xytext=(8, 6), fontsize=8, color="crimson")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (respondents)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}\nlines: formulas; markers: simulation (o local, △ shuffled, □ central)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
