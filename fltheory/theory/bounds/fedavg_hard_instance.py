"""A hard instance for FedAvg's lower bound (Karimireddy et al., SCAFFOLD, ICML 2020, Theorem II).

Theorem II of the ICML 2020 version of SCAFFOLD (not in SCAFFOLD-v1, arXiv v1)
says that for K >= 2 local steps and exact gradients there are mu-strongly
convex objectives with (G, B)-bounded gradient dissimilarity on which FedAvg,
whatever its step size, has F(x_R) - F* >= Omega(G^2 / (mu R^2)).  The instance
used here is the one-dimensional pair of clients

    f_1(x) = mu x^2 + G x,      f_2(x) = -G x,      F = (f_1 + f_2)/2 = mu x^2 / 2,

(x* = 0, F* = 0; our reading of the paper's construction, not checked against
the ICML text, which is not among the seeds).  Its gradients satisfy
(1/2)(f_1'(x)^2 + f_2'(x)^2) = G^2 + 2 mu G x + 2 mu^2 x^2 <= 2 G^2 + 3 F'(x)^2,
i.e. (G, B)-BGD with G^2 -> 2 G^2 and B^2 = 3.  FedAvg with client rate eta, K
local GD steps and server rate 1 is the affine map (q = 1 - 2 mu eta)

    y_1 = q^K x - (1 - q^K) G / (2 mu),    y_2 = x + K eta G,
    x+  = (y_1 + y_2) / 2 = a x + b,    a = (1 + q^K)/2,
    b   = (K eta G - (1 - q^K) G / (2 mu)) / 2,

with fixed point x~ = b / (1 - a) != 0 for K >= 2 (b = O(eta^2 K^2 mu G)): the
client drift.  A step small enough to keep x~ near 0 contracts slowly, a large
one stops far from 0, and the best step gives an error of order G^2/(mu R^2)
(up to log factors); for K = 1 the drift vanishes (b = 0) and FedAvg is GD.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._validate import integer, positive, real_scalar
from ...errors import InvalidHyperparameterError, OutOfRangeError

__all__ = ["hard_instance_best_error", "hard_instance_error", "hard_instance_map"]

#: hard_instance_best_error evaluates the closed form on at most this many grid steps (it loops over them)
_MAX_GRID = 1_000_000


def _check(G: Any, mu: Any, K: Any) -> tuple[float, float, int]:
    g = positive("G", G, allow_zero=True)
    m = positive("mu", mu)
    k = integer("K (local steps)", K, minimum=1, maximum=None)
    return g, m, k


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise OutOfRangeError(f"{what} overflows float64 ({value!r}); expected inputs whose error is representable")
    return value


def hard_instance_map(eta: float, *, G: float, mu: float, K: int) -> tuple[float, float]:
    """(a, b) of FedAvg's round map x -> a x + b on the hard instance (module docstring).

    Raises InvalidHyperparameterError unless 0 < eta < 1/mu (the local steps on f_1
    then contract: |1 - 2 mu eta| < 1)."""
    g, m, k = _check(G, mu, K)
    e = real_scalar("eta", eta)
    if not 0 < e < 1 / m:
        raise InvalidHyperparameterError(f"eta must lie in (0, 1/mu) = (0, {1 / m:.4g}), got {eta!r}")
    qk = (1.0 - 2.0 * m * e) ** k
    return (1.0 + qk) / 2.0, (k * e * g - (1.0 - qk) * g / (2.0 * m)) / 2.0


def hard_instance_error(eta: float, R: int, *, G: float, mu: float, K: int, x0: float) -> float:
    """F(x_R) - F* = mu x_R^2 / 2 after R FedAvg rounds from x0 (exact, closed form)."""
    a, b = hard_instance_map(eta, G=G, mu=mu, K=K)
    r = integer("R", R, minimum=0, maximum=None)
    start = real_scalar("x0", x0)
    fixed = b / (1.0 - a)
    with np.errstate(over="ignore", invalid="ignore"):
        xR = fixed + a ** r * (start - fixed)
        err = float(np.float64(mu) * np.float64(xR) ** 2 / 2.0)
    return _finite(err, f"F(x_R) - F* at x0 = {start!r}, R = {r}")


def hard_instance_best_error(R: int, *, G: float, mu: float, K: int, x0: float,
                             grid: int = 4000) -> tuple[float, float]:
    """(min over eta in (0, 1/mu) of F(x_R) - F*, the minimising eta), by a log-spaced grid of
    ``grid`` steps refined by golden-section search around the best grid point."""
    g, m, k = _check(G, mu, K)
    R = integer("R", R, minimum=0, maximum=None)
    x0 = real_scalar("x0", x0)
    grid = integer("grid", grid, minimum=3, maximum=_MAX_GRID)
    etas = np.logspace(math.log10(1e-12 / m), math.log10(0.999 / m), grid)
    errs = np.array([hard_instance_error(e, R, G=g, mu=m, K=k, x0=x0) for e in etas])
    i = int(errs.argmin())
    lo, hi = math.log(etas[max(i - 1, 0)]), math.log(etas[min(i + 1, etas.size - 1)])

    def f(le: float) -> float:
        return hard_instance_error(math.exp(le), R, G=g, mu=m, K=k, x0=x0)

    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    for _ in range(80):
        if f(c) < f(d):
            hi, d = d, c
            c = hi - ratio * (hi - lo)
        else:
            lo, c = c, d
            d = lo + ratio * (hi - lo)
    best = math.exp((lo + hi) / 2.0)
    if f(math.log(best)) > errs[i]:
        return float(errs[i]), float(etas[i])
    return f(math.log(best)), best
