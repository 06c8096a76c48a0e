"""fltheory.plotting: the house style, the ratio axis, atomic figure files."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from fltheory import plotting
from fltheory.errors import InvalidHyperparameterError


def test_figure_grid_and_style_do_not_leak():
    before = matplotlib.rcParams["font.size"]
    fig, axes = plotting.figure(2, 3)
    assert len(axes) == 6 and len(fig.axes) == 6
    assert matplotlib.rcParams["font.size"] == before          # rc_context restored
    with plotting.style():
        assert matplotlib.rcParams["font.size"] == plotting.STYLE["font.size"]
        colours = [c["color"] for c in matplotlib.rcParams["axes.prop_cycle"]]
    assert colours == list(plotting.OKABE_ITO)
    with pytest.raises(InvalidHyperparameterError, match="nrows must be an int >= 1, got 0"):
        plotting.figure(0, 1)


def test_okabe_ito_colours_are_distinct():
    rgb = np.array([to_rgb(c) for c in plotting.OKABE_ITO])
    dist = np.linalg.norm(rgb[:, None] - rgb[None], axis=-1)
    assert np.all(dist[~np.eye(len(rgb), dtype=bool)] > 0.1)


def test_ratio_axis_draws_the_line_at_one_on_a_log_axis():
    fig, (ax,) = plotting.figure()
    ax.plot([1, 2, 3], [0.1, 0.5, 2.0])
    plotting.ratio_axis(ax)
    assert ax.get_yscale() == "log"
    assert ax.get_ylabel() == "measured / bound"
    flat = [ln for ln in ax.get_lines() if np.allclose(ln.get_ydata(), 1.0)]
    assert len(flat) == 1 and flat[0].get_label() == "bound (ratio = 1)"
    fig2, (lin,) = plotting.figure()
    plotting.ratio_axis(lin, log=False, label="exact / bound")
    assert lin.get_yscale() == "linear" and lin.get_ylabel() == "exact / bound"


def test_save_figure_writes_pdf_and_png_deterministically(tmp_path):
    def draw():
        fig, (ax,) = plotting.figure()
        ax.plot(np.arange(5), np.arange(5) ** 2)
        ax.set_xlabel("round t")
        return fig
    paths = plotting.save_figure(draw(), tmp_path / "a")
    assert [p.name for p in paths] == ["a.pdf", "a.png"]
    assert paths[0].read_bytes()[:4] == b"%PDF"
    assert float(np.var(imread(paths[1])[..., :3])) > 0
    again = plotting.save_figure(draw(), tmp_path / "b")
    assert again[0].read_bytes() == paths[0].read_bytes()      # no creation date in the PDF
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pdf", "a.png", "b.pdf", "b.png"]
    with pytest.raises(InvalidHyperparameterError, match="format must be"):
        plotting.save_figure(draw(), tmp_path / "c", formats=("bmp",))
