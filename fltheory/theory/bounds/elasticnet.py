"""FedElasticNet (FedElasticNet) Theorem 3.1, eq. (13) (proof: Appendix B, Theorem B.6 and eq. 42).

For convex beta-smooth client losses L_k, uniform sampling of P of m clients
per round and lambda_2 > 27 beta (FedElasticNet with FedDyn, Alg. 3)::

    E[R(mean_{t<T} gamma_t) - R*] <= (1/T)(1/kappa_0)(E||gamma_0 - theta*||^2 + kappa C_0)
        + (kappa'/kappa_0) lambda_1^2 d
        - (1/T)(2 lambda_1/lambda_2) sum_{t=1}^T <gamma_{t-1} - theta*, (1/m) sum_k E sign(theta~_k^t - theta^{t-1})>

    kappa   = (10 m / P)(1/lambda_2)(lambda_2 + beta)/(lambda_2^2 - 25 beta^2)
    kappa_0 = (2/lambda_2)(lambda_2^2 - 25 lambda_2 beta - 50 beta^2)/(lambda_2^2 - 25 beta^2)
    kappa'  = (5/lambda_2)(lambda_2 + beta)/(lambda_2^2 - 25 beta^2)   (= kappa P/(2m))

C_0 = (1/m) sum_k E||grad L_k(theta_k^0) - grad L_k(theta*)|| is printed
without the square (``variant="as_printed"``) while C_t is squared everywhere
else in the proof (Lemma B.5 uses it as a squared norm): ``variant="corrected"``
squares it.

In the proof grad L_k(theta_k^t) is the gradient *state* of Algorithm 3 (step 5;
Lemma B.2: h^t = (1/m) sum_k grad L_k(theta_k^t) needs h^0 = (1/m) sum_k
grad L_k(theta_k^0)), and Algorithm 3 starts from h^0 = 0 and
grad L_k(theta_k^0) = 0.  So C_0 of a run of Algorithm 3 as specified is
(1/m) sum_k ||grad L_k(theta*)||(^2): :func:`elasticnet_C0` with
``grads_init=None``.  The true gradients at the initial model enter only for a
run whose states are initialised to them (with h^0 their mean).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validate import checked_arguments, choice, finite_array, integer
from ...errors import InvalidHyperparameterError, OutOfRangeError
from ..result import Assumption, BoundResult, make_result
from ._common import as_float, positive_check, uniform_smoothness

__all__ = ["elasticnet_constants", "elasticnet_C0", "elasticnet_sign_term",
           "elasticnet_theorem31", "elasticnet_theorem31_from_constants"]

_REF = "FedElasticNet (FedElasticNet) Theorem 3.1, eq. (13)"


@checked_arguments
def elasticnet_constants(beta: float, lambda2: float, m: int, P: int) -> dict[str, float]:
    """kappa, kappa_0, kappa' of Theorem 3.1 (formulas in the module docstring)."""
    b, l2 = as_float("beta", beta), as_float("lambda2", lambda2)
    if b <= 0 or l2 <= 0:
        raise InvalidHyperparameterError(f"need beta > 0 and lambda2 > 0, got beta = {b!r}, lambda2 = {l2!r}")
    m = integer("m", m, minimum=1, maximum=None)
    P = integer("P", P, minimum=1, maximum=m)
    den = l2 ** 2 - 25 * b ** 2
    if den == 0:
        raise InvalidHyperparameterError(f"lambda2^2 = 25 beta^2 (lambda2 = {l2}, beta = {b}): kappa undefined")
    kappa = (10 * m / P) * (1 / l2) * (l2 + b) / den
    kappa0 = (2 / l2) * (l2 ** 2 - 25 * l2 * b - 50 * b ** 2) / den
    kappa_p = (5 / l2) * (l2 + b) / den
    return {"kappa": kappa, "kappa_0": kappa0, "kappa_prime": kappa_p}


@checked_arguments
def elasticnet_C0(grads_init: Any, grads_opt: Any, *, variant: str = "corrected") -> float:
    """C_0 from (m, d) arrays of grad L_k(theta_k^0) and grad L_k(theta*):
    mean of the norms (as printed) or of the squared norms (corrected).

    ``grads_init`` are the initial gradient states of Algorithm 3 (its input:
    all zero, with h^0 = 0); ``None`` means exactly that, so C_0 =
    (1/m) sum_k ||grad L_k(theta*)||(^2) (see the module docstring)."""
    variant = choice("variant", variant, ("as_printed", "corrected"))
    gs = finite_array("grads_opt", grads_opt, error=InvalidHyperparameterError)
    g0 = np.zeros_like(gs) if grads_init is None else finite_array("grads_init", grads_init,
                                                                     error=InvalidHyperparameterError)
    if g0.shape != gs.shape or g0.ndim != 2:
        raise InvalidHyperparameterError(f"grads must be two (m, d) arrays, got {g0.shape} and {gs.shape}")
    sq = np.sum((g0 - gs) ** 2, axis=1)
    if variant == "as_printed":
        return float(np.mean(np.sqrt(sq)))
    if variant == "corrected":
        return float(np.mean(sq))
    raise InvalidHyperparameterError(f"variant must be 'as_printed' or 'corrected', got {variant!r}")


@checked_arguments
def elasticnet_sign_term(gammas: Any, theta_star: ArrayLike, mean_signs: Any, *, lambda1: float,
                         lambda2: float) -> float:
    """Trajectory term -(1/T)(2 lambda_1/lambda_2) sum_{t=1}^T <gamma_{t-1} - theta*, s_t>.

    Parameters
    ----------
    gammas : (T, d)
        gamma_{t-1} for t = 1..T (gamma_t = mean of the participating clients' models).
    theta_star : (d,)
    mean_signs : (T, d)
        s_t = (1/m) sum_k E sign(theta~_k^t - theta^{t-1}) (an estimate from a run).
    """
    G = finite_array("gammas", gammas, error=InvalidHyperparameterError)
    Sg = finite_array("mean_signs", mean_signs, error=InvalidHyperparameterError)
    th = finite_array("theta_star", theta_star, error=InvalidHyperparameterError)
    if G.ndim != 2 or G.shape != Sg.shape or th.shape != (G.shape[1],):
        raise InvalidHyperparameterError(
            f"gammas and mean_signs must be (T, d) and theta_star (d,), got {G.shape}, {Sg.shape}, {th.shape}")
    if G.shape[0] == 0:
        raise InvalidHyperparameterError("gammas and mean_signs must hold at least one round (T >= 1), got T = 0")
    if np.any(np.abs(Sg) > 1):
        raise InvalidHyperparameterError("mean sign vectors must lie in [-1, 1]")
    lambda1, lambda2 = as_float("lambda1", lambda1), as_float("lambda2", lambda2)
    if lambda1 < 0 or lambda2 <= 0:
        raise InvalidHyperparameterError(
            f"need lambda1 >= 0 and lambda2 > 0, got lambda1 = {lambda1!r}, lambda2 = {lambda2!r}")
    T = G.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        value = float(-(2 * lambda1 / lambda2) * np.einsum("td,td->", G - th, Sg) / T)
    if not np.isfinite(value):
        raise OutOfRangeError(f"the sign term overflows float64 (lambda1/lambda2 = {lambda1 / lambda2:.3e}, "
                              f"max |gamma - theta*| = {float(np.abs(G - th).max()):.3e})")
    return value


@checked_arguments
def elasticnet_theorem31(T: int, *, beta: float, lambda1: float, lambda2: float, m: int, P: int,
                         d: int, init_dist2: float, C0: float, sign_term: float | None = None,
                         uniform_sampling: bool = True, variant: str = "corrected",
                         strict: bool = False) -> BoundResult:
    """Theorem 3.1 (eq. 13) bound on E[R(mean gamma_t) - R*] after T rounds.

    ``C0`` must be computed with the matching ``variant`` (see
    :func:`elasticnet_C0`); ``variant`` is recorded and used to label the
    result.  ``sign_term`` is the trajectory term from
    :func:`elasticnet_sign_term`; when omitted the bound is returned without
    it and ``terms["sign_term"]`` is None (the bound is then not complete
    unless lambda_1 = 0, where the term vanishes).  ``uniform_sampling``
    declares how the run sampled its P clients (the theorem needs P_t drawn
    uniformly at random every round; a fixed or skewed schedule is reported as
    a violated hypothesis).
    """
    variant = choice("variant", variant, ("as_printed", "corrected"))
    a = [positive_check("beta", beta), positive_check("lambda1", lambda1, allow_zero=True),
         Assumption("lambda_2 > 27 beta", lambda2 > 27 * beta,
                    f"lambda_2 = {lambda2!r}, 27 beta = {27 * beta!r}"),
         Assumption("1 <= P <= m", 1 <= P <= m, f"P = {P}, m = {m}"),
         Assumption("P_t drawn uniformly at random each round (or P = m)",
                    bool(uniform_sampling) or P == m,
                    f"uniform_sampling = {uniform_sampling!r}, P = {P}, m = {m}"),
         positive_check("T", T), positive_check("d", d),
         positive_check("init_dist2", init_dist2, allow_zero=True),
         positive_check("C0", C0, allow_zero=True)]
    value = None
    terms: dict[str, Any] = {}
    if all(x.held for x in a):
        k = elasticnet_constants(beta, lambda2, m, P)
        first = (1 / T) * (1 / k["kappa_0"]) * (init_dist2 + k["kappa"] * C0)
        second = k["kappa_prime"] / k["kappa_0"] * lambda1 ** 2 * d
        if sign_term is None and lambda1 == 0:
            sign_term = 0.0
        terms = dict(k, first_term=first, second_term=second, sign_term=sign_term)
        value = first + second + (sign_term or 0.0)
        a.append(Assumption("trajectory sign term supplied (or lambda_1 = 0)", sign_term is not None,
                            f"sign_term = {sign_term!r}"))
    return make_result(value, a, reference=_REF, variant=variant, terms=terms, strict=strict)


@checked_arguments
def elasticnet_theorem31_from_constants(constants: Any, T: int, **kw: Any) -> BoundResult:
    """:func:`elasticnet_theorem31` with beta = max_k L_k (every L_k beta-smooth) read
    from a ProblemConstants-like object (``client_L``, else ``beta``/``L``)."""
    return elasticnet_theorem31(T, beta=uniform_smoothness(constants), **kw)
