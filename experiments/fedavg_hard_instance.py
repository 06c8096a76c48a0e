"""FedAvg's lower bound (Karimireddy et al., SCAFFOLD, ICML 2020 Theorem II) on a hard instance.

Theorem II of the ICML 2020 version (SCAFFOLD-v1, arXiv v1, does not contain it):
with K >= 2 local steps and exact gradients there are mu-strongly convex
objectives on which FedAvg has F(x_R) - F* >= Omega(G^2/(mu R^2)) for *every*
step size.  The ``scaffold_drift`` experiment compares the bound with generic
quadratics, where a lower bound need not hold ("not checkable").  Here the
bound is evaluated on the hard instance of
``fltheory.theory.bounds.fedavg_hard_instance`` (f_1 = mu x^2 + G x,
f_2 = -G x, F = mu x^2/2; our reading of the paper's construction): FedAvg is
an exact affine map, so for every R the error minimised over the client rate
eta in (0, 1/mu) is computed exactly (grid plus golden-section refinement).
Check ``order`` (Theorem II): the fitted log-log slope s of min_eta
(F(x_R) - F*) against R must not be below -2 (no faster decay than 1/R^2);
ratio = -s/2.  The smallest measured c_R = min_eta (F(x_R) - F*) mu R^2 / G^2
over the R grid is the constant with which the bound holds on this instance;
K = 1 (no drift, plain GD, whose error decays geometrically) is reported for
contrast: the hypothesis K >= 2 is needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.references import cite
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.theory.bounds.fedavg_hard_instance import hard_instance_best_error

NAME = "fedavg_hard_instance"
TITLE = "FedAvg lower bound (SCAFFOLD ICML 2020 Theorem II) on a hard two-client instance, best step per R"
_PAPER = cite("SCAFFOLD-ICML") + " (not in SCAFFOLD-v1)"
THEOREMS = [
    Theorem("order", _PAPER, "Theorem II: for K >= 2, sigma = 0, min over steps of F(x_R) - F* >= "
            "Omega(G^2/(mu R^2)) (log-log slope in R not below -2)", "Theorem II"),
]
QUICK: dict[str, Any] = {"G": 1.0, "mu": 1.0, "x0_over_G": 1.0, "K": [2, 5], "R": [10, 30, 100, 300, 1000],
                         "slope_tol": 0.05, "grid": 2000}
FULL: dict[str, Any] = {**QUICK, "K": [2, 3, 5, 10], "R": [10, 30, 100, 300, 1000, 3000, 10000],
                        "grid": 8000}
EXPECTED_AXES = 1


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    G, mu = config["G"], config["mu"]
    x0 = config["x0_over_G"] * G / mu
    out: dict[str, Any] = {"G": G, "mu": mu, "x0": x0, "R": config["R"], "K": config["K"],
                           "slope_tol": config["slope_tol"], "errors": {}, "etas": {}}
    for K in progress([1, *config["K"]], desc=NAME):
        best = [hard_instance_best_error(R, G=G, mu=mu, K=K, x0=x0, grid=config["grid"]) for R in config["R"]]
        out["errors"][str(K)] = [b[0] for b in best]
        out["etas"][str(K)] = [b[1] for b in best]
    return out


def fitted_slope(R: list[int], err: list[float]) -> float:
    """Least-squares slope of log err on log R."""
    return float(np.polyfit(np.log(R), np.log(err), 1)[0])


def checks(results: dict[str, Any]) -> list[Check]:
    R, G, mu = results["R"], results["G"], results["mu"]
    parts, worst, worst_k = [], -np.inf, None
    for K in results["K"]:
        err = results["errors"][str(K)]
        s = fitted_slope(R, err)
        c = [e * mu * r ** 2 / G ** 2 for e, r in zip(err, R, strict=True)]
        parts.append(f"K = {K}: slope {s:.3f}, c_R = min_eta err mu R^2/G^2 in [{min(c):.3g}, {max(c):.3g}]")
        if -s / 2 > worst:
            worst, worst_k = -s / 2, K
    k1 = results["errors"]["1"]
    text = ("; ".join(parts) + f"; K = 1 (no drift): min error {k1[0]:.3g} at R = {R[0]} and {k1[-1]:.3g} at "
            f"R = {R[-1]} (geometric decay: the bound needs K >= 2); G = {G}, mu = {mu}, x0 = "
            f"{results['x0']}, "
            f"R = {R}")
    ok = worst <= 1 + results["slope_tol"] / 2
    return [Check("order", "holds" if ok else "violated", float(worst),
                  text if ok else f"{text}; worst K = {worst_k}")]


def macros(results: dict[str, Any]) -> dict[str, float]:
    out = {}
    for K in results["K"]:
        err = results["errors"][str(K)]
        out[f"slope_k{K}"] = fitted_slope(results["R"], err)
        out[f"min_constant_k{K}"] = float(min(e * results["mu"] * r ** 2 / results["G"] ** 2
                                              for e, r in zip(err, results["R"], strict=True)))
    return out


def plot(results: dict[str, Any]) -> Figure:
    fig, (ax,) = plotting.figure(1, 1)
    R = np.asarray(results["R"], dtype=float)
    for c, K in enumerate(results["K"]):
        ax.loglog(R, results["errors"][str(K)], marker="o", color=plotting.OKABE_ITO[c],
                  label=f"FedAvg, K = {K}, best step per R")
    ax.loglog(R, results["G"] ** 2 / (results["mu"] * R ** 2), color="black", linestyle="--",
              label=r"$G^2/(\mu R^2)$")
    ax.set_xlabel("rounds R")
    ax.set_ylabel(r"$\min_\eta F(x_R) - F^*$ (loss units)")
    ax.set_title("Theorem II (ICML 2020), hard instance", fontsize=9)
    ax.legend(fontsize=6)
    return fig
