"""Fixed points of FedOpt with local adaptivity on a 2-D heterogeneous quadratic.

LocalAdaptivity (Wang et al., "Local Adaptivity in Federated Learning"), Figure 1 and
Theorem 2 as restated in docs/theory/fixed-points.md: FedOpt with server GD is the Mann
iteration x <- (1 - eta_s) x + eta_s T(x) of the operator T(x) = sum_i p_i O_i(x)
(eq. 6), so it converges to a fixed point x~ = T(x~), which for quadratic
clients f_i(x) = 1/2 x^T H_i x - e_i^T x with a *fixed* preconditioner P_i is

    B_i = I - (I - eta_i P_i H_i)^{tau_i},   x~ = (sum p_i B_i)^{-1} sum p_i B_i x_i*

and with local correction (M_i = (tau_i P_i)^{-1}, one client rate, section 5)
x~_corr = (sum p_i M_i B_i)^{-1} sum p_i M_i B_i x_i*
(``fltheory.theory.closed_forms.fedopt_quadratic_fixed_point``).  For
restarted local AdaGrad T is not affine; its fixed point is the root of
T(x) - x (``fltheory.theory.operators.operator_fixed_point``, Powell hybrid
method cross-checked by Anderson acceleration).

The experiment draws one heterogeneous 2-client quadratic (each H_i with
eigenvalues exactly mu and L; heterogeneous local steps tau = (2, 10) as in
the non-vanishing-bias example), runs six methods with the library's FedAvg /
FedOpt for R rounds from one start x0 (R per method: the predicted linear rate's time
to reach tol / safety, see ``_rounds_needed``), and compares

* "closed form" (fixed preconditioners: FedAvg = local GD, P_i = I; local GD
  with the fixed diagonal P_i = diag(H_i)^{-1}; the latter with local
  correction): ||x_R - x~_closed|| against a stated tolerance;
* "operator root" (restarted local AdaGrad without correction, with local
  and with joint correction): ||x_R - x~_root|| against the same tolerance;
* "correction": ||x~_corr - x*|| / ||x~_none - x*|| for each corrected method
  against its uncorrected counterpart (section 5: correction removes the
  non-vanishing part of the bias, so the corrected fixed point is closer).

The tolerance is ``tol_rel * ||x0 - x*||``; a method that has not converged
in its R rounds shows up as a ratio > 1, not as a silent pass.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

from fltheory.references import cite
from fltheory.errors import DivergenceError
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import optim, plotting
from fltheory.algorithms import run as run_rounds
from fltheory.algorithms.base import Algorithm
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedopt import FedOpt
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory import fedopt_quadratic_fixed_point
from fltheory.theory.operators import fedopt_operator, operator_fixed_point

NAME = "fedopt_fixed_points"
TITLE = "FedOpt with local GD / preconditioned GD / AdaGrad converges to the fixed point of T, not to x*"
_PAPER = cite("LocalAdaptivity")
THEOREMS = [
    Theorem("closed-form", _PAPER, "Theorem 2 (quadratic example), fixed preconditioners",
            "eq. 8-10 as restated in docs/theory/fixed-points.md"),
    Theorem("operator-root", _PAPER, "Theorem 1: FedOpt = Mann iteration of T, converges to T(x~) = x~",
            "eq. 6"),
    Theorem("correction", _PAPER, "Section 5: local / joint correction move the fixed point towards x*",
            "eq. 11"),
]
QUICK: dict[str, Any] = {
    "dim": 2, "n_clients": 2, "L": 4.0, "mu": 0.5, "heterogeneity": 1.0,
    "local_steps": [2, 10],
    "lr_gd": 0.1,                # local GD and preconditioned GD (eta L <= 1)
    "lr_adagrad": 0.05,
    "server_lr": 1.0,
    "start_distance": 2.0,       # ||x0 - x*||
    "tol_rel": 1e-5,             # tolerance on ||x_R - x~||, relative to ||x0 - x*||
    "safety": 10.0,              # rounds run: predicted time to reach tol / safety
    "min_rounds": 30,
    "max_rounds": 1500,
}
FULL: dict[str, Any] = {**QUICK, "tol_rel": 1e-9, "max_rounds": 5000}
EXPECTED_AXES = 2

# method key -> (label, client optimizer kind, correction, how x~ is obtained)
METHODS: dict[str, tuple[str, str, str, str]] = {
    "fedavg": ("FedAvg (local GD)", "gd", "none", "closed form"),
    "precond": (r"local GD, fixed $P_i = \mathrm{diag}(H_i)^{-1}$", "precond", "none", "closed form"),
    "precond_local": (r"fixed $P_i$ + local correction", "precond", "local", "closed form"),
    "adagrad": ("local AdaGrad (restarted)", "adagrad", "none", "operator root"),
    "adagrad_local": ("AdaGrad + local correction", "adagrad", "local", "operator root"),
    "adagrad_joint": ("AdaGrad + joint correction", "adagrad", "joint", "operator root"),
}
# corrected method -> its uncorrected counterpart
PAIRS = {"precond_local": "precond", "adagrad_local": "adagrad", "adagrad_joint": "adagrad"}


def _preconditioners(fed: QuadraticFederation) -> np.ndarray:
    """(N, d) diagonal P_i = 1 / diag(H_i) (a fixed Jacobi preconditioner per client)."""
    return 1.0 / np.einsum("nii->ni", fed.H)


def _algorithm(key: str, cfg: dict[str, Any], fed: QuadraticFederation) -> Algorithm:
    _, kind, correction, _ = METHODS[key]
    tau = np.asarray(cfg["local_steps"])
    if kind == "gd":
        return FedAvg(lr=cfg["lr_gd"], local_steps=tau, server_lr=cfg["server_lr"])
    client = (optim.preconditioned(cfg["lr_gd"], _preconditioners(fed), per_client=True) if kind == "precond"
              else optim.adagrad(cfg["lr_adagrad"]))
    return FedOpt(client_optimizer=client, server_optimizer=optim.sgd(cfg["server_lr"]),
                  local_steps=tau, correction=correction)


def _predicted(key: str, cfg: dict[str, Any], fed: QuadraticFederation, x_start: np.ndarray
               ) -> tuple[np.ndarray, float]:
    """(x~, spectral radius of the server-rate-1 round map / of the Jacobian of T at x~)."""
    _, kind, correction, source = METHODS[key]
    tau = np.asarray(cfg["local_steps"])
    if source == "closed form":
        P = None if kind == "gd" else _preconditioners(fed)
        fp = fedopt_quadratic_fixed_point(fed, cfg["lr_gd"], tau, P, correction=correction)
        return fp.x, fp.spectral_radius
    alg = _algorithm(key, cfg, fed)
    T = fedopt_operator(alg, fed)
    try:
        fp = operator_fixed_point(T, x_start)
    except DivergenceError as first:
        # another start: the iterate after min_rounds rounds of the algorithm itself
        retry = run_algorithm(alg, fed, int(cfg["min_rounds"]), x_start)[-1]
        try:
            fp = operator_fixed_point(T, retry)
        except DivergenceError as second:
            raise _NoFixedPoint(f"root of T(x) = x not found from x* ({' '.join(str(first).split())}) "
                                f"nor from x_{cfg['min_rounds']} ({' '.join(str(second).split())})") from second
    return fp.x, fp.spectral_radius


class _NoFixedPoint(Exception):
    """The root solver made no progress from either start: the method is not checkable here."""


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    """Draw the instance, compute each method's predicted fixed point and
    simulate R rounds of the library algorithm."""
    seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                           heterogeneity=config["heterogeneity"], seed=seed, constants="clients")
    xstar = fed.optimum()
    u = rng.standard_normal(config["dim"])
    x0 = xstar + config["start_distance"] * u / np.linalg.norm(u)
    out: dict[str, Any] = {
        "seed": seed, "x_star": xstar, "x0": x0, "client_optima": fed.client_optima(),
        "H_bar": fed.hess(), "e_bar": fed.weights @ fed.e, "weights": fed.weights,
        "H": fed.H, "e": fed.e, "tol": config["tol_rel"] * config["start_distance"],
        "rounds": {}, "methods": list(METHODS), "labels": {},
        "source": {}, "trajectory": {}, "fixed_point": {}, "rate": {}, "dist_to_fp": {},
        "bias": {}, "dist_to_opt": {}, "unsolved": {},
    }
    for key in progress(list(METHODS), desc=NAME):
        try:
            x_fp, rate = _predicted(key, config, fed, xstar)
        except _NoFixedPoint as exc:
            # not checkable on this instance: simulate anyway (the figure shows where it goes)
            hist = run_algorithm(_algorithm(key, config, fed), fed, int(config["max_rounds"]), x0)
            out["unsolved"][key] = str(exc)
            out["rounds"][key] = int(config["max_rounds"])
            out["labels"][key] = METHODS[key][0]
            out["source"][key] = METHODS[key][3]
            out["trajectory"][key] = hist
            out["dist_to_opt"][key] = np.linalg.norm(hist - xstar, axis=1)
            continue
        rounds = _rounds_needed(rate, out["tol"], float(np.linalg.norm(x0 - x_fp)), config)
        hist = run_algorithm(_algorithm(key, config, fed), fed, rounds, x0)
        # The predicted rate is the local one at x~; far from x~ a non-linear T can take longer.
        # Double the rounds (up to max_rounds) while the iterate is not yet within tol.
        while np.linalg.norm(hist[-1] - x_fp) > out["tol"] and rounds < int(config["max_rounds"]):
            rounds = min(2 * rounds, int(config["max_rounds"]))
            hist = run_algorithm(_algorithm(key, config, fed), fed, rounds, x0)
        out["rounds"][key] = rounds
        out["labels"][key] = METHODS[key][0]
        out["source"][key] = METHODS[key][3]
        out["trajectory"][key] = hist
        out["fixed_point"][key] = x_fp
        out["rate"][key] = rate
        out["dist_to_fp"][key] = float(np.linalg.norm(hist[-1] - x_fp))
        out["bias"][key] = float(np.linalg.norm(x_fp - xstar))
        out["dist_to_opt"][key] = np.linalg.norm(hist - xstar, axis=1)
    return out


def _rounds_needed(rate: float, tol: float, dist0: float, cfg: dict[str, Any]) -> int:
    """Rounds after which the predicted linear rate brings ||x_t - x~|| from
    ``dist0`` below tol / ``safety``: ceil(log(tol / (safety dist0)) / log(rate)),
    clipped to [min_rounds, max_rounds] (the clip is recorded: a method stopped
    by max_rounds before its predicted time is reported as not converged)."""
    if rate >= 1.0:
        return int(cfg["max_rounds"])
    need = np.log(tol / (cfg["safety"] * dist0)) / np.log(rate)
    return int(min(max(np.ceil(need), cfg["min_rounds"]), cfg["max_rounds"]))


def run_algorithm(alg: Algorithm, fed: QuadraticFederation, rounds: int, x0: np.ndarray) -> np.ndarray:
    """Server models x_0..x_R of ``fltheory.algorithms.run`` (deterministic: exact gradients)."""
    return run_rounds(alg, fed, rounds, x0=x0, seed=0).x


def _instance(results: dict[str, Any]) -> str:
    return (f"seed {results['seed']}, N = {len(results['weights'])}, d = {len(results['x_star'])}, "
            f"R = {results['rounds']}, x0 = {np.round(results['x0'], 6).tolist()}")


def checks(results: dict[str, Any]) -> list[Check]:
    """Per source: worst ||x_R - x~|| / tol; correction: worst bias ratio corrected/uncorrected."""
    out: list[Check] = []
    tol = results["tol"]
    unsolved = results.get("unsolved", {})
    for theorem, source in (("closed-form", "closed form"), ("operator-root", "operator root")):
        missing = [k for k in results["methods"] if results["source"][k] == source and k in unsolved]
        for k in missing:
            out.append(Check(theorem, "not checkable", None, f"{k}: {unsolved[k]}; {_instance(results)}"))
        keys = [k for k in results["methods"] if results["source"][k] == source and k not in unsolved]
        for k in [k for k in keys if results["rate"][k] >= 1.0]:
            # an unstable fixed point: the convergence statement assumes rho(J) < 1 there
            out.append(Check(theorem, "not checkable", None,
                             f"{k}: the fixed point found has spectral radius {results['rate'][k]:.4f} >= 1 "
                             f"(not attracting; the convergence claim needs < 1); {_instance(results)}"))
        keys = [k for k in keys if results["rate"][k] < 1.0]
        if not keys:
            continue
        ratios = {k: results["dist_to_fp"][k] / tol for k in keys}
        worst = max(ratios, key=ratios.__getitem__)
        summary = "; ".join(f"{k}: ||x_R - x~|| = {results['dist_to_fp'][k]:.3g} "
                            f"(rate {results['rate'][k]:.4f}, R = {results['rounds'][k]})" for k in keys)
        if ratios[worst] <= 1.0:
            out.append(Check(theorem, "holds", ratios[worst], f"tol {tol:.3g}; {summary}"))
        else:
            out.append(Check(theorem, "violated", ratios[worst],
                             f"{worst}: simulated x_R = {np.asarray(results['trajectory'][worst][-1]).tolist()} "
                             f"vs predicted x~ = {np.asarray(results['fixed_point'][worst]).tolist()}, "
                             f"distance {results['dist_to_fp'][worst]:.3g} > tol {tol:.3g} "
                             f"(predicted rate {results['rate'][worst]:.4f}); {_instance(results)}"))
    ratios = {k: results["bias"][k] / results["bias"][base] for k, base in PAIRS.items()
              if k in results["bias"] and base in results["bias"]}
    if not ratios:
        out.append(Check("correction", "not checkable", None,
                         "no corrected/uncorrected pair has both fixed points: " + "; ".join(
                             f"{k}: {v}" for k, v in unsolved.items())))
        return out
    worst = max(ratios, key=ratios.__getitem__)
    summary = "; ".join(f"{k}: {results['bias'][k]:.4g} vs {PAIRS[k]}: {results['bias'][PAIRS[k]]:.4g}"
                        for k in ratios)
    status: Literal["holds", "violated"] = "holds" if ratios[worst] <= 1.0 else "violated"
    detail = f"||x~ - x*||: {summary}"
    if status == "violated":
        detail += f"; {_instance(results)}"
    out.append(Check("correction", status, ratios[worst], detail))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    """Bias ||x~ - x*|| per method and the worst simulated-vs-predicted distance."""
    out = {f"bias_{k}": float(results["bias"][k]) for k in results["methods"] if k in results["bias"]}
    out["max_dist_sim_to_predicted"] = float(max(results["dist_to_fp"].values()))
    return out


def plot(results: dict[str, Any]) -> Figure:
    """Left: contours of F - F* with trajectories, x*, client optima, predicted
    (hollow) and simulated (cross) fixed points.  Right: ||x_t - x*|| with the
    predicted bias ||x~ - x*|| dashed."""
    fig, (ax, ax2) = plotting.figure(1, 2, height=3.4)
    traj = {k: np.asarray(v) for k, v in results["trajectory"].items()}
    pts = np.vstack([*traj.values(), np.asarray(results["client_optima"]),
                     np.asarray(results["x_star"])[None]])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.15 * (hi - lo).max()
    gx = np.linspace(lo[0] - pad, hi[0] + pad, 160)
    gy = np.linspace(lo[1] - pad, hi[1] + pad, 160)
    GX, GY = np.meshgrid(gx, gy)
    Z = np.stack([GX.ravel(), GY.ravel()], axis=1) - np.asarray(results["x_star"])
    Hb = np.asarray(results["H_bar"])
    gap = 0.5 * np.einsum("ni,ij,nj->n", Z, Hb, Z).reshape(GX.shape)   # F(x) - F* exactly
    levels = np.geomspace(max(gap.max() * 1e-4, 1e-8), gap.max(), 12)
    ax.contour(GX, GY, gap, levels=levels, colors="0.7", linewidths=0.6)
    for c, key in enumerate(results["methods"]):
        colour = plotting.OKABE_ITO[c]
        t = traj[key]
        ax.plot(t[:, 0], t[:, 1], color=colour, linewidth=1.0, marker=".", markersize=2,
                label=results["labels"][key])
        if key in results["fixed_point"]:       # absent: no root found (not checkable)
            fp = np.asarray(results["fixed_point"][key])
            ax.plot(*fp, marker="o", markersize=8, markerfacecolor="none", markeredgecolor=colour,
                    linestyle="none")
        ax.plot(*t[-1], marker="x", markersize=6, color=colour, linestyle="none")
        ax2.semilogy(np.arange(t.shape[0]), np.maximum(results["dist_to_opt"][key], 1e-16),
                     color=colour, linestyle="-", label=results["labels"][key])
        if key in results["bias"]:
            ax2.axhline(results["bias"][key], color=colour, linestyle=":", linewidth=1.0)
    xs = np.asarray(results["x_star"])
    ax.plot(*xs, marker="*", markersize=13, color="black", linestyle="none", label=r"$x^*$ (global optimum)")
    co = np.asarray(results["client_optima"])
    ax.plot(co[:, 0], co[:, 1], marker="s", markersize=5, color="0.4", linestyle="none",
            label=r"client optima $x_i^*$")
    ax.plot([], [], marker="o", markerfacecolor="none", markeredgecolor="black", linestyle="none",
            label=r"predicted $\tilde x$ (closed form / root)")
    ax.plot([], [], marker="x", color="black", linestyle="none", label=r"simulated $x_R$")
    ax.set_xlabel(r"$x_1$ (model coordinate)")
    ax.set_ylabel(r"$x_2$ (model coordinate)")
    ax.set_title(r"trajectories over contours of $F - F^*$")
    ax2.set_xlabel("round t")
    ax2.set_ylabel(r"$\|x_t - x^*\|$ (model units)")
    ax2.plot([], [], color="black", linestyle=":", linewidth=1.0,
             label=r"predicted bias $\|\tilde x - x^*\|$")
    ax2.legend(handles=ax2.get_lines()[-1:], loc="upper right", fontsize=7)
    ax2.set_title(r"distance to $x^*$ plateaus at the bias")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=7)
    return fig
