"""Layout checks of a drawn figure: texts that overlap, texts cut by the canvas, legends on data.

A figure is checked as it is laid out on its own canvas (constrained layout,
before ``bbox_inches="tight"`` could hide a problem by growing the page):

* :func:`text_overlaps`: pairs of visible, non-empty texts (titles, axis
  labels, tick labels, legend entries, annotations, suptitle) whose window
  extents intersect by more than ``tolerance_px`` in both directions;
* :func:`clipped_texts`: texts that extend beyond the canvas;
* :func:`legend_data_overlaps`: axes legends that cover plotted points of
  their own axes (line vertices and scatter offsets inside the legend box).

:func:`layout_problems` runs the first two (and optionally the third) and
returns readable descriptions; an empty list means the layout is clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox

__all__ = ["clipped_texts", "layout_problems", "legend_data_overlaps", "text_overlaps", "visible_texts"]


def _renderer(fig: Figure) -> Any:
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _shown(text: Text) -> bool:
    if not text.get_visible() or not text.get_text().strip():
        return False
    parent: Any = text
    while parent is not None:                       # a hidden legend/axes hides its texts
        if hasattr(parent, "get_visible") and not parent.get_visible():
            return False
        parent = getattr(parent, "axes", None) if parent is text else None
    return True


def _describe(text: Text) -> str:
    label = " ".join(text.get_text().split())
    axes: Any = text.axes
    owner = axes.get_title() if axes is not None and axes.get_title() else ""
    where = f" (axes {owner!r})" if owner and label != owner else ""
    return f"{label[:50]!r}{where}"


def _tick_texts(ax: Axes) -> Iterator[Text]:
    """Labels of the ticks inside the view (position in axes coordinates within [0, 1])."""
    to_axes = ax.transScale + ax.transLimits
    x0, y0 = ax.get_xlim()[0], ax.get_ylim()[0]
    for k, axis in enumerate((ax.xaxis, ax.yaxis)):
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            loc = tick.get_loc()
            if loc is None or not tick.get_visible():
                continue
            point = (loc, y0) if k == 0 else (x0, loc)
            with np.errstate(all="ignore"):
                where = to_axes.transform(np.array([point], dtype=float))[0, k]
            if not (np.isfinite(where) and -1e-9 <= where <= 1 + 1e-9):
                continue
            for label in (tick.label1, tick.label2):
                if label.get_visible():
                    yield label


def visible_texts(fig: Figure) -> list[Text]:
    """Every text drawn on the figure: figure texts, suptitle, legends, and per axes
    the titles, axis labels, tick labels (of ticks inside the view), offset texts,
    annotations and axes legends."""
    found: list[Text] = list(fig.texts)
    for attr in ("_suptitle", "_supxlabel", "_supylabel"):
        t = getattr(fig, attr, None)
        if t is not None:
            found.append(t)
    for legend in fig.legends:
        found += [*legend.get_texts(), legend.get_title()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        found += [ax.title, getattr(ax, "_left_title", ax.title), getattr(ax, "_right_title", ax.title),
                  ax.xaxis.label, ax.yaxis.label, ax.xaxis.get_offset_text(), ax.yaxis.get_offset_text()]
        found += list(_tick_texts(ax))
        found += list(ax.texts)
        ax_legend = ax.get_legend()
        if ax_legend is not None and ax_legend.get_visible():
            found += [*ax_legend.get_texts(), ax_legend.get_title()]
    seen: set[int] = set()
    unique = []
    for t in found:
        if id(t) not in seen and _shown(t):
            seen.add(id(t))
            unique.append(t)
    return unique


def _extents(fig: Figure, renderer: Any = None) -> list[tuple[Text, Bbox]]:
    renderer = _renderer(fig) if renderer is None else renderer
    return [(t, t.get_window_extent(renderer)) for t in visible_texts(fig)]


def text_overlaps(fig: Figure, tolerance_px: float = 1.0, *,
                  _boxes: list[tuple[Text, Bbox]] | None = None) -> list[tuple[str, str]]:
    """Pairs of texts whose extents overlap by more than ``tolerance_px`` pixels in x and y."""
    boxes = _extents(fig) if _boxes is None else _boxes
    out: list[tuple[str, str]] = []
    for i, (ta, a) in enumerate(boxes):
        for tb, b in boxes[i + 1:]:
            dx = min(a.x1, b.x1) - max(a.x0, b.x0)
            dy = min(a.y1, b.y1) - max(a.y0, b.y0)
            if dx > tolerance_px and dy > tolerance_px:
                out.append((_describe(ta), _describe(tb)))
    return out


def clipped_texts(fig: Figure, tolerance_px: float = 0.5, *,
                  _boxes: list[tuple[Text, Bbox]] | None = None) -> list[str]:
    """Texts that extend beyond the figure canvas by more than ``tolerance_px``."""
    canvas = fig.bbox
    out = []
    for text, box in (_extents(fig) if _boxes is None else _boxes):
        if (box.x0 < canvas.x0 - tolerance_px or box.y0 < canvas.y0 - tolerance_px
                or box.x1 > canvas.x1 + tolerance_px or box.y1 > canvas.y1 + tolerance_px):
            out.append(f"{_describe(text)} extends to [{box.x0:.0f}, {box.x1:.0f}] x "
                       f"[{box.y0:.0f}, {box.y1:.0f}] px, canvas {canvas.width:.0f} x {canvas.height:.0f}")
    return out


def legend_data_overlaps(fig: Figure, max_points: int = 0, *, _renderer_: Any = None) -> list[str]:
    """Axes legends covering more than ``max_points`` plotted points of their own axes."""
    renderer = _renderer(fig) if _renderer_ is None else _renderer_
    out = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if not isinstance(legend, Legend) or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        covered = 0
        for line in ax.get_lines():
            if not line.get_visible() or str(line.get_label()).startswith("_child"):
                continue
            xy = np.column_stack([np.asarray(line.get_xdata(), dtype=float),
                                  np.asarray(line.get_ydata(), dtype=float)])
            if xy.size == 0 or line.get_transform() is not ax.transData:
                continue
            pts = ax.transData.transform(xy[np.all(np.isfinite(xy), axis=1)])
            covered += int(np.sum((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1)
                                  & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)))
        for coll in ax.collections:
            offsets = np.asarray(coll.get_offsets(), dtype=float)
            if offsets.size == 0 or not coll.get_visible():
                continue
            pts = coll.get_offset_transform().transform(offsets)
            covered += int(np.sum((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1)
                                  & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)))
        if covered > max_points:
            out.append(f"legend of axes {ax.get_title()!r} covers {covered} plotted points")
    return out


def layout_problems(fig: Figure, *, legends_on_data: bool = False) -> list[str]:
    """Every text overlap and clipped text (and, optionally, legends on data), as sentences."""
    renderer = _renderer(fig)                      # one draw for all checks
    boxes = _extents(fig, renderer)
    problems = [f"texts overlap: {a} and {b}" for a, b in text_overlaps(fig, _boxes=boxes)]
    problems += [f"clipped: {c}" for c in clipped_texts(fig, _boxes=boxes)]
    if legends_on_data:
        problems += legend_data_overlaps(fig, _renderer_=renderer)
    return problems
