"""EFL (EFL) Table 1: does EFL's row "improve the optimization" over SCAFFOLD's and MIME's?

Ma et al., Table 1 (arXiv:2106.09433; constants hidden, each row taken with
constant 1): SCAFFOLD G^2/(mu S eps) + G/(mu sqrt(eps)) + L/mu, MIME
G^2/(mu S eps) + delta/mu, EFL G^2/(mu S eps) + L/(mu sqrt(eps)).  The caption
claims EFL keeps the statistical term and improves the optimization.  In
closed form (``fltheory.theory.bounds.table1_efl_comparison``) EFL's bound is
below SCAFFOLD's exactly when G > L (1 - sqrt(eps)) and below MIME's exactly
when delta > L / sqrt(eps).  The rows are evaluated over a grid of given
constants (eps, G/L, delta/L at fixed mu, L, S) and over the constants of a
random quadratic federation (G^2 = largest client squared gradient norm over
the ball of radius ``radius`` around x*, delta the Hessian dissimilarity,
mu = min mu_i, L = max L_i).  Checks ``improves-vs-scaffold`` and
``improves-vs-mime``: ratio = the largest EFL / other over the constants;
every cell's verdict is compared with the closed-form crossover.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.references import cite
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.errors import InvalidProblemError
from fltheory.problems.generators import random_quadratic
from fltheory.theory.bounds import table1_efl_comparison

NAME = "efl_table1"
TITLE = "EFL Table 1: EFL's round complexity against SCAFFOLD's and MIME's rows for given constants"
_PAPER = cite("EFL")
THEOREMS = [
    Theorem("improves-vs-scaffold", _PAPER, "Table 1 caption: EFL improves the optimization term over "
            "SCAFFOLD's row (EFL rounds <= SCAFFOLD rounds)", "Table 1"),
    Theorem("improves-vs-mime", _PAPER, "Table 1: EFL rounds <= MIME rounds (both mu-SC rows)", "Table 1"),
]
QUICK: dict[str, Any] = {
    "mu": 1.0, "L": 10.0, "S": 10,
    "eps": [1e-1, 1e-2, 1e-3, 1e-4], "G_over_L": [0.1, 0.3, 1.0, 3.0], "delta_over_L": [0.5, 2.0],
    "fed": {"n_clients": 10, "dim": 5, "L": 10.0, "mu": 1.0, "heterogeneity": 1.0, "radius": 1.0},
}
FULL: dict[str, Any] = {**QUICK, "eps": [1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4],
                        "G_over_L": [0.03, 0.1, 0.3, 0.6, 0.9, 1.0, 1.5, 3.0, 10.0],
                        "delta_over_L": [0.5, 1.0, 2.0, 10.0, 100.0]}
EXPECTED_AXES = 2


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    mu, L, S = config["mu"], config["L"], config["S"]
    eps, gl, dl = config["eps"], config["G_over_L"], config["delta_over_L"]
    ratio_s = np.empty((len(eps), len(gl)))
    ratio_m = np.empty((len(eps), len(dl)))
    agree = True
    for a, e in enumerate(eps):
        for b, g in enumerate(gl):
            c = table1_efl_comparison(eps=e, S=S, G=g * L, mu=mu, L=L)["SCAFFOLD"]
            ratio_s[a, b] = c["ratio"]
            agree &= bool(c["efl_tighter"]) == bool(g * L > c["threshold"])
        for b, dd in enumerate(dl):
            c = table1_efl_comparison(eps=e, S=S, G=L, mu=mu, L=L, delta=dd * L)["MIME"]
            ratio_m[a, b] = c["ratio"]
            agree &= bool(c["efl_tighter"]) == bool(dd * L > c["threshold"])
    f = config["fed"]
    seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(f["n_clients"], f["dim"], L=f["L"], mu=f["mu"], heterogeneity=f["heterogeneity"],
                           seed=seed, constants="clients")
    k = fed.constants(radius=f["radius"])
    if k.G2_max is None:
        raise InvalidProblemError(f"constants(radius={f['radius']}) of the random quadratic carry no G2_max")
    G = float(np.sqrt(k.G2_max))
    fed_rows = [table1_efl_comparison(eps=e, S=S, G=G, mu=float(k.client_mu.min()), L=float(k.client_L.max()),
                                      delta=float(k.delta)) for e in eps]
    return {"mu": mu, "L": L, "S": S, "eps": eps, "G_over_L": gl, "delta_over_L": dl,
            "ratio_scaffold": ratio_s, "ratio_mime": ratio_m, "closed_form_agrees": agree,
            "fed": {"seed": seed, "G": G, "delta": float(k.delta), "mu": float(k.client_mu.min()),
                    "L": float(k.client_L.max()),
                    "ratio_scaffold": [r["SCAFFOLD"]["ratio"] for r in fed_rows],
                    "ratio_mime": [r["MIME"]["ratio"] for r in fed_rows]}}


def _check(key: str, name: str, grid: np.ndarray, cols: list[float], col_name: str,
           results: dict[str, Any]) -> Check:
    fed = results["fed"]
    fed_r = np.asarray(fed[f"ratio_{name.lower()}"])
    worst_grid = float(grid.max())
    a, b = np.unravel_index(int(grid.argmax()), grid.shape)
    share = float(np.mean(grid < 1))
    text = (f"EFL / {name} rounds over eps = {results['eps']} x {col_name} = {cols}: largest "
            f"{worst_grid:.4g} "
            f"(eps = {results['eps'][a]}, {col_name} = {cols[b]}); EFL smaller in {share:.0%} of the cells; "
            f"random quadratic (seed {fed['seed']}): G = {fed['G']:.4g}, delta = {fed['delta']:.4g}, mu = "
            f"{fed['mu']:.4g}, L = {fed['L']:.4g}, ratios {[round(float(x), 4) for x in fed_r]}; closed-form "
            f"crossover {'agrees' if results['closed_form_agrees'] else 'DISAGREES'} with every cell")
    worst = max(worst_grid, float(fed_r.max()))
    return Check(key, "holds" if worst <= 1 else "violated", worst,
                 text + (f"; mu = {results['mu']}, L = {results['L']}, S = "
                         f"{results['S']}" if worst > 1 else ""))


def checks(results: dict[str, Any]) -> list[Check]:
    return [_check("improves-vs-scaffold", "SCAFFOLD", np.asarray(results["ratio_scaffold"]),
                   results["G_over_L"], "G/L", results),
            _check("improves-vs-mime", "MIME", np.asarray(results["ratio_mime"]), results["delta_over_L"],
                   "delta/L", results)]


def macros(results: dict[str, Any]) -> dict[str, float]:
    return {"max_ratio_scaffold": float(np.max(results["ratio_scaffold"])),
            "max_ratio_mime": float(np.max(results["ratio_mime"])),
            "share_efl_tighter_scaffold": float(np.mean(np.asarray(results["ratio_scaffold"]) < 1))}


def plot(results: dict[str, Any]) -> Figure:
    fig, (ax,) = plotting.figure(1, 1)
    grid = np.log10(np.asarray(results["ratio_scaffold"]))
    lim = float(np.abs(grid).max()) or 1.0
    im = ax.imshow(grid, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", origin="lower")
    ax.set_xticks(range(len(results["G_over_L"])), [f"{g:g}" for g in results["G_over_L"]])
    ax.set_yticks(range(len(results["eps"])), [f"{e:g}" for e in results["eps"]])
    ax.set_xlabel("G / L (dimensionless)")
    ax.set_ylabel(r"target accuracy $\epsilon$")
    ax.set_title("EFL / SCAFFOLD rounds (Table 1)")
    fig.colorbar(im, ax=ax, label=r"$\log_{10}$ ratio (red: EFL larger)")
    return fig
