"""SCAFFOLD-v1 (Karimireddy et al., arXiv:1910.06378v1): the client-drift claims of sections 4.1 (ii) and
6.1 (ii), measured on SCAFFOLD runs against a bound derived by hand, beside FedAvg.

Drift of client i at local step k of a round from server model x: ||y_{i,k} - x||^2.  The printed drift
inequalities (4.1) and (6.1) were lost in the text we have; their content as the paper describes it is
that SCAFFOLD's drift is bounded by terms that vanish at the optimum with converged controls, with no
dependence on the heterogeneity of the clients (4.1 (ii)), and that with client sampling the bound gains a
term in the control-variate error (6.1 (ii)).  We check that content with an explicit bound [derived].
With c_i* = grad f_i(x*) (so c* = mean_i c_i* = 0), exact gradients, client i's corrected step is

    y_{k+1} - x = (I - eta H_i)(y_k - x) - eta v_i,   v_i = H_i (x - x*) + (c_i* - c_i) + c,

on quadratic clients (grad f_i(y) = grad f_i(x*) + H_i (y - x*)); with q_i = ||I - eta H_i|| =
max(|1 - eta mu_i|, |1 - eta L_i|) <= 1 this gives

    ||y_{i,k} - x|| <= eta ||v_i|| sum_{j<k} q_i^j                                                   (D)

for every option, every control state and every client sampling: a bound by ||x - x*|| and the control
errors c_i - c_i* and c only (no heterogeneity term); it is attained at k = 1.  For FedAvg (c = c_i = 0)
v_i = grad f_i(x), which at x = x* is grad f_i(x*) != 0: its drift stays as large as the heterogeneity.

Checks:

* ``drift-bound`` (sec. 4.1 (ii)): full participation, options I and II, heterogeneity levels
  ``heterogeneity``; ratio = max over rounds of mean_{i,k} ||y_{i,k} - x||^2 / mean_{i,k} (bound D)^2.
* ``drift-vanishes`` (sec. 4.1 (ii), fixed point): the SCAFFOLD drift of the last round relative to the
  first, beside FedAvg's (which tends to a positive limit growing with heterogeneity); ratio = SCAFFOLD's
  last-round drift / FedAvg's last-round drift at the largest heterogeneity (holds when < 1).
* ``sampling-drift`` (sec. 6.1 (ii)): the same bound (D) with uniform sampling of S clients (option II,
  stale controls of the unsampled clients enter through c_i - c_i*); ratio as in drift-bound.
* ``lemma1`` (Lemma 1, its printed inequality lost): our deterministic form for any method whose server
  step is minus eta~ = K eta_l eta_g times the mean of the local gradients (the paper's (4.1); SCAFFOLD, as
  the controls average out, and FedAvg), f_i mu-strongly convex and beta-smooth, eta~ <= 1/(4 beta):

      ||x^+ - x*||^2 <= (1 - mu eta~/2) ||x - x*||^2 - eta~ (F(x) - F*) + 3 beta eta~ E_r,

  E_r the mean squared drift of the points where gradients are taken [derived: perturbed strong convexity
  <grad f_i(y), x - x*> >= f_i(x) - f_i(x*) + (mu/4)||x - x*||^2 - beta ||x - y||^2 and
  ||g||^2 <= 2 beta^2 E_r + 4 beta (F(x) - F*)]; ratio = max per round of left / right side, for
  SCAFFOLD and FedAvg at eta_l = ``lemma_step_fraction`` / (4 beta K).

Derivations, re-done in review (tests/experiments/test_scaffold_v1_claims.py checks them by an independent
route: local iterates from matrix powers, not gradient steps; random states, not only the run's):

* (D): grad f_i(y) = c_i* + H_i (y - x) + H_i (x - x*), so y_{k+1} - x = (I - eta H_i)(y_k - x) - eta v_i and
  y_k - x = -eta sum_{j<k} (I - eta H_i)^j v_i = -(I - (I - eta H_i)^k) H_i^{-1} v_i; the triangle inequality
  and ||(I - eta H_i)^j|| = q_i^j give (D), with equality at k = 1.  Nothing uses c = mean c_i or q_i <= 1.
* Lemma 1 form: with c = (1/N) sum_i c_i (kept by full participation from zero controls) and eta_g = 1,
  x^+ = x - eta~ g, g = (1/(K N)) sum_{i, k<K} grad f_i(y_{i,k}).  Expand
  ||x^+ - x*||^2 = ||x - x*||^2 - 2 eta~ <g, x - x*> + eta~^2 ||g||^2.
  (a) For mu-convex, beta-smooth f and any y: f(x*) >= f(y) + <grad f(y), x* - y> + (mu/2)||x* - y||^2 and
  f(x) <= f(y) + <grad f(y), x - y> + (beta/2)||x - y||^2; subtracting and using
  ||x - x*||^2 <= 2||x* - y||^2 + 2||x - y||^2 gives <grad f(y), x - x*> >= f(x) - f(x*) + (mu/4)||x - x*||^2
  - ((beta + mu)/2)||x - y||^2, and (beta + mu)/2 <= beta; averaging: <g, x - x*> >= F(x) - F* +
  (mu/4)||x - x*||^2 - beta E_r.  (b) ||g||^2 <= 2||g - grad F(x)||^2 + 2||grad F(x)||^2 <= 2 beta^2 E_r +
  4 beta (F(x) - F*) (Jensen, smoothness of each f_i, ||grad F||^2 <= 2 beta (F - F*)).  Together:
  ||x^+ - x*||^2 <= (1 - mu eta~/2)||x - x*||^2 - (2 eta~ - 4 beta eta~^2)(F(x) - F*) + (2 beta eta~ +
  2 beta^2 eta~^2) E_r, and eta~ <= 1/(4 beta) makes the coefficients at most -eta~ and (5/2) beta eta~ <= 3 beta
  eta~.  Without that step condition it can fail (test: eta~ = 1.9/beta, K = 1).

Every ratio leaves out the rounds whose right side has fallen below ``ROUNDING_FLOOR`` (1e-24) times its
first-round value: there x and the controls agree with x*, c* to about 12 digits and rounding decides.

Instance: ``random_quadratic`` clients (``constants="clients"``), equal weights, x0 = x* + a random direction
of length ``init_distance``, all controls 0 at the start.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory import plotting
from fltheory.algorithms import Scaffold
from fltheory.participation import FullParticipation, Participation, UniformSampling
from fltheory.problems.generators import random_quadratic
from fltheory.references import cite
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from ._instances import ratio_check

NAME = "scaffold_v1_claims"
TITLE = "SCAFFOLD-v1: client drift bounded by vanishing terms (sec. 4.1 (ii), 6.1 (ii)) beside FedAvg"
_PAPER = cite("SCAFFOLD-v1")
THEOREMS = [
    Theorem("drift-bound", _PAPER, "sec. 4.1 (ii): drift bounded by ||x - x*|| and control errors, no "
            "heterogeneity term (bound derived, full participation)", "eq. 4.1"),
    Theorem("drift-vanishes", _PAPER, "sec. 4.1 (ii): SCAFFOLD's drift vanishes near the optimum; FedAvg's "
            "does not", "eq. 4.1"),
    Theorem("sampling-drift", _PAPER, "sec. 6.1 (ii): with sampling the drift bound gains the control-variate "
            "error (bound derived)", "eq. 6.1"),
    Theorem("lemma1", _PAPER, "Lemma 1 (one-round progress with a drift term), deterministic form derived here, "
            "SCAFFOLD and FedAvg", "Lemma 1"),
]
QUICK: dict[str, Any] = {"n_clients": 8, "dim": 5, "L": 1.0, "mu": 0.1, "heterogeneity": [1.0, 4.0],
                         "local_steps": 5, "lr": 0.1, "rounds": 60, "sampled": 3, "init_distance": 2.0,
                         "lemma_step_fraction": 1.0}
FULL: dict[str, Any] = {**QUICK, "n_clients": 20, "dim": 20, "rounds": 300, "heterogeneity": [0.5, 2.0, 8.0]}
EXPECTED_AXES = 2


def local_iterates(fed: Any, x: np.ndarray, c: np.ndarray, C: np.ndarray, lr: float, K: int) -> np.ndarray:
    """(K, N, d) local iterates y_{i,k}, k = 1..K, of every client's corrected steps from x
    (y <- y - lr (grad f_i(y) - c_i + c), exact gradients, all clients at once)."""
    N, d = fed.n_clients, fed.dim
    Y = np.broadcast_to(x, (N, d)).copy()
    shift = c[None, :] - C
    out = np.empty((K, N, d))
    clients = np.arange(N)
    for k in range(K):
        Y -= lr * (fed.client_grad(Y, clients) + shift)
        out[k] = Y
    return out


def local_drift(fed: Any, x: np.ndarray, c: np.ndarray, C: np.ndarray, lr: float, K: int) -> np.ndarray:
    """(N, K) drifts ||y_{i,k} - x||^2, k = 1..K (see :func:`local_iterates`)."""
    return np.sum((local_iterates(fed, x, c, C, lr, K) - x) ** 2, axis=2).T


def drift_bound(fed: Any, x: np.ndarray, c: np.ndarray, C: np.ndarray, lr: float, K: int) -> np.ndarray:
    """(N, K) squared right-hand sides of (D): (lr ||v_i|| sum_{j<k} q_i^j)^2."""
    N, d = fed.n_clients, fed.dim
    xs = fed.optimum()
    c_star = fed.client_grad(np.broadcast_to(xs, (N, d)), np.arange(N))
    V = np.einsum("nij,j->ni", fed.H, x - xs) + (c_star - C) + c[None, :]
    q = np.maximum(np.abs(1 - lr * fed.client_mu), np.abs(1 - lr * fed.client_L))
    geo = np.cumsum(q[:, None] ** np.arange(K)[None, :], axis=1)            # sum_{j<k} q^j, k = 1..K
    return (lr * np.linalg.norm(V, axis=1)[:, None] * geo) ** 2


def drift_run(fed: Any, x0: np.ndarray, cfg: dict[str, Any], option: str, participation: Participation,
              rng: np.random.Generator, correction: bool = True) -> dict[str, np.ndarray]:
    """Per-round mean drift and mean squared bound of SCAFFOLD (or FedAvg: ``correction=False``, the
    controls reset to 0 before every round, SCAFFOLD-v1 sec. 3)."""
    lr, K = cfg["lr"], cfg["local_steps"]
    alg = Scaffold(lr=lr, local_steps=K, server_lr=1.0, option=option)
    state = alg.init(fed, x0, rng)
    drift, bound, dist = [], [], []
    zero_c, zero_C = np.zeros(fed.dim), np.zeros((fed.n_clients, fed.dim))
    for _ in range(cfg["rounds"]):
        if not correction:
            state = replace(state, c=zero_c, c_clients=zero_C)
        D = local_drift(fed, state.x, state.c, state.c_clients, lr, K)
        B = drift_bound(fed, state.x, state.c, state.c_clients, lr, K)
        drift.append(float(D.mean()))
        bound.append(float(B.mean()))
        dist.append(float(np.sum((state.x - fed.optimum()) ** 2)))
        state, _ = alg.round(state, fed, participation, rng)
    return {"drift": np.array(drift), "bound": np.array(bound), "dist2": np.array(dist)}


def one_round_progress(fed: Any, x0: np.ndarray, cfg: dict[str, Any], rng: np.random.Generator,
                       correction: bool = True) -> dict[str, Any]:
    """Lemma 1 in our derived deterministic form, one round at a time along a run (option II, full
    participation, eta_g = 1, eta~ = K eta_l <= 1/(4 beta)):

        ||x^+ - x*||^2 <= (1 - mu eta~/2) ||x - x*||^2 - eta~ (F(x) - F*) + 3 beta eta~ E_r,
        E_r = (1/(K N)) sum_i sum_{k<K} ||y_{i,k} - x||^2 (the points where the gradients are taken),

    for SCAFFOLD and for FedAvg (``correction=False``): both satisfy (4.1), x^+ - x = -eta~ times the
    mean of the local gradients.  Returns the per-round left and right sides."""
    K = cfg["local_steps"]
    beta, mu = float(np.max(fed.client_L)), float(np.min(fed.client_mu))
    lr = cfg["lemma_step_fraction"] / (4 * beta * K)
    eff = K * lr
    alg = Scaffold(lr=lr, local_steps=K, server_lr=1.0, option="II")
    state = alg.init(fed, x0, rng)
    xs = fed.optimum()
    hbar = np.einsum("n,nij->ij", fed.weights, fed.H)     # F(x) - F* = (x - x*)^T Hbar (x - x*) / 2, exact
    zero_c, zero_C = np.zeros(fed.dim), np.zeros((fed.n_clients, fed.dim))
    lhs, rhs = [], []
    for _ in range(cfg["rounds"]):
        if not correction:
            state = replace(state, c=zero_c, c_clients=zero_C)
        x = state.x
        Y = local_iterates(fed, x, state.c, state.c_clients, lr, K)[:-1]          # y_{i,1..K-1}
        e_r = float(np.sum((Y - x) ** 2) / (K * fed.n_clients))                    # y_{i,0} = x adds 0
        d_prev = float(np.sum((x - xs) ** 2))
        state, _ = alg.round(state, fed, None, rng)
        lhs.append(float(np.sum((state.x - xs) ** 2)))
        gap = 0.5 * float((x - xs) @ hbar @ (x - xs))      # no cancellation near x* (unlike F(x) - F(x*))
        rhs.append((1 - mu * eff / 2) * d_prev - eff * gap + 3 * beta * eff * e_r)
    return {"lhs": np.array(lhs), "rhs": np.array(rhs), "eff_lr": eff, "beta": beta, "mu": mu}


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed = int(rng.integers(0, 2**31 - 1))
    out: dict[str, Any] = {"seed": seed, "config": dict(config), "levels": {}}
    for h in progress(list(config["heterogeneity"]), desc=NAME):
        fed = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                               heterogeneity=float(h), seed=seed, constants="clients")
        u = rng.standard_normal(config["dim"])
        x0 = fed.optimum() + config["init_distance"] * u / np.linalg.norm(u)
        level: dict[str, Any] = {"x0": x0}
        for option in ("I", "II"):
            level[f"scaffold_{option}"] = drift_run(fed, x0, config, option, FullParticipation(), rng)
        level["fedavg"] = drift_run(fed, x0, config, "II", FullParticipation(), rng, correction=False)
        level["sampled"] = drift_run(fed, x0, config, "II", UniformSampling(config["sampled"]), rng)
        level["lemma1_scaffold"] = one_round_progress(fed, x0, config, rng)
        level["lemma1_fedavg"] = one_round_progress(fed, x0, config, rng, correction=False)
        xs = fed.optimum()
        c_star = fed.client_grad(np.broadcast_to(xs, (fed.n_clients, fed.dim)), np.arange(fed.n_clients))
        level["drift_at_optimum"] = float(local_drift(fed, xs, c_star.mean(axis=0), c_star, config["lr"],
                                                      config["local_steps"]).mean())
        level["fedavg_drift_at_optimum"] = float(local_drift(
            fed, xs, np.zeros(fed.dim), np.zeros_like(c_star), config["lr"], config["local_steps"]).mean())
        out["levels"][str(float(h))] = level
    return out


ROUNDING_FLOOR = 1e-24
"""Rounds whose bound (a squared distance) has fallen below this fraction of its first-round value are left
out of the ratios: the iterates then agree with x* and the controls with c* to about 12 digits, and
rounding, not the inequality, decides the ratio."""


def _ratios(lhs: Any, rhs: Any) -> np.ndarray:
    """lhs / rhs per round above the rounding floor (inf where rhs <= 0 < lhs); results may come back from
    JSON as lists."""
    left, right = np.asarray(lhs, dtype=float), np.asarray(rhs, dtype=float)
    keep = np.abs(right) >= ROUNDING_FLOOR * abs(right[0]) if right.size else right.astype(bool)
    per = np.where(right > 0, left / np.where(right > 0, right, 1.0), np.where(left > 0, np.inf, 0.0))
    return np.where(keep, per, 0.0)


def _per_round_ratio(run_: dict[str, Any]) -> np.ndarray:
    """drift / bound per round (0 where both vanish or below the rounding floor)."""
    return _ratios(run_["drift"], run_["bound"])


def _ratio(run_: dict[str, Any]) -> float:
    return float(np.max(_per_round_ratio(run_)))


def _inst(results: dict[str, Any]) -> str:
    cfg = results["config"]
    return (f"random_quadratic seed {results['seed']}, N = {cfg['n_clients']}, d = {cfg['dim']}, L = {cfg['L']}, "
            f"mu = {cfg['mu']}, K = {cfg['local_steps']}, eta_l = {cfg['lr']}, eta_g = 1")


def checks(results: dict[str, Any]) -> list[Check]:
    inst = _inst(results)
    levels = results["levels"]
    worst = max(max(_ratio(lv["scaffold_I"]), _ratio(lv["scaffold_II"])) for lv in levels.values())
    text = "; ".join(f"h = {h}: options I/II max drift/bound {_ratio(lv['scaffold_I']):.3g}/"
                     f"{_ratio(lv['scaffold_II']):.3g}" for h, lv in levels.items())
    out = [ratio_check("drift-bound", worst, text, inst)]
    top = max(levels, key=float)
    lv = levels[top]
    sc, fa = float(lv["scaffold_II"]["drift"][-1]), float(lv["fedavg"]["drift"][-1])
    ratio = sc / fa if fa > 0 else float("inf")
    text = ("; ".join(f"h = {h}: SCAFFOLD drift first/last round {v['scaffold_II']['drift'][0]:.3g}/"
                      f"{v['scaffold_II']['drift'][-1]:.3g}, FedAvg {v['fedavg']['drift'][0]:.3g}/"
                      f"{v['fedavg']['drift'][-1]:.3g}, at (x*, c*) {v['drift_at_optimum']:.3g} vs FedAvg at x* "
                      f"{v['fedavg_drift_at_optimum']:.3g}" for h, v in levels.items()))
    out.append(Check("drift-vanishes", "holds" if ratio < 1 else "violated", ratio,
                     text if ratio < 1 else f"{text}; {inst}"))
    worst_s = max(_ratio(v["sampled"]) for v in levels.values())
    text = (f"S = {results['config']['sampled']} of {results['config']['n_clients']}, option II; "
            + "; ".join(f"h = {h}: max drift/bound {_ratio(v['sampled']):.3g}, last-round drift "
                        f"{v['sampled']['drift'][-1]:.3g}" for h, v in levels.items()))
    out.append(ratio_check("sampling-drift", worst_s, text, inst))
    out.append(_lemma1_check(results, inst))
    return out


def _lemma1_ratio(side: dict[str, Any]) -> float:
    return float(np.max(_ratios(side["lhs"], side["rhs"])))


def _lemma1_check(results: dict[str, Any], inst: str) -> Check:
    levels = results["levels"]
    worst = max(max(_lemma1_ratio(v["lemma1_scaffold"]), _lemma1_ratio(v["lemma1_fedavg"]))
                for v in levels.values())
    text = "max per round ||x+ - x*||^2 / right side: " + "; ".join(
        f"h = {h}: SCAFFOLD {_lemma1_ratio(v['lemma1_scaffold']):.3g}, FedAvg {_lemma1_ratio(v['lemma1_fedavg']):.3g}"
        f" (eta~ = {v['lemma1_scaffold']['eff_lr']:.3g})" for h, v in levels.items())
    if not np.isfinite(worst):
        return Check("lemma1", "violated", None, f"a round has right side <= 0 < left side; {text}; {inst}")
    return ratio_check("lemma1", worst, text, inst)


def macros(results: dict[str, Any]) -> dict[str, float]:
    levels = results["levels"]
    top = levels[max(levels, key=float)]
    return {"scaffold_last_drift": float(top["scaffold_II"]["drift"][-1]),
            "fedavg_last_drift": float(top["fedavg"]["drift"][-1]),
            "drift_bound_ratio": max(_ratio(v["scaffold_II"]) for v in levels.values())}


def plot(results: dict[str, Any]) -> Figure:
    fig, (ax1, ax2) = plotting.figure(1, 2)
    for c, (h, lv) in enumerate(results["levels"].items()):
        color = plotting.OKABE_ITO[c % len(plotting.OKABE_ITO)]
        ax1.semilogy(np.maximum(np.asarray(lv["scaffold_II"]["drift"], dtype=float), 1e-300), color=color,
                     label=f"SCAFFOLD, h = {h}")
        ax1.semilogy(np.maximum(np.asarray(lv["fedavg"]["drift"], dtype=float), 1e-300), color=color,
                     linestyle="--", label=f"FedAvg, h = {h}")
        ax2.plot(_per_round_ratio(lv["scaffold_II"]), color=color, label=f"full, h = {h}")
        ax2.plot(_per_round_ratio(lv["sampled"]), color=color, linestyle=":", label=f"sampled, h = {h}")
    ax1.set_xlabel("round")
    ax1.set_ylabel(r"mean drift $\|y_{i,k} - x\|^2$ (model units$^2$)")
    ax1.set_title("client drift (sec. 4.1 (ii))")
    ax1.legend(fontsize=6)
    ax2.axhline(1.0, color="black", linestyle="--", linewidth=1.0)
    ax2.set_xlabel("round")
    ax2.set_ylabel("drift / derived bound (ratio)")
    ax2.set_title("bound (D), full and sampled (sec. 6.1 (ii))")
    ax2.legend(fontsize=6)
    return fig
