"""FedElasticNet with FedDyn (FedElasticNet, Algorithm 3): Lemma B.3 by exact enumeration of the client
sampling, FedDyn's theta-vs-Delta entropy comparison, and the update histograms of Figure 2.

FedElasticNet (FedElasticNet, ICLR 2023 submission):

* Lemma B.3 (App. B.2): with P of the m clients drawn uniformly without
  replacement each round and gamma_t = (1/P) sum_{k in P_t} theta_k^t,

      E[gamma_t - gamma_{t-1}] = -(1/(lambda_2 m)) sum_k grad L_k(theta~_k^t)
                                 - (lambda_1/(lambda_2 m)) sum_k sign(theta~_k^t - theta^{t-1}),

  the expectation over the sampling of round t given the state after round
  t - 1, theta~_k^t the solution client k would compute.  The left-hand side
  is computed *exactly* by running round t from one state for every one of
  the C(m, P) subsets and averaging; theta~ comes from one round with every
  client.  The proof uses eq. 11 (lambda_2 Delta~_k = g_k - grad L_k(theta~_k)
  - lambda_1 s_k, g_k the stored gradient state, s_k a subgradient of ||.||_1
  at Delta~_k) and Lemma B.2 (h^{t-1} = (1/m) sum g_k); on coordinates the l1
  term pins (Delta~_k(j) = 0) s_k(j) lies in [-1, 1], while the printed
  formula has sign(0) = 0.  Checks: ``lemma-b3`` (Algorithm 3 with the KKT
  subgradient, ``FedElasticNet(subgradient="kkt")``, against the formula with
  that subgradient: relative error / ``tol``) and ``lemma-b3-as-printed``
  (Algorithm 3 and the formula as printed, sign(0) = 0).
* Section 4 (Tables 3-4): FedDyn transmitting the local changes Delta_k
  instead of the local models theta_k has a much lower Shannon entropy (bin
  0.01).  Check ``feddyn-delta-entropy``: ratio = H(Delta) / H(theta) over all
  transmitted values of FedDyn (Algorithm 3 with lambda_1 = 0).
* Figure 2: Algorithm 3's transmitted changes are sparser than FedDyn's
  (Laplacian-like rather than Gaussian-like).  Check ``alg3-sparser``: ratio =
  non-zero fraction of Algorithm 3's changes / FedDyn's; the excess kurtosis
  of the non-zero changes and the histograms are reported.

* The other one-round inequalities of the proof (App. B.2), each given the
  state after round t - 1 with the expectation over round t's sampling
  computed exactly by the same enumeration (Algorithm 3 with the KKT
  subgradient, so the stored gradient states are the true gradients and
  C_{t-1} = (1/m) sum ||g_k - grad L_k(theta*)||^2), lambda_2 = ``proof_lambda2_over_beta``
  beta (the theorem's lambda_2 > 27 beta), beta = max L_k:
  eq. 27 E||h^t||^2 <= C_t; eq. 28 C_t <= (1 - P/m) C_{t-1} + (2 beta^2 P/m) eps_t
  + (4 beta P/m) (R(gamma_{t-1}) - R*); eq. 29 E||gamma_t - gamma_{t-1}||^2 <= eps_t;
  Lemma B.4 E||gamma_t - theta*||^2 <= ||gamma_{t-1} - theta*||^2 - (2/lambda_2)(R(gamma_{t-1}) - R*)
  + (beta/lambda_2) eps_t + E||gamma_t - gamma_{t-1}||^2 - (2 lambda_1/lambda_2) <gamma_{t-1} - theta*,
  (1/m) sum_k s_k>;
  Lemma B.5 (1 - 5 beta^2/lambda_2^2) eps_t <= (10/lambda_2^2) C_{t-1}
  + (10 beta/lambda_2^2)(R(gamma_{t-1}) - R*) + 5 lambda_1^2 d/lambda_2^2; and Theorem
  B.6 kappa_0 (R(gamma_{t-1}) - R*) <= Phi_{t-1} - E Phi_t + kappa P lambda_1^2 d/(2m)
  - (2 lambda_1/lambda_2) <gamma_{t-1} - theta*, (1/m) sum_k s_k>, Phi = ||gamma - theta*||^2
  + kappa C (the proof's form, with d; s_k the subgradient of eq. 11).  Check
  ``proof-inequalities``: ratio = the largest left / right side.

Instance: random quadratic clients (``constants="clients"``), uniform weights,
exact local solves, eps = 0; Lemma B.3 from the state after ``warmup`` rounds of
uniform sampling.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.references import cite
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.algorithms import FedElasticNet
from fltheory.algorithms import run as run_rounds
from fltheory.compression import entropy
from fltheory.participation import Participants, Participation, UniformSampling
from ._instances import random_quadratic_instance, ratio_check

NAME = "elasticnet_lemmas"
TITLE = "FedElasticNet Alg. 3: Lemma B.3 by exact enumeration, theta-vs-Delta entropy, update histograms"
_PAPER = cite("FedElasticNet")
THEOREMS = [
    Theorem("lemma-b3", _PAPER, "Lemma B.3 with the KKT subgradient (Algorithm 3, subgradient='kkt'), exact "
            "expectation over the sampling", "eqs. 23-26"),
    Theorem("lemma-b3-as-printed", _PAPER, "Lemma B.3 as printed (sign(0) = 0 in Algorithm 3 and in the "
            "formula)", "eqs. 23-26"),
    Theorem("feddyn-delta-entropy", _PAPER, "sec. 4: FedDyn sending Delta_k has lower entropy than sending "
            "theta_k", "Tables 3-4"),
    Theorem("alg3-sparser", _PAPER, "Figure 2: Algorithm 3's transmitted changes are sparser than FedDyn's",
            "Fig. 2"),
    Theorem("proof-inequalities", _PAPER,
    "eqs. 27-29, Lemma B.5 and Theorem B.6 (one round, exact expectation "
            "over the sampling, KKT subgradient)", "App. B.2"),
]
QUICK: dict[str, Any] = {
    "n_clients": 6, "dim": 8, "sampled": 3, "L": 1.0, "mu": 0.1, "heterogeneity": 1.0, "init_distance": 2.0,
    "lambda2": 1.0, "lambda1": 0.05, "warmup": 4, "tol": 1e-6,
    "hist_rounds": 20, "hist_lambda1": 0.05, "bin_width": 0.01, "proof_lambda2_over_beta": 30.0,
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 8, "dim": 30, "sampled": 4, "warmup": 10, "hist_rounds": 100}
EXPECTED_AXES = 2


class FixedSubset(Participation):
    """Exactly the given clients take part, each completing its nominal steps."""

    def __init__(self, clients: Any) -> None:
        self.clients = np.sort(np.asarray(clients, dtype=np.int64))

    def draw(self, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
        return Participants(self.clients, np.asarray(local_steps, dtype=np.int64)[self.clients])


def lemma_b3(fed: Any, x0: np.ndarray, cfg: dict[str, Any], subgradient: str,
             rng: np.random.Generator) -> dict[str, Any]:
    """Exact E[gamma_t - gamma_{t-1}] over all C(m, P) subsets against Lemma B.3's right-hand side,
    with the subgradient s_k the run uses and with sign (as printed)."""
    m, P, lam1, lam2 = fed.n_clients, cfg["sampled"], cfg["lambda1"], cfg["lambda2"]
    alg = FedElasticNet(base="feddyn", lambda1=lam1, lambda2=lam2, subgradient=subgradient)
    state = run_rounds(alg, fed, cfg["warmup"], x0=x0, participation=UniformSampling(P),
                       seed=int(rng.integers(0, 2**31 - 1))).state
    gamma_prev = state.x + state.h / lam2
    subsets = list(combinations(range(m), P))
    draws = np.random.default_rng(0)                      # exact solves draw nothing
    gammas = []
    for S in subsets:
        new, _ = alg.round(state, fed, FixedSubset(S), draws)
        gammas.append(new.x + new.h / lam2)
    lhs = np.mean(gammas, axis=0) - gamma_prev
    _, info = alg.round(state, fed, FixedSubset(range(m)), draws)
    delta = np.asarray(info.extra["local_change"])       # Delta~_k for every k
    theta = state.x + delta
    G = fed.client_grad(theta, np.arange(m))
    s_kkt = (state.grads - G - lam2 * delta) / lam1      # eq. 11's subgradient
    rhs_sign = -(G.sum(axis=0) + lam1 * np.sign(delta).sum(axis=0)) / (lam2 * m)
    rhs_kkt = -(G.sum(axis=0) + lam1 * s_kkt.sum(axis=0)) / (lam2 * m)
    scale = float(np.linalg.norm(lhs))
    return {"subsets": len(subsets), "lhs": lhs, "rhs_sign": rhs_sign, "rhs_kkt": rhs_kkt,
            "rel_err_sign": float(np.linalg.norm(lhs - rhs_sign)) / scale,
            "rel_err_kkt": float(np.linalg.norm(lhs - rhs_kkt)) / scale,
            "pinned": int(np.sum(delta == 0.0)),
            "lemma_b2_gap": float(np.linalg.norm(state.h - state.grads.mean(axis=0)))}


def proof_inequalities(fed: Any, x0: np.ndarray, cfg: dict[str, Any], rng: np.random.Generator
                       ) -> dict[str, dict[str, float]]:
    """Left and right sides of eqs. 27-29, Lemma B.5 and Theorem B.6 for one round from the state after
    ``warmup`` sampled rounds,
    every expectation over round t's sampling by enumerating the C(m, P) subsets."""
    m, P, d, lam1 = fed.n_clients, cfg["sampled"], fed.dim, cfg["lambda1"]
    beta = float(fed.client_L.max())
    lam2 = cfg["proof_lambda2_over_beta"] * beta
    alg = FedElasticNet(base="feddyn", lambda1=lam1, lambda2=lam2, subgradient="kkt")
    state = run_rounds(alg, fed, cfg["warmup"], x0=x0, participation=UniformSampling(P),
                       seed=int(rng.integers(0, 2**31 - 1))).state
    theta_star = fed.optimum()
    g_star = fed.client_grad(np.broadcast_to(theta_star, (m, d)), np.arange(m))
    r_star = float(fed.loss(theta_star))

    def C(grads: np.ndarray) -> float:
        return float(np.mean(np.sum((grads - g_star) ** 2, axis=1)))

    gamma_prev = state.x + state.h / lam2
    gap_prev = float(fed.loss(gamma_prev)) - r_star
    draws = np.random.default_rng(0)
    rows = []
    for S in combinations(range(m), P):
        new, _ = alg.round(state, fed, FixedSubset(S), draws)
        gamma = new.x + new.h / lam2
        rows.append((C(new.grads), float(new.h @ new.h), float(np.sum((gamma - gamma_prev) ** 2)),
                     float(np.sum((gamma - theta_star) ** 2))))
    EC, Eh2, Estep, Edist = (float(v) for v in np.mean(rows, axis=0))
    _, info = alg.round(state, fed, FixedSubset(range(m)), draws)
    delta = np.asarray(info.extra["local_change"])
    theta = state.x + delta
    eps_t = float(np.mean(np.sum((theta - gamma_prev) ** 2, axis=1)))
    vbar = (theta - gamma_prev).mean(axis=0)
    s_kkt = (state.grads - fed.client_grad(theta, np.arange(m)) - lam2 * delta) / lam1
    k = {"kappa": 10 * m / P / lam2 * (lam2 + beta) / (lam2 ** 2 - 25 * beta ** 2),
         "kappa_0": 2 / lam2 * (lam2 ** 2 - 25 * lam2 * beta - 50 * beta ** 2) / (lam2 ** 2 - 25 * beta ** 2)}
    C_prev = C(state.grads)
    phi_prev = float(np.sum((gamma_prev - theta_star) ** 2)) + k["kappa"] * C_prev
    sign_term = 2 * lam1 / lam2 * float((gamma_prev - theta_star) @ s_kkt.mean(axis=0))
    return {
        "eq27": {"lhs": Eh2, "rhs": EC},
        "eq28": {"lhs": EC,
        "rhs": (1 - P / m) * C_prev + 2 * beta ** 2 * P / m * eps_t + 4 * beta * P / m * gap_prev},
        "eq29": {"lhs": Estep, "rhs": eps_t,
                 # sampling P of m without replacement: E||mean_S v||^2 = ||v_bar||^2 + (m-P)/(P(m-1)) Var(v)
                 "closed_form": float(vbar @ vbar) + (m - P) / (P * (m - 1)) * (eps_t - float(vbar @ vbar))},
        "lemma_b4": {"lhs": Edist, "rhs": float(np.sum((gamma_prev - theta_star) ** 2)) - 2 / lam2 * gap_prev
                     + beta / lam2 * eps_t + Estep - sign_term},
        "lemma_b5": {"lhs": (1 - 5 * beta ** 2 / lam2 ** 2) * eps_t,
                     "rhs": (10 * C_prev + 10 * beta * gap_prev + 5 * lam1 ** 2 * d) / lam2 ** 2},
        "theorem_b6": {"lhs": k["kappa_0"] * gap_prev,
                       "rhs": phi_prev - (Edist + k["kappa"] * EC) + k["kappa"] * P * lam1 ** 2 * d / (2 * m)
                       - sign_term},
    }


def excess_kurtosis(v: np.ndarray) -> float:
    """E[(v - mean)^4] / Var^2 - 3 (0 for a Gaussian, 3 for a Laplacian)."""
    c = np.asarray(v, dtype=float) - np.mean(v)
    var = float(np.mean(c ** 2))
    return float(np.mean(c ** 4) / var ** 2 - 3.0) if var > 0 else 0.0


def transmitted(fed: Any, x0: np.ndarray, lambda1: float, cfg: dict[str, Any]) -> dict[str, Any]:
    """Every transmitted change Delta_k and local model theta_k of ``hist_rounds`` rounds of
    Algorithm 3 (full participation; lambda_1 = 0 is FedDyn)."""
    alg = FedElasticNet(base="feddyn", lambda1=lambda1, lambda2=cfg["lambda2"],
                        subgradient="kkt" if lambda1 > 0 else "sign")
    deltas, thetas = [], []

    def callback(t: int, state: Any, info: Any) -> None:
        sent = np.asarray(info.extra["sent"])
        deltas.append(sent.ravel())
        thetas.append((sent + prev[0]).ravel())
        prev[0] = state.x.copy()

    prev = [np.array(x0, dtype=float)]
    run_rounds(alg, fed, cfg["hist_rounds"], x0=x0, callback=callback)
    D, T = np.concatenate(deltas), np.concatenate(thetas)
    nz = D[D != 0.0]
    return {"delta": D, "theta": T, "entropy_delta": entropy(D, cfg["bin_width"]),
            "entropy_theta": entropy(T, cfg["bin_width"]), "nonzero_fraction": float(nz.size / D.size),
            "kurtosis": excess_kurtosis(nz) if nz.size > 3 else None}


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed, fed, x0 = random_quadratic_instance(config, rng)
    out: dict[str, Any] = {"seed": seed, "m": config["n_clients"], "P": config["sampled"], "d": config["dim"],
                           "lambda1": config["lambda1"], "lambda2": config["lambda2"], "tol": config["tol"],
                           "x0": x0, "hist_rounds": config["hist_rounds"]}
    for part in progress(["kkt", "sign", "hist", "proof"], desc=NAME):
        if part == "proof":
            out["proof"] = proof_inequalities(fed, x0, config, rng)
            out["proof_lambda2"] = config["proof_lambda2_over_beta"] * float(fed.client_L.max())
        elif part in ("kkt", "sign"):
            out[f"b3_{part}"] = lemma_b3(fed, x0, config, part, rng)
        else:
            fd = transmitted(fed, x0, 0.0, config)
            a3 = transmitted(fed, x0, config["hist_lambda1"], config)
            out["feddyn"] = {k: v for k, v in fd.items() if k not in ("delta", "theta")}
            out["alg3"] = {k: v for k, v in a3.items() if k not in ("delta", "theta")}
            edges = np.linspace(-0.5, 0.5, 41)
            out["hist_edges"] = edges
            out["hist_feddyn"] = np.histogram(fd["delta"], bins=edges)[0]
            out["hist_alg3"] = np.histogram(a3["delta"], bins=edges)[0]
    return out


def _inst(r: dict[str, Any]) -> str:
    return (f"random_quadratic seed {r['seed']}, m = {r['m']}, P = {r['P']}, d = {r['d']}, "
            f"lambda_1 = {r['lambda1']}, lambda_2 = {r['lambda2']}, x0 recorded")


def checks(results: dict[str, Any]) -> list[Check]:
    out: list[Check] = []
    tol, inst = results["tol"], _inst(results)
    for key, run_kind, err_key in (("lemma-b3", "kkt", "rel_err_kkt"), ("lemma-b3-as-printed", "sign",
                                                                        "rel_err_sign")):
        b = results[f"b3_{run_kind}"]
        ratio = b[err_key] / tol
        text = (f"{b['subsets']} subsets enumerated; ||E[gamma_t - gamma_(t-1)] - rhs|| / ||E[...]|| = "
                f"{b[err_key]:.3g} (tolerance {tol:g}); {b['pinned']} pinned coordinates; Lemma B.2 gap "
                f"||h - mean g_k|| = {b['lemma_b2_gap']:.3g}")
        out.append(ratio_check(key, ratio, text, inst))
    fd, a3 = results["feddyn"], results["alg3"]
    if fd["entropy_theta"] <= 0:
        out.append(Check("feddyn-delta-entropy", "not checkable", None, "zero entropy of the sent models"))
    else:
        ratio = fd["entropy_delta"] / fd["entropy_theta"]
        text = (f"FedDyn over {results['hist_rounds']} rounds: H(Delta) = {fd['entropy_delta']:.4g} bits, "
                f"H(theta) = {fd['entropy_theta']:.4g} bits per value (bin 0.01)")
        out.append(ratio_check("feddyn-delta-entropy", ratio, text, inst))
    ratio = a3["nonzero_fraction"] / fd["nonzero_fraction"] if fd["nonzero_fraction"] > 0 else None
    kurt = ", ".join(f"{n} {r['kurtosis']:.3g}" if r["kurtosis"] is not None else f"{n} n/a"
                     for n, r in (("FedDyn", fd), ("Alg. 3", a3)))
    text = (f"non-zero fraction of sent changes: FedDyn {fd['nonzero_fraction']:.4g}, Alg. 3 "
            f"{a3['nonzero_fraction']:.4g}; excess kurtosis of the non-zero changes: {kurt}; entropy "
            f"FedDyn {fd['entropy_delta']:.4g}, Alg. 3 {a3['entropy_delta']:.4g} bits per value")
    if ratio is None:
        out.append(Check("alg3-sparser", "not checkable", None, f"{text}: FedDyn sent no non-zero"))
    else:
        out.append(ratio_check("alg3-sparser", ratio, text, inst))
    proof = results["proof"]
    ratios = {name: (v["lhs"] / v["rhs"] if v["rhs"] > 0 else (0.0 if v["lhs"] <= 0 else float("inf")))
              for name, v in proof.items()}
    name = max(ratios, key=lambda n: ratios[n])
    text = (f"lambda_2 = {results['proof_lambda2']:.4g}; left/right: "
            + ", ".join(f"{n} {r:.4g} ({proof[n]['lhs']:.4g} vs {proof[n]['rhs']:.4g})" for n,
            r in ratios.items()))
    worst = ratios[name]
    if not np.isfinite(worst):
        out.append(Check("proof-inequalities", "violated", None,
        f"{name}: right side <= 0 < left side; {text}; {inst}"))
    else:
        out.append(ratio_check("proof-inequalities", worst, text, inst))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    return {"lemma_b_three_rel_err_kkt": float(results["b3_kkt"]["rel_err_kkt"]),
            "lemma_b_three_rel_err_printed": float(results["b3_sign"]["rel_err_sign"]),
            "feddyn_entropy_delta": float(results["feddyn"]["entropy_delta"]),
            "feddyn_entropy_theta": float(results["feddyn"]["entropy_theta"]),
            "alg_three_nonzero_fraction": float(results["alg3"]["nonzero_fraction"]),
            "feddyn_nonzero_fraction": float(results["feddyn"]["nonzero_fraction"])}


def plot(results: dict[str, Any]) -> Figure:
    fig, (ax1, ax2) = plotting.figure(1, 2)
    edges = np.asarray(results["hist_edges"])
    centres = (edges[:-1] + edges[1:]) / 2
    width = edges[1] - edges[0]
    for c, (key, label) in enumerate((("hist_feddyn", "FedDyn"), ("hist_alg3", "FedElasticNet Alg. 3"))):
        counts = np.asarray(results[key], dtype=float)
        ax1.bar(centres, counts / max(counts.sum(), 1.0), width=width, alpha=0.5,
                color=plotting.OKABE_ITO[c], label=label)
    ax1.set_yscale("log")
    ax1.set_xlabel(r"transmitted change $\Delta_k(i)$ (model units)")
    ax1.set_ylabel("fraction of entries (ratio)")
    ax1.set_title("update histograms (Fig. 2)")
    ax1.legend(fontsize=6)
    names = ["kkt run, kkt rhs", "printed run, sign rhs"]
    errs = [results["b3_kkt"]["rel_err_kkt"], results["b3_sign"]["rel_err_sign"]]
    ax2.bar(names, np.maximum(errs, 1e-17), color=plotting.OKABE_ITO[2])
    ax2.axhline(results["tol"], color="black", linestyle="--", linewidth=1.0, label="tolerance")
    ax2.set_yscale("log")
    ax2.set_ylabel("relative error of Lemma B.3 (ratio)")
    ax2.set_title(f"Lemma B.3, exact over C({results['m']}, {results['P']}) subsets")
    ax2.legend(fontsize=6)
    return fig
