"""EFL (Ma et al.) Corollary 1 (eq. 8) with both of its bounds evaluated from Theorem 1.

Corollary 1 compares f_0(T), the Theorem 1 bound when an inactive client a is kept, with f_1(T), the bound
when it is abandoned at round tau0, and then approximates both (f_0 ~ y^a J, f_1 ~ T C / (E (T - tau0) +
gamma)^2, :func:`~fltheory.theory.bounds.efl_abandonment`).  Here both are evaluated exactly:

* keep: client a completes no step with probability y^a in each round (else E steps), every other client E
  steps, plain weights p_tau^k = p^k (theta = 1): f_0(T) = eq. (7) after T rounds, on E||w_{TE} - w*||^2;
* abandon at tau0: client a departs; the remaining clients complete E steps and keep their weights p^k
  (eq. 6 is not renormalised), i.e. p_tau^k = (1 - p^a) p^_k with p^_k = p^k / (1 - p^a) the remaining
  system's base weights (so theta = 1 and every ratio E[p s] / p^_k is (1 - p^a) E: r_t = 0), and the
  learning rate restarts at tau0 (EFL section 4.3): f_1(T) = eq. (7) of the remaining system after
  T - tau0 rounds from E||w_{tau0 E} - w^*||^2, on E||w_{TE} - w^*||^2 with w^* its optimum.

Like the paper, the two bounds concern different optima (w* and w^*); the decision they induce (abandon iff
f_0(T) > f_1(T)) is the one eq. (8) approximates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validate import checked_arguments, positive, scalar_int
from ...errors import InvalidHyperparameterError
from ..result import Assumption, BoundResult, make_result
from .efl import StepMoments, efl_abandonment, efl_step_moments, efl_theorem1

__all__ = ["efl_abandonment_bounds", "efl_departed_moments"]

_REF = "EFL (EFL) Corollary 1, eq. (8), both bounds from Theorem 1 eq. (7)"


def _weights(weights: ArrayLike) -> np.ndarray:
    p = np.asarray(weights, dtype=np.float64)
    if p.ndim != 1 or p.shape[0] < 2 or not np.all(np.isfinite(p)) or np.any(p <= 0) or abs(p.sum() - 1) > 1e-9:
        raise InvalidHyperparameterError(
            f"weights must be at least two positive numbers summing to 1, got {np.asarray(weights).tolist()}")
    return p


@checked_arguments
def efl_departed_moments(weights: ArrayLike, client: int, E: int) -> StepMoments:
    """Step moments of the remaining system after ``client`` departed (module docstring).

    Every remaining client completes E steps with its unrenormalised weight p^k = (1 - p^a) p^_k:
    E[p s] = (1 - p^a) p^_k E, E[p] = (1 - p^a) p^_k, E[p^2 s] = (1 - p^a)^2 (p^_k)^2 E, and
    max p_tau^k / p^_k = 1 - p^a.  Arrays of shape (1, N - 1) over the remaining clients in their order.
    """
    p = _weights(weights)
    a = scalar_int("client", client, minimum=0, strict=False)
    if a >= p.shape[0]:
        raise InvalidHyperparameterError(f"client must be an index in [0, {p.shape[0] - 1}], got {client!r}")
    E = scalar_int("E", E, minimum=1, strict=False)
    scale = 1.0 - float(p[a])
    p_hat = np.delete(p, a)[None, :] / scale
    return StepMoments(ps=scale * p_hat * E, p=scale * p_hat, p2s=(scale * p_hat) ** 2 * E, max_ratio=scale)


@checked_arguments
def efl_abandonment_bounds(T: int, tau0: int, *, y_a: float, client: int, E: int, mu: float, L: float,
                           sigma2: ArrayLike, D: ArrayLike, G2: float, weights: ArrayLike, init_dist2: float,
                           mu_remaining: float, L_remaining: float, D_remaining: ArrayLike,
                           G2_remaining: float, init_dist2_remaining: float) -> BoundResult:
    """Corollary 1 (EFL eq. 8) with f_0(T) and f_1(T) from Theorem 1 (module docstring).

    Parameters
    ----------
    T, tau0 : int
        Deadline and abandonment round (0 <= tau0 < T).
    y_a : float
        Probability that ``client`` is inactive in a round while kept (0 < y^a < 1).
    client : int
        Index a of the inactive client.
    E, mu, L, sigma2, D, G2, weights, init_dist2 :
        Constants of the whole system for f_0 (as :func:`efl_theorem1`); sigma2 scalar or (N,).
    mu_remaining, L_remaining, D_remaining, G2_remaining :
        Constants of the remaining system (D_remaining: (N - 1,) gaps to its own optimum w^*).
    init_dist2_remaining : float
        E||w_{tau0 E} - w^*||^2, where the remaining system's run starts.

    Returns
    -------
    BoundResult with value f_1(T), measured f_0(T) and terms ``f0``, ``f1``, ``keep`` and ``remaining``
    (the two Theorem 1 results: their ``terms["eta"]`` are the step sizes of the two runs, the second
    restarted at tau0), ``abandon`` (f_0(T) > f_1(T)), ``eq8`` (:func:`efl_abandonment` with C = C_T / T,
    J, gamma of the keep bound) and ``abandon_eq8``, ``abandon_eq9`` (y^a > eq. 9's threshold, constant 1).
    """
    p = _weights(weights)
    N = p.shape[0]
    T = scalar_int("T", T, minimum=1, strict=False)
    tau0 = scalar_int("tau0", tau0, minimum=0, strict=False)
    a = scalar_int("client", client, minimum=0, strict=False)
    E = scalar_int("E", E, minimum=1, strict=False)
    if a >= N:
        raise InvalidHyperparameterError(f"client must be an index in [0, {N - 1}], got {client!r}")
    if tau0 >= T:
        raise InvalidHyperparameterError(f"tau0 must be < T = {T}, got {tau0}")
    y = positive("y_a", y_a)
    if y >= 1:
        raise InvalidHyperparameterError(f"y_a must lie in (0, 1), got {y_a!r}")
    sig = np.broadcast_to(np.asarray(sigma2, dtype=np.float64), (N,))
    probs = np.zeros((N, E + 1))
    probs[:, E] = 1.0
    probs[a, 0], probs[a, E] = y, 1.0 - y
    keep = efl_theorem1(T, E=E, theta=1.0, mu=mu, L=L, sigma2=sig, D=D, G2=G2, weights=p,
                        init_dist2=init_dist2, moments=efl_step_moments(p, probs, E))
    p_hat = np.delete(p, a) / (1.0 - float(p[a]))
    remaining = efl_theorem1(T - tau0, E=E, theta=1.0, mu=mu_remaining, L=L_remaining, sigma2=np.delete(sig, a),
                             D=D_remaining, G2=G2_remaining, weights=p_hat, init_dist2=init_dist2_remaining,
                             moments=efl_departed_moments(p, a, E))
    assumptions = [*keep.assumptions, *(Assumption(f"remaining system: {x.name}", x.held, x.detail)
                                        for x in remaining.assumptions)]
    terms: dict[str, Any] = {"keep": keep, "remaining": remaining, "f0": keep.value, "f1": remaining.value}
    value = None
    if keep.value is not None and remaining.value is not None:
        value = remaining.value
        rule = efl_abandonment(y, float(keep.terms["J"]), float(keep.terms["C"]) / T, T, E, tau0,
                               float(keep.terms["gamma"]))
        threshold = rule.terms["eq9_threshold"]
        terms.update(abandon=bool(keep.value > remaining.value), eq8=rule, abandon_eq8=bool(rule.terms["abandon"]),
                     abandon_eq9=None if threshold is None else bool(y > threshold))
    return make_result(value, assumptions, reference=_REF, variant="corrected", terms=terms,
                       measured=keep.value)
