"""Three remaining claims of EFL (Ma et al., arXiv:2106.09433) against exact expectations: the limit remark
after Theorem 1 (sec. 3.2), the remark after Theorem 2 (sec. 4.4) and Figure 3 (low participation).

Part 1, Theorem 1's limit (sec. 3.2: "C_tau = O(tau) ... converge as tau -> infinity when H_tau grows slower
than tau").  One random quadratic federation (every client exactly L-smooth and mu-strongly convex), gradient
noise of total variance ``sigma2`` per client, EFL with lambda = 0, no compression, plain weights, and
Theorem 1's step sizes eta_tau (``efl_theorem1(...).terms["eta"]``).  The last client is inactive (s = 0) in
the rounds t with y_t = 1 of one deterministic schedule per growth regime of H_tau = sum_{t<tau} y_t:
``complete`` (never, H = 0), ``log`` (t + 1 a power of two, H ~ log2 tau), ``sqrt`` (t + 1 a perfect square,
H ~ sqrt(tau)) and ``half`` (t odd, H ~ tau / 2).  The exact E||w_tau - w*||^2 comes from the exact affine
map of each round propagated on the first and second moments (:func:`fixed_step_moments`, closed form; the
tests hold it to ``efl_corollaries.chained_moments``, which reads the maps off ``averaging_moments``), over
``rounds`` rounds: long enough that tau E passes Theorem 1's gamma, where the bound turns down.  The bound is
evaluated on a log-spaced grid of tau (G^2 as in ``efl_corollaries``).

Checks: ``thm1-limit-C`` (C_tau <= tau c* with c* = max{gamma^2 ||w_0 - w*||^2, (16E/mu)^2 max_t
E[B_t]/S_t^2}, the per-round bound that makes C_tau = O(tau); ratio = max_tau C_tau / (tau c* (1 + 1e-12)),
the factor allowing for rounding when C_tau = tau c* exactly), ``thm1-limit-bound`` (for the sublinear
regimes the bound still falls at the end: ratio = max bound(T) / bound(T/2)) and ``thm1-limit-exact`` (the
exact error still falls at the end: ratio = the largest error over tau in [T/2, T] over the largest over
[T/4, T/2], worst sublinear regime; envelopes, since an inactive round lifts the error for a round).
Reported beside: the log-log slope of both over the last octave, the largest error / bound (Theorem 1
itself), and for ``half`` the distance of the activity-weighted optimum (the limit of a vanishing step): the
claim's condition fails there and the bound's second term H_tau J / (tau E + gamma) tends to J / (2E), not 0.

Part 2, the remark after Theorem 2 (sec. 4.4: the shift bound is small when the data are "more IID" and the
changed client owns fewer samples).  Random quadratics (``random_quadratic``, seeds drawn per instance) with
heterogeneity h (the weighted RMS distance of the client optima to the global one: h = 0 is IID in the sense
of identical optima) and client 0's weight (sample share) n_a / n; client 0 departs.  Both eq. 10 as printed
and the exact ||w* - w^*||^2 (``fltheory.theory.objective_shift``).  Checks ``thm2-remark-iid`` (ratio =
max bound(h_i) / bound(h_{i+1}) over adjacent h_i < h_{i+1}, every share and instance; <= 1 iff the bound
shrinks towards IID) and ``thm2-remark-share`` (the same over adjacent shares); the same monotonicity of the
exact shift is reported in the text.  Within one seed ``random_quadratic`` scales the client offsets x_i* - x*
by h, so along h both the bound and the shift grow exactly as h^2 (the measured slope); the share direction
rebuilds the federation (the offsets satisfy sum_i p_i H_i u_i = 0 for the new weights) and is not a scaling.

Part 3, Figure 3 (low participation: EFL, which aggregates incomplete updates, converges faster than FedAvg,
which drops stragglers).  Every round each client completes its E local steps with probability q (the
participation level) and otherwise s ~ uniform{1..E-1} steps (a straggler).  EFL aggregates every client with
the adaptive weight E p^k / s (sec. 4.2; ``fltheory.theory.moments.averaging_moments``, exact over the step
laws) and, as a variant, the plain weight p^k; FedAvg (``fltheory.algorithms.FedAvg``) aggregates only the
clients that completed all E steps, with weights renormalised over them (Bernoulli(q) participation; an empty
round keeps the model; ``exact_moments``, exact over the 2^N participation patterns).  Same constant local
rate ``lr_factor / L``, same gradient noise, same start.  Check ``fig3-low-participation``: ratio = max over
q <= ``low_participation`` and rounds t = 1..T of E[F(w_t^EFL)] - F* over E[F(w_t^FedAvg)] - F*; <= 1 iff
EFL's exact expected loss is below FedAvg's in every round at every low participation level.  The text gives,
for every q, whether EFL is below FedAvg at every round and the losses at T.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fltheory import plotting
from fltheory.algorithms import FedAvg
from fltheory.participation import Bernoulli
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory.theory import objective_shift
from fltheory.theory.bounds import efl_step_moments, efl_theorem1
from fltheory.theory.moments import AdditiveNoise, averaging_moments, exact_moments

from ._efl_instances import PAPER, dist2_from_moments, efl_step_weights, quadratic_instance, ratio_check, \
    recorded_instance_text
from ._panels import LEGEND_BELOW, cycle_color, label_panel
from .efl_corollaries import gradient_bound, theorem1_inputs

NAME = "efl_claims"
TITLE = "EFL: Theorem 1's limit, the remark after Theorem 2 and Figure 3 against exact expectations"
THEOREMS = [
    Theorem("thm1-limit-C", PAPER, "sec. 3.2: C_tau = O(tau) (C_tau <= tau max{gamma^2 ||w_0 - w*||^2, "
            "(16E/mu)^2 max_t E[B_t]/S_t^2})", "Theorem 1, sec. 3.2"),
    Theorem("thm1-limit-bound", PAPER, "sec. 3.2: with H_tau = o(tau) Theorem 1's bound tends to 0 (still falling "
            "over the last octave of the horizon)", "Theorem 1, sec. 3.2"),
    Theorem("thm1-limit-exact", PAPER, "sec. 3.2: with H_tau = o(tau) the iterates converge to w* (exact "
            "E||w_tau - w*||^2 still falling over the last octave)", "Theorem 1, sec. 3.2"),
    Theorem("thm2-remark-iid", PAPER, "sec. 4.4: the shift bound (eq. 10) shrinks as the data become more IID",
            "Theorem 2, sec. 4.4"),
    Theorem("thm2-remark-share", PAPER, "sec. 4.4: the shift bound (eq. 10) shrinks as the changed client owns "
            "fewer samples", "Theorem 2, sec. 4.4"),
    Theorem("fig3-low-participation", PAPER, "Figure 3: under low participation EFL (incomplete updates, adaptive "
            "weights) has a lower exact expected loss than FedAvg dropping stragglers", "Figure 3"),
]
QUICK: dict[str, Any] = {
    "n_clients": 3, "dim": 2, "L": 4.0, "mu": 0.5, "heterogeneity": 1.0, "init_distance": 2.0,
    "sigma2": 0.5, "local_steps": 2, "rounds": 2048, "grid": 12, "regimes": ["complete", "log", "sqrt", "half"],
    "shift_instances": 3, "shift_clients": 4, "shift_dim": 3, "shift_heterogeneity": [0.25, 0.5, 1.0, 2.0, 4.0],
    "shift_shares": [0.05, 0.1, 0.2, 0.35, 0.5],
    "fig3_local_steps": 4, "fig3_rounds": 40, "lr_factor": 0.5, "participation": [0.1, 0.2, 0.3, 0.5, 0.7, 0.9],
    "low_participation": 0.3,
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 4, "dim": 3, "rounds": 16384, "grid": 20, "shift_instances": 10,
                        "shift_dim": 5, "shift_heterogeneity": [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
                        "shift_shares": [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
                        "fig3_rounds": 80, "participation": [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9]}
EXPECTED_AXES = 3
SUBLINEAR = ("complete", "log", "sqrt")


def inactive_rounds(regime: str, T: int) -> np.ndarray:
    """y_t, t = 0..T-1, of one growth regime of H_tau = sum_{t<tau} y_t (module docstring)."""
    t = np.arange(T)
    if regime == "complete":
        return np.zeros(T, dtype=bool)
    if regime == "log":
        return ((t + 1) & t) == 0
    if regime == "sqrt":
        r = np.array([math.isqrt(int(v) + 1) for v in t])
        return r * r == t + 1
    if regime == "half":
        return (t % 2) == 1
    raise ValueError(f"unknown regime {regime!r}; expected one of complete, log, sqrt, half")


def tau_grid(T: int, n: int) -> np.ndarray:
    """Log-spaced integer taus in [1, T], always holding T/2 and T."""
    grid = np.unique(np.round(np.geomspace(1, T, n)).astype(np.int64))
    return np.unique(np.concatenate([grid, [T // 2, T]]))


def last_octave_slope(values: np.ndarray, T: int) -> float:
    """log2(values[T] / values[T/2]): the log-log slope over the last octave (values indexed by tau)."""
    return float(np.log2(values[T] / values[T // 2]))


def fixed_step_moments(fed: QuadraticFederation, eta: np.ndarray, E: int, steps: np.ndarray, sigma2: float,
                       x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact E[x_t] (T+1, d) and E[x_t x_t^T] (T+1, d, d) of EFL (lambda = 0, plain weights, no compression)
    with deterministic step counts ``steps`` (T, N) and local rates ``eta`` (T,), from x_0 = ``x0``.

    Client k (f_k(y) = 1/2 y^T H_k y - e_k^T y, gradient noise of covariance (sigma2 / d) I) runs s local steps
    y <- B y + eta e_k - eta xi with B = I - eta H_k, so y_s = A_k x + b_k + n_k with A_k = B^s,
    b_k = eta sum_{j<s} B^j e_k and Cov n_k = V_k = eta^2 (sigma2 / d) sum_{j<s} B^j B^{jT}.  The server takes
    x' = x + sum_{k: s_k > 0} p^k (y_k - x) = M x + c + n with M = I + sum p^k (A_k - I), c = sum p^k b_k and
    Cov n = sum (p^k)^2 V_k (independent clients); the moments follow mean' = M mean + c and
    second' = M second M^T + M mean c^T + c mean^T M^T + c c^T + Cov n.
    """
    N, d = fed.n_clients, fed.dim
    H, e = np.asarray(fed.H), np.asarray(fed.e)
    eye = np.eye(d)
    noise = (sigma2 / d) * eye
    active = np.where(steps > 0, fed.weights[None, :], 0.0)
    mean, second = np.array(x0, dtype=float), np.outer(x0, x0)
    means, seconds = [mean], [second]
    for t in range(steps.shape[0]):
        B = eye[None] - eta[t] * H
        A, b, V = np.broadcast_to(eye, (N, d, d)).copy(), np.zeros((N, d)), np.zeros((N, d, d))
        for j in range(int(steps[t].max())):
            go = (steps[t] > j)[:, None]
            A = np.where(go[:, :, None], B @ A, A)
            b = np.where(go, np.einsum("kij,kj->ki", B, b) + eta[t] * e, b)
            V = np.where(go[:, :, None], B @ V @ np.transpose(B, (0, 2, 1)) + eta[t] ** 2 * noise, V)
        w = active[t]
        M = eye + np.einsum("k,kij->ij", w, A - eye)
        c = w @ b
        Q = np.einsum("k,kij->ij", w ** 2, V)
        Mm = M @ mean
        second = M @ second @ M.T + np.outer(Mm, c) + np.outer(c, Mm) + np.outer(c, c) + Q
        second = 0.5 * (second + second.T)
        mean = Mm + c
        means.append(mean)
        seconds.append(second)
    return np.array(means), np.array(seconds)


def limit_part(fed: QuadraticFederation, noisy: Any, cfg: dict[str, Any], x0: np.ndarray) -> dict[str, Any]:
    N, E, T, s2 = fed.n_clients, cfg["local_steps"], cfg["rounds"], cfg["sigma2"]
    a = N - 1
    x_star, kw, init = theorem1_inputs(fed, x0, s2)
    taus = tau_grid(T, cfg["grid"])
    out: dict[str, Any] = {"taus": taus}
    for regime in cfg["regimes"]:
        y = inactive_rounds(regime, T)
        probs = np.zeros((T, N, E + 1))
        probs[:, :, E] = 1.0
        probs[y, a, E], probs[y, a, 0] = 0.0, 1.0
        mom = efl_step_moments(fed.weights, probs, E)
        eta = np.asarray(efl_theorem1(T, E=E, theta=1.0, G2=0.0, init_dist2=init, moments=mom, **kw).terms["eta"])
        steps = np.full((T, N), E)
        steps[y, a] = 0
        mean, second = fixed_step_moments(fed, eta, E, steps, s2, x0)
        exact = dist2_from_moments(x_star, mean, second)
        G2 = gradient_bound(fed, mean, second, eta, E, s2)
        res = [efl_theorem1(int(tau), E=E, theta=1.0, G2=G2, init_dist2=init, moments=mom, **kw) for tau in taus]
        last = res[-1].terms
        B, S = np.asarray(last["B"], dtype=float), np.asarray(last["S"], dtype=float)
        c_star = max(float(last["gamma"]) ** 2 * init, (16 * E / kw["mu"]) ** 2 * float(np.max(B / S ** 2)))
        share = np.ones(N)
        share[a] = 1.0 - y.mean()
        w_pi = QuadraticFederation(fed.H, fed.e, weights=fed.weights * share / (fed.weights @ share)).optimum()
        out[regime] = {"exact": exact, "bound": np.array([r.value for r in res]),
                       "C": np.array([float(r.terms["C"]) for r in res]),
                       "H": np.array([float(r.terms["H"]) for r in res]),
                       "second_term": np.array([float(r.terms["second_term"]) for r in res]),
                       "J": float(last["J"]), "gamma": float(last["gamma"]), "G2": G2, "c_star": c_star,
                       "limit": float(np.sum((w_pi - x_star) ** 2))}
    return out


def shift_part(cfg: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    N, d = cfg["shift_clients"], cfg["shift_dim"]
    hs, shares = cfg["shift_heterogeneity"], cfg["shift_shares"]
    seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=cfg["shift_instances"])]
    bound = np.zeros((len(seeds), len(hs), len(shares)))
    exact = np.zeros_like(bound)
    for i, seed in enumerate(seeds):
        for j, h in enumerate(hs):
            for k, share in enumerate(shares):
                weights = np.full(N, (1.0 - share) / (N - 1))
                weights[0] = share
                fed = random_quadratic(N, d, L=cfg["L"], mu=cfg["mu"], heterogeneity=h, seed=seed,
                                       constants="clients", weights=weights)
                res = objective_shift(fed, client=0, kind="depart")
                bound[i, j, k], exact[i, j, k] = res.value, res.measured
    return {"seeds": seeds, "heterogeneity": hs, "shares": shares, "bound": bound, "exact": exact,
            "N": N, "d": d}


def straggler_law(q: float, N: int, E: int) -> np.ndarray:
    """P(s = j), j = 0..E, per client: E steps w.p. q, else uniform on 1..E-1 (a straggler)."""
    probs = np.zeros((N, E + 1))
    probs[:, E] = q
    probs[:, 1:E] += (1.0 - q) / (E - 1)
    return probs


def figure3_part(fed: QuadraticFederation, noisy: Any, cfg: dict[str, Any], x0: np.ndarray) -> dict[str, Any]:
    N, E, T = fed.n_clients, cfg["fig3_local_steps"], cfg["fig3_rounds"]
    lr = cfg["lr_factor"] / float(fed.client_L.max())
    noise = AdditiveNoise(noisy.noise_sigma2, N, fed.dim)
    out: dict[str, Any] = {"lr": lr, "E": E, "T": T, "q": list(cfg["participation"])}
    curves: dict[str, list[np.ndarray]] = {"efl": [], "efl_plain": [], "fedavg": []}
    for q in cfg["participation"]:
        law = straggler_law(q, N, E)
        for key, weighting in (("efl", "adaptive"), ("efl_plain", "plain")):
            ex = averaging_moments(fed, T, lr=lr, local_steps=E, weights=efl_step_weights(fed.weights, E, weighting),
                                   step_pmf=law, noise=noise, x0=x0)
            curves[key].append(np.asarray(ex.loss_gap))
        fa = exact_moments(FedAvg(lr=lr, local_steps=E), noisy, T, participation=Bernoulli(q), x0=x0)
        curves["fedavg"].append(np.asarray(fa.loss_gap))
    out.update({key: np.array(v) for key, v in curves.items()})
    return out


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed, fed, x0 = quadratic_instance(config, rng)
    noisy = fed.with_gradient_noise(config["sigma2"])
    out: dict[str, Any] = {"seed": seed, "N": config["n_clients"], "d": config["dim"], "E": config["local_steps"],
                           "T": config["rounds"], "sigma2": config["sigma2"], "x0": x0,
                           "heterogeneity": config["heterogeneity"], "low_participation": config["low_participation"]}
    for name in progress(["limit", "shift", "figure3"], desc=NAME):
        if name == "limit":
            out[name] = limit_part(fed, noisy, config, x0)
        elif name == "shift":
            out[name] = shift_part(config, rng)
        else:
            out[name] = figure3_part(fed, noisy, config, x0)
    return out


def _instance(results: dict[str, Any], *details: str) -> str:
    return recorded_instance_text(results, results["E"],
                                  f"heterogeneity {results['heterogeneity']}, sigma2 = {results['sigma2']}", *details)


def _limit_checks(results: dict[str, Any]) -> list[Check]:
    r, T = results["limit"], results["T"]
    taus = np.asarray(r["taus"])
    at = {int(t): i for i, t in enumerate(taus)}
    regimes = [k for k in r if k != "taus"]
    c_ratio = max(float(np.max(np.asarray(r[g]["C"]) / (taus * r[g]["c_star"] * (1 + 1e-12)))) for g in regimes)
    lines, b_ratio, e_ratio = [], 0.0, 0.0
    for g in regimes:
        v = r[g]
        bound, exact = np.asarray(v["bound"]), np.asarray(v["exact"])
        b_half, b_end = float(bound[at[T // 2]]), float(bound[at[T]])
        e_half, e_end = float(exact[T // 4: T // 2 + 1].max()), float(exact[T // 2:].max())
        worst = float(np.max(exact[taus] / bound))
        line = (f"{g}: H_T = {float(v['H'][-1]):.0f}, C_T/T = {float(v['C'][-1]) / T:.4g} (c* = {v['c_star']:.4g}), "
                f"bound(T) = {b_end:.4g} (slope {np.log2(b_end / b_half):+.2f}), max exact over [T/2, T] {e_end:.4g} "
                f"(envelope slope {np.log2(e_end / e_half):+.2f}), largest exact/bound {worst:.3g}")
        if g in SUBLINEAR:
            b_ratio, e_ratio = max(b_ratio, b_end / b_half), max(e_ratio, e_end / e_half)
        else:
            line += (f"; H_tau ~ tau: second term H J/(tau E + gamma) = {float(v['second_term'][-1]):.4g} does not "
                     f"vanish, exact(T) vs the activity-weighted optimum's distance {v['limit']:.4g}")
        lines.append(line)
    inst = _instance(results, f"last client inactive on the regime's rounds, Theorem 1's eta, T = {T}")
    text = "; ".join(lines)
    return [ratio_check("thm1-limit-C", c_ratio, f"max_tau C_tau / (tau c*) = {c_ratio:.4g} over {regimes}", inst),
            ratio_check("thm1-limit-bound", b_ratio, f"sublinear regimes, bound(T)/bound(T/2) <= {b_ratio:.4g}; "
                        + text, inst),
            ratio_check("thm1-limit-exact", e_ratio, f"sublinear regimes, max_[T/2,T] exact / max_[T/4,T/2] exact "
                        f"<= {e_ratio:.4g}; "
                        + text, inst)]


def _monotone(values: np.ndarray, axis: int) -> tuple[float, float]:
    """(largest value_i / value_{i+1} along ``axis``, share of adjacent pairs with value_i < value_{i+1})."""
    lo = np.take(values, np.arange(values.shape[axis] - 1), axis=axis)
    hi = np.take(values, np.arange(1, values.shape[axis]), axis=axis)
    return float(np.max(lo / hi)), float(np.mean(lo < hi))


def _shift_checks(results: dict[str, Any]) -> list[Check]:
    r = results["shift"]
    bound, exact = np.asarray(r["bound"]), np.asarray(r["exact"])
    inst = (f"random_quadratic seeds {r['seeds']}, N = {r['N']}, d = {r['d']}, client 0 departs, heterogeneity "
            f"{r['heterogeneity']}, shares {r['shares']}")
    out = []
    for key, axis, what in (("thm2-remark-iid", 1, "heterogeneity"), ("thm2-remark-share", 2, "share n_a/n")):
        b_ratio, b_share = _monotone(bound, axis)
        e_ratio, e_share = _monotone(exact, axis)
        slope = np.log(np.take(bound, -1, axis=axis) / np.take(bound, 0, axis=axis))
        span = np.log(r["heterogeneity"][-1] / r["heterogeneity"][0] if axis == 1 else r["shares"][-1] / r["shares"][0])
        out.append(ratio_check(key, b_ratio, f"eq. 10 grows with the {what} in {b_share:.0%} of the adjacent pairs "
                               f"(largest bound_i/bound_(i+1) {b_ratio:.4g}; mean log-log slope end to end "
                               f"{float(np.mean(slope)) / span:.3g}); the exact shift grows in {e_share:.0%} "
                               f"(largest exact_i/exact_(i+1) {e_ratio:.4g}); largest exact/bound "
                               f"{float(np.max(exact / bound)):.3g}", inst))
    return out


def _figure3_check(results: dict[str, Any]) -> Check:
    r = results["figure3"]
    q = np.asarray(r["q"])
    efl, plain, fedavg = np.asarray(r["efl"]), np.asarray(r["efl_plain"]), np.asarray(r["fedavg"])
    ratio_t = efl[:, 1:] / fedavg[:, 1:]
    low = q <= results["low_participation"]
    per = "; ".join(f"q = {qi:g}: EFL {'below' if np.all(rt <= 1) else 'not always below'} FedAvg (largest "
                    f"ratio {float(rt.max()):.3g}), loss(T) EFL adaptive {e[-1]:.4g}, plain {p[-1]:.4g}, "
                    f"FedAvg {f[-1]:.4g}"
                    for qi, rt, e, p, f in zip(q, ratio_t, efl, plain, fedavg, strict=True))
    holds_at = [float(qi) for qi, rt in zip(q, ratio_t, strict=True) if np.all(rt <= 1)]
    ratio = float(ratio_t[low].max()) if low.any() else float("nan")
    if not low.any():
        return Check("fig3-low-participation", "not checkable", None,
                     f"no participation level <= {results['low_participation']}")
    inst = _instance(results, f"Figure 3 analogue: E = {r['E']}, eta = {r['lr']:.4g}, T = {r['T']}, "
                     f"q in {list(q)}")
    return ratio_check("fig3-low-participation", ratio,
                       f"q <= {results['low_participation']}: max_t loss_EFL/loss_FedAvg = {ratio:.4g}; EFL below "
                       f"FedAvg at every round for q in {holds_at}; {per}", inst)


def checks(results: dict[str, Any]) -> list[Check]:
    return [*_limit_checks(results), *_shift_checks(results), _figure3_check(results)]


def macros(results: dict[str, Any]) -> dict[str, float]:
    r = results["figure3"]
    ratio_t = np.asarray(r["efl"])[:, 1:] / np.asarray(r["fedavg"])[:, 1:]
    T = results["T"]
    out = {f"limit_exact_{g}": float(np.asarray(results["limit"][g]["exact"])[T])
           for g in results["limit"] if g != "taus"}
    out["fig3_levels_efl_faster"] = float(np.sum(np.all(ratio_t <= 1, axis=1)))
    return out


def plot(results: dict[str, Any]) -> Any:
    fig, axes = plotting.figure(1, 3, height=3.4)
    r, taus = results["limit"], np.asarray(results["limit"]["taus"])
    for n, g in enumerate(k for k in r if k != "taus"):
        color = cycle_color(n)
        exact = np.asarray(r[g]["exact"])
        axes[0].loglog(np.arange(1, exact.shape[0]), exact[1:], color=color, linestyle="-", label=f"{g}: exact")
        axes[0].loglog(taus, r[g]["bound"], color=color, linestyle="--", label=f"{g}: Theorem 1")
    label_panel(axes[0], r"round $\tau$", r"$E\|w_\tau - w^*\|^2$", "Thm 1 limit, by growth of $H_\\tau$",
                LEGEND_BELOW)
    s = results["shift"]
    bound, exact = np.asarray(s["bound"]), np.asarray(s["exact"])
    for k, share in enumerate(s["shares"]):
        color = cycle_color(k)
        axes[1].loglog(s["heterogeneity"], bound[0, :, k], color=color, linestyle="--", marker="o", markersize=2)
        axes[1].loglog(s["heterogeneity"], exact[0, :, k], color=color, linestyle="-", marker="o", markersize=2,
                       label=f"$n_a/n$ = {share:g}")
    axes[1].set_xticks(s["heterogeneity"], [f"{h:g}" for h in s["heterogeneity"]])
    axes[1].minorticks_off()
    label_panel(axes[1], "heterogeneity h", "shift (solid), eq. 10 (dashed)", "Thm 2 remark (1st instance)",
                LEGEND_BELOW)
    f = results["figure3"]
    for n, q in enumerate(f["q"]):
        color = cycle_color(n)
        axes[2].semilogy(np.asarray(f["efl"])[n], color=color, linestyle="-", label=f"q = {q:g}")
        axes[2].semilogy(np.asarray(f["fedavg"])[n], color=color, linestyle="--")
    label_panel(axes[2], "round t", r"$E[F(w_t)] - F^*$", "Fig. 3: EFL (solid),\nFedAvg (dashed)", LEGEND_BELOW)
    return fig
