"""Server optimizers change the iteration, not the fixed point of the client operator T.

LocalAdaptivity (Wang et al., "Local Adaptivity in Federated Learning"), section 4
(after eq. 6) and docs/theory/fixed-points.md: FedOpt with server GD is the Mann
iteration of T(x) = sum_i p_i O_i(x); "replacing server GD with another server
optimizer can accelerate the convergence but it will not influence the
properties and the fixed points of the operator T".  A server optimizer sees
only the pseudo-gradient g = -sum p_i (O_i(x) - x) = x - T(x); every one of
FedAvg (server SGD), FedAvgM, FedAdagrad, FedAdam, FedYogi
(``fltheory.optim.server``; Reddi et al. 2021, Algorithm 2) is at rest exactly
where g = 0, i.e. at x~ = T(x~), so whichever of them converges must converge
to x~.

Measured on one heterogeneous quadratic (recorded seed; heterogeneous local
steps, so x~ != x*) for client SGD (x~ in closed form,
``fedopt_quadratic_fixed_point``, and as the root of T(x) - x) and client
AdaGrad (root of T(x) - x, ``operator_fixed_point``), and on a heterogeneous
binary logistic federation (ridge ``logistic_reg``; T non-linear even for
SGD) with client SGD: ||x_t - x~|| and ||x_t - x*|| over R rounds of the
library's FedOpt for each server optimizer.  Client SGD rate:
``lr_factor`` / max_i L_i of the problem.

Verdict per (client, server) pair, tolerance tol = ``tol_rel`` ||x0 - x*||:
converged (every step ||x_t - x_{t-1}|| of the last w = ``still_window`` rounds
<= tol, so a cycle is not mistaken for convergence) and ||x_R - x~|| <=
tol: holds with ratio ||x_R - x~|| / tol; converged elsewhere: violated; still
moving after R rounds: not checkable (the claim is about limits).  Server
hyperparameters are fixed in the configuration (no per-instance tuning);
near x~ the adaptive servers behave like momentum GD with rate lr / tau_s on
g, which is why lr and tau_s are set equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import optim, plotting
from fltheory.algorithms import run as run_rounds
from fltheory.algorithms.fedopt import FedOpt
from fltheory.errors import DivergenceError
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic
from fltheory.problems.logistic import LogisticFederation
from fltheory.theory import fedopt_quadratic_fixed_point
from fltheory.theory.operators import fedopt_operator, operator_fixed_point

NAME = "server_optimizers"
TITLE = "FedAvg / FedAvgM / FedAdagrad / FedAdam / FedYogi all converge to the same fixed point of T"
THEOREMS = [
    Theorem("server-fixed-point", "LocalAdaptivity (Wang et al.)",
            "Section 4: server optimizers change the iteration, not the fixed points of T", "eq. 6"),
]
QUICK: dict[str, Any] = {
    "n_clients": 4, "dim": 3, "L": 4.0, "mu": 0.5, "heterogeneity": 1.0,
    "local_steps": [1, 2, 5, 10],
    "lr_factor": 0.5,                     # client SGD rate = lr_factor / max_i L_i
    "lr_adagrad": 0.05,
    "servers": {
        "FedAvg": {"kind": "fedavg", "lr": 1.0},
        "FedAvgM": {"kind": "fedavgm", "lr": 0.5, "beta": 0.5},
        "FedAdagrad": {"kind": "fedadagrad", "lr": 0.5, "tau": 0.3},
        "FedAdam": {"kind": "fedadam", "lr": 0.1, "tau": 0.1},
        "FedYogi": {"kind": "fedyogi", "lr": 0.1, "tau": 0.1},
    },
    "logistic_samples": 40, "logistic_reg": 0.1, "logistic_shift": 1.0,
    "rounds": 200,
    "start_distance": 2.0,
    "tol_rel": 1e-4,
    "still_window": 10,
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 8, "dim": 8, "local_steps": [1, 2, 3, 5, 8, 10, 15, 20],
                        "rounds": 1500, "tol_rel": 1e-8}
EXPECTED_AXES = 6
# (problem, client optimizer) settings, one panel each
SETTINGS = ("quadratic/sgd", "quadratic/adagrad", "logistic/sgd")


def _server(spec: dict[str, Any]) -> optim.Optimizer:
    kind = spec["kind"]
    if kind == "fedavg":
        return optim.fedavg(spec["lr"])
    if kind == "fedavgm":
        return optim.fedavgm(spec["lr"], spec["beta"])
    adaptive: dict[str, Callable[..., optim.Optimizer]] = {
        "fedadagrad": optim.fedadagrad, "fedadam": optim.fedadam, "fedyogi": optim.fedyogi}
    return adaptive[kind](spec["lr"], tau=spec["tau"])


def _logistic(cfg: dict[str, Any], seed: int) -> LogisticFederation:
    """Binary logistic clients with shifted features a ~ N(m_i, I), m_i ~ N(0, shift^2 I),
    labels +1 with probability s(a^T w_i), w_i = w0 + N(0, shift^2 I) (construction only)."""
    rng = np.random.default_rng(seed)
    d, n, sh = cfg["dim"], cfg["logistic_samples"], cfg["logistic_shift"]
    w0 = rng.standard_normal(d)
    feats, labels = [], []
    for _ in range(cfg["n_clients"]):
        a = rng.standard_normal((n, d)) + sh * rng.standard_normal(d)
        w = w0 + sh * rng.standard_normal(d)
        feats.append(a)
        labels.append(np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-a @ w)), 1.0, -1.0))
    return LogisticFederation(feats, labels, reg=cfg["logistic_reg"])


def _fixed_point(T: Any, start: np.ndarray) -> tuple[Any, str]:
    """(operator fixed point or None, note).  The root of T(x) - x with the
    library's Anderson cross-check; if only the cross-check fails (the Picard
    iteration x <- T(x) does not settle, e.g. restarted AdaGrad, whose T is
    discontinuous where a client's gradient coordinate vanishes) the root is
    kept and the failure noted; if the root solver fails, None."""
    try:
        return operator_fixed_point(T, start), ""
    except DivergenceError as exc:
        first = " ".join(str(exc).split())
    try:
        return operator_fixed_point(T, start, cross_check=False), f"Anderson cross-check failed: {first}"
    except DivergenceError as exc:
        return None, f"no fixed point found: {first}; root solver: {' '.join(str(exc).split())}"


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed = int(rng.integers(0, 2**31 - 1))
    quadratic = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                                 heterogeneity=config["heterogeneity"], seed=seed, constants="clients")
    feds: dict[str, QuadraticFederation | LogisticFederation] = {"quadratic": quadratic,
                                                                 "logistic": _logistic(config, seed)}
    u = rng.standard_normal(config["dim"])
    u = config["start_distance"] * u / np.linalg.norm(u)
    tau = np.asarray(config["local_steps"])
    out: dict[str, Any] = {"seed": seed, "tol": config["tol_rel"] * config["start_distance"],
                           "still_window": config["still_window"], "rounds": config["rounds"],
                           "servers": list(config["servers"]), "settings": list(SETTINGS),
                           "n_clients": config["n_clients"], "dim": config["dim"], "eta_sgd": {},
                           "fixed_point": {}, "bias": {}, "dist_fp": {}, "dist_opt": {}, "movement": {},
                           "fixed_point_note": {}, "jacobian_radius": {}}
    for setting in SETTINGS:
        problem, client = setting.split("/")
        fed = feds[problem]
        xstar = fed.optimum()
        x0 = xstar + u
        eta = config["lr_factor"] / float(fed.client_L.max())
        opt = optim.sgd(eta) if client == "sgd" else optim.adagrad(config["lr_adagrad"])
        T = fedopt_operator(FedOpt(client_optimizer=opt, server_optimizer=optim.sgd(1.0),
                                   local_steps=tau), fed)
        fp, note = _fixed_point(T, xstar)
        out["fixed_point_note"][setting] = note
        if fp is None:
            out["fixed_point"][setting] = None
            out["bias"][setting] = None
            for key in ("dist_fp", "dist_opt", "movement"):
                out[key][setting] = None
            continue
        out["jacobian_radius"][setting] = fp.spectral_radius
        if setting == "quadratic/sgd":
            closed = fedopt_quadratic_fixed_point(quadratic, eta, tau)
            out["closed_vs_root_sgd"] = float(np.linalg.norm(fp.x - closed.x))
        if client == "sgd":
            out["eta_sgd"][problem] = eta
        out["fixed_point"][setting] = fp.x
        out["bias"][setting] = float(np.linalg.norm(fp.x - xstar))
        for key in ("dist_fp", "dist_opt", "movement"):
            out[key][setting] = {}
        for sname in progress(list(config["servers"]), desc=f"{NAME} {setting}"):
            alg = FedOpt(client_optimizer=opt, server_optimizer=_server(config["servers"][sname]),
                         local_steps=tau)
            xs = run_rounds(alg, fed, config["rounds"], x0=x0).x
            out["dist_fp"][setting][sname] = np.linalg.norm(xs - fp.x, axis=1)
            out["dist_opt"][setting][sname] = np.linalg.norm(xs - xstar, axis=1)
            w = config["still_window"]
            out["movement"][setting][sname] = float(np.linalg.norm(np.diff(xs[-w - 1:], axis=0), axis=1).max())
    return out


def _verdicts(results: dict[str, Any]) -> list[tuple[str, str, str, float]]:
    """(client, server, status, ||x_R - x~|| / tol) for every pair."""
    tol = results["tol"]
    out = []
    for c in results["settings"]:
        if results["fixed_point"][c] is None:
            continue
        for s in results["servers"]:
            ratio = float(results["dist_fp"][c][s][-1]) / tol
            moving = results["movement"][c][s] > tol
            status = "not checkable" if moving else ("holds" if ratio <= 1 else "violated")
            out.append((c, s, status, ratio))
    return out


def checks(results: dict[str, Any]) -> list[Check]:
    tol = results["tol"]
    inst = (f"seed {results['seed']}, N = {results['n_clients']}, d = {results['dim']}, "
            f"R = {results['rounds']}, tol = {tol:.3g}")
    out = []
    for client in results["settings"]:
        note = results.get("fixed_point_note", {}).get(client, "")
        if results["fixed_point"][client] is None:
            out.append(Check("server-fixed-point", "not checkable", None, f"{client}: {note}; {inst}"))
            continue
        rows = [v for v in _verdicts(results) if v[0] == client]
        worst = max(rows, key=lambda v: v[3])
        parts = "; ".join(f"{s}: {r * tol:.3g}" for _, s, _, r in rows)
        summary = (f"{client}: ||x_R - x~|| per server: {parts}; bias ||x~ - x*|| = "
                   f"{results['bias'][client]:.4g}")
        if client == "quadratic/sgd":
            summary += f"; closed form vs root {results['closed_vs_root_sgd']:.2g}"
        summary += f"; rho(J_T(x~)) = {results['jacobian_radius'][client]:.4g}"
        if note:
            summary += f"; {note}"
        bad = [v for v in rows if v[2] == "violated"]
        moving = [v for v in rows if v[2] == "not checkable"]
        if bad:
            out.append(Check("server-fixed-point", "violated", worst[3],
                             f"{', '.join(v[1] for v in bad)} converged away from x~; {summary}; {inst}"))
        elif moving:
            out.append(Check("server-fixed-point", "not checkable", worst[3],
                             f"{', '.join(v[1] for v in moving)} still moving after R rounds "
                             f"(a step of the last {results['still_window']} rounds > tol); {summary}; {inst}"))
        else:
            out.append(Check("server-fixed-point", "holds", worst[3], f"{summary}; tol {tol:.3g}"))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    out = {}
    for setting in results["settings"]:
        if results["fixed_point"][setting] is None:
            continue
        c = setting.replace("/", "_")
        out[f"bias_{c}"] = float(results["bias"][setting])
        out[f"max_dist_to_fixed_point_{c}"] = float(max(results["dist_fp"][setting][s][-1]
                                                       for s in results["servers"]))
    return out


def plot(results: dict[str, Any]) -> Figure:
    """Two rows, one column per client optimizer.  Top: ||x_t - x~|| per server
    optimizer with the tolerance.  Bottom: ||x_t - x*|| / ||x~ - x*||, which
    tends to 1 (the bias line, drawn wide and light *under* the curves) for
    every server optimizer: they all stop at x~, none reaches x* (ratio 0)."""
    fig, axes = plotting.figure(2, 3, height=5.6)
    top, bottom = axes[:3], axes[3:]
    # one check per setting
    status = {s: c.status for s, c in zip(results["settings"], checks(results), strict=True)}
    verdicts = {"holds": r"all reach $\tilde x$", "violated": "VIOLATED: settled away from x~",
                "not checkable": "not settled: not checkable"}
    for ax, low, client in zip(top, bottom, results["settings"], strict=True):
        problem, opt = client.split("/")
        verdict = verdicts.get(status.get(client, ""), "")
        ax.set_title(f"{problem}, {'SGD' if opt == 'sgd' else 'AdaGrad'} clients\n({verdict})", fontsize=9)
        ax.set_ylabel(r"$\|x_t - \tilde x\|$")
        low.set_xlabel("round t")
        low.set_ylabel(r"$\|x_t - x^*\| \,/\, \|\tilde x - x^*\|$")
        if results["fixed_point"][client] is None:
            for a in (ax, low):
                a.text(0.5, 0.5, "no fixed point of T found\n(see the JSON note)", ha="center",
                       va="center", transform=a.transAxes)
            continue
        bias = float(results["bias"][client])
        low.axhline(1.0, color="0.8", linewidth=4.0, zorder=0, label=r"bias: $\|\tilde x - x^*\|$ (ratio 1)")
        for c, s in enumerate(results["servers"]):
            colour = plotting.OKABE_ITO[c]
            style = plotting.LINESTYLES[c]
            d = np.maximum(np.asarray(results["dist_fp"][client][s]), 1e-17)
            t = np.arange(d.size)
            ax.semilogy(t, d, color=colour, linestyle=style, label=s, zorder=2)
            low.plot(t, np.asarray(results["dist_opt"][client][s]) / bias, color=colour, linestyle=style,
                     linewidth=1.2, zorder=2)
        ax.axhline(results["tol"], color="0.4", linestyle=":", linewidth=1.0, label="tolerance", zorder=1)
        ax.set_ylim(1e-17, None)
        low.set_ylim(0.0, None)
    fig.suptitle(r"every server optimizer converges to the fixed point $\tilde x$ of T, none to $x^*$"
                 if all(v == "holds" for v in status.values()) else
                 r"server optimizers vs the fixed point $\tilde x$ of T (panel titles give the verdict)",
                 fontsize=10)
    handles, labels = top[0].get_legend_handles_labels()
    h2, l2 = bottom[0].get_legend_handles_labels()
    fig.legend(handles + h2, labels + l2, loc="outside lower center", ncol=4, fontsize=7)
    return fig
