"""One figure style for every experiment.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot),
each on its own Agg canvas, so they need no display, never enter pyplot's
registry of open figures (nothing to close: a figure is freed with its last
reference), whatever backend pyplot is set to, and are safe in worker
processes; PNG is rendered by Agg and PDF/SVG by matplotlib's own writers.

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
import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import matplotlib
import numpy as np
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ._validate import flag, instance, positive
from .errors import InvalidHyperparameterError, OutputDirectoryError
from .results import atomic_write

__all__ = ["LINESTYLES", "OKABE_ITO", "STYLE", "figure", "ratio_axis", "save_figure", "style"]

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

#: Largest panel grid side and figure side (inches) accepted: beyond them a figure is a mistake, not a plot.
MAX_PANELS = 64
MAX_INCHES = 100.0

#: Output formats :func:`save_figure` writes.
FORMATS = ("pdf", "png", "svg")


def _size(name: str, value: float | None, default: float) -> float:
    if value is None:
        return default
    inches = positive(name, value)
    if inches > MAX_INCHES:
        raise InvalidHyperparameterError(f"{name} must be at most {MAX_INCHES} inches, got {inches!r}")
    return inches


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidHyperparameterError(f"{name} must be a string, got {value!r:.80} ({type(value).__name__})")
    return value


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Context in which matplotlib uses :data:`STYLE` (restored on exit)."""
    with matplotlib.rc_context(cast(Any, STYLE)):
        yield


def figure(nrows: int = 1, ncols: int = 1, *, width: float | None = None,
           height: float | None = None, sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A new styled figure with an ``nrows x ncols`` grid; returns ``(fig, axes)``
    with ``axes`` a flat list in row-major order.  Default width: one column
    for a single panel, the text width otherwise; height 2.6 in per row."""
    for name, value in (("nrows", nrows), ("ncols", ncols)):
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value < 1:
            raise InvalidHyperparameterError(f"{name} must be an int >= 1, got {value!r:.80}")
        if value > MAX_PANELS:
            raise InvalidHyperparameterError(f"{name} must be an int <= {MAX_PANELS} (panels per side), got {value!r}")
    nrows, ncols = int(nrows), int(ncols)
    w = _size("width", width, COLUMN_WIDTH if nrows * ncols == 1 else TEXT_WIDTH)
    h = _size("height", height, min(2.6 * nrows, MAX_INCHES))
    sharey = flag("sharey", sharey)
    with style():
        fig = Figure(figsize=(w, h), layout="constrained")
        FigureCanvasAgg(fig)                   # its own Agg canvas (no pyplot, no interactive backend)
        grid = fig.subplots(nrows, ncols, sharey=sharey, squeeze=False)
    return fig, [ax for row in grid for ax in row]


def ratio_axis(ax: Axes, *, label: str = "measured / bound", log: bool = True,
               reference_label: str = "bound (ratio = 1)") -> None:
    """Make ``ax`` a tightness axis: y label ``label`` (dimensionless ratio),
    log scale (``log=True``) and a black dashed line at ratio = 1, above which a
    point violates its bound."""
    instance("ax", ax, Axes, "a matplotlib Axes (e.g. from fltheory.plotting.figure)", InvalidHyperparameterError)
    label, reference_label = _text("label", label), _text("reference_label", reference_label)
    if flag("log", log):
        ax.set_yscale("log")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1.0, label=reference_label, zorder=1)
    ax.set_ylabel(label)


def save_figure(fig: Figure, path_without_suffix: str | os.PathLike[str],
                formats: Sequence[str] = ("pdf", "png")) -> list[Path]:
    """Write ``fig`` as ``<path>.pdf`` and ``<path>.png`` (rendered in memory,
    then written atomically with the usual file mode, in the house style), with
    deterministic PDF metadata; returns the paths.

    Raises
    ------
    InvalidHyperparameterError
        ``fig`` not a Figure, a path that is not a non-empty str / os.PathLike, or
        ``formats`` not a list/tuple of names out of ("pdf", "png", "svg").
    OutputDirectoryError
        (an OSError) when a file cannot be written (read-only or full disk, a
        directory in the way); the message names the file and the system error.
    """
    instance("fig", fig, Figure, "a matplotlib Figure (e.g. from fltheory.plotting.figure)",
             InvalidHyperparameterError)
    if isinstance(path_without_suffix, bytes) or not isinstance(path_without_suffix, str | os.PathLike):
        raise InvalidHyperparameterError(f"path_without_suffix must be a str or os.PathLike path, got "
                                         f"{path_without_suffix!r:.80} ({type(path_without_suffix).__name__})")
    base = Path(path_without_suffix)
    if not base.name:
        raise InvalidHyperparameterError(f"path_without_suffix must end in a file name, got {str(base)!r}")
    if not isinstance(formats, list | tuple):
        raise InvalidHyperparameterError(f"formats must be a list or tuple of format names out of {FORMATS}, got "
                                         f"{formats!r:.80} ({type(formats).__name__})")
    for fmt in formats:
        if not isinstance(fmt, str) or fmt not in FORMATS:
            raise InvalidHyperparameterError(f"format must be 'pdf', 'png' or 'svg', got {fmt!r:.80}")
    written: list[Path] = []
    for fmt in formats:
        target = base.with_name(base.name + "." + fmt)
        metadata: dict[str, Any] = {"pdf": {"CreationDate": None, "ModDate": None},
                                    "svg": {"Date": None}}.get(fmt, {})
        # Render in memory first: a full disk then fails as a plain OSError from the
        # write (matplotlib's writers can mask it), and no partial figure is ever visible.
        buffer = io.BytesIO()
        with style():
            fig.savefig(buffer, format=fmt, metadata=metadata)
        try:
            with atomic_write(target, "wb") as handle:
                handle.write(buffer.getvalue())
        except OSError as exc:
            # the errno is kept (callers tell a full or read-only disk by it)
            raise OutputDirectoryError(exc.errno, f"cannot write the figure {target}: {exc.strerror or exc}") from exc
        written.append(target)
    return written
