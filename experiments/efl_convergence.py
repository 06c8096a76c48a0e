"""Monte Carlo E||w_{tau E} - w*||^2 of EFL against its Theorem 1 (EFL, eq. 7).

EFL (Ma et al.), section 4, Theorem 1: under Assumptions 1-5
(every F~_k L-smooth and mu-strongly convex, gradient noise E||g - grad||^2 <=
sigma_k^2, E||g||^2 <= G^2, aggregation weights p_tau^k <= theta p^k) and with
the decreasing step size

    eta_tau = 16 E / (mu ((tau + 1) E + gamma) E[sum_k p_tau^k s_tau^k]),

    E||w_{tau E} - w*||^2 <= C_tau / (tau E + gamma)^2 + H_tau J / (tau E + gamma).

The bound is ``fltheory.theory.bounds.efl_theorem1`` in both readings of
docs/theory/index.md#bounds (``"corrected"``: J with D_k inside its sum, s_t^k in
B_t; ``"as_printed"``: the literal J with D outside and inverted units, s_t^K
read as E).

Protocol (docs/theory/checks.md).  One random quadratic federation (every
client exactly L-smooth and mu-strongly convex, ``random_quadratic(...,
constants="clients")``) with Gaussian gradient noise of known per-client
variance sigma_k^2 (``with_gradient_noise``).  EFL (``fltheory.algorithms.EFL``)
with lambda = 0, so F~_k = F_k and D_k = F_k(w*) - F_k* is the convention of
the bounds module, runs with ``lr = 1`` and ``lr_schedule(tau) = eta_tau``
taken from the bound's own step sizes (``terms["eta"]``), i.e. exactly the
schedule of the theorem.  Variants (each a row of ``config["variants"]``):

* ``complete``: every client completes E steps, plain weights p^k;
* ``incomplete-plain`` / ``incomplete-adaptive``: s_k uniform on {1..E},
  weights p^k or the adaptive E p^k / s_k of section 4.2 (theta = E);
* ``inactive``: client k completes E steps or none (probability y_k, unequal
  across clients, so the ratio E[p s]/p^k differs and r_t = 1);
* ``sampled``: S of N clients drawn uniformly without replacement each round
  (``UniformSampling``), the others count as s_k = 0 (weight 0, weights not
  renormalised, as eq. 6 sums over all clients); P(s_k = E) = S/N;
* ``st-ef`` / ``st-ef-consistent``: complete clients, ST ternary top-k
  compression with error feedback both ways (Alg. 1-2), server copy as
  printed or with each residual counted once.  Theorem 1 is stated for EFL
  with its compression; its hypotheses say nothing about it;
* ``st-no-ef``: the same compression with error feedback switched off
  (``EFL(error_feedback=False)``: residuals discarded), the ablation that
  shows what the residual memory buys;
* ``complete-elastic``, ``incomplete-adaptive-elastic``, ``inactive-elastic``,
  ``sampled-elastic``: the same step laws with the Fisher-elastic term of
  eq. 2-3, lambda = ``config["lam"]`` > 0, no compression (theorem keys
  ``t1-corrected-elastic`` / ``t1-as-printed-elastic``).  F~_{tau,k} then
  depends on the clients' previous models; the constants follow the reading
  documented in ``fltheory.theory.bounds.efl``: w* minimises sum_k p^k f_k,
  D_k = max over the rounds t < tau of the exact E[F~_{t,k}(w*) - F~_{t,k}*]
  over the law of the anchors (``efl_elastic_constants`` on
  ``efl_elastic_moments``), mu and L the extreme eigenvalues of every
  H_k + lambda diag U (U = 0 in round 0, at most the sum of all Fisher
  diagonals), and G^2 the largest exact E||g||^2 of any local step taken in
  rounds t < tau (``efl_elastic_gradient_moments``), the convention of the
  exact instances below.  The error is the exact expectation; Monte Carlo
  replicates of the real runs give the bands and a z-score cross-check.

Constants come from the problem (``fed.constants``): mu = min_k mu_k,
L = max_k L_k, sigma_k^2 exact, D_k exact, theta = max p_tau^k / p^k over the
support of the step distribution, and G^2 = G2_max + max sigma_k^2 with
G2_max the exact maximum of max_k ||grad f_k||^2 over the ball around w* of
radius r = (largest distance of any server or client copy to w* in any
replicate) + 2 max_k ||w_k* - w*||.  For exact local gradient steps with
eta <= 1/L the local iterates stay within that radius (each step contracts
towards w_k*); with noise the radius is an empirical envelope, and
Assumption 4 only needs the expectation E||g||^2 <= G^2.

Sensitivity (a macro, not a check): the worst ratio when G^2 is taken at w*
alone, max_k ||grad f_k(w*)||^2 + max sigma_k^2 -- not an admissible constant
for the run, but it shows how much of the slack the choice of G^2 explains.

Exact counterexample instances (``COUNTEREXAMPLES``; the same instances are
strict xfails in tests/theory/test_bounds_efl.py).  Theorem 1 fails on three
one-dimensional two-client instances that meet every hypothesis; they are
reported as checks of their own theorem keys (``t1-corrected-exact``,
``t1-as-printed-exact``) so that the Monte Carlo keys still say which
variants hold:

* ``low-participation``: f_k = (x -+ 1)^2/2, each client inactive w.p. 0.8
  else E = 2 steps, w_0 = w* = 0: the drift factor of B_t is negative,
  E[B_t] < 0, C_tau = 0, H_tau = 0, so the bound is exactly 0 in both
  readings while the error is positive (error / bound is infinite, so the
  check's ratio comes from the same instance started at w_0 = 0.1, where the
  bound is positive and still violated: ``companion_w0``);
* ``first-round-noise``: f_1 = x^2 (departed, never active), f_2 = x^2/2 with
  gradient-noise variance 40, E = 1, w_0 = 1: C_tau is a max, not a sum, so
  the bound gamma^2/(E + gamma)^2 ||w_0 - w*||^2 lies below ||w_0 - w*||^2,
  and the first round's noise lifts the error above it (corrected reading;
  as printed J = 32 E mu / D is undefined, D = 0);
* ``departure``: f_k = (x -+ 4)^2/2, client 2 departed, client 1 one exact
  step, w_0 = 2: J as printed (32 E mu / D) is too small to cover the drift
  towards the remaining client; the corrected J holds.

The errors are exact, not sampled: each round is the affine map
w <- A w + b + xi of the step pattern (s_1, s_2) (``exact_scalar_efl``,
EFL with lambda = 0, plain weights, no compression), and E[w], E[w^2] are
propagated over all patterns with their probabilities.  G^2 is the exact
smallest constant of Assumption 4 over the instance's horizon: the largest
E||g_t^k||^2 = h_k^2 E(y - c_k)^2 + sigma_k^2 at any local step a client
can take.

Statistics: M replicate runs (``config["replicates"]``), each with its own
recorded seed; per round the mean and a two-sided 95 % normal confidence
interval mean +- 1.96 s / sqrt(M).  The check's ratio is mean / bound (worst
round); a violation additionally reports whether the lower confidence limit
exceeds the bound.  EFL without error feedback is not run: the library's EFL
has no option to compress without error feedback (reported, not re-implemented).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.references import cite
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.algorithms import EFL
from fltheory.algorithms import run as run_algorithm
from fltheory.errors import InvalidHyperparameterError
from fltheory.participation import (
    FixedSteps,
    FullParticipation,
    FullSteps,
    IncompleteSteps,
    Participation,
    UniformSampling,
)
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic
from fltheory.theory import BoundResult
from fltheory.theory.bounds import (
    StepMoments,
    efl_elastic_constants,
    efl_step_moments,
    efl_theorem1,
    efl_theorem1_from_constants,
)
from fltheory.theory.moments import (
    AdditiveNoise,
    averaging_moments,
    efl_elastic_gradient_moments,
    efl_elastic_moments,
    elastic_anchor_laws,
)

NAME = "efl_convergence"
TITLE = "Monte Carlo E||w - w*||^2 of EFL vs Theorem 1 (eq. 7), incomplete/inactive clients, compression"
_PAPER = cite("EFL")
THEOREMS = [
    Theorem("t1-corrected", _PAPER, "Theorem 1, corrected reading (docs/theory/index.md#bounds)", "eq. 7"),
    Theorem("t1-as-printed", _PAPER, "Theorem 1, as printed (J with D outside its sum, s^K = E)", "eq. 7"),
    Theorem("t1-corrected-exact", _PAPER,
            "Theorem 1, corrected reading, on exact two-client instances meeting its hypotheses", "eq. 7"),
    Theorem("t1-as-printed-exact", _PAPER,
            "Theorem 1, as printed, on exact two-client instances meeting its hypotheses", "eq. 7"),
    Theorem("t1-corrected-elastic", _PAPER,
            "Theorem 1, corrected reading, EFL with the Fisher-elastic term lambda > 0 (exact expectation)",
            "eq. 7"),
    Theorem("t1-as-printed-elastic", _PAPER,
            "Theorem 1, as printed, EFL with the Fisher-elastic term lambda > 0 (exact expectation)", "eq. 7"),
]
ELASTIC_KEYS = {"corrected": "t1-corrected-elastic", "as_printed": "t1-as-printed-elastic"}
READINGS = {"corrected": "t1-corrected-exact", "as_printed": "t1-as-printed-exact"}
# One-dimensional clients f_k(x) = h_k/2 (x - c_k)^2 (min value 0), EFL with lambda = 0, plain
# weights, theta = 1, no compression; step_probs[k, j] = P(s_k = j), the same every round.
# Instances and their exact errors: tests/theory/test_bounds_efl.py (strict xfails).
COUNTEREXAMPLES: dict[str, dict[str, Any]] = {
    "low-participation": {"h": [1.0, 1.0], "c": [1.0, -1.0], "weights": [0.5, 0.5], "sigma2": [0.0, 0.0],
                          "E": 2, "step_probs": [[0.8, 0.0, 0.2], [0.8, 0.0, 0.2]], "w0": 0.0,
                          "theta": 1.0, "rounds": 3,
                          # the bound is exactly 0 from w_0 = w*, so error / bound is infinite there; the same
                          # instance started at w* + 0.1 (bound > 0, still violated) gives the check a finite ratio
                          "companion_w0": 0.1,
                          "finding": "drift factor of B_t < 0 under low participation: E[B_t] < 0, bound 0"},
    "first-round-noise": {"h": [2.0, 1.0], "c": [0.0, 0.0], "weights": [0.5, 0.5], "sigma2": [0.0, 40.0],
                          "E": 1, "step_probs": [[1.0, 0.0], [0.0, 1.0]], "w0": 1.0, "theta": 1.0,
                          "rounds": 1,
                          "finding": "C_tau is a max, not a sum: first-round noise exceeds gamma^2 ||w0-w*||^2 "
                                     "/ (E + gamma)^2"},
    "departure": {"h": [1.0, 1.0], "c": [4.0, -4.0], "weights": [0.5, 0.5], "sigma2": [0.0, 0.0],
                  "E": 1, "step_probs": [[0.0, 1.0], [1.0, 0.0]], "w0": 2.0, "theta": 1.0, "rounds": 1,
                  "finding": "J as printed (32 E mu / D) too small after a client departure"},
}
VARIANTS: dict[str, dict[str, Any]] = {
    "complete": {"steps": "full", "weights": "plain", "compression": None, "server_update": "as_printed"},
    "incomplete-plain": {"steps": "incomplete", "weights": "plain", "compression": None,
                         "server_update": "as_printed"},
    "incomplete-adaptive": {"steps": "incomplete", "weights": "adaptive", "compression": None,
                            "server_update": "as_printed"},
    "inactive": {"steps": "inactive", "weights": "plain", "compression": None, "server_update": "as_printed"},
    "sampled": {"steps": "sampled", "weights": "plain", "compression": None, "server_update": "as_printed"},
    "st-ef": {"steps": "full", "weights": "plain", "compression": "st", "server_update": "as_printed"},
    "st-ef-consistent": {"steps": "full", "weights": "plain", "compression": "st",
                         "server_update": "consistent"},
    "st-no-ef": {"steps": "full", "weights": "plain", "compression": "st", "server_update": "as_printed",
                 "error_feedback": False},
    # lambda = config["lam"] > 0: the elastic term of eq. 2-3, exact expectation (no compression)
    "complete-elastic": {"steps": "full", "weights": "plain", "compression": None, "server_update": "as_printed",
                         "elastic": True},
    "incomplete-adaptive-elastic": {"steps": "incomplete", "weights": "adaptive", "compression": None,
                                    "server_update": "as_printed", "elastic": True},
    "inactive-elastic": {"steps": "inactive", "weights": "plain", "compression": None,
                         "server_update": "as_printed", "elastic": True},
    "sampled-elastic": {"steps": "sampled", "weights": "plain", "compression": None,
                        "server_update": "as_printed", "elastic": True},
}
QUICK: dict[str, Any] = {
    "n_clients": 4, "dim": 4, "L": 4.0, "mu": 1.0, "heterogeneity": 1.0,
    "sigma2": [0.5, 1.0, 1.5, 2.0],           # per-client gradient-noise variance
    "E": 3, "rounds": 12, "replicates": 40, "init_distance": 2.0,
    "inactive_prob": [0.0, 0.2, 0.4, 0.6],    # y_k of the "inactive" variant
    "q": 0.5,                                 # ST sparsity: k = floor(d q) entries
    "sampled": 2,                             # S clients per round in the "sampled" variant
    "lam": 0.5,                               # lambda of the "-elastic" variants (EFL eq. 2)
    "variants": list(VARIANTS),
    "confidence_z": 1.96,                     # two-sided 95 % normal interval
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 8, "dim": 10, "rounds": 60, "replicates": 400,
                        "sigma2": [0.5 + 0.25 * k for k in range(8)],
                        "inactive_prob": [0.1 * k for k in range(8)], "q": 0.3, "sampled": 3,
                        # the exact elastic path enumerates outcomes x reported sets with (N+1) d = 90 states:
                        # at N = 8 only the complete variant (one outcome, one set) stays within minutes
                        "variants": [v for v, sp in VARIANTS.items() if not sp.get("elastic")] + ["complete-elastic"]}
EXPECTED_AXES = 3


class _TableSteps:
    """Step distribution with a fixed per-client table P(s_k = j), j = 0..E:
    one call ``rng.random(m)``, inverse CDF per selected client."""

    def __init__(self, probs: np.ndarray) -> None:
        self.cdf = np.cumsum(probs, axis=1)
        self.cdf[:, -1] = 1.0

    def pmf(self, t: int, E: int, client: int) -> np.ndarray:
        """P(s = j), j = 0..E, of ``client`` (the exact law, for ``fltheory.theory.moments``)."""
        return np.diff(np.concatenate([[0.0], self.cdf[client]]))[: E + 1]

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray, clients: np.ndarray) -> np.ndarray:
        u = np.asarray(rng.random(clients.shape[0]))
        return (u[:, None] >= self.cdf[clients]).sum(axis=1).astype(np.int64)


class _Schedule:
    """lr_schedule(tau) = eta_tau of Theorem 1 (tau = completed rounds)."""

    def __init__(self, eta: np.ndarray) -> None:
        self.eta = np.asarray(eta, dtype=np.float64)

    def __call__(self, tau: int) -> float:
        return float(self.eta[min(tau, self.eta.shape[0] - 1)])


def _step_table(kind: str, N: int, E: int, inactive: np.ndarray, sample_share: float = 1.0) -> np.ndarray:
    """(N, E+1) table of P(s_k = j); ``sample_share`` = S/N for kind "sampled"."""
    probs = np.zeros((N, E + 1))
    if kind == "full":
        probs[:, E] = 1.0
    elif kind == "incomplete":
        probs[:, 1:] = 1.0 / E
    elif kind == "inactive":
        probs[:, 0], probs[:, E] = inactive, 1.0 - inactive
    elif kind == "sampled":
        probs[:, 0], probs[:, E] = 1.0 - sample_share, sample_share
    else:
        raise InvalidHyperparameterError(
            f"unknown step kind {kind!r}; expected full/incomplete/inactive/sampled")
    return probs


def _participation(kind: str, probs: np.ndarray, inactive: np.ndarray, S: int) -> Participation | None:
    if kind == "full":
        return None
    if kind == "sampled":
        return UniformSampling(S)
    if kind == "inactive":
        return IncompleteSteps(FullParticipation(), FullSteps(), inactive_prob=inactive)
    return IncompleteSteps(FullParticipation(), _TableSteps(probs))


def _step_law(spec: dict[str, Any], fed: Any, cfg: dict[str, Any]
              ) -> tuple[np.ndarray, Participation | None, StepMoments, float]:
    """The variant's local-step law: the (N, E+1) table of P(s_k = j), the participation realising it, the
    moments of the aggregation weights under it and theta = max(largest weight ratio, 1)."""
    N, E = fed.n_clients, cfg["E"]
    inactive = np.asarray(cfg["inactive_prob"], dtype=np.float64)
    S = int(cfg["sampled"])
    if not 1 <= S <= N:
        raise InvalidHyperparameterError(f"sampled must be in [1, N = {N}], got {S}")
    probs = _step_table(spec["steps"], N, E, inactive, S / N)
    mom = efl_step_moments(fed.weights, probs, E, weighting=spec["weights"])
    theta = max(mom.max_ratio, 1.0)
    return probs, _participation(spec["steps"], probs, inactive, S), mom, theta


def _bound_curves(out: dict[str, Any], T: int, bound_at: Callable[[int, str], BoundResult]) -> None:
    """Theorem 1's bound ``bound_at(tau, variant)`` at tau = 1..T for the "corrected" and "as_printed"
    variants into ``out``: the curves, the hypotheses unmet on the way and (corrected bound at T) gamma, J, H."""
    for variant in ("corrected", "as_printed"):
        bound: list[float | None] = []
        unmet: list[str] = []
        for tau in range(1, T + 1):
            res = bound_at(tau, variant)
            bound.append(res.value)
            unmet.extend(f"{a.name} ({a.detail})" for a in res.violated)
        out[f"bound_{variant}"] = bound
        out[f"unmet_{variant}"] = sorted(set(unmet))
        if variant == "corrected" and res.value is not None:
            out["gamma"], out["J"], out["H_final"] = res.terms["gamma"], res.terms["J"], res.terms["H"]


def _variant(name: str, spec: dict[str, Any], fed: Any, cfg: dict[str, Any], x0: np.ndarray,
             seeds: np.ndarray) -> dict[str, Any]:
    if spec.get("elastic"):
        return _elastic_variant(name, spec, fed, cfg, x0, seeds)
    E, T = cfg["E"], cfg["rounds"]
    probs, part, mom, theta = _step_law(spec, fed, cfg)
    x_star = fed.optimum()
    init_dist2 = float(np.sum((x0 - x_star) ** 2))
    consts0 = fed.constants()
    # eta_tau does not depend on G^2: take the theorem's schedule before the runs.
    pre = efl_theorem1_from_constants(consts0, T, E=E, theta=theta, weights=fed.weights,
                                      init_dist2=init_dist2, G2=0.0, moments=mom)
    if pre.terms.get("eta") is None:
        raise InvalidHyperparameterError(f"{name}: Theorem 1 step size undefined: {pre}")
    eta = np.asarray(pre.terms["eta"])
    alg = EFL(lr=1.0, local_steps=E, lam=0.0, weights=spec["weights"], theta=theta,
              compression=spec["compression"], q=cfg["q"], server_update=spec["server_update"],
              error_feedback=spec.get("error_feedback", True), lr_schedule=_Schedule(eta))
    server = np.empty((seeds.shape[0], T + 1))
    client = np.empty((seeds.shape[0], T + 1))
    for j, s in enumerate(seeds):
        hist = run_algorithm(alg, fed, T, participation=part, seed=int(s), x0=x0)
        server[j] = hist.dist2
        xc = np.array([x0] + [e["client_model"] for e in hist.extra])
        client[j] = np.sum((xc - x_star) ** 2, axis=1)
    offsets = np.linalg.norm(fed.client_optima() - x_star, axis=1)
    radius = float(np.sqrt(max(server.max(), client.max()))) + 2.0 * float(offsets.max())
    consts = fed.constants(radius=radius)
    z, M = cfg["confidence_z"], seeds.shape[0]
    out: dict[str, Any] = {"spec": spec, "theta": theta, "eta": eta, "S": np.asarray(pre.terms["S"]),
                           "radius": radius, "G2": float(consts.G2_max + consts.sigma2_clients.max()),
                           "seeds": seeds}
    for label, series in (("server", server), ("client", client)):
        mean = series.mean(axis=0)
        half = z * series.std(axis=0, ddof=1) / np.sqrt(M)
        out[f"{label}_mean"], out[f"{label}_low"], out[f"{label}_high"] = mean, mean - half, mean + half
    out["server_se"] = series_se = server.std(axis=0, ddof=1) / np.sqrt(M)
    out["exact"] = _exact_curve(spec, fed, cfg, probs, eta, theta, x0)
    if out["exact"] is not None:
        # Monte Carlo cross-check of the exact expectation: largest |MC mean - exact| in standard errors
        ex = np.asarray(out["exact"])
        zs = np.abs(server.mean(axis=0) - ex)[1:] / np.maximum(series_se[1:], 1e-300)
        out["mc_exact_max_z"] = float(zs.max())
    _bound_curves(out, T, lambda tau, variant: efl_theorem1_from_constants(
        consts, tau, E=E, theta=theta, weights=fed.weights, init_dist2=init_dist2, moments=mom, variant=variant))
    # Sensitivity (not a check): G^2 at w* alone, max_k ||grad f_k(w*)||^2 + max sigma_k^2, is no admissible
    # constant for the whole run but shows how much of the slack the choice of G^2 explains.
    at_opt = fed.constants(radius=0.0)
    out["G2_at_optimum"] = float(at_opt.G2_max + at_opt.sigma2_clients.max())
    out["bound_corrected_G2_at_optimum"] = [
        efl_theorem1_from_constants(at_opt, tau, E=E, theta=theta, weights=fed.weights, init_dist2=init_dist2,
                                    moments=mom).value for tau in range(1, T + 1)]
    return out


def _elastic_smoothness(fed: Any, lam: float) -> tuple[float, float]:
    """(mu, L) over every F~_{tau,k} and F = sum p^k F~_{tau,k} a run can meet (Assumptions 1-2):
    their Hessians are H_k + lambda diag U and Hbar + lambda diag U with U = 0 before any report
    (round 0) up to U_all = sum_i diag(I_i); adding a PSD diagonal only raises eigenvalues, so the
    extremes sit at U = 0 (mu) and U = U_all (L)."""
    N, d = fed.n_clients, fed.dim
    U_all = fed.fisher_diag(np.zeros((N, d))).sum(axis=0)
    Hbar = np.einsum("k,kij->ij", fed.weights, fed.H)
    mats = np.concatenate([fed.H, fed.H + lam * np.diag(U_all)[None], Hbar[None], (Hbar + lam * np.diag(U_all))[None]])
    eig = np.linalg.eigvalsh(mats)
    return float(eig.min()), float(eig.max())


def _elastic_variant(name: str, spec: dict[str, Any], fed: Any, cfg: dict[str, Any], x0: np.ndarray,
                     seeds: np.ndarray) -> dict[str, Any]:
    """EFL with lambda = cfg["lam"] > 0 (no compression) against Theorem 1 with the constants of the
    elastic objective (``efl_elastic_constants``: D_k = max over the rounds before tau of the exact
    E[F~_{t,k}(w*) - F~_{t,k}*], mu and L over every F~ the run meets), the exact expectation
    (``efl_elastic_moments``) and Monte Carlo replicates of the real rounds beside it."""
    E, T = cfg["E"], cfg["rounds"]
    lam = float(cfg["lam"])
    if not lam > 0:
        raise InvalidHyperparameterError(f"{name}: the elastic variants need lam > 0, got {cfg['lam']!r}")
    probs, part, mom, theta = _step_law(spec, fed, cfg)
    exact_fed = fed.exact()
    x_star = fed.optimum()
    init_dist2 = float(np.sum((x0 - x_star) ** 2))
    sig = np.asarray(fed.noise_sigma2, dtype=np.float64)
    mu_el, L_el = _elastic_smoothness(exact_fed, lam)
    # eta_tau depends on mu, L, theta and the step law only: take the theorem's schedule before the runs.
    pre = efl_theorem1(T, E=E, theta=theta, mu=mu_el, L=L_el, sigma2=sig, D=0.0, G2=0.0, weights=fed.weights,
                       init_dist2=init_dist2, moments=mom)
    if pre.terms.get("eta") is None:
        raise InvalidHyperparameterError(f"{name}: Theorem 1 step size undefined: {pre}")
    eta = np.asarray(pre.terms["eta"])
    alg = EFL(lr=1.0, local_steps=E, lam=lam, weights=spec["weights"], theta=theta, compression=None,
              lr_schedule=_Schedule(eta))
    server = np.array([run_algorithm(alg, fed, T, participation=part, seed=int(sd), x0=x0).dist2 for sd in seeds])
    ex = efl_elastic_moments(alg, fed, T, participation=part, x0=x0)
    ec = efl_elastic_constants(exact_fed, lam, elastic_anchor_laws(ex))
    # Assumption 4, the smallest constant for the rounds before tau: the largest exact E||g||^2 of any local
    # step a client takes with positive probability (g = grad F~_{t,k} + noise at the local iterate), the
    # convention of the exact instances; like D_k, a maximum over the rounds t < tau
    grads = efl_elastic_gradient_moments(alg, fed, ex)                       # (T, N, E)
    takes = probs[:, 1:][:, ::-1].cumsum(axis=1)[:, ::-1] > 0                 # P(s_k > j) > 0
    G2_rounds = np.nanmax(np.where(takes[None], grads, np.nan), axis=(1, 2))  # (T,)
    G2 = float(G2_rounds.max())
    if ec.mu < mu_el * (1 - 1e-12) or ec.L > L_el * (1 + 1e-12):
        raise InvalidHyperparameterError(
            f"{name}: the run meets mu = {ec.mu}, L = {ec.L} outside the schedule's [{mu_el}, {L_el}]")
    z, M = cfg["confidence_z"], seeds.shape[0]
    mean = server.mean(axis=0)
    se = server.std(axis=0, ddof=1) / np.sqrt(M)
    out: dict[str, Any] = {"spec": spec, "lam": lam, "theta": theta, "eta": eta, "S": np.asarray(pre.terms["S"]),
                           "radius": None, "G2": G2, "seeds": seeds, "mu_elastic": mu_el, "L_elastic": L_el,
                           "D_rounds": ec.D, "D_k_elastic": ec.D[:T].max(axis=0),
                           "D_k_lambda0": ec.D[0], "exact": [float(v) for v in ex.dist2], "G2_rounds": G2_rounds,
                           "server_se": se}
    for label in ("server", "client"):                # no compression: the client copy is the server model
        out[f"{label}_mean"], out[f"{label}_low"], out[f"{label}_high"] = mean, mean - z * se, mean + z * se
    out["mc_exact_max_z"] = float((np.abs(mean - ex.dist2)[1:] / np.maximum(se[1:], 1e-300)).max())
    _bound_curves(out, T, lambda tau, variant: efl_theorem1(
        tau, E=E, theta=theta, mu=mu_el, L=L_el, sigma2=sig, D=ec.D[:tau].max(axis=0),
        G2=float(G2_rounds[:tau].max()), weights=fed.weights, init_dist2=init_dist2, moments=mom, variant=variant))
    # sensitivity (not a check): G^2 at w* with the anchors at w* (elastic gradient 0 there)
    at_opt = fed.constants(radius=0.0)
    out["G2_at_optimum"] = float(at_opt.G2_max + sig.max())
    out["bound_corrected_G2_at_optimum"] = [
        efl_theorem1(tau, E=E, theta=theta, mu=mu_el, L=L_el, sigma2=sig, D=ec.D[:tau].max(axis=0),
                     G2=out["G2_at_optimum"], weights=fed.weights, init_dist2=init_dist2, moments=mom).value
        for tau in range(1, T + 1)]
    return out


def _exact_curve(spec: dict[str, Any], fed: Any, cfg: dict[str, Any], probs: np.ndarray, eta: np.ndarray,
                 theta: float, x0: np.ndarray) -> list[float] | None:
    """Exact E||w_tau - w*||^2, tau = 0..T, of an uncompressed variant (None with compression: ST
    top-k is not affine, that variant stays Monte Carlo).  EFL with lambda = 0 and no compression
    is w <- w + sum_k p_tau^k (y_k - w) with independent per-client step counts (or uniform
    sampling of S clients): ``fltheory.theory.moments.averaging_moments``."""
    if spec["compression"] is not None:
        return None
    N, E, T = fed.n_clients, cfg["E"], cfg["rounds"]
    p = fed.weights
    s = np.arange(E + 1)
    ratio = np.ones(E + 1) if spec["weights"] == "plain" else E / np.maximum(s, 1)
    w = np.where(s[None, :] > 0, p[:, None] * np.minimum(ratio, theta)[None, :], 0.0)
    noise = AdditiveNoise(fed.noise_sigma2, N, fed.dim)
    if spec["steps"] == "sampled":
        ex = averaging_moments(fed.exact(), T, lr=eta[:T], local_steps=E, weights=w, sampled=int(cfg["sampled"]),
                               noise=noise, x0=x0)
    else:
        ex = averaging_moments(fed.exact(), T, lr=eta[:T], local_steps=E, weights=w, step_pmf=probs,
                               noise=noise, x0=x0)
    return [float(v) for v in ex.dist2]


def exact_scalar_efl(h: Any, c: Any, weights: Any, sigma2: Any, step_probs: Any, eta: Any,
                     w0: float) -> dict[str, Any]:
    """Exact E[w_tau] and E(w_tau - w*)^2 of EFL on one-dimensional quadratic clients.

    Clients f_k(x) = h_k/2 (x - c_k)^2 with stochastic gradients h_k (y - c_k) + xi, E xi = 0,
    E xi^2 = sigma_k^2, independent; EFL (EFL Alg. 1 / eq. 6) with lambda = 0, plain weights
    and no compression: in round t client k takes s_t^k local steps y <- y - eta_t g (s_t^k
    drawn from ``step_probs[k]``, independently across clients and rounds, independent of the
    noise), and the server sets w_{t+1} = w_t + sum_k p_t^k (y_k - w_t) with p_t^k = p^k if
    s_t^k > 0 else 0.  Given the pattern s, y_k - c_k = a_k (w_t - c_k) + noise with
    a_k = (1 - eta_t h_k)^{s_k} and noise variance v_k = eta_t^2 sigma_k^2 sum_{j<s_k}
    (1 - eta_t h_k)^{2j}, so w_{t+1} = A w_t + b + xi with A = 1 - sum_k p_t^k (1 - a_k),
    b = sum_k p_t^k (1 - a_k) c_k, Var xi = sum_k (p_t^k)^2 v_k; then
    E w_{t+1} = E[A] E w_t + E[b] and E w_{t+1}^2 = E[A^2] E w_t^2 + 2 E[A b] E w_t + E[b^2] + E[Var xi]
    (pattern expectations over all (E+1)^N patterns at once).

    Returns ``mean`` and ``error`` (E(w_tau - w*)^2) for tau = 1..T, ``w_star``
    (minimiser of F = sum_k p^k f_k), ``D`` (D_k = f_k(w*)) and ``G2``: the smallest constant of
    Assumption 4 over the T rounds, max over t, k and local steps j < s that client k takes with
    positive probability of E g^2 = h_k^2 [(1 - eta_t h_k)^{2j} E(w_t - c_k)^2
    + eta_t^2 sigma_k^2 sum_{i<j} (1 - eta_t h_k)^{2i}] + sigma_k^2.
    """
    h, c, p, sig = (np.asarray(v, dtype=np.float64) for v in (h, c, weights, sigma2))
    q = np.asarray(step_probs, dtype=np.float64)
    eta = np.asarray(eta, dtype=np.float64)
    N, E = h.shape[0], q.shape[1] - 1
    if not (c.shape == p.shape == sig.shape == (N,) and q.shape == (N, E + 1) and eta.ndim == 1):
        raise InvalidHyperparameterError(
            f"h, c, weights, sigma2 need shape ({N},), step_probs ({N}, E+1), eta 1-D; got {c.shape}, "
            f"{p.shape}, {sig.shape}, {q.shape}, {eta.shape}")
    if np.any(h <= 0) or np.any(sig < 0) or np.any(q < 0) or np.any(np.abs(q.sum(axis=1) - 1) > 1e-12):
        raise InvalidHyperparameterError(
            f"need h_k > 0, sigma_k^2 >= 0 and probability rows; got h = {h}, sigma2 = {sig}, step_probs = {q}")
    pats = np.stack(np.meshgrid(*[np.arange(E + 1)] * N, indexing="ij"), axis=-1).reshape(-1, N)  # (P, N)
    prob = np.prod(q[np.arange(N), pats], axis=1)                                                  # (P,)
    pt = np.where(pats > 0, p, 0.0)
    j = np.arange(E)
    takes = q[:, 1:][:, ::-1].cumsum(axis=1)[:, ::-1] > 0            # (N, E): P(s_k > j) > 0
    w_star = float(np.sum(p * h * c) / np.sum(p * h))
    m, M, G2 = float(w0), float(w0) ** 2, 0.0
    means, errors = [], []
    for e in eta:                                                     # rounds: the recursion itself
        r = 1.0 - e * h                                               # (N,)
        dev2 = M - 2 * c * m + c ** 2                                 # E(w_t - c_k)^2
        noise_j = e ** 2 * sig[:, None] * np.cumsum(np.concatenate(
            [np.zeros((N, 1)), (r[:, None] ** (2 * j[None, :]))[:, :-1]], axis=1), axis=1)   # (N, E)
        g2 = h[:, None] ** 2 * (r[:, None] ** (2 * j) * dev2[:, None] + noise_j) + sig[:, None]
        G2 = max(G2, float(np.max(np.where(takes, g2, 0.0))))
        a = r ** pats                                                 # (P, N)
        var = e ** 2 * sig * np.where(np.abs(r ** 2 - 1) > 1e-15,
                                      (1 - r ** (2 * pats)) / np.where(np.abs(r ** 2 - 1) > 1e-15,
                                                                       1 - r ** 2, 1.0), pats)
        A = 1.0 - np.sum(pt * (1 - a), axis=1)
        b = np.sum(pt * (1 - a) * c, axis=1)
        V = np.sum(pt ** 2 * var, axis=1)
        m, M = (float(prob @ A * m + prob @ b),
                float(prob @ A ** 2 * M + 2 * (prob @ (A * b)) * m + prob @ b ** 2 + prob @ V))
        means.append(m)
        errors.append(M - 2 * w_star * m + w_star ** 2)
    return {"mean": means, "error": errors, "w_star": w_star, "D": (h / 2 * (w_star - c) ** 2).tolist(),
            "G2": G2}


def _counterexample(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Exact error and Theorem 1 (both readings) per round of one COUNTEREXAMPLES instance."""
    h = np.asarray(spec["h"], dtype=np.float64)
    T, E = spec["rounds"], spec["E"]
    base = {"E": E, "theta": spec["theta"], "mu": float(h.min()), "L": float(h.max()),
            "sigma2": spec["sigma2"], "weights": spec["weights"], "step_probs": spec["step_probs"]}
    # eta_t of the theorem does not depend on G^2, D_k or the reading: take it first.
    eta = efl_theorem1(T, D=0.0, G2=0.0, init_dist2=0.0, **base).terms.get("eta")
    if eta is None:
        raise InvalidHyperparameterError(f"{name}: Theorem 1 step size undefined for {spec}")
    ex = exact_scalar_efl(spec["h"], spec["c"], spec["weights"], spec["sigma2"], spec["step_probs"], eta,
                          spec["w0"])
    init_dist2 = (spec["w0"] - ex["w_star"]) ** 2
    out: dict[str, Any] = {**ex, "eta": eta, "init_dist2": init_dist2, "finding": spec["finding"],
                           "spec": {k: v for k, v in spec.items() if k not in ("finding", "companion_w0")},
                           "companion": None}
    if spec.get("companion_w0") is not None:
        twin = {k: v for k, v in spec.items() if k != "companion_w0"}
        out["companion"] = _counterexample(f"{name} from w_0 = {spec['companion_w0']}",
                                           {**twin, "w0": spec["companion_w0"]})
    for reading in READINGS:
        vals: list[float | None] = []
        unmet: list[str] = []
        B = None
        for tau in range(1, T + 1):
            res = efl_theorem1(tau, D=ex["D"], G2=ex["G2"], init_dist2=init_dist2, variant=reading, **base)
            vals.append(res.value)
            unmet.extend(f"{a.name} ({a.detail})" for a in res.violated)
            B = res.terms.get("B", B)
        out[f"bound_{reading}"] = vals
        out[f"unmet_{reading}"] = sorted(set(unmet))
        out[f"B_{reading}"] = None if B is None else np.asarray(B, dtype=float).tolist()
    return out


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    """Build the instance, run every variant M times, evaluate both bound readings per round."""
    N, d = config["n_clients"], config["dim"]
    for key in ("sigma2", "inactive_prob"):
        if len(config[key]) != N:
            raise InvalidHyperparameterError(f"{key} needs {N} entries (one per client), got {config[key]}")
    fed_seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(N, d, L=config["L"], mu=config["mu"], heterogeneity=config["heterogeneity"],
                           seed=fed_seed, constants="clients").with_gradient_noise(config["sigma2"])
    direction = rng.standard_normal(d)
    x0 = fed.optimum() + config["init_distance"] * direction / np.linalg.norm(direction)
    c = fed.constants()
    out: dict[str, Any] = {"fed_seed": fed_seed, "x0": x0, "x_star": fed.optimum(),
                           "mu": float(c.client_mu.min()), "L": float(c.client_L.max()),
                           "sigma2": list(config["sigma2"]), "D_k": c.D_k, "E": config["E"],
                           "rounds": config["rounds"], "replicates": config["replicates"],
                           "confidence_z": config["confidence_z"], "n_clients": N, "dim": d,
                           "variants": list(config["variants"]), "runs": {}}
    for name in progress(list(config["variants"]), desc=NAME):
        if name not in VARIANTS:
            raise InvalidHyperparameterError(f"unknown variant {name!r}; expected one of {list(VARIANTS)}")
        seeds = rng.integers(0, 2**31 - 1, size=config["replicates"])
        out["runs"][name] = _variant(name, VARIANTS[name], fed, config, x0, seeds)
    out["counterexamples"] = {name: _counterexample(name, spec) for name, spec in COUNTEREXAMPLES.items()}
    out["elastic_counterexample"] = elastic_first_round_noise(float(config["lam"]))
    return out


def elastic_first_round_noise(lam: float) -> dict[str, Any]:
    """The ``first-round-noise`` instance run with the elastic term lambda > 0, through the lambda > 0
    pipeline (``efl_elastic_moments``, ``efl_elastic_constants``, ``efl_elastic_gradient_moments``):
    f_1 = x^2 (departed: s = 0 always), f_2 = x^2/2 with gradient noise of variance 40, p = (1/2, 1/2),
    E = 1, plain weights, theta = 1, w_0 = 1.  Nobody has reported before round 0 (U = 0), so the first
    round does not see lambda, and Theorem 1 (corrected reading) fails at tau = 1 exactly as with
    lambda = 0: mu = 1, L = 2 (the F~ of round 0 are f_1, f_2), D_k = 0, G^2 = 41."""
    spec = COUNTEREXAMPLES["first-round-noise"]
    h = np.asarray(spec["h"], dtype=np.float64)
    fed = QuadraticFederation(h[:, None, None], np.zeros((2, 1)), weights=np.asarray(spec["weights"])) \
        .with_gradient_noise(spec["sigma2"])
    base = {"E": 1, "theta": 1.0, "sigma2": spec["sigma2"], "weights": spec["weights"],
            "step_probs": spec["step_probs"], "init_dist2": (spec["w0"] - 0.0) ** 2}
    mu, L = float(h.min()), float(h.max())                    # round 0: U = 0, F~_k = f_k
    eta = np.asarray(efl_theorem1(1, mu=mu, L=L, D=0.0, G2=0.0, **base).terms["eta"])
    alg = EFL(lr=1.0, local_steps=1, lam=lam, compression=None, theta=1.0, lr_schedule=_Schedule(eta))
    part = IncompleteSteps(FullParticipation(), FixedSteps(np.array([0, 1])))
    ex = efl_elastic_moments(alg, fed, 1, participation=part, x0=np.array([spec["w0"]]))
    ec = efl_elastic_constants(fed.exact(), lam, elastic_anchor_laws(ex))
    G2 = float(np.nanmax(efl_elastic_gradient_moments(alg, fed, ex)[0, 1]))
    res = efl_theorem1(1, mu=mu, L=L, D=ec.D[0], G2=G2, variant="corrected", **base)
    return {"lam": lam, "error": float(ex.dist2[1]), "bound": res.value, "D": ec.D[0].tolist(), "G2": G2,
            "eta": eta.tolist(), "mu": mu, "L": L}


def _ratios(r: dict[str, Any], variant: str, key: str | None = None) -> list[float | None]:
    """measured / bound per round tau = 1..T (None where the bound is undefined); measured is the
    exact expectation where the variant has one, else the Monte Carlo mean."""
    if key is None:
        key = "exact" if r.get("exact") is not None else "server_mean"
    return [None if b is None or b <= 0 else float(m) / b
            for m, b in zip(r[key][1:], r[f"bound_{variant}"])]


def checks(results: dict[str, Any]) -> list[Check]:
    """Per (reading, variant): worst mean/bound over rounds; violated if > 1 (with the CI)."""
    inst = (f"random_quadratic seed {results['fed_seed']}, N = {results['n_clients']}, d = {results['dim']}, "
            f"mu = {results['mu']:.4g}, L = {results['L']:.4g}, E = {results['E']}, "
            f"sigma_k^2 = {results['sigma2']}, M = {results['replicates']} replicates")
    out: list[Check] = []
    for base_key, variant in (("t1-corrected", "corrected"), ("t1-as-printed", "as_printed")):
        for name in results["variants"]:
            r = results["runs"][name]
            key = ELASTIC_KEYS[variant] if r.get("lam") else base_key
            ratios = _ratios(r, variant)
            valid = [(i, x) for i, x in enumerate(ratios) if x is not None]
            if not valid:
                out.append(Check(key, "not checkable", None,
                                 f"{name}: bound undefined: {'; '.join(r[f'unmet_{variant}']) or 'no value'}"))
                continue
            i, worst = max(valid, key=lambda p: p[1])
            tau = i + 1
            b = r[f"bound_{variant}"][i]
            consts = f"theta = {r['theta']:.3g}, G^2 = {r['G2']:.4g} (radius {r['radius']:.4g})" \
                if r.get("radius") is not None else \
                f"theta = {r['theta']:.3g}, G^2 = {r['G2']:.4g} (exact largest E||g||^2 of the run)"
            if r.get("lam"):
                consts += (f"; lambda = {r['lam']:g}: D_k = max_t E[F~_(t,k)(w*) - F~_(t,k)*] = "
                           f"{[round(float(v), 5) for v in r['D_k_elastic']]} (round 0, U = 0: "
                           f"{[round(float(v), 5) for v in r['D_k_lambda0']]}), mu = {r['mu_elastic']:.4g}, "
                           f"L = {r['L_elastic']:.4g} over every F~ the run meets")
            if r.get("exact") is not None:
                how = (f"exact E||w-w*||^2 = {r['exact'][tau]:.6g} (computed, not sampled); Monte Carlo "
                       f"cross-check: max |MC mean - exact| = {r['mc_exact_max_z']:.2f} standard errors")
                text = (f"{'FINDING: ' if worst > 1.0 else ''}{name}, round {tau}: {how}; bound {b:.6g}; "
                        f"{consts}; {inst}")
                out.append(Check(key, "violated", worst, text) if worst > 1.0 else Check(key, "holds", worst, text))
                continue
            mc = "Monte Carlo only (ST compression is not affine: no exact expectation)"
            if worst > 1.0:
                low = r["server_low"][tau]
                sig = "significant (lower 95% limit above bound)" if low > b else "within the 95% CI"
                out.append(Check(key, "violated", worst,
                                 f"{name}, round {tau}: {mc}: mean E||w-w*||^2 = {r['server_mean'][tau]:.6g} > "
                                 f"bound {b:.6g} ({sig}; CI [{low:.4g}, {r['server_high'][tau]:.4g}]); "
                                 f"{consts}; {inst}"))
            else:
                out.append(Check(key, "holds", worst,
                                 f"{name}: {mc}: worst round {tau} of {len(ratios)}, upper 95% limit / bound = "
                                 f"{r['server_high'][tau] / b:.3g}; {consts}"))
    out.extend(_counterexample_checks(results))
    cx = results.get("elastic_counterexample")
    if cx is not None and cx["bound"] is not None:
        text = (f"first-round-noise with lambda = {cx['lam']:g}: exact E||w_1 - w*||^2 = {cx['error']:.6g} vs bound "
                f"{cx['bound']:.6g} (corrected reading); f_1 = x^2 (departed), f_2 = x^2/2 with noise variance 40, "
                f"p = (1/2, 1/2), E = 1, theta = 1, w_0 = 1, mu = {cx['mu']:g}, L = {cx['L']:g}, D_k = {cx['D']} "
                f"(exact, elastic objective of round 0), G^2 = {cx['G2']:.6g} (exact E||g||^2); nobody has reported "
                "before round 0 (U = 0), so lambda does not act in the first round and the lambda = 0 failure "
                "(C_tau a max, not a sum) carries over")
        ratio = cx["error"] / cx["bound"]
        out.append(Check("t1-corrected-elastic", "violated" if ratio > 1 else "holds", ratio,
                         ("FINDING: " if ratio > 1 else "") + text))
    return out


def _counterexample_worst(r: dict[str, Any], reading: str) -> tuple[int, float, float] | None:
    """(tau, exact error, bound) at the round with the smallest bound / error (None: bound undefined)."""
    rows = [(tau, err, b) for tau, (err, b) in enumerate(zip(r["error"], r[f"bound_{reading}"]), start=1)
            if b is not None]
    return min(rows, key=lambda x: x[2] / x[1]) if rows else None


def _counterexample_checks(results: dict[str, Any]) -> list[Check]:
    """One check per (exact instance, reading): violated when the exact error exceeds the bound at
    some round; ratio = error / bound (None when the bound is exactly 0: the ratio is infinite)."""
    out: list[Check] = []
    for name, r in results["counterexamples"].items():
        sp = r["spec"]
        inst = (f"{name}: f_k = h_k/2 (x - c_k)^2, h = {sp['h']}, c = {sp['c']}, p = {sp['weights']}, "
                f"sigma_k^2 = {sp['sigma2']}, E = {sp['E']}, P(s_k = j) = {sp['step_probs']}, plain weights, "
                f"theta = {sp['theta']}, lambda = 0, w_0 = {sp['w0']}, w* = {r['w_star']:.6g}, D_k = "
                f"{[round(d, 6) for d in r['D']]}, G^2 = {r['G2']:.6g} (exact max E||g||^2), theorem's "
                f"eta_t = {[float(f'{x:.6g}') for x in r['eta']]}")
        for reading, key in READINGS.items():
            worst = _counterexample_worst(r, reading)
            if worst is None:
                out.append(Check(key, "not checkable", None,
                                 f"{name}: bound undefined: {'; '.join(r[f'unmet_{reading}']) or 'no value'}"))
                continue
            tau, err, b = worst
            ratio = err / b if b > 0 else None
            B = r[f"B_{reading}"]
            text = (f"round {tau}: exact E||w - w*||^2 = {err:.6g} vs bound {b:.6g} "
                    f"(E[B_t] = {[round(x, 6) for x in B] if B is not None else None}); {inst}")
            twin = r.get("companion")
            if ratio is None and twin is not None and (tw := _counterexample_worst(twin, reading)) is not None \
                    and tw[2] > 0:
                ratio = tw[1] / tw[2]
                text += (f"; ratio from the same instance started at w_0 = {twin['spec']['w0']} (bound > 0): "
                         f"round {tw[0]}: exact {tw[1]:.6g} vs bound {tw[2]:.6g}, G^2 = {twin['G2']:.6g}")
            if err > b:
                why = "" if b > 0 else " (bound exactly 0 from w_0 = w*: error / bound infinite there)"
                out.append(Check(key, "violated", ratio, f"FINDING ({r['finding']}){why}: {text}"))
            else:
                out.append(Check(key, "holds", ratio, text))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    """Worst mean/bound per variant and reading, and the final-round ratio."""
    out: dict[str, float] = {}
    for name in results["variants"]:
        stem = name.replace("-", "_")
        for variant in ("corrected", "as_printed"):
            vals = [x for x in _ratios(results["runs"][name], variant) if x is not None]
            if vals:
                out[f"{stem}_{variant}_worst_ratio"] = max(vals)
                out[f"{stem}_{variant}_final_ratio"] = vals[-1]
        r = results["runs"][name]
        sens = [float(mm) / b for mm, b in zip(r["server_mean"][1:], r["bound_corrected_G2_at_optimum"])
                if b is not None and b > 0]
        if sens:
            out[f"{stem}_worst_ratio_G2_at_optimum"] = max(sens)
    for name, r in results.get("counterexamples", {}).items():
        stem = "cx_" + name.replace("-", "_")
        for reading in READINGS:
            worst = _counterexample_worst(r, reading)
            if worst is None:
                continue
            _tau, err, b = worst
            out[f"{stem}_{reading}_exact_error"] = err
            out[f"{stem}_{reading}_bound"] = b
            if b > 0:
                out[f"{stem}_{reading}_ratio"] = err / b
            twin = r.get("companion")
            if twin is not None and (tw := _counterexample_worst(twin, reading)) is not None and tw[2] > 0:
                out[f"{stem}_offset_start_{reading}_ratio"] = tw[1] / tw[2]
    cx = results.get("elastic_counterexample")
    if cx is not None and cx["bound"]:
        out["cx_elastic_first_round_noise_exact_error"] = cx["error"]
        out["cx_elastic_first_round_noise_bound"] = cx["bound"]
        out["cx_elastic_first_round_noise_ratio"] = cx["error"] / cx["bound"]
    return out


def plot(results: dict[str, Any]) -> Figure:
    """(a) exact E||w - w*||^2 (solid; Monte Carlo mean dash-dot for the compressed variants, which have
    no exact expectation) with the Monte Carlo 95% bands and the corrected bound (dashed) per variant;
    (b) exact (or MC) / bound per round, corrected (solid) and as printed (dotted); (c) the exact
    instances: exact / bound, above 1 = violated."""
    fig, (ax, axr, axc) = plotting.figure(1, 3, height=4.0)
    rounds = np.arange(results["rounds"] + 1)
    for c, name in enumerate(results["variants"]):
        r = results["runs"][name]
        colour = plotting.OKABE_ITO[c % len(plotting.OKABE_ITO)]
        if r.get("exact") is not None:
            ax.plot(rounds, r["exact"], color=colour, linestyle="-", label=f"{name} (exact)")
        else:
            ax.plot(rounds, r["server_mean"], color=colour, linestyle="-.", label=f"{name} (MC mean)")
        ax.fill_between(rounds, np.maximum(r["server_low"], 1e-300), r["server_high"], color=colour, alpha=0.2,
                        linewidth=0)
        bound = [np.nan if b is None else b for b in r["bound_corrected"]]
        ax.plot(rounds[1:], bound, color=colour, linestyle="--", linewidth=1.0)
        for variant, style in (("corrected", "-"), ("as_printed", ":")):
            y = [np.nan if x is None else x for x in _ratios(r, variant)]
            axr.plot(rounds[1:], y, color=colour, linestyle=style, marker="o" if style == "-" else None,
                     markersize=3)
    ax.plot([], [], color="grey", linestyle="--", label="Theorem 1 bound (corrected)")
    ax.fill_between([], [], [], color="grey", alpha=0.2, label=f"MC 95% band (M = {results['replicates']})")
    ax.set_yscale("log")
    ax.set_xlabel(r"round $\tau$")
    ax.set_ylabel(r"$E\|w_{\tau E} - w^*\|^2$")
    ax.set_title("(a) EFL: error and bound", fontsize=8)
    plotting.ratio_axis(axr, label="exact / bound")
    axr.plot([], [], color="grey", linestyle="-", marker="o", markersize=3, label="corrected reading")
    axr.plot([], [], color="grey", linestyle=":", label="as printed")
    axr.set_xlabel(r"round $\tau$")
    axr.set_title("(b) tightness of eq. 7", fontsize=8)
    axr.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=6)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=7)
    _plot_counterexamples(axc, results)
    fig.suptitle(_headline(results), fontsize=7)
    return fig


def _headline(results: dict[str, Any]) -> str:
    """Which variants hold per reading (exact expectation; ST variants Monte Carlo), and which exact
    instances violate it."""
    parts = []
    for reading, label in (("corrected", "corrected"), ("as_printed", "as printed")):
        held = [n for n in results["variants"]
                if all(x is not None and x <= 1 for x in _ratios(results["runs"][n], reading))]
        rest = [n for n in results["variants"] if n not in held]
        mc = "all variants hold (exact; ST: MC)" if not rest \
            else f"holds: {', '.join(held) or 'none'}; not: {', '.join(rest)}"
        bad = [n for n, r in results.get("counterexamples", {}).items()
               if (w := _counterexample_worst(r, reading)) is not None and w[1] > w[2]]
        parts.append(f"{label}: {mc}; violated on exact instance(s): {', '.join(bad) or 'none'}")
    return "Theorem 1 (eq. 7), " + "\n".join(parts)


def _plot_counterexamples(ax: Any, results: dict[str, Any]) -> None:
    """exact error / bound per exact instance and round (above 1 = bound violated; a bound of exactly 0
    is drawn as an upward triangle at the top of the axis: the ratio is infinite there)."""
    names = list(results.get("counterexamples", {}))
    finite = [e / b for r in results.get("counterexamples", {}).values() for rr in (r, r.get("companion") or r)
              for rd in READINGS for e, b in zip(rr["error"], rr[f"bound_{rd}"]) if b is not None and b > 0]
    top = max([2.0, *finite]) * 1.2
    for c, (reading, marker, label, colour) in enumerate((
            ("corrected", "o", "corrected reading", plotting.OKABE_ITO[7]),
            ("as_printed", "s", "as printed", plotting.OKABE_ITO[3]))):
        xs, ys, inf_x = [], [], []
        for i, name in enumerate(names):
            r = results["counterexamples"][name]
            rows = [(tau, e, b) for tau, (e, b) in enumerate(zip(r["error"], r[f"bound_{reading}"]), start=1)
                    if b is not None]
            if not rows:
                ax.annotate("undefined\n(D = 0 in J)", (i + 0.15, 0.05), fontsize=6,
                            ha="center", va="bottom", color=colour)
            for k, (_tau, e, b) in enumerate(rows):
                x = i + (c - 0.5) * 0.3 + 0.06 * k
                if b > 0:
                    xs.append(x)
                    ys.append(e / b)
                else:
                    inf_x.append(x)
            twin = r.get("companion")
            if twin is not None:
                tx = [i + (c - 0.5) * 0.3 + 0.06 * k for k, b in enumerate(twin[f"bound_{reading}"])
                      if b is not None and b > 0]
                ty = [e / b for e, b in zip(twin["error"], twin[f"bound_{reading}"]) if b is not None and b > 0]
                ax.plot(tx, ty, linestyle="none", marker=marker, markerfacecolor="none", color=colour,
                        label=f"hollow: from $w_0$ = {twin['spec']['w0']:g}" if c == 0 else None)
        ax.plot(xs, ys, linestyle="none", marker=marker, color=colour, label=label)
        ax.plot(inf_x, [top * 0.97] * len(inf_x), linestyle="none", marker="^", color=colour,
                label="bound = 0 (ratio infinite)" if c == 0 and inf_x else None)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.3g}", (x, y), textcoords="offset points", xytext=(4, -3), fontsize=6, color=colour)
    plotting.ratio_axis(ax, label="exact / bound", log=False, reference_label="bound (above: violated)")
    ax.axhspan(1.0, top, color="grey", alpha=0.1, linewidth=0)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n.replace("-", "\n") for n in names], fontsize=7)
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylim(0.0, top)
    ax.set_title("(c) exact instances, a point per round", fontsize=8)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=6, ncol=2)
