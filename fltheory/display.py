"""Short text and HTML summaries of fltheory's results, for terminals and notebooks.

A ``History`` of 3,000 rounds, a round map of a 200-dimensional state or a
bound with ten hypotheses should print in a few lines, not as raw arrays.  The
classes that users look at in a notebook take one of the mixins below as a
base class (their dataclass is declared with ``repr=False`` so the mixin's
``__repr__`` is used):

========================  =========================  ============================
class                     mixin                      summary
========================  =========================  ============================
``History``               :class:`HistoryDisplay`    algorithm, rounds, first/last
                                                     metrics; ``to_frame()``
``BoundResult``           :class:`BoundDisplay`      reference, value, measured,
                                                     ratio, hypotheses
``AffineRoundMap``,       :class:`SummaryDisplay`    shape, residual, rate
``RoundMap``, fixed
points
========================  =========================  ============================

Each mixin gets its rows from ``_summary_rows()`` (title plus (name, value)
pairs), so ``repr`` and the HTML table always agree.  Experiment results, as
written by ``fltheory reproduce`` (``figures/NAME.json``), are shown by
:class:`ExperimentReport`.  :func:`plot_histories` draws one or several
Histories in the house style (:mod:`fltheory.plotting`).

>>> from fltheory.display import format_value
>>> format_value(0.000123456789), format_value([1.0, 2.0, 3.0]), format_value(list(range(100)))
('0.000123457', '[1, 2, 3]', 'array (100,) [0 .. 99]')
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._validate import flag, integer
from .errors import InvalidHyperparameterError, OptionalDependencyError

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "HISTORY_METRICS",
    "BoundDisplay",
    "ExperimentReport",
    "HistoryDisplay",
    "SummaryDisplay",
    "format_value",
    "history_to_frame",
    "plot_histories",
    "summary_html",
    "summary_text",
]

Rows = list[tuple[str, str]]

#: Per-round metrics of a History that :func:`plot_histories` and ``to_frame`` know, with labels.
HISTORY_METRICS: Mapping[str, str] = {
    "dist2": r"$\|x_t - x^*\|^2$",
    "loss_gap": r"$F(x_t) - F^*$",
    "loss": r"$F(x_t)$",
    "grad_norm2": r"$\|\nabla F(x_t)\|^2$",
}


def format_value(value: Any, width: int = 60) -> str:
    """A one-line, at most ``width``-character rendering of any value.

    Floats get 6 significant digits; arrays show their shape and range (never
    their entries when they have more than 4); long strings are cut with "...".
    ``width`` is an integer >= 4 (room for one character and the "...").
    """
    width = integer("width", width, minimum=4, maximum=None)
    if value is None:
        return "None"
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return f"{float(value):.6g}"
    if isinstance(value, np.ndarray) and value.dtype == np.bool_:
        return f"array {value.shape} of bool, {int(value.sum())} True"
    if isinstance(value, list | tuple | np.ndarray) and _numeric(value):
        arr = np.asarray(value, dtype=np.float64)
        if arr.size <= 4 and arr.ndim <= 1:
            text = "[" + ", ".join(f"{v:.4g}" for v in arr.ravel()) + "]"
        else:
            finite = arr[np.isfinite(arr)]
            rng = (f"[{finite.min():.4g} .. {finite.max():.4g}]" if finite.size else "[no finite entries]")
            text = f"array {arr.shape} {rng}"
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k}: {format_value(v, 20)}" for k, v in list(value.items())[:4])
        text += ", ...}" if len(value) > 4 else "}"
    else:
        text = str(value).replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def _numeric(value: Any) -> bool:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):          # ragged lists
        return False
    return arr.dtype.kind in "biuf" and arr.size > 0


def _checked_summary(title: Any, rows: Any) -> Rows:
    """``rows`` as a list of (name, value) string pairs; a typed error naming what is wrong otherwise."""
    if not isinstance(title, str):
        raise InvalidHyperparameterError(f"title must be a string, got {title!r:.80} ({type(title).__name__})")
    if not isinstance(rows, list | tuple):
        raise InvalidHyperparameterError(f"rows must be a list or tuple of (name, value) string pairs, got "
                                         f"{rows!r:.80} ({type(rows).__name__})")
    for i, row in enumerate(rows):
        if not (isinstance(row, list | tuple) and len(row) == 2 and all(isinstance(x, str) for x in row)):
            raise InvalidHyperparameterError(f"rows[{i}] must be a (name, value) pair of strings, got {row!r:.80}")
    return [(n, v) for n, v in rows]


def summary_text(title: str, rows: Sequence[tuple[str, str]]) -> str:
    """``title`` then one indented ``name: value`` line per row (names aligned)."""
    rows = _checked_summary(title, rows)
    width = max((len(n) for n, _ in rows), default=0)
    return "\n".join([title] + [f"  {n:<{width}} : {v}" for n, v in rows])


def summary_html(title: str, rows: Sequence[tuple[str, str]]) -> str:
    """The same summary as a two-column HTML table with ``title`` as caption."""
    rows = _checked_summary(title, rows)
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(n)}</th>"
                   f"<td style='text-align:left'>{html.escape(v)}</td></tr>" for n, v in rows)
    return (f"<table><caption style='text-align:left'><b>{html.escape(title)}</b></caption>"
            f"{body}</table>")


class SummaryDisplay:
    """Mixin: ``repr`` and ``_repr_html_`` from ``_summary_rows()``.

    The default rows list the scalar attributes (numbers, strings) and the
    shapes of array attributes, so any dataclass gets a readable summary;
    classes override ``_summary_rows`` to choose and order them.
    """

    def _summary_rows(self) -> tuple[str, Rows]:
        fields = getattr(self, "__dataclass_fields__", None)
        names = list(fields) if fields else [n for n in vars(self) if not n.startswith("_")]
        rows = []
        for name in names:
            value = getattr(self, name, None)
            if isinstance(value, str | int | float | bool | np.ndarray | np.number | type(None)):
                rows.append((name, format_value(value)))
        algorithm = getattr(self, "algorithm", None)
        name = algorithm if isinstance(algorithm, str) else getattr(algorithm, "name", None)
        return type(self).__name__ + (f" of {name}" if isinstance(name, str) else ""), rows

    def __repr__(self) -> str:
        title, rows = self._summary_rows()
        return summary_text(title, rows)

    def _repr_html_(self) -> str:
        title, rows = self._summary_rows()
        return summary_html(title, rows)


def _final(series: Any) -> str:
    if series is None:
        return "n/a (optimum unknown)"
    arr = np.asarray(series, dtype=np.float64)
    return f"{arr[0]:.6g} -> {arr[-1]:.6g}"


class HistoryDisplay(SummaryDisplay):
    """Mixin of ``History``: a short summary and :meth:`to_frame`."""

    def _summary_rows(self) -> tuple[str, Rows]:
        record: Mapping[str, Any] = getattr(self, "record", {}) or {}
        x = np.asarray(self.x)  # type: ignore[attr-defined]
        title = f"History of {record.get('algorithm', '?')}: {x.shape[0] - 1} rounds, d = {x.shape[1]}"
        rows: Rows = []
        if "problem" in record:
            rows.append(("problem", format_value(record["problem"])))
        if "seed" in record:
            rows.append(("seed", format_value(record["seed"])))
        for name in ("dist2", "loss_gap", "grad_norm2"):
            rows.append((f"{name} (first -> last)", _final(getattr(self, name, None))))
        hyper = record.get("hyperparameters")
        if hyper:
            rows.append(("hyperparameters", format_value(hyper)))
        return title, rows

    def to_frame(self) -> Any:
        """The per-round metrics as a pandas DataFrame (see :func:`history_to_frame`)."""
        return history_to_frame(self)


class BoundDisplay(SummaryDisplay):
    """Mixin of ``BoundResult``: reference, verdict and every hypothesis in a few lines."""

    def _summary_rows(self) -> tuple[str, Rows]:
        value = getattr(self, "value", None)
        measured = getattr(self, "measured", None)
        ratio = getattr(self, "ratio", None)
        holds = getattr(self, "holds", None)
        verdict = ("not evaluated (a hypothesis fails)" if value is None else
                   "no measurement" if holds is None else "holds" if holds else "VIOLATED")
        title = f"{getattr(self, 'reference', '?')} [{getattr(self, 'variant', '?')}]: {verdict}"
        rows: Rows = [("bound", format_value(value))]
        if measured is not None:
            rows += [("measured", format_value(measured)), ("measured / bound", format_value(ratio))]
        for a in getattr(self, "assumptions", ()):
            rows.append(("[ok]" if a.held else "[VIOLATED]", format_value(f"{a.name}: {a.detail}", 100)))
        return title, rows


def _iterates(name: str, history: Any) -> np.ndarray:
    """The iterates ``history.x`` (R + 1, d) of a History-like object, checked."""
    x = getattr(history, "x", None)
    arr = np.asarray(x) if isinstance(x, np.ndarray | list | tuple) else None
    if arr is None or arr.ndim != 2 or arr.shape[0] == 0 or arr.dtype.kind not in "iuf":
        raise InvalidHyperparameterError(f"{name} must be a History (iterates x of shape (R + 1, d)), got "
                                         f"{history!r:.80} ({type(history).__name__})")
    return arr


def history_to_frame(history: Any) -> Any:
    """One row per round t = 0..R with the History's per-round metrics.

    Columns: ``round``, ``loss``, ``loss_gap``, ``dist2``, ``grad_norm2``
    (those the History has), ``participants`` (count; NaN at t = 0) and
    ``x_0 .. x_{d-1}`` for d <= 10 (the model coordinates).

    Raises
    ------
    OptionalDependencyError
        (an ImportError) when pandas is not installed (``pip install pandas``).
    InvalidHyperparameterError
        ``history`` is not a History (no 2-D array of iterates ``x``).
    """
    x = _iterates("history", history)
    try:
        import pandas as pd
    except ImportError as exc:
        raise OptionalDependencyError(
            'History.to_frame() needs pandas, which is not installed: pip install pandas '
            '(or pip install "fltheory[testing]")') from exc
    columns: dict[str, Any] = {"round": np.arange(x.shape[0])}
    for name in ("loss", "loss_gap", "dist2", "grad_norm2"):
        series = getattr(history, name, None)
        if series is not None:
            columns[name] = np.asarray(series, dtype=np.float64)
    clients = getattr(history, "clients", None)
    if clients is not None:
        columns["participants"] = np.concatenate([[np.nan], [len(c) for c in clients]])
    if x.shape[1] <= 10:
        for j in range(x.shape[1]):
            columns[f"x_{j}"] = x[:, j]
    return pd.DataFrame(columns)


def plot_histories(histories: Any, metric: str = "dist2", *, labels: Sequence[str] | None = None,
                   ax: Axes | None = None, log: bool = True) -> Figure:
    """Plot one metric of one or several Histories against the round, in the house style.

    Parameters
    ----------
    histories : History, sequence of History, or mapping label -> History
    metric : {"dist2", "loss_gap", "loss", "grad_norm2"}
    labels : legend labels (default: the mapping's keys, else each record's algorithm name)
    ax : draw into this Axes instead of a new figure
    log : log-scale y axis (zeros are drawn at the smallest positive value of the plot)

    Returns
    -------
    matplotlib.figure.Figure
        The figure (save it with :func:`fltheory.plotting.save_figure`).
    """
    from matplotlib.axes import Axes

    from . import plotting
    if not isinstance(metric, str) or metric not in HISTORY_METRICS:
        raise InvalidHyperparameterError(
            f"plot_histories: metric must be one of {sorted(HISTORY_METRICS)}, got {metric!r:.80}")
    log = flag("log", log)
    if ax is not None and not isinstance(ax, Axes):
        raise InvalidHyperparameterError(f"plot_histories: ax must be a matplotlib Axes or None, got {ax!r:.80} "
                                         f"({type(ax).__name__})")
    if labels is not None and (not isinstance(labels, list | tuple) or not all(isinstance(n, str) for n in labels)):
        raise InvalidHyperparameterError(f"plot_histories: labels must be a list or tuple of strings or None, got "
                                         f"{labels!r:.80}")
    if isinstance(histories, Mapping):
        items = list(histories.items())
    else:
        if hasattr(histories, "x"):
            seq = [histories]
        elif isinstance(histories, list | tuple):
            seq = list(histories)
        else:
            raise InvalidHyperparameterError(
                f"plot_histories: histories must be a History, a list or tuple of Histories or a mapping "
                f"label -> History, got {histories!r:.80} ({type(histories).__name__})")
        names = labels if labels is not None else [
            str((getattr(h, "record", {}) or {}).get("algorithm", f"run {i}")) for i, h in enumerate(seq)]
        if len(names) != len(seq):
            raise InvalidHyperparameterError(
                f"plot_histories: {len(seq)} histories but {len(names)} labels")
        items = list(zip(names, seq, strict=True))
    if not items:
        raise InvalidHyperparameterError("plot_histories: no histories given")
    for label, h in items:
        _iterates(f"histories[{label!r}]", h)
    missing = [name for name, h in items if getattr(h, metric, None) is None]
    if missing:
        raise InvalidHyperparameterError(
            f"plot_histories: {metric} is unknown (None) for {missing}; the optimum is not known "
            f"for these problems, plot 'loss' or 'grad_norm2' instead")
    with plotting.style():
        if ax is None:
            fig, axes = plotting.figure(1, 1)
            ax = axes[0]
        else:
            fig = ax.get_figure()  # type: ignore[assignment]
        positive = [np.asarray(getattr(h, metric), dtype=np.float64) for _, h in items]
        floor = min((float(v[v > 0].min()) for v in positive if np.any(v > 0)), default=1.0)
        for (name, _), values in zip(items, positive, strict=True):
            shown = np.where(values > 0, values, floor) if log else values
            ax.plot(np.arange(values.shape[0]), shown, label=str(name))
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("round t")
        ax.set_ylabel(HISTORY_METRICS[metric])
        if len(items) > 1:
            ax.legend(loc="best")
    return fig


class ExperimentReport(SummaryDisplay):
    """An experiment's stored result (``figures/NAME.json``) with a readable summary.

    Attributes
    ----------
    name, title : str
    mode : str
        ``"quick"`` or ``"full"``.
    checks : list of dict
        One per theorem check: ``theorem``, ``status``, ``ratio``, ``detail``.
    macros : dict
        The headline numbers.
    data : dict
        Everything the experiment's ``run`` returned.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        if not isinstance(document, Mapping) or "checks" not in document:
            raise InvalidHyperparameterError(
                "ExperimentReport: expected the JSON document written by `fltheory reproduce` "
                f"(with a 'checks' list), got {type(document).__name__}")
        experiment = document.get("experiment", {}) or {}
        self.name: str = str(experiment.get("name", "?"))
        self.title: str = str(experiment.get("title", ""))
        self.mode: str = str((document.get("key", {}) or {}).get("mode", "?"))
        self.checks: list[dict[str, Any]] = [dict(c) for c in document["checks"]]
        self.macros: dict[str, Any] = dict(document.get("macros", {}) or {})
        self.data: dict[str, Any] = dict(document.get("data", {}) or {})

    @classmethod
    def load(cls, path: str | Path) -> ExperimentReport:
        """Read ``figures/NAME.json`` (or any file ``fltheory reproduce`` wrote)."""
        from .results import load_json
        return cls(load_json(path))

    def _summary_rows(self) -> tuple[str, Rows]:
        counts: dict[str, int] = {}
        for c in self.checks:
            counts[c.get("status", "?")] = counts.get(c.get("status", "?"), 0) + 1
        verdicts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        title = f"{self.name} ({self.mode}): {len(self.checks)} checks: {verdicts}"
        rows: Rows = []
        for c in self.checks:
            ratio = c.get("ratio")
            shown = "n/a" if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)) \
                else format_value(ratio)
            rows.append((str(c.get("theorem", "?")), f"{c.get('status', '?')}, measured/bound {shown}"))
        return title, rows

    def _repr_html_(self) -> str:
        head = "<tr><th>theorem</th><th>status</th><th>measured / bound</th><th>detail</th></tr>"
        body = "".join(
            "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(x)}</td>" for x in (
                str(c.get("theorem", "?")), str(c.get("status", "?")),
                "n/a" if c.get("ratio") is None else format_value(c.get("ratio")),
                format_value(c.get("detail", ""), 120))) + "</tr>" for c in self.checks)
        title, _ = self._summary_rows()
        return (f"<table><caption style='text-align:left'><b>{html.escape(title)}</b></caption>"
                f"{head}{body}</table>")

