"""Exact objective shift against EFL Theorem 2 when a client departs or joins.

EFL (Ma et al.), section 4.3-4.4, Theorem 2: with F = sum_k (n_k/n) F_k
mu-strongly convex, every F_k L-smooth and D^_a = F_a(w^*) - F_a*,

* client a departs:  ||w* - w^*||^2 <= 8 L n_a^2 D^_a / (mu^2 n^2)          (eq. 10)
* client a joins:    ||w* - w^*||^2 <= 8 L n_a^2 D^_a / (mu^2 (n + n_a)^2)  (eq. 11)

where w* is the optimum before and w^* after the shift (docs/theory/index.md#bounds).
Both optima are exact (closed form for quadratics, Newton for logistic), so
the left-hand side is computed, not estimated; ``fltheory.theory.objective_shift``
evaluates both the bound as printed and the bound the standard argument
derives (constant 2; for a join D_a at the *old* optimum and mu of the new F).

Sweep: the data share n_a/n of client a, over three families: random
quadratics (``random_quadratic``, every client exactly L-smooth and
mu-strongly convex), least squares (``random_least_squares``, n_a = rows of
a) and binary logistic regression with a ridge reg (mu = reg, L_k =
lambda_max(A_k^T A_k / n_k)/4 + reg).  Every instance is built from its own
recorded seed, so a violation can be rebuilt from the JSON.  One federation
per (share, instance) holds client a as client 0: a departure removes it; a
join starts from the federation without it and adds it back, so for a join
n is the other clients' total and n_a/n may exceed 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.errors import InvalidHyperparameterError
from fltheory.problems.generators import random_least_squares, random_quadratic
from fltheory.problems.logistic import LogisticFederation
from fltheory.theory import objective_shift as shift
from fltheory.references import cite

NAME = "objective_shift"
TITLE = "Exact objective shift vs EFL Theorem 2 when a client departs or joins"
_PAPER = cite("EFL")
_DERIVED = "docs/theory/index.md#bounds / fltheory.theory.objective_shift"
THEOREMS = [
    Theorem("depart", _PAPER, "Theorem 2, client departure (as printed)", "eq. 10"),
    Theorem("join", _PAPER, "Theorem 2, client arrival (as printed)", "eq. 11"),
    Theorem("depart-derived", _DERIVED, "departure bound of the standard argument, 2 L (n_a/n)^2 D^_a / mu^2",
            "derived from eq. 10"),
    Theorem("join-derived", _DERIVED,
            "arrival bound of the standard argument, 2 L (n_a/(n+n_a))^2 D_a(w*) / mu_new^2",
            "derived from eq. 11"),
]
FAMILIES = ("quadratic", "least_squares", "logistic")
KINDS = ("depart", "join")
QUICK: dict[str, Any] = {
    "families": list(FAMILIES),
    "n_clients": 4,              # clients other than a
    "dim": 3,
    "n_total": 400,              # depart: rows of all clients; join: rows of the others
    "depart_shares": [0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.95],
    "join_shares": [0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
    "instances": 3,
    "L": 4.0, "mu": 0.25, "heterogeneity": 1.0,          # quadratic family
    "lsq_noise": 0.1,                                      # least-squares family
    "logistic_reg": 0.05, "logistic_shift": 1.0,           # logistic family
}
FULL: dict[str, Any] = {
    **QUICK,
    "n_clients": 10,
    "dim": 10,
    "n_total": 4000,
    "depart_shares": [float(s) for s in np.round(np.geomspace(0.005, 0.95, 16), 4)],
    "join_shares": [float(s) for s in np.round(np.geomspace(0.005, 10.0, 18), 4)],
    "instances": 20,
}
EXPECTED_AXES = 2


# --------------------------------------------------------------------------- instances

def _rows(kind: str, share: float, n_clients: int, n_total: int, dim: int) -> list[int]:
    """Row counts with client a first.  depart: n_a = round(share n), the
    other n_clients - 1 clients split n - n_a; join: n_a = round(share n) and
    the other n_clients clients split n."""
    n_a = max(1, round(share * n_total))
    if kind == "depart":
        others, rest = n_clients - 1, n_total - n_a
    else:
        others, rest = n_clients, n_total
    split = [rest // others + (1 if i < rest % others else 0) for i in range(others)]
    if min(split) < dim:
        raise InvalidHyperparameterError(
            f"share {share} leaves a client with {min(split)} < dim = {dim} rows; increase n_total "
            f"(got n_total = {n_total}) or lower the share")
    return [n_a, *split]


def _logistic(rows: list[int], dim: int, reg: float, spread: float, seed: int) -> LogisticFederation:
    """Binary logistic clients: features a ~ N(m_k, I), m_k = spread * u_k
    (u_k uniform on the sphere), labels +1 with probability s(a^T w_k),
    w_k = w0 + spread * v_k, w0 ~ N(0, I/d)."""
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(dim) / np.sqrt(dim)
    feats, labels = [], []
    for n_k in rows:                                   # construction only
        u, v = rng.standard_normal(dim), rng.standard_normal(dim)
        a = rng.standard_normal((n_k, dim)) + spread * u / np.linalg.norm(u)
        w = w0 + spread * v / np.linalg.norm(v)
        prob = 1.0 / (1.0 + np.exp(-a @ w))
        feats.append(a)
        labels.append(np.where(rng.random(n_k) < prob, 1.0, -1.0))
    return LogisticFederation(feats, labels, reg=reg)


def _federation(family: str, rows: list[int], cfg: dict[str, Any], seed: int) -> Any:
    d = cfg["dim"]
    if family == "quadratic":
        return random_quadratic(len(rows), d, L=cfg["L"], mu=cfg["mu"], heterogeneity=cfg["heterogeneity"],
                                seed=seed, n_samples=rows, constants="clients")
    if family == "least_squares":
        return random_least_squares(len(rows), d, rows=rows, seed=seed, heterogeneity=cfg["heterogeneity"],
                                    noise=cfg["lsq_noise"])
    if family == "logistic":
        return _logistic(rows, d, cfg["logistic_reg"], cfg["logistic_shift"], seed)
    raise InvalidHyperparameterError(f"unknown family {family!r}; expected one of {FAMILIES}")


def _only_first(fed: Any) -> Any:
    """The one-client federation of client 0 (construction only)."""
    for i in range(fed.n_clients - 1, 0, -1):
        fed = fed.without_client(i)
    return fed


def _measure(family: str, kind: str, share: float, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    rows = _rows(kind, share, cfg["n_clients"], cfg["n_total"], cfg["dim"])
    fed = _federation(family, rows, cfg, seed)
    if kind == "depart":
        printed = shift(fed, 0, "depart")
        derived = shift(fed, 0, "depart", variant="derived")
        n_a_over_n = rows[0] / sum(rows)
    else:
        base, newcomer = fed.without_client(0), _only_first(fed)
        printed = shift(base, kind="join", other=newcomer)
        derived = shift(base, kind="join", other=newcomer, variant="derived")
        n_a_over_n = rows[0] / sum(rows[1:])
    t = printed.terms
    return {"n_a_over_n": n_a_over_n, "n_a": rows[0], "exact": printed.measured,
            "bound": printed.value, "ratio": printed.ratio,
            "bound_derived": derived.value, "ratio_derived": derived.ratio,
            "L": t["L"], "mu": t["mu"], "D_hat": t["D_hat"], "D_old_optimum": t["D_old_optimum"],
            "unmet": [a.name for a in printed.assumptions if not a.held]}


# --------------------------------------------------------------------------- protocol

def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    """For each kind, family, share and instance: exact shift, both bounds,
    their ratios, the constants and the instance seed."""
    out: dict[str, Any] = {"families": list(config["families"]), "kinds": list(KINDS),
                           "dim": config["dim"], "n_clients": config["n_clients"],
                           "n_total": config["n_total"]}
    fields = ("n_a_over_n", "n_a", "exact", "bound", "ratio", "bound_derived", "ratio_derived",
              "L", "mu", "D_hat", "D_old_optimum", "unmet")
    tasks = [(kind, family, share) for kind in KINDS for family in config["families"]
             for share in config[f"{kind}_shares"]]
    seeds = rng.integers(0, 2**31 - 1, size=(len(tasks), config["instances"]))
    for (kind, family, share), row_seeds in progress(list(zip(tasks, seeds)), desc=NAME):
        table = out.setdefault(kind, {}).setdefault(family, {"share": [], "seed": [],
                                                             **{f: [] for f in fields}})
        cells = [_measure(family, kind, share, config, int(s)) for s in row_seeds]
        table["share"].append(share)
        table["seed"].append([int(s) for s in row_seeds])
        for f in fields:
            table[f].append([c[f] for c in cells])
    return out


def _worst(table: dict[str, Any], key: str) -> tuple[float | None, tuple[int, int] | None, int, int]:
    """(max ratio, its (share, instance) index, #evaluated, #total)."""
    best, where, count, total = None, None, 0, 0
    for i, row in enumerate(table[key]):
        for j, r in enumerate(row):
            total += 1
            if r is None:
                continue
            count += 1
            if best is None or r > best:
                best, where = r, (i, j)
    return best, where, count, total


def checks(results: dict[str, Any]) -> list[Check]:
    """One check per (statement, family): worst exact/bound over the sweep."""
    cfg_line = f"N = {results['n_clients']} other clients, d = {results['dim']}, n = {results['n_total']}"
    out: list[Check] = []
    for kind in results["kinds"]:
        for variant, key, bound_key in (("", "ratio", "bound"), ("-derived", "ratio_derived", "bound_derived")):
            for family in results["families"]:
                table = results[kind][family]
                worst, where, count, total = _worst(table, key)
                theorem = kind + variant
                if worst is None or where is None:      # both None together: nothing evaluated
                    reasons = sorted({u for row in table["unmet"] for cell in row for u in cell})
                    out.append(Check(theorem, "not checkable", None,
                                     f"{family}: no instance meets the hypotheses ({'; '.join(reasons)})"))
                    continue
                i, j = where
                instance = (f"{family}, {kind}, n_a/n = {table['n_a_over_n'][i][j]:.4g} "
                            f"(n_a = {table['n_a'][i][j]}), seed {table['seed'][i][j]}, {cfg_line}: "
                            f"exact {table['exact'][i][j]:.6g} > bound {table[bound_key][i][j]:.6g} "
                            f"(L = {table['L'][i][j]:.4g}, mu = {table['mu'][i][j]:.4g}, "
                            f"D^_a = {table['D_hat'][i][j]:.4g})")
                skipped = f"; {total - count} of {total} instances not checkable" if count < total else ""
                if worst > 1.0:
                    n_bad = sum(r is not None and r > 1.0 for row in table[key] for r in row)
                    out.append(Check(theorem, "violated", worst,
                                     f"{n_bad} of {count} instances; worst: {instance}{skipped}"))
                else:
                    out.append(Check(theorem, "holds", worst,
                                     f"{family}: {count} instances, worst n_a/n = "
                                     f"{table['n_a_over_n'][i][j]:.4g}{skipped}"))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    """Worst ratio per (kind, family, variant) and, for joins, the smallest
    n_a/n at which the printed eq. 11 fails (omitted if it never fails)."""
    out: dict[str, float] = {}
    for kind in results["kinds"]:
        for family in results["families"]:
            table = results[kind][family]
            for key, suffix in (("ratio", "max_ratio"), ("ratio_derived", "max_ratio_derived")):
                worst = _worst(table, key)[0]
                if worst is not None:
                    out[f"{kind}_{family}_{suffix}"] = worst
            bad = [s for row_s, row_r in zip(table["n_a_over_n"], table["ratio"])
                   for s, r in zip(row_s, row_r) if r is not None and r > 1.0]
            if bad:
                out[f"{kind}_{family}_first_violation_share"] = min(bad)
    return out


def plot(results: dict[str, Any]) -> Figure:
    """Two panels (departure, arrival): worst exact/bound over instances
    against n_a/n, log-log; solid = as printed, dashed = derived."""
    fig, axes = plotting.figure(1, 2, sharey=True, height=3.3)
    titles = {"depart": "client departs (eq. 10)", "join": "client joins (eq. 11)"}
    for ax, kind in zip(axes, results["kinds"]):
        for c, family in enumerate(results["families"]):
            table = results[kind][family]
            x = [float(np.mean(row)) for row in table["n_a_over_n"]]
            colour = plotting.OKABE_ITO[c]
            for key, style, label in (("ratio", "-", "as printed"), ("ratio_derived", "--", "derived")):
                y = [max((r for r in row if r is not None), default=np.nan) for row in table[key]]
                ax.plot(x, y, linestyle=style, marker="o" if style == "-" else None, color=colour,
                        label=f"{family.replace('_', ' ')}, {label}")
        ax.set_xscale("log")
        plotting.ratio_axis(ax, label="exact shift / bound (worst instance)")
        ax.set_xlabel(r"data share $n_a/n$ of client $a$")
        ax.set_title(titles[kind])
    axes[1].set_ylabel("")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=7)
    return fig
