"""BetterObjects (Zhu and Ye) Figure 1: under non-IID data the global model's trajectory, projected on its
two principal components, "changes drastically" from round to round, which motivates centring the
proximal / Fisher penalty at a temporal ensemble of past global models instead of the last one.

FedAvg with uniform client sampling (S of N clients per round) on random quadratic clients that share
their Hessians and differ only in their optima (heterogeneity h; h = 0 is IID), from the same start.
Measured on the server models x_0..x_R:

* the PCA of the trajectory (centred SVD), its 2-D projection (the figure) and the variance the two
  components explain;
* the winding of the late phase (rounds R/2..R): path length sum ||x_{t+1} - x_t|| divided by the
  displacement ||x_R - x_{R/2}|| (1 for a straight path, large when the model jumps back and forth), and
  the mean cosine between consecutive updates;
* the temporal-ensemble target of BetterObjects Alg. 2 (beta = ``beta``, bias-corrected) beside the last
  model: late-phase mean distance of each to x*.

Checks:

* ``fig1-drastic``: ratio = winding at h = 0 / winding at the largest h (holds when < 1: the non-IID
  trajectory winds more); the per-h numbers are in the detail;
* ``fig1-target``: ratio = late mean ||T_t - x*|| / late mean ||x_t - x*|| at the largest h (holds when < 1:
  the ensemble is a steadier centre than the last model).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory import plotting
from fltheory.algorithms import FedAvg
from fltheory.algorithms import run as run_rounds
from fltheory.participation import UniformSampling
from fltheory.problems.generators import random_quadratic
from fltheory.references import cite
from fltheory.reproduce import Check, Progress, Theorem, silent_progress

from ._instances import ratio_check
from ._panels import cycle_color, label_panel

NAME = "te_trajectory"
TITLE = "BetterObjects Figure 1: the global model's PCA trajectory under IID and non-IID clients"
_PAPER = cite("BetterObjects")
THEOREMS = [
    Theorem("fig1-drastic", _PAPER, "Figure 1: under non-IID data the global model changes drastically from "
            "round to round (late-phase winding of the trajectory, IID vs non-IID)", "Fig. 1"),
    Theorem("fig1-target", _PAPER, "sec. 3 (after Figure 1): the last global model is a poor constraint "
            "target; a temporal ensemble of past models is steadier", "Alg. 2"),
]
QUICK: dict[str, Any] = {"n_clients": 20, "dim": 10, "L": 1.0, "mu": 0.1, "heterogeneity": [0.0, 1.0, 4.0],
                         "sampled": 4, "lr": 0.1, "local_steps": 5, "rounds": 120, "beta": 0.9,
                         "init_distance": 5.0}
FULL: dict[str, Any] = {**QUICK, "n_clients": 100, "dim": 50, "sampled": 10, "rounds": 400,
                        "heterogeneity": [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]}
EXPECTED_AXES = 2


def pca_projection(xs: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(coordinates (R+1, k) on the first k principal components of the centred rows, fraction of the
    variance each explains)."""
    centred = xs - xs.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    total = float(np.sum(s ** 2))
    frac = (s[:k] ** 2 / total) if total > 0 else np.zeros(min(k, s.shape[0]))
    return centred @ vt[:k].T, frac


def winding(xs: np.ndarray) -> tuple[float, float]:
    """(path length / displacement, mean cosine between consecutive steps) of the rows of xs."""
    steps = np.diff(xs, axis=0)
    norms = np.linalg.norm(steps, axis=1)
    disp = float(np.linalg.norm(xs[-1] - xs[0]))
    path = float(norms.sum())
    ok = (norms[1:] > 0) & (norms[:-1] > 0)
    cos = np.sum(steps[1:] * steps[:-1], axis=1)[ok] / (norms[1:] * norms[:-1])[ok]
    return (path / disp if disp > 0 else float("inf")), (float(cos.mean()) if cos.size else 1.0)


def temporal_ensemble(xs: np.ndarray, beta: float) -> np.ndarray:
    """Bias-corrected targets T_t = That_t / (1 - beta^t), That_t = (1 - beta) x_t + beta That_{t-1}
    (BetterObjects Alg. 2), for t = 1..R (row t-1)."""
    hat = np.zeros(xs.shape[1])
    out = []
    for t, x in enumerate(xs[1:], start=1):
        hat = (1 - beta) * x + beta * hat
        out.append(hat / (1 - beta ** t))
    return np.array(out)


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed = int(rng.integers(0, 2**31 - 1))
    u = rng.standard_normal(config["dim"])
    run_seed = int(rng.integers(0, 2**31 - 1))
    R, half = config["rounds"], config["rounds"] // 2
    alg = FedAvg(lr=config["lr"], local_steps=config["local_steps"])
    levels: dict[str, Any] = {}
    for h in progress(list(config["heterogeneity"]), desc=NAME):
        fed = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                               heterogeneity=float(h), seed=seed, constants="clients")
        x0 = fed.optimum() + config["init_distance"] * u / np.linalg.norm(u)
        hist = run_rounds(alg, fed, R, participation=UniformSampling(config["sampled"]), seed=run_seed, x0=x0)
        xs = np.asarray(hist.x)
        coords, frac = pca_projection(xs)
        wind, cos = winding(xs[half:])
        targets = temporal_ensemble(xs, config["beta"])
        xstar = fed.optimum()
        late_x = float(np.mean(np.linalg.norm(xs[half + 1:] - xstar, axis=1)))
        late_t = float(np.mean(np.linalg.norm(targets[half:] - xstar, axis=1)))
        levels[str(float(h))] = {"pca": coords, "explained": frac, "winding": wind, "cosine": cos,
                                 "late_model_dist": late_x, "late_target_dist": late_t}
    return {"seed": seed, "run_seed": run_seed, "config": dict(config), "levels": levels}


def _inst(results: dict[str, Any]) -> str:
    c = results["config"]
    return (f"random_quadratic seed {results['seed']} (shared Hessians), N = {c['n_clients']}, d = {c['dim']}, "
            f"S = {c['sampled']}, FedAvg eta = {c['lr']}, K = {c['local_steps']}, {c['rounds']} rounds, run seed "
            f"{results['run_seed']}")


def checks(results: dict[str, Any]) -> list[Check]:
    inst = _inst(results)
    levels = results["levels"]
    iid, top = levels[min(levels, key=float)], levels[max(levels, key=float)]
    text = "late-phase winding / mean cosine of consecutive updates: " + ", ".join(
        f"h = {h}: {v['winding']:.3g} / {v['cosine']:.3g} (PCA explains {sum(v['explained']):.3g})"
        for h, v in levels.items())
    if float(min(levels, key=float)) != 0.0 or not np.isfinite(top["winding"]):
        out = [Check("fig1-drastic", "not checkable", None, f"needs h = 0 and a finite winding; {text}; {inst}")]
    else:
        out = [ratio_check("fig1-drastic", iid["winding"] / top["winding"], text, inst)]
    ratio = top["late_target_dist"] / top["late_model_dist"]
    text = "late mean distance to x* of the ensemble target / of the last model: " + ", ".join(
        f"h = {h}: {v['late_target_dist']:.3g} / {v['late_model_dist']:.3g}" for h, v in levels.items())
    out.append(ratio_check("fig1-target", ratio, text, inst))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    levels = results["levels"]
    return {"winding_iid": float(levels[min(levels, key=float)]["winding"]),
            "winding_noniid": float(levels[max(levels, key=float)]["winding"])}


def plot(results: dict[str, Any]) -> Figure:
    fig, (ax1, ax2) = plotting.figure(1, 2)
    names = list(results["levels"])
    for c, h in enumerate(names):
        v = results["levels"][h]
        xy = np.asarray(v["pca"], dtype=float)
        ax1.plot(xy[:, 0], xy[:, 1], "-", marker=".", markersize=2, linewidth=0.7,
                 color=cycle_color(c), label=f"h = {h}")
    label_panel(ax1, "principal component 1 (model units)", "principal component 2 (model units)",
                "global model trajectory (Fig. 1)", {"fontsize": 6})
    ax2.bar(names, [results["levels"][h]["winding"] for h in names], color=plotting.OKABE_ITO[1])
    ax2.set_yscale("log")
    label_panel(ax2, "heterogeneity h", "late path length /\ndisplacement (ratio)", "winding of the late phase")
    return fig
