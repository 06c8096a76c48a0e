"""Exact maximum of a convex quadratic over a ball (a trust-region problem).

max_{||s|| <= r} q(s) = s^T M s + 2 g^T s + q0 with M symmetric positive
semidefinite.  A convex function attains its maximum over the ball on the
sphere ||s|| = r.  With M = V diag(lam) V^T and g~ = V^T g, the maximiser is
s = (t + lam_max - M)^{-1} g for the unique t > 0 with ||s|| = r (the secular
equation sum_k g~_k^2 / (t + lam_max - lam_k)^2 = r^2, solved by bracketing
and Brent's method); in the "hard case" (g~ = 0 on the top eigenspace and
the secular norm stays below r as t -> 0) the remaining length is put along
the top eigenvector (Conn, Gould and Toint, *Trust-Region Methods*, 7.3).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from ..errors import InvalidProblemError


def max_convex_quadratic_on_ball(M: np.ndarray, g: np.ndarray, q0: float, r: float) -> float:
    """max of s^T M s + 2 g^T s + q0 over ||s|| <= r (M PSD, r >= 0)."""
    if r < 0 or not np.isfinite(r):
        raise InvalidProblemError(f"radius must be finite and >= 0, got {r!r}")
    lam, V = np.linalg.eigh(0.5 * (M + M.T))
    return max_diagonal_quadratic_on_ball(lam, V.T @ g, q0, r)


def max_diagonal_quadratic_on_ball(lam: np.ndarray, gt: np.ndarray, q0: float, r: float) -> float:
    """The same maximum for M = diag(lam) with ascending ``lam`` (the eigenbasis form: g~ = ``gt``)."""
    if r < 0 or not np.isfinite(r):
        raise InvalidProblemError(f"radius must be finite and >= 0, got {r!r}")
    if lam[0] < -1e-12 * max(abs(lam[-1]), 1.0):
        raise InvalidProblemError(f"M must be positive semidefinite, smallest eigenvalue {lam[0]:.3e}")
    if r == 0:
        return float(q0)
    top = lam[-1]
    gap = top - lam                                         # >= 0
    gnorm = float(np.linalg.norm(gt))

    def value(s: np.ndarray) -> float:
        return float(q0 + np.sum(lam * s * s) + 2.0 * np.dot(gt, s))

    def phi(t: float) -> float:
        return float(np.linalg.norm(gt / (gap + t))) - r

    if gnorm > 0:
        t_hi = gnorm / r                                    # ||s(t_hi)|| <= r
        t = t_hi
        scale_floor = 1e-15 * (top + t_hi)
        while t > scale_floor:
            t *= 0.25
            if phi(t) > 0:
                if phi(4.0 * t) >= 0:
                    # only on the first pass (4 t = t_hi): phi(t_hi) <= 0 exactly, with equality when
                    # g~ lies in the top eigenspace (e.g. d = 1); rounding can make it +0: the root is t_hi
                    return value(gt / (gap + 4.0 * t))
                root = brentq(phi, t, 4.0 * t, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
                s = gt / (gap + root)
                return value(s)
            if phi(t) == 0:
                return value(gt / (gap + t))
    # hard case: s = s_rest + tau v_top with ||s|| = r
    top_space = gap <= 1e-12 * max(top, 1e-300)
    s = np.zeros_like(gt)
    s[~top_space] = gt[~top_space] / gap[~top_space]
    tau2 = max(r * r - float(s @ s), 0.0)
    k = int(np.flatnonzero(top_space)[0])
    s[k] = np.sqrt(tau2) * (1.0 if gt[k] >= 0 else -1.0)
    return value(s)
