"""Notebook summaries: short, faithful to the numbers, and typed errors on bad input."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, Scaffold, run
from fltheory.display import (
    ExperimentReport,
    format_value,
    history_to_frame,
    plot_histories,
    summary_html,
    summary_text,
)
from fltheory.errors import InvalidHyperparameterError, OptionalDependencyError
from fltheory.problems import random_quadratic
from fltheory.theory import (
    Assumption,
    affine_round_map,
    bound_result,
    fedopt_quadratic_fixed_point,
    fixed_point,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fed():
    return random_quadratic(6, 3, L=10.0, mu=1.0, heterogeneity=2.0, seed=1)


@pytest.fixture(scope="module")
def long_history(fed):
    return run(FedAvg(lr=0.05, local_steps=3), fed, 3000)


def test_history_repr_is_short_and_states_first_and_last_values(long_history):
    text = repr(long_history)
    assert len(text) < 800                      # was ~700 kB for 3,000 rounds
    assert text.startswith("History of FedAvg: 3000 rounds, d = 3")
    assert f"{long_history.dist2[0]:.6g} -> {long_history.dist2[-1]:.6g}" in text
    html = long_history._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") == text.count("\n")


def test_to_frame_matches_the_arrays(long_history):
    frame = long_history.to_frame()
    assert len(frame) == long_history.rounds + 1
    np.testing.assert_array_equal(frame["dist2"].to_numpy(), long_history.dist2)
    np.testing.assert_array_equal(frame["x_2"].to_numpy(), long_history.x[:, 2])
    assert np.isnan(frame["participants"].iloc[0]) and frame["participants"].iloc[1] == 6


def test_to_frame_without_pandas_says_how_to_install(long_history, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(OptionalDependencyError, match="pip install pandas"):
        history_to_frame(long_history)


def test_bound_result_verdicts():
    ok = Assumption("mu > 0", True, "mu = 1")
    bad = Assumption("lr <= 1/L", False, "lr = 1, 1/L = 0.5")
    held = bound_result(2.0, [ok], reference="R, eq. (1)", variant="as_printed", measured=1.0)
    violated = bound_result(2.0, [ok], reference="R, eq. (1)", variant="as_printed", measured=3.0)
    skipped = bound_result(2.0, [ok, bad], reference="R, eq. (1)", variant="as_printed", measured=3.0)
    assert repr(held).splitlines()[0] == "R, eq. (1) [as_printed]: holds"
    assert "measured / bound : 0.5" in repr(held)
    assert repr(violated).splitlines()[0].endswith("VIOLATED")
    assert repr(skipped).splitlines()[0].endswith("not evaluated (a hypothesis fails)")
    assert repr(skipped).splitlines()[-1].split() == ["[VIOLATED]", ":", "lr", "<=", "1/L:", "lr", "=",
                                                       "1,", "1/L", "=", "0.5"]
    assert "<b>R, eq. (1) [as_printed]: holds</b>" in held._repr_html_()


def test_round_map_and_fixed_point_summaries_hide_raw_arrays(fed):
    amap = affine_round_map(Scaffold(lr=0.05, local_steps=3), fed)
    fp = fixed_point(amap)
    qfp = fedopt_quadratic_fixed_point(fed, lr=0.05, local_steps=3)
    for obj in (amap, fp, qfp):
        text = repr(obj)
        assert len(text) < 1000 and "e-" not in text.split(":")[0]
        assert obj._repr_html_().startswith("<table>")
    assert repr(amap).startswith("AffineRoundMap of SCAFFOLD")
    assert f"array {amap.M.shape}" in repr(amap)
    assert f"spectral_rate      : {fp.spectral_rate:.6g}" in repr(fp)


def test_format_value_never_prints_long_arrays():
    assert format_value(np.arange(10_000.0)) == "array (10000,) [0 .. 9999]"
    assert format_value(np.array([True, False, True])) == "array (3,) of bool, 2 True"
    assert format_value("x" * 100, width=10) == "xxxxxxx..."
    assert format_value(np.full(5, np.nan)) == "array (5,) [no finite entries]"


def test_experiment_report_counts_the_stored_checks():
    path = ROOT / "figures" / "server_optimizers.json"
    report = ExperimentReport.load(path)
    assert report.name == "server_optimizers"
    text = repr(report)
    assert text.splitlines()[0].startswith(f"server_optimizers ({report.mode}): {len(report.checks)} checks")
    assert len(text.splitlines()) == len(report.checks) + 1
    assert report._repr_html_().count("<tr>") == len(report.checks) + 1
    with pytest.raises(InvalidHyperparameterError, match="checks"):
        ExperimentReport({"data": {}})


def test_plot_histories_draws_each_history(fed, long_history):
    other = run(Scaffold(lr=0.05, local_steps=3), fed, 50)
    fig = plot_histories({"FedAvg": long_history, "SCAFFOLD": other}, "dist2")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["FedAvg", "SCAFFOLD"]
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), long_history.dist2)
    assert ax.get_yscale() == "log"
    single = plot_histories(long_history, "loss_gap", log=False)
    np.testing.assert_array_equal(single.axes[0].get_lines()[0].get_ydata(), long_history.loss_gap)
    with pytest.raises(InvalidHyperparameterError, match="metric"):
        plot_histories(long_history, "accuracy")
    with pytest.raises(InvalidHyperparameterError, match="labels"):
        plot_histories([long_history, other], labels=["one"])


def test_plot_histories_refuses_what_is_not_a_history(long_history):
    with pytest.raises(InvalidHyperparameterError, match=r"histories must be a History.*1\.5"):
        plot_histories(1.5)
    with pytest.raises(InvalidHyperparameterError, match=r"histories\['a'\] must be a History"):
        plot_histories({"a": np.ones(3)})
    with pytest.raises(InvalidHyperparameterError, match=r"histories\['one'\] must be a History"):
        plot_histories(["abc"], labels=["one"])
    with pytest.raises(InvalidHyperparameterError, match="ax must be a matplotlib Axes"):
        plot_histories(long_history, ax="abc")
    with pytest.raises(InvalidHyperparameterError, match="log must be True or False"):
        plot_histories(long_history, log=np.ones(2))
    with pytest.raises(InvalidHyperparameterError, match="labels must be a list or tuple of strings"):
        plot_histories(long_history, labels=3)
    with pytest.raises(InvalidHyperparameterError, match="history must be a History"):
        history_to_frame(np.ones((3, 2)))


def test_summaries_refuse_malformed_rows():
    assert summary_text("T", [("a", "1"), ("bb", "2")]) == "T\n  a  : 1\n  bb : 2"
    assert "<caption" in summary_html("T", (("a", "<1>"),)) and "&lt;1&gt;" in summary_html("T", [("a", "<1>")])
    with pytest.raises(InvalidHyperparameterError, match="title must be a string"):
        summary_text(3, [("a", "1")])
    with pytest.raises(InvalidHyperparameterError, match="rows must be a list or tuple"):
        summary_html("T", "ab")
    with pytest.raises(InvalidHyperparameterError, match=r"rows\[1\] must be a \(name, value\) pair of strings"):
        summary_text("T", [("a", "1"), ("b", 2.0)])
    with pytest.raises(InvalidHyperparameterError, match="width must be an integer >= 4"):
        format_value(1.0, width=2)
    assert format_value("x" * 10, width=4) == "x..."


def test_plots_leave_no_open_pyplot_figure_and_render_with_agg(long_history, tmp_path):
    """The figures never enter pyplot's registry (nothing left open, whatever the backend), and each
    has its own Agg canvas."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from fltheory import plotting
    before = plt.get_fignums()
    fig = plot_histories(long_history, "dist2")
    fig2, _ = plotting.figure(2, 2)
    plotting.save_figure(fig, tmp_path / "h", formats=("png",))
    assert plt.get_fignums() == before
    assert isinstance(fig.canvas, FigureCanvasAgg) and isinstance(fig2.canvas, FigureCanvasAgg)
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


def test_a_failed_figure_write_is_a_typed_os_error_keeping_the_errno(tmp_path, monkeypatch):
    """A full disk during save_figure: OutputDirectoryError (an OSError) with errno ENOSPC, naming the file."""
    import errno
    import tempfile

    from fltheory import plotting
    from fltheory.errors import OutputDirectoryError

    fig, _ = plotting.figure()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.raises(OutputDirectoryError, match=r"f\.pdf: No space left on device") as info:
        plotting.save_figure(fig, tmp_path / "f")
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []
