"""Minimizer inconsistency ||x~(eta) - x*|| against the client rate (LocalAdaptivity, Theorem 2).

LocalAdaptivity (Wang et al., "Local Adaptivity in Federated Learning"), section 4,
as restated in docs/theory/fixed-points.md: on quadratic clients
f_i(x) = 1/2 x^T H_i x - e_i^T x with fixed preconditioners P_i, rates
eta_i = c_i eta and tau_i local steps, FedOpt (server GD) converges to

    x~(eta) = (sum p_i B_i)^{-1} sum p_i B_i x_i*,   B_i = I - (I - eta_i P_i H_i)^{tau_i},

and as eta -> 0 (eq. 8)

    x~ -> (sum p_i c_i tau_i P_i H_i)^{-1} sum p_i c_i tau_i P_i e_i,

which is x* only when c_i tau_i P_i is the same for every client: a bias that
does not vanish with the rate.  With equal rates and steps (FedAvg) the bias
is O(eta) with first-order term

    x~ = x* + (eta (K - 1)/2) (sum p_i H_i)^{-1} sum p_i H_i grad f_i(x*) + O(eta^2),

and local correction (M_i = (tau_i P_i)^{-1} with one client rate, section 5, eq. 11) makes the
bias O(eta) whatever the steps.

What is computed on one random heterogeneous quadratic (recorded seed):

* closed-form curves (``fedopt_quadratic_fixed_point``, many rates) for local
  GD clients with equal steps, heterogeneous steps, heterogeneous steps +
  local correction; the eq. 8 limit (``fedopt_small_rate_limit``) and the
  first-order FedAvg bias (``fedavg_first_order_bias``);
* simulated points: the fixed point of the library's round operator T
  (``minimizer_inconsistency``: root of T(x) - x of one FedOpt round with
  server averaging) for the same local GD settings and for restarted local
  AdaGrad clients (equal steps, heterogeneous steps, heterogeneous + local
  correction), where no closed form exists.

Checks (slopes are least-squares fits of log ||.|| on log eta over the
``fit_points`` smallest rates; ``slope_tol`` is the allowed deviation):

* ``closed-vs-root``: ||x~_root - x~_closed|| / ``agree_tol`` (local GD cases);
* ``eq8-limit``: uncorrected heterogeneous steps: |slope of the bias| / slope_tol
  (bias does not vanish: slope 0) for GD and AdaGrad, and for GD
  |slope of ||x~ - x_lim|| - 1| / slope_tol (x~ reaches the eq. 8 limit at rate O(eta));
* ``correction-O(eta)``: |slope - 1| / slope_tol of the corrected curves;
* ``fedavg-first-order``: equal steps, local GD: |slope of the remainder
  ||x~ - x~_1st|| - 2| / slope_tol (the first-order coefficient is right iff
  the remainder is O(eta^2)) and |slope of the bias - 1| / slope_tol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import optim, plotting
from fltheory.algorithms.fedopt import FedOpt
from fltheory.errors import DivergenceError
from fltheory.problems.generators import random_quadratic
from fltheory.theory import (fedavg_first_order_bias, fedopt_quadratic_fixed_point,
                             fedopt_small_rate_limit)
from fltheory.theory.operators import minimizer_inconsistency as operator_inconsistency
from fltheory.references import cite

NAME = "minimizer_inconsistency"
TITLE = "Non-vanishing bias of heterogeneous local steps / local AdaGrad, and O(eta) after correction"
_PAPER = cite("LocalAdaptivity")
THEOREMS = [
    Theorem("closed-vs-root", _PAPER, "Theorem 2 (quadratic example): closed-form fixed point",
            "eq. 8-10 as restated in docs/theory/fixed-points.md"),
    Theorem("eq8-limit", _PAPER, "Theorem 2: non-vanishing bias unless c_i tau_i P_i are equal", "eq. 8"),
    Theorem("correction-O(eta)", _PAPER, "Section 5, local correction: bias O(eta)", "eq. 11"),
    Theorem("fedavg-first-order", "docs/theory/fixed-points.md (LocalAdaptivity sec. 4, refs [19, 20])",
            "FedAvg equal steps: bias (eta (K-1)/2) Hbar^{-1} sum p_i H_i grad f_i(x*) + O(eta^2)", ""),
]
QUICK: dict[str, Any] = {
    "n_clients": 4, "dim": 3, "L": 4.0, "mu": 0.5, "heterogeneity": 1.0,
    "equal_steps": 5,
    "hetero_steps": [1, 2, 5, 10],
    "gd_rates": [float(r) for r in np.geomspace(1e-4, 2e-2, 5)],
    "adagrad_rates": [float(r) for r in np.geomspace(1e-4, 1e-1, 5)],
    "curve_points": 60,
    "fit_points": 3,
    "slope_tol": 0.1,
    "agree_tol": 1e-7,
}
FULL: dict[str, Any] = {
    **QUICK, "n_clients": 8, "dim": 6, "hetero_steps": [1, 2, 3, 5, 8, 10, 15, 20],
    "gd_rates": [float(r) for r in np.geomspace(1e-5, 2e-2, 12)],
    "adagrad_rates": [float(r) for r in np.geomspace(1e-5, 1e-1, 12)],
    "curve_points": 200, "fit_points": 4,
}
EXPECTED_AXES = 2

# case -> (label, client optimizer, steps kind, correction)
CASES: dict[str, tuple[str, str, str, str]] = {
    "gd_equal": ("local GD, equal steps (FedAvg)", "gd", "equal", "none"),
    "gd_hetero": ("local GD, heterogeneous steps", "gd", "hetero", "none"),
    "gd_hetero_local": ("local GD, heterogeneous steps + local corr.", "gd", "hetero", "local"),
    "adagrad_equal": ("AdaGrad, equal steps", "adagrad", "equal", "none"),
    "adagrad_hetero": ("AdaGrad, heterogeneous steps", "adagrad", "hetero", "none"),
    "adagrad_hetero_local": ("AdaGrad, heterogeneous steps + local corr.", "adagrad", "hetero", "local"),
}


def _steps(kind: str, cfg: dict[str, Any]) -> Any:
    return int(cfg["equal_steps"]) if kind == "equal" else np.asarray(cfg["hetero_steps"])


def _maker(case: str, cfg: dict[str, Any]) -> Callable[[float], FedOpt]:
    _, opt, kind, correction = CASES[case]
    steps = _steps(kind, cfg)
    client = optim.sgd if opt == "gd" else optim.adagrad
    return lambda h: FedOpt(client_optimizer=client(h), server_optimizer=optim.sgd(1.0),
                            local_steps=steps, correction=correction)


def slope(rates: Any, values: Any, k: int) -> float | None:
    """Least-squares slope of log(values) on log(rates) over the k smallest
    rates; None (not measurable) if any of them has no value: a slope through
    larger rates would measure another regime than the small-rate limit."""
    smallest = sorted(zip((float(r) for r in rates), values), key=lambda p: p[0])[:k]
    if len(smallest) < k or any(v is None for _, v in smallest):
        return None
    pairs = [(r, float(v)) for r, v in smallest]
    r, v = np.array(pairs).T
    return float(np.polyfit(np.log(r), np.log(v), 1)[0])


def _adaptive_sweep(case: str, cfg: dict[str, Any], fed: Any, rates: np.ndarray
                    ) -> tuple[list[float | None], list[str]]:
    """||x~(eta) - x*|| of an adaptive-client case, one rate at a time from the
    largest down (warm start at the previous fixed point).  Restarted AdaGrad
    makes T discontinuous where a client's gradient coordinate vanishes (its
    first step is eta g / |g|), so a root of T(x) - x may not exist; a rate
    where the root solver fails is recorded as None with the solver's message."""
    dist: list[float | None] = [None] * len(rates)
    failures: list[str] = []
    start = fed.optimum()
    for k in np.argsort(-rates):
        inc = operator_inconsistency(_maker(case, cfg), fed, [float(rates[k])], x0=start)
        if not bool(inc.converged[0]):        # recorded by the sweep, not raised
            failures.append(f"eta = {rates[k]:.3g}: " + " ".join(str(inc.messages[0]).split()))
            continue
        dist[k] = float(inc.distances[0])
        start = np.asarray(inc.fixed_points[0])
    return dist, failures


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    """Closed-form curves, eq. 8 limit, first-order FedAvg bias and operator
    fixed points over the rate sweeps."""
    seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                           heterogeneity=config["heterogeneity"], seed=seed, constants="clients")
    xstar = fed.optimum()
    N = config["n_clients"]
    if len(config["hetero_steps"]) != N:
        raise ValueError(f"hetero_steps has {len(config['hetero_steps'])} entries, n_clients = {N}")
    gd_rates = np.asarray(config["gd_rates"])
    curve = np.geomspace(gd_rates.min(), gd_rates.max(), config["curve_points"])
    out: dict[str, Any] = {"seed": seed, "x_star": xstar, "n_clients": N, "dim": config["dim"],
                           "L": config["L"], "mu": config["mu"], "cases": list(CASES),
                           "labels": {c: CASES[c][0] for c in CASES}, "curve_rates": curve,
                           "closed": {}, "closed_at_points": {}, "points": {}, "rates": {}, "failures": {},
                           "fit_points": config["fit_points"], "slope_tol": config["slope_tol"],
                           "agree_tol": config["agree_tol"]}
    for case in progress(list(CASES), desc=NAME):
        _, opt, kind, correction = CASES[case]
        rates = gd_rates if opt == "gd" else np.asarray(config["adagrad_rates"])
        out["rates"][case] = rates
        if opt != "gd":
            out["points"][case], out["failures"][case] = _adaptive_sweep(case, config, fed, rates)
            continue
        inc = operator_inconsistency(_maker(case, config), fed, rates.tolist())
        if not np.all(inc.converged):            # local GD: T is affine, its root always exists
            raise DivergenceError(f"{case}: root of T(x) = x not found at rates "
                                  f"{list(inc.failed_rates)}: {list(inc.messages)}")
        out["points"][case] = np.asarray(inc.distances)
        if opt == "gd":
            steps = _steps(kind, config)
            closed = [fedopt_quadratic_fixed_point(fed, h, steps, correction=correction) for h in curve]
            out["closed"][case] = [fp.bias for fp in closed]
            at = np.array([fedopt_quadratic_fixed_point(fed, h, steps, correction=correction).x
                           for h in rates])
            out["closed_at_points"][case] = np.linalg.norm(at - inc.fixed_points, axis=1)
            if case == "gd_hetero":
                lim = fedopt_small_rate_limit(fed, 1.0, steps)
                out["eq8_limit_bias"] = float(np.linalg.norm(lim - xstar))
                out["dist_to_limit"] = np.linalg.norm(inc.fixed_points - lim, axis=1)
            if case == "gd_equal":
                first = np.array([fedavg_first_order_bias(fed, h, steps) for h in rates])
                out["first_order_points"] = np.linalg.norm(first - xstar, axis=1)
                out["first_order_remainder"] = np.linalg.norm(inc.fixed_points - first, axis=1)
                out["first_order_curve"] = [float(np.linalg.norm(fedavg_first_order_bias(fed, h, steps)
                                                                 - xstar)) for h in curve]
    return out


def _slope_check(theorem: str, what: str, measured: float | None, target: float, tol: float,
                 detail: str) -> Check:
    if measured is None:
        return Check(theorem, "not checkable", None,
                     f"{what}: no fixed point at some of the smallest rates (root of T(x) - x not "
                     f"found), so the small-rate slope cannot be measured; {detail}")
    ratio = abs(measured - target) / tol
    status: Literal["holds", "violated"] = "holds" if ratio <= 1.0 else "violated"
    return Check(theorem, status, ratio, f"{what}: slope {measured:.4f}, expected {target:g} "
                                         f"+- {tol:g}; {detail}")


def checks(results: dict[str, Any]) -> list[Check]:
    k, tol = results["fit_points"], results["slope_tol"]
    inst = (f"seed {results['seed']}, N = {results['n_clients']}, d = {results['dim']}, "
            f"L = {results['L']}, mu = {results['mu']}")
    out: list[Check] = []
    gd_cases = [c for c in results["cases"] if c.startswith("gd")]
    worst_case = max(gd_cases, key=lambda c: max(results["closed_at_points"][c]))
    dist = float(max(results["closed_at_points"][worst_case]))
    ratio = dist / results["agree_tol"]
    out.append(Check("closed-vs-root", "holds" if ratio <= 1 else "violated", ratio,
                     f"max ||x~_root - x~_closed|| = {dist:.3g} ({worst_case}) vs tol "
                     f"{results['agree_tol']:g}; {inst}"))
    for case in ("gd_hetero", "adagrad_hetero", "adagrad_equal"):
        s = slope(results["rates"][case], results["points"][case], k)
        found = [v for v in results["points"][case] if v is not None]
        fails = results["failures"].get(case, [])
        out.append(_slope_check("eq8-limit", f"{case} bias ||x~ - x*|| (non-vanishing)", s, 0.0, tol,
                                f"bias at the smallest rate {min(found, default=float('nan')):.4g}"
                                + (f"; failed: {'; '.join(fails)}" if fails else "") + f"; {inst}"))
    s = slope(results["rates"]["gd_hetero"], results["dist_to_limit"], k)
    out.append(_slope_check("eq8-limit", "gd_hetero ||x~ - x_lim(eq. 8)||", s, 1.0, tol,
                            f"eq. 8 limit bias {results['eq8_limit_bias']:.4g}, smallest distance "
                            f"{min(results['dist_to_limit']):.3g}; {inst}"))
    for case in ("gd_hetero_local", "adagrad_hetero_local"):
        s = slope(results["rates"][case], results["points"][case], k)
        fails = results["failures"].get(case, [])
        out.append(_slope_check("correction-O(eta)", f"{case} bias", s, 1.0, tol,
                                (f"failed: {'; '.join(fails)}; " if fails else "") + inst))
    s = slope(results["rates"]["gd_equal"], results["points"]["gd_equal"], k)
    out.append(_slope_check("fedavg-first-order", "gd_equal bias", s, 1.0, tol, inst))
    s = slope(results["rates"]["gd_equal"], results["first_order_remainder"], k)
    out.append(_slope_check("fedavg-first-order", "gd_equal remainder ||x~ - x~_1st||", s, 2.0, tol, inst))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    k = results["fit_points"]
    slopes = {c: slope(results["rates"][c], results["points"][c], k) for c in results["cases"]}
    out = {f"slope_{c}": v for c, v in slopes.items() if v is not None}
    out["eq8_limit_bias"] = float(results["eq8_limit_bias"])
    remainder = slope(results["rates"]["gd_equal"], results["first_order_remainder"], k)
    if remainder is not None:
        out["slope_first_order_remainder"] = remainder
    return out


def plot(results: dict[str, Any]) -> Figure:
    """Left: local GD clients, closed-form curves (lines) over operator fixed
    points (markers), eq. 8 limit and first-order FedAvg bias.  Right: local
    AdaGrad clients (operator fixed points), with an O(eta) guide."""
    fig, (ax, ax2) = plotting.figure(1, 2, height=4.6)
    curve = np.asarray(results["curve_rates"])
    for c, case in enumerate(results["cases"]):
        colour = plotting.OKABE_ITO[c % 3]
        target = ax if case.startswith("gd") else ax2
        marker = ("o", "s", "^")[c % 3]
        label = results["labels"][case]
        if case in results["closed"]:
            target.loglog(curve, results["closed"][case], color=colour, linestyle="-",
                          label=f"{label}: closed form")
            target.loglog(results["rates"][case], results["points"][case], color=colour, marker=marker,
                          linestyle="none", markerfacecolor="none", label=f"{label}: root of T(x)=x")
        else:
            pts = [(r, v) for r, v in zip(results["rates"][case], results["points"][case]) if v is not None]
            r, v = np.array(pts).T if pts else (np.array([]), np.array([]))
            target.loglog(r, v, color=colour, marker=marker, linestyle="-", label=f"{label}: root of T(x)=x")
    ax.axhline(results["eq8_limit_bias"], color="black", linestyle="--", linewidth=1.0,
               label="eq. 8 limit (heterogeneous steps)")
    ax.loglog(curve, results["first_order_curve"], color="black", linestyle=":", linewidth=1.2,
              label=r"first order $\eta(K-1)/2\,\bar H^{-1}\sum p_i H_i\nabla f_i(x^*)$")
    pts = sorted((r, v) for r, v in zip(results["rates"]["adagrad_hetero_local"],
                                         results["points"]["adagrad_hetero_local"]) if v is not None)
    if pts:
        r = np.asarray(results["rates"]["adagrad_hetero_local"], dtype=float)
        ax2.loglog(r, pts[0][1] * r / pts[0][0], color="black", linestyle=":", linewidth=1.0,
                   label=r"slope 1 guide, $O(\eta)$")
    failed = [f"{case}: " + ", ".join(f.split(":")[0].replace("eta = ", "") for f in fs)
              for case, fs in results["failures"].items() if fs]
    if failed:
        ax2.text(0.98, 0.02, "no root of T(x)=x found at eta =\n" + "\n".join(failed), ha="right",
                 va="bottom", fontsize=6, transform=ax2.transAxes)
    for a, title, xlabel in ((ax, "local GD clients", r"GD step size $\eta$ (1/curvature units)"),
                             (ax2, "local AdaGrad clients (restarted)", r"AdaGrad step $\eta$ (model units)")):
        a.set_xlabel(xlabel)
        a.set_ylabel(r"bias $\|\tilde x(\eta) - x^*\|$ (model units)")
        a.set_title(title)
        a.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1)
    return fig
