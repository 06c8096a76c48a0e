"""Contraction of the client operators and LocalAdaptivity Theorem 1 on a heterogeneous quadratic.

LocalAdaptivity (Wang et al., "Local Adaptivity in Federated Learning"), section 4,
restated in docs/theory/fixed-points.md:

* Assumption 1: ||O_i(x) - O_i(y)||^2 <= rho_i ||x - y||^2, where O_i(x) is the
  model after tau_i ClientOpt steps from x (restarted state).  For SGD with
  eta <= 1/L_i one step contracts by 1 - eta mu_i, so the *unsquared* Lipschitz
  constant of O_i is at most (1 - eta mu_i)^{tau_i}; docs/theory/index.md's squared form
  uses rho_i = (1 - eta mu_i)^{tau_i} (weaker).  Both are checked against the
  empirical ratios ||O_i(x) - O_i(y)|| / ||x - y|| over sampled pairs
  (``fltheory.theory.operators.lipschitz_ratios``); for AdaGrad and Adam
  clients only the measured ratio exists (A1 needs it < 1), over random
  pairs and over one pair straddling the hyperplane where a client's gradient
  coordinate vanishes (``straddle_ratio``: the restarted first step
  eta g / (|g| + eps) jumps there, so the ratio grows like eta / h).
* The global operator T = sum p_i O_i and the Mann iteration
  x <- (1 - eta_s) x + eta_s T(x) (FedOpt with server GD): for SGD clients on
  quadratics the map is affine with the *symmetric* linear part
  A = (1 - eta_s) I + eta_s sum p_i (I - eta H_i)^{tau_i}, so
  ||x_t - x~|| <= rho(A)^t ||x_0 - x~|| exactly (``mann_rate``); for AdaGrad
  clients the local rate is the spectral radius of (1 - eta_s) I + eta_s J,
  J the Jacobian of T at its fixed point (``operator_fixed_point``), compared
  with the measured asymptotic decay.
* Theorem 1 [derived recursion, docs/theory/fixed-points.md]: with rho_bar = sum p_i rho_i < 1
  and phi_i = tau_i eta^2 sigma^2 (Gaussian gradient noise of variance sigma^2),
  E||x_{t+1} - x~||^2 <= (1 - eta_s (1 - rho_bar)) E||x_t - x~||^2 + eta_s^2 sum p_i^2 phi_i
  (``fltheory.theory.bounds.local_adaptivity.fedopt_theorem1_quadratic``, both
  the exact worst-case squared constants and the paper's (1 - eta mu)^tau).
  The left-hand side is measured by Monte Carlo (``mc_runs`` independent runs
  of the library's FedAvg with ``with_gradient_noise``; mean with a normal 95%
  confidence band) and computed exactly by the mean/covariance recursion of
  the linear-Gaussian iteration (m_{t+1} = A m_t + b, C_{t+1} = A C_t A^T +
  eta_s^2 sum p_i^2 Q_i, Q_i = eta^2 sigma^2 / d sum_{j<tau} (I - eta H_i)^{2j}).
* Assumption 2 [derived]: E||O_i(x) - E O_i(x)||^2 <= phi_i = tau eta^2 sigma^2,
  against its exact value tr Q_i (``noise_variance``) and a Monte Carlo
  estimate (``a2_samples`` noisy client maps per client in one vectorized
  ``local_descent`` batch, 95% band).

* Tight A1 constant for every eta < 2/L_i (``a1-sgd-tight``): tau GD steps on a
  mu-strongly convex L-smooth function are Lipschitz with constant
  max(|1 - eta mu|, |1 - eta L|)^tau for *every* eta
  (``fltheory.theory.bounds.gd_contraction.gd_contraction_factor``), which is
  (1 - eta mu)^tau up to eta = 2/(L + mu).  Swept over eta = f / max_i L_i for
  ``tight_lr_factors`` f (f > 1 leaves the old hypothesis eta <= 1/L): the
  sampled ratios and the exact operator norm ||(I - eta H_i)^tau||_2 (closed
  form from the spectrum) against the constant; the exact norm attains it.
* Where A1 holds for adaptive clients (``a1-adaptive``): restarted AdaGrad's
  first step is eta g / (sqrt(v0 + g^2) + eps), whose slope at g = 0 is
  eta / (sqrt(v0) + eps): the map has no useful Lipschitz constant only when the
  initial accumulator v0 is (near) 0.  The straddling pair and random pairs are
  measured for every ``adagrad_initial_accumulators`` value and every Adam
  ``adam_eps`` value, and each setting is reported as A1 holding (largest
  ratio < 1) or failing ("violated": LocalAdaptivity App. B.4 gives empirical
  evidence that adaptive optimizers such as Adam satisfy A1).

The client rate is eta = ``lr_factor`` / max_i L_i, computed from the problem,
so eta <= 1/L_i holds for every client in the tau sweep.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.references import cite
from fltheory.errors import DivergenceError
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import optim, plotting
from fltheory.algorithms import run as run_rounds
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedopt import FedOpt
from fltheory.algorithms.local import local_descent
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory import fedopt_quadratic_fixed_point, mann_rate
from fltheory.theory.bounds.gd_contraction import gd_contraction_factor
from fltheory.theory.bounds.local_adaptivity import fedopt_theorem1_quadratic
from fltheory.theory.operators import (fedopt_operator, lipschitz_ratios, operator_fixed_point,
                                       sgd_contraction_bound)

NAME = "contraction"
TITLE = "Assumption-1 constants, Mann-iteration rates and LocalAdaptivity Theorem 1 vs Monte Carlo"
_PAPER = cite("LocalAdaptivity")
THEOREMS = [
    Theorem("a1-sgd", _PAPER, "Assumption 1 for SGD: Lip(O_i) <= (1 - eta mu_i)^tau_i, eta <= 1/L_i",
            "docs/theory/fixed-points.md (unsquared and squared forms)"),
    Theorem("a1-sgd-tight", "textbook (Nesterov 2004, Thm 2.1.15 setting) for LocalAdaptivity A1",
            "Lip(tau GD steps) <= max(|1 - eta mu_i|, |1 - eta L_i|)^tau_i for every eta < 2/L_i",
            "attained by quadratics"),
    Theorem("a1-adaptive", _PAPER, "Assumption 1 (rho_i < 1) for AdaGrad / Adam clients, swept over "
            "AdaGrad's initial accumulator and Adam's eps", "docs/theory/fixed-points.md"),
    Theorem("a2-sgd", _PAPER, "Assumption 2 for SGD: E||O_i(x) - E O_i(x)||^2 <= phi_i = tau eta^2 sigma^2",
            "docs/theory/fixed-points.md [derived]"),
    Theorem("mann-rate", _PAPER, "Mann iteration of T: ||x_t - x~|| <= rho^t ||x_0 - x~|| (SGD, exact); "
            "local rate rho((1-eta_s) I + eta_s J) (AdaGrad)", "eq. 6"),
    Theorem("theorem1", _PAPER, "Theorem 1, derived recursion form",
            "eq. 7 as restated in docs/theory/fixed-points.md"),
]
QUICK: dict[str, Any] = {
    "n_clients": 4, "dim": 3, "L": 4.0, "mu": 0.5, "heterogeneity": 1.0,
    "lr_factor": 0.5,                 # eta = lr_factor / max_i L_i
    "lr_adaptive": 0.05,              # AdaGrad / Adam client rate
    "taus": [1, 2, 4, 8, 16],
    "n_pairs": 8, "pair_radius": 1.0,
    "straddle_half_width": 1e-6,      # pair x_c +- h e_0 across client 0's g_0 = 0 hyperplane
    "local_steps": 4,                 # Mann-rate and Theorem-1 runs
    "server_lr": 0.5,
    "rate_rounds": 250,
    "rate_rel_tol": 0.05,             # allowed |log r_meas / log r_pred - 1| (AdaGrad)
    "sigma2": 0.5,                    # gradient-noise variance per client
    "mc_runs": 48, "mc_rounds": 25,
    "a2_samples": 4000,               # noisy client maps per client for A2
    "start_distance": 2.0,
    "tight_lr_factors": [0.5, 1.0, 1.5, 1.9],            # eta = f / max_i L_i, f < 2
    "adagrad_initial_accumulators": [0.0, 1e-4, 1e-2, 1e-1],
    "adam_eps": [1e-8, 1e-4, 1e-2, 1e-1],
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 8, "dim": 6, "taus": [1, 2, 4, 8, 16, 32],
                        "n_pairs": 40, "rate_rounds": 400, "mc_runs": 1000, "mc_rounds": 60,
                        "a2_samples": 100000}
EXPECTED_AXES = 5
_ADAPTIVE = ("adagrad", "adam")


def _client(kind: str, cfg: dict[str, Any], eta: float, regulariser: float | None = None) -> optim.Optimizer:
    """SGD(eta), or AdaGrad / Adam at ``lr_adaptive``; ``regulariser`` is AdaGrad's
    initial accumulator or Adam's eps (library defaults 0 and 1e-8 when None)."""
    if kind == "sgd":
        return optim.sgd(eta)
    if kind == "adagrad":
        return optim.adagrad(cfg["lr_adaptive"], initial_accumulator=regulariser or 0.0)
    return optim.adam(cfg["lr_adaptive"], eps=1e-8 if regulariser is None else regulariser)


def _fedopt(kind: str, cfg: dict[str, Any], eta: float, tau: int, server_lr: float = 1.0,
            regulariser: float | None = None) -> FedOpt:
    return FedOpt(client_optimizer=_client(kind, cfg, eta, regulariser),
                  server_optimizer=optim.sgd(server_lr), local_steps=tau)


def exact_gd_map_norm(fed: QuadraticFederation, eta: float, tau: int) -> np.ndarray:
    """||(I - eta H_i)^tau||_2 = max_j |1 - eta lambda_ij|^tau per client (H_i symmetric) -> (N,):
    the exact Lipschitz constant of tau local GD steps on client i."""
    return np.max(np.abs(1.0 - eta * fed.client_eigenvalues), axis=1) ** tau


def _a1_tight(fed: QuadraticFederation, cfg: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """Sampled ratios and exact norms of tau GD steps vs the tight constant, over eta = f / max L_i."""
    tau, L_max = cfg["local_steps"], float(fed.client_L.max())
    out: dict[str, Any] = {"factors": cfg["tight_lr_factors"], "eta": [], "bound": [], "exact": [],
                           "sampled": [], "beyond_one_over_L": []}
    for f in cfg["tight_lr_factors"]:
        eta = f / L_max
        T = fedopt_operator(_fedopt("sgd", cfg, eta, tau), fed)
        out["eta"].append(eta)
        out["bound"].append(gd_contraction_factor(eta, tau, fed.client_mu, fed.client_L))
        out["exact"].append(exact_gd_map_norm(fed, eta, tau))
        out["sampled"].append(lipschitz_ratios(T, rng, n_pairs=cfg["n_pairs"],
                                               radius=cfg["pair_radius"]).max_ratio)
        out["beyond_one_over_L"].append(int(np.sum(eta * fed.client_L > 1)))
    return out


def _a1_adaptive_sweep(fed: QuadraticFederation, cfg: dict[str, Any], rng: np.random.Generator
                       ) -> dict[str, Any]:
    """Straddling-pair and random-pair ratios of restarted AdaGrad (per initial
    accumulator) and Adam (per eps), tau = ``local_steps``."""
    tau, out = cfg["local_steps"], {}
    for kind, key in (("adagrad", "adagrad_initial_accumulators"), ("adam", "adam_eps")):
        straddle, random = [], []
        for value in cfg[key]:
            alg = _fedopt(kind, cfg, 0.0, tau, regulariser=value)
            straddle.append(straddle_ratio(fed, alg, cfg["straddle_half_width"]))
            random.append(float(lipschitz_ratios(fedopt_operator(alg, fed), rng, n_pairs=cfg["n_pairs"],
                                                 radius=cfg["pair_radius"]).max_ratio.max()))
        out[kind] = {"parameter": "initial accumulator" if kind == "adagrad" else "eps",
                     "values": cfg[key], "straddle": straddle, "random": random}
    return out


def exact_second_moment(fed: QuadraticFederation, eta: float, tau: int, server_lr: float,
                        sigma2: float, x0: np.ndarray, x_fp: np.ndarray, rounds: int) -> np.ndarray:
    """E||x_t - x~||^2, t = 0..rounds, of FedAvg (server rate eta_s) with
    Gaussian gradient noise N(0, sigma2/d I), by the exact mean/covariance
    recursion of the module docstring (linear-Gaussian iteration)."""
    d = fed.dim
    S = np.eye(d) - eta * fed.H                                        # (N, d, d)
    Sk = np.linalg.matrix_power(S, tau)
    A = (1 - server_lr) * np.eye(d) + server_lr * np.einsum("i,ijk->jk", fed.weights, Sk)
    # Q_i = eta^2 sigma2/d sum_{j<tau} S_i^{2j}
    S2 = np.matmul(S, S)
    Q, P = np.zeros_like(S), np.broadcast_to(np.eye(d), S.shape).copy()
    for _ in range(tau):                                               # construction, tau terms
        Q += P
        P = np.matmul(P, S2)
    Q *= eta ** 2 * sigma2 / d
    noise = server_lr ** 2 * np.einsum("i,ijk->jk", fed.weights ** 2, Q)
    m, C = x0 - x_fp, np.zeros((d, d))
    out = np.empty(rounds + 1)
    for t in range(rounds + 1):
        out[t] = float(m @ m + np.trace(C))
        m, C = A @ m, A @ C @ A.T + noise
    return out


def _a1(fed: QuadraticFederation, cfg: dict[str, Any], eta: float, rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    taus = cfg["taus"]
    out: dict[str, Any] = {"taus": taus, "bound": [], "measured": {k: [] for k in ("sgd", *_ADAPTIVE)},
                           "ratio_unsquared": [], "ratio_squared": []}
    for tau in progress(taus, desc=NAME):
        bound = sgd_contraction_bound(fed, eta, tau)                    # (N,), unsquared
        out["bound"].append(bound)
        for kind in ("sgd", *_ADAPTIVE):
            T = fedopt_operator(_fedopt(kind, cfg, eta, tau), fed)
            lr = lipschitz_ratios(T, rng, n_pairs=cfg["n_pairs"], radius=cfg["pair_radius"])
            out["measured"][kind].append(lr.max_ratio)
            if kind == "sgd":
                out["ratio_unsquared"].append(lr.max_ratio / bound)
                out["ratio_squared"].append(lr.max_ratio ** 2 / bound)  # rho_i = (1 - eta mu)^tau
    out["straddle"] = {kind: straddle_ratio(fed, _fedopt(kind, cfg, eta, cfg["local_steps"]),
                                            cfg["straddle_half_width"]) for kind in _ADAPTIVE}
    return out


def straddle_ratio(fed: QuadraticFederation, alg: FedOpt, half_width: float) -> float:
    """||O_0(x_c + h e_0) - O_0(x_c - h e_0)|| / (2 h) for client 0, where x_c = x* + s e_0
    puts client 0's first gradient coordinate at zero: (H_0 x_c - e_0)_0 = 0.

    Restarted AdaGrad / Adam take a first step eta g / (|g| + eps) per
    coordinate, a jump of about 2 eta across g_0j = 0, so the ratio grows like
    eta / h: the client map has no Lipschitz constant near that hyperplane."""
    xstar = fed.optimum()
    H0, e0 = fed.H[0], fed.e[0]
    s = -(H0 @ xstar - e0)[0] / H0[0, 0]
    xc = xstar.copy()
    xc[0] += s
    step = np.zeros(fed.dim)
    step[0] = half_width
    T = fedopt_operator(alg, fed)
    O = T.client_maps(np.stack([xc + step, xc - step]), [0, 0])
    return float(np.linalg.norm(O[0] - O[1]) / (2 * half_width))


def noise_variance(fed: QuadraticFederation, eta: float, tau: int, sigma2: float) -> np.ndarray:
    """Exact E||O_i(x) - E O_i(x)||^2 = eta^2 sigma2 / d tr(sum_{j<tau} (I - eta H_i)^{2j})
    of tau local SGD steps with N(0, sigma2/d I) gradient noise (any x) -> (N,)."""
    S = np.eye(fed.dim) - eta * fed.H
    lam = np.linalg.eigvalsh(S)                                         # (N, d), S symmetric
    return eta ** 2 * sigma2 / fed.dim * np.sum((1 - lam ** (2 * tau)) / (1 - lam ** 2), axis=1)


def _a2(fed: QuadraticFederation, cfg: dict[str, Any], eta: float, x0: np.ndarray,
        rng: np.random.Generator) -> dict[str, Any]:
    """A2 by Monte Carlo: ``a2_samples`` noisy client maps per client from x0, all
    S x N rows in one ``local_descent`` batch; exact value and phi_i beside it."""
    tau, s2, S = cfg["local_steps"], cfg["sigma2"], cfg["a2_samples"]
    N, d = fed.n_clients, fed.dim
    noisy = fed.with_gradient_noise(s2)
    clients = np.tile(np.arange(N), S)
    Y, _ = local_descent(noisy, np.broadcast_to(x0, (S * N, d)), clients, np.full(S * N, tau),
                         np.full(S * N, eta), rng)
    Y = Y.reshape(S, N, d)
    mc = np.sum(Y.var(axis=0, ddof=1), axis=1)                          # (N,)
    # standard error of the per-client sum of variances, from the squared deviations
    dev2 = np.sum((Y - Y.mean(axis=0)) ** 2, axis=2)                    # (S, N)
    return {"mc": mc, "mc_half_width": 1.96 * dev2.std(axis=0, ddof=1) / np.sqrt(S),
            "exact": noise_variance(fed, eta, tau, s2), "phi": np.full(N, tau * eta ** 2 * s2),
            "samples": S}


def _mann(fed: QuadraticFederation, cfg: dict[str, Any], eta: float, x0: np.ndarray) -> dict[str, Any]:
    tau, eta_s, R = cfg["local_steps"], cfg["server_lr"], cfg["rate_rounds"]
    fp = fedopt_quadratic_fixed_point(fed, eta, tau)
    rho_sgd = mann_rate(fp, eta_s)
    hist = run_rounds(FedAvg(lr=eta, local_steps=tau, server_lr=eta_s), fed, R, x0=x0)
    err_sgd = np.linalg.norm(hist.x - fp.x, axis=1)
    alg = _fedopt("adagrad", cfg, eta, tau, eta_s)
    T = fedopt_operator(alg, fed)
    x_ada = run_rounds(alg, fed, R, x0=x0).x
    ofp, failures = None, []
    for start in (fed.optimum(), x_ada[-1]):        # x*, then the last simulated iterate
        try:
            ofp = operator_fixed_point(T, start)
            break
        except DivergenceError as exc:
            failures.append(" ".join(str(exc).split()))
    if ofp is None:       # restarted AdaGrad's T is nearly non-smooth: no root found, not checkable
        return {"rho_sgd": rho_sgd, "err_sgd": err_sgd, "rho_adagrad": None, "err_adagrad": None,
                "rounds": R, "adagrad_unsolved": "; ".join(failures)}
    Jm = (1 - eta_s) * np.eye(fed.dim) + eta_s * ofp.jacobian
    rho_ada = float(np.abs(np.linalg.eigvals(Jm)).max())
    err_ada = np.linalg.norm(x_ada - ofp.x, axis=1)
    return {"rho_sgd": rho_sgd, "err_sgd": err_sgd, "rho_adagrad": rho_ada, "err_adagrad": err_ada,
            "rounds": R}


def _theorem1(fed: QuadraticFederation, cfg: dict[str, Any], eta: float, x0: np.ndarray,
              rng: np.random.Generator, progress: Progress = silent_progress) -> dict[str, Any]:
    tau, eta_s, R, s2 = cfg["local_steps"], cfg["server_lr"], cfg["mc_rounds"], cfg["sigma2"]
    out: dict[str, Any] = {}
    for form in ("squared", "paper"):
        res = fedopt_theorem1_quadratic(fed, R, lr=eta, local_steps=tau, sigma2=s2, server_lr=eta_s,
                                        x0=x0, form=form)
        out[f"bound_{form}"] = res.terms["per_round"]
        out[f"unmet_{form}"] = [a.name for a in res.assumptions if not a.held]
        out[f"rho_bar_{form}"] = res.terms["rho_bar"]
        x_fp = res.terms["fixed_point"]
    noisy = fed.with_gradient_noise(s2)
    alg = FedAvg(lr=eta, local_steps=tau, server_lr=eta_s)
    seeds = rng.integers(0, 2**31 - 1, size=cfg["mc_runs"])
    sq = np.array([np.sum((run_rounds(alg, noisy, R, x0=x0, seed=int(s)).x - x_fp) ** 2, axis=1)
                   for s in progress(seeds, desc=f"{NAME} Monte Carlo")])   # (runs, R+1)
    out["mc_mean"] = sq.mean(axis=0)
    out["mc_half_width"] = 1.96 * sq.std(axis=0, ddof=1) / np.sqrt(sq.shape[0])
    out["exact"] = exact_second_moment(fed, eta, tau, eta_s, s2, x0, x_fp, R)
    out["mc_seeds_first"] = int(seeds[0])
    return out


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                           heterogeneity=config["heterogeneity"], seed=seed, constants="clients")
    eta = config["lr_factor"] / float(fed.client_L.max())
    u = rng.standard_normal(config["dim"])
    x0 = fed.optimum() + config["start_distance"] * u / np.linalg.norm(u)
    return {"seed": seed, "eta": eta, "x0": x0, "client_L": fed.client_L, "client_mu": fed.client_mu,
            "n_clients": config["n_clients"], "dim": config["dim"], "server_lr": config["server_lr"],
            "local_steps": config["local_steps"], "sigma2": config["sigma2"],
            "rate_rel_tol": config["rate_rel_tol"], "mc_runs": config["mc_runs"],
            "straddle_half_width": config["straddle_half_width"],
            "a1": _a1(fed, config, eta, rng, progress), "a2": _a2(fed, config, eta, x0, rng),
            "a1_tight": _a1_tight(fed, config, rng), "a1_sweep": _a1_adaptive_sweep(fed, config, rng),
            "mann": _mann(fed, config, eta, x0),
            "theorem1": _theorem1(fed, config, eta, x0, rng, progress)}


def _inst(r: dict[str, Any]) -> str:
    return (f"seed {r['seed']}, N = {r['n_clients']}, d = {r['dim']}, eta = {r['eta']:.4g}, "
            f"tau = {r['local_steps']}, eta_s = {r['server_lr']}, sigma^2 = {r['sigma2']}")


def measured_rate(err: Any, lo: float = 1e-11, hi: float = 1e-2) -> float | None:
    """Geometric decay rate of err_t / err_0 over the rounds where it lies in
    [lo, hi] (least-squares slope of log err_t on t); None if fewer than 3."""
    e = np.asarray(err, dtype=float)
    rel = e / e[0]
    idx = np.flatnonzero((rel >= lo) & (rel <= hi))
    if idx.size < 3:
        return None
    return float(np.exp(np.polyfit(idx, np.log(e[idx]), 1)[0]))


def checks(results: dict[str, Any]) -> list[Check]:
    out: list[Check] = []
    a1, inst = results["a1"], _inst(results)
    for form in ("unsquared", "squared"):
        r = np.asarray(a1[f"ratio_{form}"])
        worst = float(r.max())
        k, i = np.unravel_index(int(r.argmax()), r.shape)
        detail = (f"{form} form, worst tau = {a1['taus'][k]}, client {i}: measured "
                  f"{np.asarray(a1['measured']['sgd'])[k, i]:.6g} vs bound {np.asarray(a1['bound'])[k, i]:.6g}")
        out.append(Check("a1-sgd", "holds" if worst <= 1 else "violated", worst,
                         detail if worst <= 1 else f"{detail}; {inst}"))
    for kind in _ADAPTIVE:
        m = np.asarray(a1["measured"][kind])
        worst = float(m.max())
        tau = a1["taus"][int(np.unravel_index(int(m.argmax()), m.shape)[0])]
        straddle = float(a1["straddle"][kind])
        worst_all = max(worst, straddle)
        msg = (f"{kind}: max Lipschitz ratio over random pairs {worst:.4f} (tau = {tau}); pair straddling "
               f"client 0's g_0 = 0 hyperplane (half-width {results['straddle_half_width']:g}, "
               f"tau = {results['local_steps']}): {straddle:.4g}")
        if worst_all < 1:
            out.append(Check("a1-adaptive", "holds", worst_all, msg))
        else:
            out.append(Check("a1-adaptive", "violated", worst_all,
                             f"{msg}: ratio >= 1, A1 fails for this client optimizer, Theorem 1 does not "
                             f"apply; {inst}"))
    out.extend(tight_checks(results["a1_tight"], inst))
    out.extend(adaptive_sweep_checks(results["a1_sweep"], results["straddle_half_width"],
                                     results["local_steps"]))
    a2 = results["a2"]
    phi = np.asarray(a2["phi"])
    r_exact = np.asarray(a2["exact"]) / phi
    r_mc = np.asarray(a2["mc"]) / phi
    lower = (np.asarray(a2["mc"]) - np.asarray(a2["mc_half_width"])) / phi
    worst = float(max(r_exact.max(), r_mc.max()))
    detail = (f"max exact/phi {r_exact.max():.4f}, max MC/phi {r_mc.max():.4f} ({a2['samples']} samples "
              f"per client), phi = {phi[0]:.4g}")
    if worst <= 1:
        out.append(Check("a2-sgd", "holds", worst, detail))
    elif r_exact.max() > 1 or lower.max() > 1:
        out.append(Check("a2-sgd", "violated", worst, f"{detail}; {inst}"))
    else:
        out.append(Check("a2-sgd", "not checkable", worst,
                         f"{detail}: MC estimate above phi within its 95% band, exact value below; {inst}"))
    mann = results["mann"]
    e = np.asarray(mann["err_sgd"])
    t = np.arange(e.size)
    keep = (e >= 1e-12 * e[0]) & (t >= 1)     # above rounding; t = 0 is the identity
    ratio = float(np.max(e[keep] / (mann["rho_sgd"] ** t[keep] * e[0])))
    out.append(Check("mann-rate", "holds" if ratio <= 1 else "violated", ratio,
                     f"SGD: max_t ||x_t - x~|| / (rho^t ||x_0 - x~||), rho = {mann['rho_sgd']:.6f}, "
                     f"{int(keep.sum())} rounds" + ("" if ratio <= 1 else f"; {inst}")))
    r_meas = None if mann["err_adagrad"] is None else measured_rate(mann["err_adagrad"])
    if mann["rho_adagrad"] is None:
        out.append(Check("mann-rate", "not checkable", None,
                         f"AdaGrad: no fixed point of T found from x* nor from x_R: "
                         f"{mann.get('adagrad_unsolved', '')}; {inst}"))
    elif mann["rho_adagrad"] >= 1.0:
        # an unstable fixed point: no local linear rate towards it to compare with
        out.append(Check("mann-rate", "not checkable", None,
                         f"AdaGrad: the fixed point found has Jacobian spectral radius "
                         f"{mann['rho_adagrad']:.5f} >= 1 (not attracting); {inst}"))
    elif r_meas is None:
        out.append(Check("mann-rate", "not checkable", None,
                         "AdaGrad: the error never entered [1e-11, 1e-2] x its start in the rounds run"))
    else:
        dev = abs(np.log(r_meas) / np.log(mann["rho_adagrad"]) - 1) / results["rate_rel_tol"]
        out.append(Check("mann-rate", "holds" if dev <= 1 else "violated", dev,
                         f"AdaGrad: measured rate {r_meas:.5f} vs Jacobian rate {mann['rho_adagrad']:.5f} "
                         f"(|log ratio - 1| / {results['rate_rel_tol']})" + ("" if dev <= 1 else f"; {inst}")))
    th = results["theorem1"]
    mean, half, exact = (np.asarray(th[k]) for k in ("mc_mean", "mc_half_width", "exact"))
    for form in ("squared", "paper"):
        bound = th[f"bound_{form}"]
        if bound is None or th[f"unmet_{form}"]:
            out.append(Check("theorem1", "not checkable", None,
                             f"{form} constants: hypotheses fail: {th[f'unmet_{form}']}"))
            continue
        b = np.asarray(bound)[1:]              # t = 0 is the equality E||x0 - x~||^2 = e_0
        r_exact = float(np.max(exact[1:] / b))
        r_mc = float(np.max(mean[1:] / b))
        lower = float(np.max((mean[1:] - half[1:]) / b))
        worst = max(r_exact, r_mc)
        detail = (f"{form} constants (rho_bar = {th[f'rho_bar_{form}']:.4f}): max exact/bound {r_exact:.4f}, "
                  f"max MC-mean/bound {r_mc:.4f} ({results['mc_runs']} runs)")
        if worst <= 1:
            out.append(Check("theorem1", "holds", worst, detail))
        elif r_exact > 1 or lower > 1:
            out.append(Check("theorem1", "violated", worst, f"{detail}; {inst}"))
        else:
            out.append(Check("theorem1", "not checkable", worst,
                             f"{detail}: MC mean above the bound but the 95% band and the exact value are "
                             f"not; {inst}"))
    return out


def tight_checks(tight: dict[str, Any], inst: str) -> list[Check]:
    """One ``a1-sgd-tight`` check: worst (sampled or exact) / tight constant over the eta sweep."""
    bound, exact, sampled = (np.asarray(tight[k]) for k in ("bound", "exact", "sampled"))
    ratio = np.maximum(exact, sampled) / bound
    worst = float(ratio.max())
    k = int(np.unravel_index(int(ratio.argmax()), ratio.shape)[0])
    detail = (f"eta L_max in {list(tight['factors'])}: max measured/constant {worst:.6f} (at eta L_max = "
              f"{tight['factors'][k]}); exact ||(I - eta H_i)^tau|| / constant in "
              f"[{float((exact / bound).min()):.6f}, {float((exact / bound).max()):.6f}] (attained); "
              f"{int(np.sum(tight['beyond_one_over_L']))} client-steps beyond the old hypothesis "
              "eta <= 1/L_i")
    if worst <= 1 + 1e-12:            # the exact norm equals the constant up to rounding (attained)
        return [Check("a1-sgd-tight", "holds", min(worst, 1.0), detail)]
    return [Check("a1-sgd-tight", "violated", worst, f"{detail}; {inst}")]


def adaptive_sweep_checks(sweep: dict[str, Any], half_width: float, tau: int) -> list[Check]:
    """One ``a1-adaptive`` check per optimizer setting: "holds" when the largest
    measured ratio (straddling pair, random pairs) is < 1; else A1 fails there ("violated":
    LocalAdaptivity App. B.4 holds that adaptive client optimizers such as Adam satisfy A1)
    and Theorem 1 does not apply."""
    out = []
    for kind, s in sweep.items():
        for value, st, rd in zip(s["values"], s["straddle"], s["random"], strict=True):
            worst = max(float(st), float(rd))
            msg = (f"{kind}, {s['parameter']} {value:g} (tau = {tau}): ratio {float(st):.4g} on the pair "
                   f"straddling client 0's g_0 = 0 (half-width {half_width:g}), {float(rd):.4g} over "
                   "random pairs")
            if worst < 1:
                out.append(Check("a1-adaptive", "holds", worst, f"A1 holds: {msg}"))
            else:
                out.append(Check("a1-adaptive", "violated", worst,
                                 f"A1 fails (ratio >= 1), Theorem 1 does not apply: {msg}"))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    a1, th = results["a1"], results["theorem1"]
    out = {"a1_sgd_max_ratio": float(np.max(a1["ratio_unsquared"])),
           "a1_sgd_max_ratio_squared": float(np.max(a1["ratio_squared"])),
           "rho_mann_sgd": float(results["mann"]["rho_sgd"])}
    if results["mann"]["rho_adagrad"] is not None:
        out["rho_mann_adagrad"] = float(results["mann"]["rho_adagrad"])
    tight = results["a1_tight"]
    out["a1_sgd_tight_max_ratio"] = float(np.max(np.maximum(np.asarray(tight["exact"]),
                                                            np.asarray(tight["sampled"]))
                                                 / np.asarray(tight["bound"])))
    for kind, s in results["a1_sweep"].items():
        for value, st in zip(s["values"], s["straddle"], strict=True):
            tag = f"{value:.0e}".replace("-", "m").replace("+", "p").replace(".", "_")
            out[f"a1_{kind}_straddle_{tag}"] = float(st)
    out["a2_max_ratio_exact"] = float(np.max(np.asarray(results["a2"]["exact"]) / np.asarray(results["a2"]["phi"])))
    for kind in _ADAPTIVE:
        out[f"a1_{kind}_max_lipschitz"] = float(np.max(a1["measured"][kind]))
        out[f"a1_{kind}_straddle_ratio"] = float(a1["straddle"][kind])
    for form in ("squared", "paper"):
        if th[f"bound_{form}"] is not None:
            out[f"theorem1_max_ratio_{form}"] = float(np.max(np.asarray(th["exact"])[1:]
                                                             / np.asarray(th[f"bound_{form}"])[1:]))
    return out


def plot(results: dict[str, Any]) -> Figure:
    fig, axes = plotting.figure(2, 3, height=8.4)
    fig.delaxes(axes[5])
    C = plotting.OKABE_ITO
    a1, ax = results["a1"], axes[0]
    taus = np.asarray(a1["taus"])
    ax.semilogy(taus, np.max(a1["bound"], axis=1), color="black", linestyle="--",
                label=r"bound $\max_i(1-\eta\mu_i)^{\tau}$")
    for c, kind in enumerate(("sgd", *_ADAPTIVE)):
        ax.semilogy(taus, np.max(a1["measured"][kind], axis=1), color=C[c], marker="o",
                    linestyle="-", label=f"{kind}: measured max ratio")
    ax.axhline(1.0, color="0.3", linestyle=":", linewidth=1.0, label="ratio = 1 (A1 needs < 1)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(r"local steps $\tau$")
    ax.set_ylabel(r"$\max\ \|O_i(x)-O_i(y)\| / \|x-y\|$ (ratio)")
    ax.set_title("Assumption 1: client maps")
    ax.text(0.03, 0.4, "pair across $(\\nabla f_0)_1 = 0$,\nhalf-width "
            f"{results['straddle_half_width']:g}:\n"
            + "\n".join(f"{k}: ratio {v:.3g}" for k, v in a1["straddle"].items()),
            transform=ax.transAxes, fontsize=6, va="top")
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    mann, ax = results["mann"], axes[1]
    for c, key in ((0, "sgd"), (1, "adagrad")):
        if mann[f"err_{key}"] is None:            # no fixed point found: nothing to measure against
            continue
        e = np.asarray(mann[f"err_{key}"])
        t = np.arange(e.size)
        ax.semilogy(t, np.maximum(e / e[0], 1e-17), color=C[c], linestyle="-", label=f"{key}: measured")
        ax.semilogy(t, mann[f"rho_{key}"] ** t, color=C[c], linestyle="--",
                    label=rf"{key}: $\rho^t$, $\rho$ = {mann[f'rho_{key}']:.3f}")
    ax.set_ylim(1e-16, 2)
    ax.set_xlabel("round t")
    ax.set_ylabel(r"$\|x_t - \tilde x\| / \|x_0 - \tilde x\|$ (ratio)")
    ax.set_title(rf"Mann iteration, $\eta_s$ = {results['server_lr']}")
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    th, ax = results["theorem1"], axes[2]
    mean, half = np.asarray(th["mc_mean"]), np.asarray(th["mc_half_width"])
    t = np.arange(mean.size)
    ax.fill_between(t, np.maximum(mean - half, 1e-12), mean + half, color=C[0], alpha=0.3,
                    label="Monte Carlo 95% band")
    ax.semilogy(t, mean, color=C[0], linestyle="-", label=f"Monte Carlo mean ({results['mc_runs']} runs)")
    ax.semilogy(t, th["exact"], color=C[2], linestyle=":", label="exact (covariance recursion)")
    for form, style in (("squared", "--"), ("paper", "-.")):
        if th[f"bound_{form}"] is not None:
            ax.semilogy(t, th[f"bound_{form}"], color="black", linestyle=style,
                        label=f"Theorem 1 bound ({form} constants)")
    ax.set_xlabel("round t")
    ax.set_ylabel(r"$E\|x_t - \tilde x\|^2$ (squared model units)")
    ax.set_title(rf"Theorem 1, $\sigma^2$ = {results['sigma2']}")
    a2 = results["a2"]
    ax.text(0.97, 0.97, "A2: max$_i$ $E\\|O_i - EO_i\\|^2 / \\phi_i$\n= "
            f"{np.max(np.asarray(a2['exact']) / np.asarray(a2['phi'])):.3f} (exact), "
            f"{np.max(np.asarray(a2['mc']) / np.asarray(a2['phi'])):.3f} (MC)",
            transform=ax.transAxes, fontsize=6, va="top", ha="right")
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    _plot_tight(results["a1_tight"], axes[3], C)
    _plot_sweep(results["a1_sweep"], axes[4], C)
    return fig


def _plot_tight(tight: dict[str, Any], ax: Any, C: Any) -> None:
    f = np.asarray(tight["factors"])
    bound, exact, sampled = (np.asarray(tight[k]) for k in ("bound", "exact", "sampled"))
    ax.plot(f, np.max(exact / bound, axis=1), color=C[0], marker="o", label="exact norm / constant")
    ax.plot(f, np.max(sampled / bound, axis=1), color=C[1], marker="s", label="sampled pairs / constant")
    plotting.ratio_axis(ax, log=False, label="Lipschitz ratio / tight constant (ratio)")
    ax.axvline(1.0, color="0.5", linestyle=":", linewidth=1.0, label=r"$\eta = 1/L_{max}$")
    ax.set_ylim(0, 1.1)
    ax.set_xlabel(r"$\eta L_{max}$ (dimensionless)")
    ax.set_title("tight A1 constant, SGD")
    ax.legend(fontsize=6, loc="lower left")


def _plot_sweep(sweep: dict[str, Any], ax: Any, C: Any) -> None:
    for c, (kind, s) in enumerate(sweep.items()):
        v = np.asarray(s["values"], dtype=float)
        x = np.where(v > 0, v, 1e-10)            # accumulator 0 drawn at 1e-10 on the log axis
        ax.loglog(x, s["straddle"], color=C[c], marker="o", label=f"{kind}: straddling pair")
        ax.loglog(x, s["random"], color=C[c], marker="s", linestyle=":", label=f"{kind}: random pairs")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1.0, label="ratio = 1 (A1 needs < 1)")
    ax.set_xlabel("AdaGrad $v_0$ / Adam eps (0 at 1e-10)")
    ax.set_ylabel(r"$\max\ \|O_i(x)-O_i(y)\| / \|x-y\|$ (ratio)")
    ax.set_title("A1, adaptive clients")
    ax.legend(fontsize=6, loc="upper right")
