"""Shared plot set-up of the experiments' figures: one panel's labels, title and legend, and the colour
cycle.  The figure style itself (sizes, fonts, the Okabe-Ito palette) is ``fltheory.plotting``'s.

Not an experiment (the leading underscore keeps it out of the reproduce registry).
"""

from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes

from fltheory import plotting

LEGEND_BELOW: dict[str, Any] = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), "fontsize": 5, "ncol": 2}
"""Legend keywords for a two-column legend under a narrow panel."""


def cycle_color(n: int) -> str:
    """The ``n``-th colour of the Okabe-Ito palette, starting again after the last one."""
    return plotting.OKABE_ITO[n % len(plotting.OKABE_ITO)]


def label_panel(ax: Axes, xlabel: str, ylabel: str, title: str, legend: dict[str, Any] | None = None) -> None:
    """Set the x and y labels and the title of ``ax``; with ``legend`` also draw its legend
    (``ax.legend(**legend)``, e.g. ``{"fontsize": 6}`` or :data:`LEGEND_BELOW`)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if legend is not None:
        ax.legend(**legend)
