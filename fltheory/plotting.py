"""One figure style for every experiment.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot),
so they need no display, leave no global figure state behind and are safe in
worker processes; saving goes through the Agg/PDF canvases.

Style: serif-free readable fonts (9 pt body, 10 pt titles), the Okabe-Ito
colour-blind-safe palette (Okabe & Ito 2008, "Color Universal Design") as the
colour cycle with distinct line styles, light grid, no top/right spines.
Use it as::

    from fltheory import plotting
    with plotting.style():
        fig, axes = plotting.figure(1, 2)
        axes[0].plot(x, y, label="exact / bound")
        plotting.ratio_axis(axes[0])
        plotting.save_figure(fig, "figures/my_experiment")   # .pdf and .png, atomically
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .errors import InvalidHyperparameterError
from .results import atomic_write

__all__ = ["OKABE_ITO", "LINESTYLES", "STYLE", "style", "figure", "ratio_axis", "save_figure"]

#: Okabe-Ito palette (black last: it is used for reference lines).
OKABE_ITO: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7",
                              "#56B4E9", "#F0E442", "#000000")
LINESTYLES: tuple[str, ...] = ("-", "--", "-.", ":", "-", "--", "-.", ":")

#: rcParams of the house style.
STYLE: dict[str, Any] = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "legend.fontsize": 8.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "axes.prop_cycle": cycler(color=list(OKABE_ITO)) + cycler(linestyle=list(LINESTYLES)),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.5,
    "lines.markersize": 4.0,
    "legend.frameon": False,
    "figure.dpi": 100.0,
    "savefig.dpi": 200.0,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
}

#: Width of one column / full text in inches (a two-column paper layout).
COLUMN_WIDTH = 3.4
TEXT_WIDTH = 7.0


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Context in which matplotlib uses :data:`STYLE` (restored on exit)."""
    with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]  # STYLE's str keys are rcParams names
        yield


def figure(nrows: int = 1, ncols: int = 1, *, width: float | None = None,
           height: float | None = None, sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A new styled figure with an ``nrows x ncols`` grid; returns ``(fig, axes)``
    with ``axes`` a flat list in row-major order.  Default width: one column
    for a single panel, the text width otherwise; height 2.6 in per row."""
    for name, value in (("nrows", nrows), ("ncols", ncols)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidHyperparameterError(f"{name} must be an int >= 1, got {value!r}")
    w = width if width is not None else (COLUMN_WIDTH if nrows * ncols == 1 else TEXT_WIDTH)
    h = height if height is not None else 2.6 * nrows
    with style():
        fig = Figure(figsize=(w, h), layout="constrained")
        grid = fig.subplots(nrows, ncols, sharey=sharey, squeeze=False)
    return fig, [ax for row in grid for ax in row]


def ratio_axis(ax: Axes, *, label: str = "measured / bound", log: bool = True,
               reference_label: str = "bound (ratio = 1)") -> None:
    """Make ``ax`` a tightness axis: y label ``label`` (dimensionless ratio),
    log scale (``log=True``) and a black dashed line at ratio = 1, above which a
    point violates its bound."""
    if log:
        ax.set_yscale("log")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1.0, label=reference_label, zorder=1)
    ax.set_ylabel(label)


def save_figure(fig: Figure, path_without_suffix: str | os.PathLike[str],
                formats: Sequence[str] = ("pdf", "png")) -> list[Path]:
    """Write ``fig`` as ``<path>.pdf`` and ``<path>.png`` (atomically, in the
    house style), with deterministic PDF metadata; returns the paths."""
    base = Path(path_without_suffix)
    written: list[Path] = []
    for fmt in formats:
        if fmt not in ("pdf", "png", "svg"):
            raise InvalidHyperparameterError(f"format must be 'pdf', 'png' or 'svg', got {fmt!r}")
        target = base.with_name(base.name + "." + fmt)
        metadata: dict[str, Any] = {"pdf": {"CreationDate": None, "ModDate": None},
                                    "svg": {"Date": None}}.get(fmt, {})
        with style(), atomic_write(target, "wb") as handle:
            fig.savefig(handle, format=fmt, metadata=metadata)
        written.append(target)
    return written
