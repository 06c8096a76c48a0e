"""The layout checker finds overlaps, clipping and legends on data; every stored figure is checked."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from fltheory import plotting
from fltheory.plotting_checks import (
    clipped_texts,
    layout_problems,
    legend_data_overlaps,
    text_overlaps,
    visible_texts,
)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))


def _figure() -> tuple[Figure, object]:
    fig = Figure(figsize=(4, 3), layout="constrained")
    return fig, fig.add_subplot()


def test_clean_figure_has_no_problems():
    fig, ax = _figure()
    ax.plot([0, 1, 2], [0, 1, 4], label="data")
    ax.set_title("a title")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    assert layout_problems(fig, legends_on_data=True) == []


def test_overlapping_texts_are_found():
    fig, ax = _figure()
    ax.text(0.5, 0.5, "first label", transform=ax.transAxes)
    ax.text(0.52, 0.5, "second label", transform=ax.transAxes)
    pairs = text_overlaps(fig)
    assert ("'first label'", "'second label'") in pairs


def test_text_beyond_the_canvas_is_clipped():
    fig, _ = _figure()
    fig.text(0.9, 0.5, "runs off the right edge")
    assert len(clipped_texts(fig)) == 1 and "runs off" in clipped_texts(fig)[0]


def test_legend_on_data_is_found_and_ticks_outside_the_view_are_ignored():
    fig, ax = _figure()
    x = np.linspace(0, 1, 200)
    ax.plot(x, np.full_like(x, 0.95), label="a line along the top")
    ax.plot(x, x, label="diagonal")
    ax.legend(loc="upper center")
    assert legend_data_overlaps(fig) and "covers" in legend_data_overlaps(fig)[0]
    fig2, ax2 = _figure()
    ax2.semilogy([1, 2], [1e-3, 1.0])
    ax2.set_ylim(1e-3, 1.0)
    labels = [t.get_text() for t in visible_texts(fig2)]
    assert not any("10^{-4}" in t or "10^{1}" in t for t in labels)


def _experiments():
    from fltheory.reproduce import discover
    return {e.name: e for e in discover("experiments")}


# Figures of other branches with layout defects at the time of writing (checked, reported, not hidden).
KNOWN: dict[str, str] = {}     # every stored figure is laid out cleanly (none known to fail)
NAMES = sorted(p.stem for p in (ROOT / "figures").glob("*.json"))


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=False, reason=f"FINDING: {KNOWN[n]}")) if n in KNOWN else n
    for n in NAMES])
def test_every_stored_figure_is_laid_out_cleanly(name):
    from fltheory.reproduce import read_stored
    exp = _experiments()[name]
    doc = read_stored(ROOT / "figures", name).doc
    with plotting.style():
        fig = exp.plot(doc["data"])
        problems = layout_problems(fig, legends_on_data=name == "server_optimizers")
    assert problems == [], "\n".join(problems)
