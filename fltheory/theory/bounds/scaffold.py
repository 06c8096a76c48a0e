"""SCAFFOLD (Karimireddy et al.) round complexities and step-size conditions.

SCAFFOLD-v1 is arXiv:1910.06378v1, which states only the strongly convex
SCAFFOLD rates (its Theorems 4 and 6).  The FedAvg bounds (Theorem I), the
FedAvg lower bound (Theorem II), SCAFFOLD's Theorem III with its step-size
conditions and the quadratic delta-similarity result (Theorem IV) are those of
the ICML 2020 version (Karimireddy et al., "SCAFFOLD: Stochastic Controlled
Averaging for Federated Learning", PMLR 119:5132-5143), cited as such below.

The published statements are O~(.) / Omega(.) results: each function takes an
explicit ``constant`` (default 1) multiplying the formula, and is meant for
comparing slopes and orders, not absolute values.

* SCAFFOLD, mu-strongly convex: R = c (sigma^2/(mu K S eps) + beta/mu + N/S).
* SCAFFOLD, quadratic: R = c (beta sigma^2/(mu K N eps) + (beta + delta K)/(mu K)).
* FedAvg (their Theorem I), mu-strongly convex:
  R = c (sigma^2/(mu K S eps) + (1 - S/N) G^2/(mu S eps) + sqrt(beta) G/(mu sqrt(eps)) + B^2 beta/mu).
* FedAvg lower bound (K >= 2, sigma = 0): E[F(x_R)] - F* >= c G^2/(mu R^2).
* Step-size conditions (strongly convex, with sampling):
  eta_l <= 1/(81 beta K eta_g), R >= max(162 beta/mu, 30 N/S).
  Karimireddy et al. (ICML 2020, Theorem III / appendix Theorem VII) state two
  more: the global rate eta_g >= 1, and a second local-rate cap depending on
  the sampling, eta_l <= S/(15 mu N K eta_g) (the seed text keeps only the
  remark "there is an additional bound on the step-size depending on the
  number of clients sampled", its constant was lost; docs/theory/index.md#bounds
  omits it).  :func:`scaffold_step_conditions` checks all of them.
"""

from __future__ import annotations

import math
from typing import Any

from ..._validate import checked_arguments
from ...errors import InvalidHyperparameterError
from ..result import Assumption, BoundResult, make_result
from ._common import as_float, constant_from, positive_check, uniform_convexity, uniform_smoothness

__all__ = ["scaffold_rounds", "scaffold_quadratic_rounds", "fedavg_rounds",
           "fedavg_lower_bound", "scaffold_step_conditions", "scaffold_rounds_from_constants",
           "fedavg_rounds_from_constants"]

_REF = "Karimireddy et al., SCAFFOLD (ICML 2020 version; not in SCAFFOLD-v1 = arXiv:1910.06378v1)"


def _checks(**values: float) -> list[Assumption]:
    return [positive_check(k, v) for k, v in values.items()]


@checked_arguments
def scaffold_rounds(*, sigma2: float, mu: float, K: int, S: int, N: int, eps: float,
                    beta: float, constant: float = 1.0, strict: bool = False) -> BoundResult:
    """SCAFFOLD rounds to eps accuracy, strongly convex (ICML 2020 Theorem III; the
    same order as SCAFFOLD-v1's Theorem 6): c (sigma^2/(mu K S eps) + beta/mu + N/S)."""
    v = {k: as_float(k, x) for k, x in dict(sigma2=sigma2, mu=mu, K=K, S=S, N=N, eps=eps,
                                            beta=beta, constant=constant).items()}
    a = _checks(mu=v["mu"], K=v["K"], S=v["S"], N=v["N"], eps=v["eps"], beta=v["beta"])
    a += [positive_check("sigma2", v["sigma2"], allow_zero=True),
          Assumption("1 <= S <= N", 1 <= v["S"] <= v["N"], f"S = {S}, N = {N}"),
          Assumption("mu <= beta", v["mu"] <= v["beta"], f"mu = {mu}, beta = {beta}")]
    ok = all(x.held for x in a)
    terms = {}
    value = None
    if ok:
        terms = {"statistical": sigma2 / (mu * K * S * eps), "optimization": beta / mu,
                 "sampling": N / S}
        value = constant * sum(terms.values())
    return make_result(value, a, reference=f"{_REF} strongly convex round complexity",
                       variant=f"big_O(constant={constant})", terms=terms, strict=strict)


@checked_arguments
def scaffold_rounds_from_constants(constants: Any, *, K: int, S: int, N: int, eps: float,
                                   **kw: Any) -> BoundResult:
    """:func:`scaffold_rounds` with sigma2, mu = min_i mu_i and beta = max_i L_i read from a
    ProblemConstants-like object (SCAFFOLD-v1 Assumptions: *each* f_i is beta-smooth and
    mu-strongly convex; ``mu``/``L`` when there are no ``client_mu``/``client_L``)."""
    return scaffold_rounds(sigma2=constant_from(constants, "sigma2", default=0.0, required=False),
                           mu=uniform_convexity(constants),
                           beta=uniform_smoothness(constants), K=K, S=S, N=N, eps=eps, **kw)


@checked_arguments
def scaffold_quadratic_rounds(*, beta: float, sigma2: float, mu: float, K: int, N: int,
                              eps: float, delta: float, constant: float = 1.0,
                              strict: bool = False) -> BoundResult:
    """SCAFFOLD on quadratics with Hessian dissimilarity delta:
    c (beta sigma^2/(mu K N eps) + (beta + delta K)/(mu K))."""
    a = _checks(beta=beta, mu=mu, K=K, N=N, eps=eps) + [
        positive_check("sigma2", sigma2, allow_zero=True),
        positive_check("delta", delta, allow_zero=True),
        Assumption("mu <= beta", mu <= beta, f"mu = {mu}, beta = {beta}")]
    ok = all(x.held for x in a)
    terms = {"statistical": beta * sigma2 / (mu * K * N * eps),
             "optimization": (beta + delta * K) / (mu * K)} if ok else {}
    value = constant * sum(terms.values()) if ok else None
    return make_result(value, a, reference=f"{_REF} quadratic round complexity",
                       variant=f"big_O(constant={constant})", terms=terms, strict=strict)


@checked_arguments
def fedavg_rounds(*, sigma2: float, mu: float, K: int, S: int, N: int, eps: float,
                  G: float, B: float, beta: float, constant: float = 1.0,
                  strict: bool = False) -> BoundResult:
    """FedAvg rounds, strongly convex, (G, B)-BGD (ICML 2020 Theorem I, not in SCAFFOLD-v1):
    c (sigma^2/(mu K S eps) + (1 - S/N) G^2/(mu S eps) + sqrt(beta) G/(mu sqrt(eps)) + B^2 beta/mu)."""
    a = _checks(mu=mu, K=K, S=S, N=N, eps=eps, beta=beta) + [
        positive_check("sigma2", sigma2, allow_zero=True), positive_check("G", G, allow_zero=True),
        Assumption("B >= 1", B >= 1,
                   f"B = {B} (the O-form term B^2 beta/mu stands for Theorem I's "
                   f"(1 + B^2) beta/mu only when B >= 1)"),
        Assumption("1 <= S <= N", 1 <= S <= N, f"S = {S}, N = {N}"),
        Assumption("mu <= beta", mu <= beta, f"mu = {mu}, beta = {beta}")]
    ok = all(x.held for x in a)
    terms = {}
    if ok:
        terms = {"statistical": sigma2 / (mu * K * S * eps),
                 "sampling": (1 - S / N) * G ** 2 / (mu * S * eps),
                 "drift": math.sqrt(beta) * G / (mu * math.sqrt(eps)),
                 "optimization": B ** 2 * beta / mu}
    value = constant * sum(terms.values()) if ok else None
    return make_result(value, a, reference=f"{_REF} Theorem I (FedAvg)",
                       variant=f"big_O(constant={constant})", terms=terms, strict=strict)


@checked_arguments
def fedavg_lower_bound(*, G: float, mu: float, R: int, K: int, sigma2: float = 0.0,
                       constant: float = 1.0, strict: bool = False) -> BoundResult:
    """FedAvg lower bound (ICML 2020 Theorem II, not in SCAFFOLD-v1): F(x_R) - F* >= c G^2 / (mu R^2)
    for K >= 2 and sigma = 0.  ``value`` is a lower bound here."""
    a = [positive_check("mu", mu), positive_check("R", R), positive_check("G", G, allow_zero=True),
         Assumption("K >= 2", K >= 2, f"K = {K}"),
         Assumption("sigma = 0", sigma2 == 0, f"sigma2 = {sigma2}")]
    ok = all(x.held for x in a)
    value = constant * G ** 2 / (mu * R ** 2) if ok else None
    return make_result(value, a, reference=f"{_REF} Theorem II (FedAvg lower bound)",
                       variant=f"big_Omega(constant={constant})", terms={}, strict=strict)


@checked_arguments
def scaffold_step_conditions(*, eta_l: float, eta_g: float, beta: float, K: int, R: int,
                             mu: float, N: int, S: int, strict: bool = False) -> BoundResult:
    """Check SCAFFOLD's step-size conditions (strongly convex, with sampling;
    Karimireddy et al. 2020 Theorem III, appendix Theorem VII)::

        eta_g >= 1,
        eta_l <= min(1/(81 beta K eta_g), S/(15 mu N K eta_g)),
        R >= max(162 beta/mu, 30 N/S).

    ``value`` = the largest allowed eta_l (the min of both caps),
    ``measured`` = eta_l; ``terms`` hold both caps (``eta_l_max_smoothness``,
    ``eta_l_max_sampling``), their min ``eta_l_max`` and ``R_min``."""
    for name, v in dict(eta_g=eta_g, beta=beta, mu=mu, K=K, N=N, S=S).items():
        if not as_float(name, v) > 0:
            raise InvalidHyperparameterError(f"{name} must be > 0, got {v!r}")
    cap_beta = 1.0 / (81 * beta * K * eta_g)
    cap_sampling = S / (15 * mu * N * K * eta_g)
    eta_max = min(cap_beta, cap_sampling)
    R_min = max(162 * beta / mu, 30 * N / S)
    a = [positive_check("eta_l", eta_l), positive_check("beta", beta), positive_check("mu", mu),
         Assumption("1 <= S <= N", 1 <= S <= N, f"S = {S}, N = {N}"),
         Assumption("eta_g >= 1", eta_g >= 1, f"eta_g = {eta_g!r}"),
         Assumption("eta_l <= 1/(81 beta K eta_g)", eta_l <= cap_beta,
                    f"eta_l = {eta_l!r}, 1/(81 beta K eta_g) = {cap_beta!r}"),
         Assumption("eta_l <= S/(15 mu N K eta_g)", eta_l <= cap_sampling,
                    f"eta_l = {eta_l!r}, S/(15 mu N K eta_g) = {cap_sampling!r}"),
         Assumption("R >= max(162 beta/mu, 30 N/S)", R >= R_min, f"R = {R}, bound = {R_min!r}")]
    return make_result(eta_max, a, reference=f"{_REF} Theorem III step-size conditions",
                       variant="as_stated",
                       terms={"eta_l_max": eta_max, "eta_l_max_smoothness": cap_beta,
                              "eta_l_max_sampling": cap_sampling, "R_min": R_min},
                       measured=float(eta_l), strict=strict)


@checked_arguments
def fedavg_rounds_from_constants(constants: Any, *, K: int, S: int, N: int, eps: float,
                                 **kw: Any) -> BoundResult:
    """:func:`fedavg_rounds` with sigma2, mu = min_i mu_i, beta = max_i L_i (each f_i, as
    SCAFFOLD-v1 assumes) and the (G, B)-BGD pair G = sqrt(scaffold_G2), B = sqrt(scaffold_B2)
    read from a ProblemConstants-like object."""
    return fedavg_rounds(sigma2=constant_from(constants, "sigma2", default=0.0, required=False),
                         mu=uniform_convexity(constants), beta=uniform_smoothness(constants),
                         G=math.sqrt(float(constant_from(constants, "scaffold_G2"))),
                         B=math.sqrt(float(constant_from(constants, "scaffold_B2"))),
                         K=K, S=S, N=N, eps=eps, **kw)
