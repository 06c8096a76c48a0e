"""EFL's elastic weight lambda (Figure 2, sec. 5.3) on exact quadratic federations: stability and accuracy.

Ma et al. (arXiv:2106.09433), sec. 5.3 and Figure 2 compare EFL with lambda = 0 against EFL with the best
lambda on non-IID data and claim that "the appropriate lambda can increase the stability for unstable methods
and can force divergent methods to converge, and it also increases the accuracy in most cases".

Analogue with everything computable.  A random non-IID quadratic federation; EFL (``fltheory.algorithms.EFL``,
no compression, plain weights) whose local objective is f_k + (lambda/2) w^T diag(U) w - lambda w^T V with
U = sum_i diag(I_i), V = sum_i diag(I_i) w_i (eq. 2-3; on quadratic clients the Fisher diagonal is diag(H_i),
a constant, so the round is affine in the state [x, U, V, ...]).  Over a grid of local steps E, client rates
eta = f / L (f in ``lr_factors``, beyond 2/L included: the unstable and divergent regime of Figure 2) and
lambda in ``lams``:

* stability: the exact asymptotic rate rho(lambda) = spectral radius of the affine round map
  (``fltheory.theory.affine_round_map`` + ``spectral_rate``; rho >= 1 diverges);
* bias: ||x~(lambda) - w*||^2 at the fixed point x~ of the deterministic map (``fixed_point``), when rho < 1;
* accuracy: the exact expected training loss E[F(w_T)] - F* after T rounds with gradient noise (variance
  ``sigma2`` per client) and one client inactive with probability ``inactive_prob`` per round
  (``fltheory.theory.moments.exact_moments``, exact expectation over noise and activity).

Checks: ``lambda-rescues-divergence`` (over the cells where lambda = 0 diverges, ratio = largest
min_{lambda > 0} rho(lambda): <= 1 iff some lambda > 0 converges in each such cell, searched over
``search_lams`` = [low, high, count], log-spaced;
"not checkable" if lambda = 0 diverges nowhere on the grid); ``lambda-stabilises`` (share of the grid cells
where the best lambda > 0 has a smaller rho than lambda = 0) and ``lambda-accuracy`` (over the cells where
lambda = 0 converges, share where the best lambda > 0 has the smaller exact E[F(w_T)] - F*): "in most
cases", so each holds iff its share is above one half (ratio = 2 (1 - share), below 1 iff it holds).
The lambdas that lower the loss are reported per cell.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory import plotting
from fltheory.algorithms import EFL
from fltheory.errors import FLTheoryError, NotAffineError
from fltheory.participation import FullParticipation, IncompleteSteps
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory.theory import affine_round_map, fixed_point, spectral_rate
from fltheory.theory.moments import exact_moments

from ._efl_instances import PAPER, quadratic_instance, ratio_check, recorded_instance_text
from ._panels import cycle_color, label_panel

NAME = "efl_lambda"
TITLE = "EFL Figure 2: does the elastic weight lambda stabilise EFL and improve its accuracy? (exact)"
THEOREMS = [
    Theorem("lambda-rescues-divergence", PAPER, "sec. 5.3 / Figure 2: an appropriate lambda forces divergent EFL "
            "(lambda = 0) to converge", "Figure 2"),
    Theorem("lambda-stabilises", PAPER, "sec. 5.3 / Figure 2: an appropriate lambda increases stability (smaller "
            "exact asymptotic rate than lambda = 0)", "Figure 2"),
    Theorem("lambda-accuracy", PAPER, "sec. 5.3 / Figure 2: the best lambda increases accuracy in most cases "
            "(smaller exact expected training loss after T rounds)", "Figure 2"),
]
QUICK: dict[str, Any] = {
    "n_clients": 3, "dim": 2, "L": 4.0, "mu": 0.5, "heterogeneity": 2.0, "init_distance": 2.0,
    "local_steps": [1, 4], "lr_factors": [0.5, 1.9, 2.5], "lams": [0.0, 0.03, 0.1, 0.3, 1.0],
    "sigma2": 0.5, "inactive_prob": 0.3, "rounds": 30, "search_lams": [1e-3, 30.0, 24],
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 5, "dim": 4, "local_steps": [1, 2, 4, 8],
                        "lr_factors": [0.25, 0.5, 1.0, 1.5, 1.9, 2.2, 2.5],
                        "lams": [0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0], "rounds": 60,
                        "search_lams": [1e-3, 30.0, 60]}
EXPECTED_AXES = 2


def deterministic_cell(fed: Any, lr: float, E: int, lam: float) -> tuple[float, float | None]:
    """(rho, ||x~ - w*||^2) of EFL's deterministic round map (full participation, exact gradients);
    the bias is None when rho >= 1 (no attracting fixed point).  rho is NaN when the map cannot be
    recovered in floating point (NotAffineError of the affinity check: it happens only for violently
    expanding maps, whose probe rounds reach ~1e12 and lose the digits the check needs)."""
    try:
        amap = affine_round_map(EFL(lr=lr, local_steps=E, lam=lam, compression=None), fed)
    except NotAffineError:
        return float("nan"), None
    rho = spectral_rate(amap)
    if rho >= 1:
        return rho, None
    fp = fixed_point(amap)
    return rho, float(np.sum((fp.x - fed.optimum()) ** 2))


def expected_loss(fed: Any, cfg: dict[str, Any], lr: float, E: int, lam: float, x0: np.ndarray) -> float:
    """Exact E[F(w_T)] - F* with gradient noise and the last client inactive w.p. ``inactive_prob``."""
    y = np.zeros(fed.n_clients)
    y[-1] = cfg["inactive_prob"]
    part = IncompleteSteps(FullParticipation(), inactive_prob=y)
    ex = exact_moments(EFL(lr=lr, local_steps=E, lam=lam, compression=None), fed.with_gradient_noise(cfg["sigma2"]),
                       cfg["rounds"], participation=part, x0=x0)
    return float(ex.loss_gap[-1])


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed, fed, x0 = quadratic_instance(config, rng)
    L = float(fed.client_L.max())
    Es, fs, lams = config["local_steps"], config["lr_factors"], config["lams"]
    shape = (len(Es), len(fs), len(lams))
    rho, bias, loss = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    cells = [(i, j) for i in range(len(Es)) for j in range(len(fs))]
    for i, j in progress(cells, desc=NAME):
        for k, lam in enumerate(lams):
            r, b = deterministic_cell(fed, fs[j] / L, Es[i], lam)
            rho[i, j, k] = r
            if b is not None:
                bias[i, j, k] = b
            if r < 1:                                    # False for NaN (map not recovered)
                try:
                    loss[i, j, k] = expected_loss(fed, config, fs[j] / L, Es[i], lam, x0)
                except FLTheoryError:                    # overflow of a slowly mixing cell: recorded as missing
                    loss[i, j, k] = np.nan
    lo, hi, n = config["search_lams"]
    grid = np.logspace(np.log10(lo), np.log10(hi), int(n))
    search = {}
    for i, j in zip(*np.nonzero(~(rho[:, :, 0] < 1)), strict=True):     # diverging (or too expansive to recover)
        rates = np.array([deterministic_cell(fed, fs[j] / L, Es[i], float(lam))[0] for lam in grid])
        ok = np.isfinite(rates)
        k = int(np.argmin(np.where(ok, rates, np.inf)))
        search[f"{Es[i]},{fs[j]}"] = {"lam": float(grid[k]), "rho": float(rates[k]) if ok.any() else None,
                                      "unrecovered": int((~ok).sum())}
    return {"seed": seed, "N": config["n_clients"], "d": config["dim"], "L": L, "x0": x0, "local_steps": Es,
            "lr_factors": fs, "lams": lams, "rho": missing_as_none(rho), "bias": missing_as_none(bias),
            "loss": missing_as_none(loss), "T": config["rounds"],
            "sigma2": config["sigma2"], "inactive_prob": config["inactive_prob"],
            "heterogeneity": config["heterogeneity"], "search": search, "search_lams": [lo, hi, int(n)]}


def missing_as_none(values: np.ndarray) -> list[Any]:
    """Nested lists with None where ``values`` is NaN (saved results hold finite numbers only);
    ``np.asarray(out, dtype=float)`` restores the NaNs."""
    return [missing_as_none(v) for v in values] if values.ndim > 1 else \
        [None if not np.isfinite(v) else float(v) for v in values]


def _inst(results: dict[str, Any]) -> str:
    return recorded_instance_text(results, results["local_steps"][-1],
                                  f"E in {results['local_steps']}, eta L in {results['lr_factors']}, lambda in "
                                  f"{results['lams']}", f"heterogeneity {results['heterogeneity']}")


def helpful_lambdas(results: dict[str, Any]) -> dict[str, list[float]]:
    """Per grid cell "E = .., eta L = .." where lambda = 0 converges, the lambdas > 0 whose exact expected
    loss after T rounds is below lambda = 0's."""
    loss, lams = np.asarray(results["loss"], dtype=float), results["lams"]
    out: dict[str, list[float]] = {}
    for i, E in enumerate(results["local_steps"]):
        for j, f in enumerate(results["lr_factors"]):
            if np.isfinite(loss[i, j, 0]):
                out[f"E = {E}, eta L = {f}"] = [float(lams[k]) for k in range(1, len(lams))
                                                 if np.isfinite(loss[i, j, k]) and loss[i, j, k] < loss[i, j, 0]]
    return out


def _most(key: str, share: float, text: str, instance: str) -> Check:
    """"In most cases": holds iff the share is above one half; ratio = 2 (1 - share) (1 at exactly half,
    0 when every cell agrees, 2 when none does)."""
    ratio = 2.0 * (1.0 - share)
    holds = share > 0.5
    return Check(key, "holds" if holds else "violated", ratio, text if holds else f"{text}; {instance}")


def checks(results: dict[str, Any]) -> list[Check]:
    rho, loss = np.asarray(results["rho"], dtype=float), np.asarray(results["loss"], dtype=float)
    Es, fs, lams = results["local_steps"], results["lr_factors"], results["lams"]
    out = []
    div = ~(rho[:, :, 0] < 1)                      # NaN: a lambda = 0 map too expansive to recover
    if not div.any():
        out.append(Check("lambda-rescues-divergence", "not checkable", None,
                         "lambda = 0 converges in every grid cell: no divergent run to rescue; " + _inst(results)))
    else:
        lo, hi, n = results["search_lams"]
        found = [results["search"][f"{Es[i]},{fs[j]}"] for i, j in zip(*np.nonzero(div), strict=True)]
        # a cell whose every lambda > 0 map is unrecoverable (violently expanding) counts with rho(0)
        worst = max(float(f["rho"]) if f["rho"] is not None else float(rho[i, j, 0])
                    for (i, j), f in zip(zip(*np.nonzero(div), strict=True), found, strict=True))
        cells = [f"E = {Es[i]}, eta L = {fs[j]}: rho(0) = {rho[i, j, 0]:.4g}, smallest rho over {n} lambdas in "
                 f"[{lo:g}, {hi:g}] "
                 + (f"{f['rho']:.4g} at lambda = {f['lam']:.3g}" if f["rho"] is not None else "not recovered")
                 + (f" ({f['unrecovered']} lambdas with a map too expansive to recover)" if f["unrecovered"] else "")
                 for (i, j), f in zip(zip(*np.nonzero(div), strict=True), found, strict=True)]
        out.append(ratio_check("lambda-rescues-divergence", worst,
                               f"cells where lambda = 0 diverges: {'; '.join(cells)}", _inst(results)))
    better_rho = np.where(np.isfinite(rho[:, :, 1:]), rho[:, :, 1:], np.inf).min(axis=2) < rho[:, :, 0]
    share = float(better_rho.mean())
    per_E = ", ".join(f"E = {E}: {int(better_rho[i].sum())}/{len(fs)}" for i, E in enumerate(Es))
    out.append(_most("lambda-stabilises", share, f"the best lambda > 0 has a smaller exact rate than lambda = 0 in "
                     f"{share:.0%} of the cells ({per_E})", _inst(results)))
    conv = np.isfinite(loss[:, :, 0])
    if not conv.any():
        out.append(Check("lambda-accuracy", "not checkable", None, "lambda = 0 diverges everywhere"))
        return out
    best_loss = np.where(np.isfinite(loss[:, :, 1:]), loss[:, :, 1:], np.inf).min(axis=2)
    better = best_loss < loss[:, :, 0]
    share = float(better[conv].mean())
    def gain(i: int, j: int) -> str:
        if not np.isfinite(best_loss[i, j]):
            return f"E = {Es[i]}, eta L = {fs[j]}: {loss[i, j, 0]:.3g} -> every lambda > 0 diverges"
        k = 1 + int(np.argmin(np.where(np.isfinite(loss[i, j, 1:]), loss[i, j, 1:], np.inf)))
        return f"E = {Es[i]}, eta L = {fs[j]}: {loss[i, j, 0]:.3g} -> {best_loss[i, j]:.3g} (lambda {lams[k]:g})"

    gains = ", ".join(gain(i, j) for i, j in zip(*np.nonzero(conv), strict=True))
    helpful = "; ".join(f"{cell}: {v if v else 'none'}" for cell, v in helpful_lambdas(results).items())
    out.append(_most("lambda-accuracy", share,
                           f"the best lambda > 0 lowers the exact E[F(w_T)] - F* (T = {results['T']}) in {share:.0%} "
                           f"of the {int(conv.sum())} convergent cells ({gains}); the lambdas that lower the loss, per "
                           f"cell: {helpful}", _inst(results)))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    rho, loss = np.asarray(results["rho"], dtype=float), np.asarray(results["loss"], dtype=float)
    conv = np.isfinite(loss[:, :, 0])
    best_loss = np.where(np.isfinite(loss[:, :, 1:]), loss[:, :, 1:], np.inf).min(axis=2)
    best_rho = np.where(np.isfinite(rho[:, :, 1:]), rho[:, :, 1:], np.inf).min(axis=2)
    out = {"share_rho_improved": float((best_rho < rho[:, :, 0]).mean()),
           "cells_divergent_at_zero": float((~(rho[:, :, 0] < 1)).sum())}
    if conv.any():
        out["share_loss_improved"] = float((best_loss < loss[:, :, 0])[conv].mean())
    return out


def plot(results: dict[str, Any]) -> Figure:
    fig, axes = plotting.figure(1, 2)
    rho, loss = np.asarray(results["rho"], dtype=float), np.asarray(results["loss"], dtype=float)
    lams = np.asarray(results["lams"], dtype=float)
    x = np.where(lams > 0, lams, lams[lams > 0].min() / 3)          # lambda = 0 drawn left of the grid
    n = 0
    for i, E in enumerate(results["local_steps"]):
        for j, f in enumerate(results["lr_factors"]):
            color = cycle_color(n)
            style = "-" if i == 0 else "--"
            axes[0].semilogx(x, rho[i, j], color=color, linestyle=style, marker="o", markersize=2,
                             label=f"E = {E}, eta L = {f}")
            axes[1].loglog(x, loss[i, j], color=color, linestyle=style, marker="o", markersize=2)
            n += 1
    axes[0].axhline(1.0, color="0.4", linestyle=":", linewidth=1.0)
    axes[0].set_ylim(0, 2)
    lam_label = r"elastic weight $\lambda$ (leftmost point: $\lambda = 0$)"
    label_panel(axes[0], lam_label, r"exact rate $\rho$ (ratio per round)", r"stability ($\rho > 2$ off the chart)",
                {"fontsize": 4, "ncol": 2})
    label_panel(axes[1], lam_label, r"$E[F(w_T)] - F^*$ (loss units)",
                f"accuracy after T = {results['T']} rounds (exact)")
    return fig
