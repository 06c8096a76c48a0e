"""Temporal-ensembling targets (BetterObjects, Zhu and Ye, Alg. 2) against their base algorithms.

BetterObjects (file ``002_d16cbc7bc28131c7.txt``) centres the local penalty of
FedProx (eq. 1) and FedCurv/FedCL (eq. 2) at the bias-corrected exponential
average of the past global models,

    T_hat <- (1 - beta) G_t + beta T_hat,   T = T_hat / (1 - beta^t)      (Alg. 2, lines 4-5),

and claims (section 4.2, last paragraph) that "the constraint target we
designed can improve the performance of the original algorithm in most cases,
and will not lead to a decrease in the performance of the algorithm in the
worst case".  That is an *empirical* claim, not a theorem; this experiment
tests its second half ("never worse") on a convex problem where the training
optimum F* is exact, and the exact reduction beta = 0 == base.

**Problem.**  FedProx's Synthetic(alpha, beta) data
(:func:`fltheory.problems.synthetic_fedprox`, alpha = beta = 1, its own
device-level heterogeneity, 90/10 train/test split per device) pooled and
re-split over ``n_clients`` clients with the Dirichlet label skew BetterObjects
uses (section 4.1.1, eq. 4, Hsu et al.: q ~ Dir(gamma p), gamma = 1 for
MNIST; :func:`fltheory.problems.dirichlet_partition`).  The model is the
multinomial logistic regression of Synthetic (weights and intercept, ridge
``reg`` > 0 so that F* exists), a :class:`~fltheory.problems.LogisticFederation`.
Test accuracy and test loss are measured on the pooled test split.

**Protocol** (BetterObjects section 4.1): ``sampled`` of ``n_clients`` clients per
round uniformly without replacement (BetterObjects: 2 of 10), ``local_steps``
full-batch gradient steps.  Penalty weights from BetterObjects Table 2 (MNIST row,
chosen there for the base algorithm, not tuned here): FedProx alpha = 1
(mu = 2 alpha, eq. 1), FedCurv alpha = 0.1, beta = 0.2 for both TE variants.
FedCurv uses the client Fisher (eq. 2); FedCurv-TE ensembles the *global*
models (Alg. 2 as printed, ``of="global"``).  The local rate comes from the
problem: eta = 1 / (L_max + mu) for FedProx and eta = 1 / (L_max (1 + 2 alpha
(S - 1))) for FedCurv (the multinomial Fisher diagonal is at most L_max
coordinate-wise, and S - 1 other participants add penalties), L_max the
largest client smoothness constant (``LogisticFederation.client_L``).

**Verdict** (per pair base / TE).  Seeds differ in the client-sampling
sequence; base and TE with the same seed see the same clients (paired).  For
seed s let r_s = g_TE,s / g_base,s, g = mean of F(x_t) - F* over the last
``window`` rounds.  Ratio reported = geomean_s(r_s) / (1 + margin): <= 1 means
TE is at most ``margin`` worse than its base (the claim "no decrease",
"holds").  Above 1 it is "violated" only when the one-sided 95 % Student-t
lower confidence bound of geomean(r_s) exceeds 1 + margin (TE significantly
worse), otherwise "not checkable" (inconclusive with this many seeds).

**Reduction** (docs/theory/index.md#algorithms: "beta = 0 must reproduce the base
algorithm exactly").  FedProx-TE(beta = 0) vs FedProx, and FedCurv-TE(beta = 0,
``of="local"``: per-client ensembles of the previous local models, the reading
under which FedCurv's centres w_j are kept) vs FedCurv, same seed: the largest
|x_t^TE - x_t^base| over all rounds must be <= 1e-12; ratio = that / 1e-12.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter
from scipy import stats

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.algorithms import FedCurv, FedCurvTE, FedProx, FedProxTE
from fltheory.algorithms import run as run_algorithm
from fltheory.participation import UniformSampling
from fltheory.problems import LogisticFederation, dirichlet_partition, synthetic_fedprox
from fltheory.references import cite

NAME = "te_targets"
TITLE = ("FedProx/FedCurv vs their temporal-ensembling variants (BetterObjects Alg. 2) "
         "on Dirichlet-skewed Synthetic(1,1)")
_PAPER = cite("BetterObjects")
THEOREMS = [
    Theorem("prox-te-not-worse", _PAPER,
            "empirical claim, sec. 4.2: FedProx-TE is not worse than FedProx (final training loss gap)",
            "Alg. 2"),
    Theorem("curv-te-not-worse", _PAPER,
            "empirical claim, sec. 4.2: FedCurv-TE is not worse than FedCurv (final training loss gap)",
            "Alg. 2, eq. 2"),
    Theorem("beta0-reduction", _PAPER, "beta = 0 gives T = G_t: TE is its base algorithm exactly",
            "Alg. 2, lines 4-5"),
]
QUICK: dict[str, Any] = {
    "synthetic_alpha": 1.0, "synthetic_beta": 1.0,
    "n_devices": 20, "dim": 20, "n_classes": 5, "reg": 0.01,
    "n_clients": 10, "gamma": 1.0, "sampled": 2,
    "rounds": 40, "local_steps": 10, "seeds": 4, "window": 5,
    "prox_alpha": 1.0, "curv_alpha": 0.1, "te_beta": 0.2,
    "margin": 0.02, "reduction_rounds": 8, "reduction_tol": 1e-12,
}
FULL: dict[str, Any] = {
    **QUICK,
    "n_devices": 30, "dim": 60, "n_classes": 10,
    "rounds": 200, "seeds": 10, "window": 20, "reduction_rounds": 30,
}
EXPECTED_AXES = 3
METHODS = ("FedProx", "FedProx-TE", "FedCurv", "FedCurv-TE")
PAIRS = (("prox-te-not-worse", "FedProx", "FedProx-TE"), ("curv-te-not-worse", "FedCurv", "FedCurv-TE"))
_CONFIDENCE = 0.95


# --------------------------------------------------------------------------- instance

def _instance(cfg: dict[str, Any], seed: int) -> tuple[LogisticFederation, np.ndarray, np.ndarray, dict]:
    """Pooled Synthetic(alpha, beta) train data re-split by Dir(gamma p); the
    pooled test split.  -> (train federation, test features, test labels, sizes)."""
    rng = np.random.default_rng(seed)
    data = synthetic_fedprox(cfg["synthetic_alpha"], cfg["synthetic_beta"], seed=rng,
                             n_devices=cfg["n_devices"], dim=cfg["dim"], n_classes=cfg["n_classes"],
                             reg=cfg["reg"])
    X = np.vstack(data.X_train)
    y = np.concatenate(data.y_train)
    A = np.hstack([X, np.ones((X.shape[0], 1))])
    parts = dirichlet_partition(y, cfg["n_clients"], cfg["gamma"], rng)
    fed = LogisticFederation([A[p] for p in parts], [y[p] for p in parts], reg=cfg["reg"],
                             n_classes=cfg["n_classes"])
    Xt = np.vstack(data.X_test)
    At = np.hstack([Xt, np.ones((Xt.shape[0], 1))])
    yt = np.concatenate(data.y_test)
    C = cfg["n_classes"]
    label_counts = np.array([np.bincount(y[p], minlength=C) for p in parts])
    info = {"n_train": int(y.shape[0]), "n_test": int(yt.shape[0]),
            "client_sizes": [int(p.shape[0]) for p in parts],
            "client_label_counts": label_counts.tolist()}
    return fed, At, yt, info


def _algorithms(cfg: dict[str, Any], L_max: float, beta: float, curv_of: str = "global") -> dict[str, Any]:
    mu = 2.0 * cfg["prox_alpha"]                                   # BetterObjects eq. 1: alpha ||.||^2
    lr_prox = 1.0 / (L_max + mu)
    lr_curv = 1.0 / (L_max * (1.0 + 2.0 * cfg["curv_alpha"] * (cfg["sampled"] - 1)))
    E = cfg["local_steps"]
    return {
        "FedProx": FedProx(lr=lr_prox, local_steps=E, mu=mu),
        "FedProx-TE": FedProxTE(beta=beta, lr=lr_prox, local_steps=E, mu=mu),
        "FedCurv": FedCurv(lr=lr_curv, local_steps=E, alpha=cfg["curv_alpha"]),
        "FedCurv-TE": FedCurvTE(beta=beta, of=curv_of, lr=lr_curv, local_steps=E, alpha=cfg["curv_alpha"]),
    }


def _test_metrics(X: np.ndarray, A: np.ndarray, y: np.ndarray, C: int) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy and mean cross-entropy of every model row of X (R+1, f*C) on (A, y);
    the parameter is W stacked over b, x.reshape(f, C) (synthetic_fedprox)."""
    Z = np.einsum("nf,rfc->rnc", A, X.reshape(X.shape[0], A.shape[1], C))
    acc = (Z.argmax(axis=2) == y[None, :]).mean(axis=1)
    zmax = Z.max(axis=2, keepdims=True)
    lse = np.log(np.exp(Z - zmax).sum(axis=2)) + zmax[..., 0]
    ce = (lse - np.take_along_axis(Z, y[None, :, None], axis=2)[..., 0]).mean(axis=1)
    return acc, ce


# --------------------------------------------------------------------------- protocol

def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    """Loss gap, test accuracy and test loss per round for the four methods and
    every seed; the beta = 0 reduction differences."""
    instance_seed = int(rng.integers(0, 2**31 - 1))
    run_seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=config["seeds"])]
    fed, At, yt, info = _instance(config, instance_seed)
    C = config["n_classes"]
    L_max = float(fed.client_L.max())
    f_star = float(fed.loss(fed.optimum()))
    algs = _algorithms(config, L_max, config["te_beta"])
    part = UniformSampling(config["sampled"])
    out: dict[str, Any] = {
        "instance_seed": instance_seed, "run_seeds": run_seeds, "L_max": L_max, "L": float(fed.L),
        "f_star": f_star, "dim_params": int(fed.dim), **info,
        "lr": {k: float(a.lr) for k, a in algs.items()},
        "methods": list(METHODS), "rounds": config["rounds"], "window": config["window"],
        "margin": config["margin"], "te_beta": config["te_beta"],
        "loss_gap": {}, "test_acc": {}, "test_loss": {},
    }
    for name in METHODS:
        out["loss_gap"][name], out["test_acc"][name], out["test_loss"][name] = [], [], []
    for seed in progress(run_seeds, desc=NAME):
        for name in METHODS:
            hist = run_algorithm(algs[name], fed, config["rounds"], participation=part, seed=seed)
            acc, ce = _test_metrics(hist.x, At, yt, C)
            out["loss_gap"][name].append(hist.loss_gap)
            out["test_acc"][name].append(acc)
            out["test_loss"][name].append(ce)
    # beta = 0: TE must be its base bit for bit (FedCurv: per-client local ensembles)
    zero = _algorithms(config, L_max, 0.0, curv_of="local")
    red: dict[str, Any] = {}
    for base, te in (("FedProx", "FedProx-TE"), ("FedCurv", "FedCurv-TE")):
        hb = run_algorithm(zero[base], fed, config["reduction_rounds"], participation=part, seed=run_seeds[0])
        ht = run_algorithm(zero[te], fed, config["reduction_rounds"], participation=part, seed=run_seeds[0])
        red[base] = {"max_abs_diff": float(np.max(np.abs(hb.x - ht.x))),
                     "max_abs_x": float(np.max(np.abs(hb.x))), "rounds": config["reduction_rounds"]}
    out["reduction"] = red
    out["reduction_tol"] = config["reduction_tol"]
    return out


def _paired(results: dict[str, Any], base: str, te: str) -> dict[str, float]:
    """Per-seed log ratios of the window-averaged final loss gaps, their
    geometric mean and its one-sided 95 % Student-t confidence bounds."""
    w = results["window"]
    gb = np.array([np.mean(g[-w:]) for g in results["loss_gap"][base]])
    gt = np.array([np.mean(g[-w:]) for g in results["loss_gap"][te]])
    logr = np.log(gt / gb)
    n = logr.shape[0]
    m = float(logr.mean())
    if n > 1:
        half = float(stats.t.ppf(_CONFIDENCE, n - 1) * logr.std(ddof=1) / np.sqrt(n))
    else:
        half = float("inf")
    return {"geomean": float(np.exp(m)), "lower": float(np.exp(m - half)), "upper": float(np.exp(m + half)),
            "n": n, "wins": int(np.sum(gt < gb)), "gap_base": float(gb.mean()), "gap_te": float(gt.mean())}


def checks(results: dict[str, Any]) -> list[Check]:
    """Per pair: geomean TE/base final gap against 1 + margin (paired, 95 %);
    reduction: max |x_TE - x_base| against the tolerance."""
    out: list[Check] = []
    margin = results["margin"]
    for key, base, te in PAIRS:
        p = _paired(results, base, te)
        ratio = p["geomean"] / (1.0 + margin)
        summary = (f"{te}/{base} final gap (mean of last {results['window']} of {results['rounds']} rounds), "
                   f"geomean over {p['n']} seeds {p['geomean']:.4f}, one-sided 95% CI "
                   f"[{p['lower']:.4f}, {p['upper']:.4f}], TE better on {p['wins']}/{p['n']} seeds; "
                   f"mean gaps base {p['gap_base']:.4g}, TE {p['gap_te']:.4g}; margin {margin}")
        if ratio <= 1.0:
            verdict = ("TE significantly better" if p["upper"] < 1.0 else "no significant difference")
            out.append(Check(key, "holds", ratio, f"{summary}; {verdict}"))
        elif p["lower"] > 1.0 + margin:
            out.append(Check(key, "violated", ratio,
                             f"{summary}; instance seed {results['instance_seed']}, run seeds "
                             f"{results['run_seeds']}, {results['dim_params']} parameters, "
                             f"L_max {results['L_max']:.4g}, F* {results['f_star']:.6g}"))
        else:
            worse = ("TE significantly worse than its base (95% lower bound > 1) but not significantly "
                     "beyond the margin" if p["lower"] > 1.0 else "the difference is within the seed noise")
            out.append(Check(key, "not checkable", ratio,
                             f"inconclusive: geomean ratio {p['geomean']:.4f} > 1 + margin but its one-sided 95% "
                             f"lower bound {p['lower']:.4f} <= 1 + margin ({worse}); {summary}"))
    tol = results["reduction_tol"]
    worst = max(r["max_abs_diff"] for r in results["reduction"].values())
    detail = "; ".join(f"{b}: max |x_TE - x_base| = {r['max_abs_diff']:.3g} over {r['rounds']} rounds "
                       f"(max |x| {r['max_abs_x']:.3g})" for b, r in results["reduction"].items())
    status: Literal["holds", "violated"] = "holds" if worst <= tol else "violated"
    out.append(Check("beta0-reduction", status, worst / tol, f"tolerance {tol:g}; {detail}"))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    """Geomean TE/base gap ratio and the rounds each method needs to reach the
    base's final mean test accuracy (per pair)."""
    out: dict[str, float] = {}
    for _key, base, te in PAIRS:
        tag = "prox" if base == "FedProx" else "curv"
        p = _paired(results, base, te)
        out[f"{tag}_gap_ratio"] = p["geomean"]
        out[f"{tag}_gap_ratio_upper"] = p["upper"]
        acc_b = np.mean(results["test_acc"][base], axis=0)
        acc_t = np.mean(results["test_acc"][te], axis=0)
        target = float(acc_b[-1])
        out[f"{tag}_final_acc_base"] = target
        out[f"{tag}_final_acc_te"] = float(acc_t[-1])
        out[f"{tag}_rounds_to_base_acc_base"] = float(np.argmax(acc_b >= target))
        if np.any(acc_t >= target):
            out[f"{tag}_rounds_to_base_acc_te"] = float(np.argmax(acc_t >= target))
    out["reduction_max_abs_diff"] = max(r["max_abs_diff"] for r in results["reduction"].values())
    return out


def plot(results: dict[str, Any]) -> Figure:
    """(a) training loss gap, (b) test accuracy: mean over seeds with the
    min-max band; (c) TE/base gap ratio per round (geomean over seeds, band
    min-max over seeds) with the ratio = 1 line."""
    fig, axes = plotting.figure(1, 3, height=3.0)
    t = np.arange(results["rounds"] + 1)
    colours = dict(zip(METHODS, plotting.OKABE_ITO))
    styles = {"FedProx": "-", "FedProx-TE": "--", "FedCurv": "-", "FedCurv-TE": "--"}
    for ax, key, ylabel in ((axes[0], "loss_gap", r"training loss gap $F(x_t) - F^*$ (nats)"),
                            (axes[1], "test_acc", "test accuracy (fraction)")):
        for name in results["methods"]:
            Y = np.asarray(results[key][name])
            ax.plot(t, Y.mean(axis=0), color=colours[name], linestyle=styles[name], label=name)
            ax.fill_between(t, Y.min(axis=0), Y.max(axis=0), color=colours[name], alpha=0.15, linewidth=0)
        ax.set_xlabel("communication round t")
        ax.set_ylabel(ylabel)
    axes[0].set_yscale("log")
    axes[0].set_title("train loss gap (band: seeds)", fontsize=9)
    axes[1].set_title("test accuracy (band: seeds)", fontsize=9)
    axes[1].legend(fontsize=7, loc="lower right")
    ax = axes[2]
    for _c, (_key, base, te) in enumerate(PAIRS):
        R = np.log(np.asarray(results["loss_gap"][te])[:, 1:] / np.asarray(results["loss_gap"][base])[:, 1:])
        colour = colours[te]
        ax.plot(t[1:], np.exp(R.mean(axis=0)), color=colour, label=f"{te} / {base}")
        ax.fill_between(t[1:], np.exp(R.min(axis=0)), np.exp(R.max(axis=0)), color=colour, alpha=0.15,
                        linewidth=0)
    plotting.ratio_axis(ax, label="loss gap ratio TE / base", reference_label="TE = base (ratio 1)")
    ax.axhline(1.0 + results["margin"], color="black", linestyle=":", linewidth=1.0,
               label=f"1 + margin ({results['margin']:g})")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    w = results["window"]
    ax.axvspan(results["rounds"] - w + 1, results["rounds"], color="grey", alpha=0.15,
               label="verdict window")
    ax.set_xlabel("communication round t")
    red = max(r["max_abs_diff"] for r in results["reduction"].values())
    ax.set_title(rf"gap TE / base, $\beta$={results['te_beta']}" + "\n"
                 + rf"($\beta$=0: max|$\Delta x$|={red:.1g})", fontsize=8)
    ax.legend(fontsize=6.5, loc="best")
    return fig
