"""Symbolic derivations (sympy) behind the closed forms and bounds.

Each function returns sympy expressions; tests in tests/theory/test_symbolic.py
lambdify them and hold them against the numeric routines of
:mod:`fltheory.theory.closed_forms` and :mod:`fltheory.theory.bounds`.

* :func:`scalar_fixed_point` - LocalAdaptivity Theorem 2 for scalar quadratic clients
  f_i = h_i x^2/2 - e_i x with rates eta_i = c_i h, preconditioners P_i and
  tau_i steps: x~ = sum p_i b_i e_i/h_i / sum p_i b_i, b_i = 1 - (1 - c_i h P_i h_i)^tau_i;
  :func:`fixed_point_series` expands it in h (eq. 8 is the h^0 term).
* :func:`diagonal_fixed_point` - the same per coordinate for diagonal H_i, P_i.
* :func:`sgd_contraction_factor` - ||(I - eta H)^tau|| on a quadratic with
  spectrum [mu, L]: max(|1 - eta mu|, |1 - eta L|)^tau, and the rate minimising it.
* :func:`elasticnet_kappa_identity` - kappa' - kappa P/(2m) (simplifies to 0) and
  the threshold on lambda_2/beta for kappa_0 > 0 on the branch lambda_2 > 5 beta
  (the seed states 27; the sharp value is (25 + sqrt 825)/2 = 26.86).
* :func:`efl_step_size_condition` - with gamma >= 32 E (1+theta) L/(mu S_min) and
  S_tau >= S_min, eta_tau <= 1/(2 (1+theta) L) for every tau.
* :func:`latex` - LaTeX export of any derived expression.
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from .._validate import integer
from ..errors import InvalidHyperparameterError

__all__ = ["scalar_fixed_point", "fixed_point_series", "diagonal_fixed_point",
           "sgd_contraction_factor", "elasticnet_kappa_identity", "efl_step_size_condition",
           "latex"]


#: Largest client count / model dimension of the symbolic expressions: they grow with the number of
#: symbols, and sympy's series and simplification beyond this take minutes (the checks use 2-3).
MAX_SYMBOLIC_CLIENTS = 32
MAX_SYMBOLIC_DIM = 16
#: Largest series order of ``fixed_point_series`` (each order differentiates the whole quotient once more).
MAX_SERIES_ORDER = 6


def _count(name: str, value: Any, maximum: int) -> int:
    return integer(name, value, minimum=1, maximum=maximum)


def _steps(tau: Any, n_clients: int) -> tuple[int, ...]:
    if not isinstance(tau, (tuple, list)) or len(tau) != n_clients:
        raise InvalidHyperparameterError(
            f"fixed_point_series: tau must be None or a tuple of {n_clients} local step counts (one per "
            f"client), got {tau!r:.80}")
    return tuple(integer(f"fixed_point_series: tau[{i}]", t, minimum=1) for i, t in enumerate(tau))


def scalar_fixed_point(n_clients: int) -> tuple[sp.Expr, dict[str, Any]]:
    """x~(h) for ``n_clients`` scalar quadratic clients (LocalAdaptivity Theorem 2).

    Returns (expr, symbols) with symbols p_i, hess_i (h_i), e_i, c_i, P_i,
    tau_i (positive integers) and the common rate scale h.  ``n_clients`` is an integer in
    [1, ``MAX_SYMBOLIC_CLIENTS``] (InvalidHyperparameterError otherwise).
    """
    n_clients = _count("scalar_fixed_point: n_clients", n_clients, MAX_SYMBOLIC_CLIENTS)
    h = sp.Symbol("h", positive=True)
    p = sp.symbols(f"p0:{n_clients}", positive=True)
    H = sp.symbols(f"hess0:{n_clients}", positive=True)
    e = sp.symbols(f"e0:{n_clients}", real=True)
    c = sp.symbols(f"c0:{n_clients}", positive=True)
    P = sp.symbols(f"P0:{n_clients}", positive=True)
    tau = sp.symbols(f"tau0:{n_clients}", positive=True, integer=True)
    b = [1 - (1 - c[i] * h * P[i] * H[i]) ** tau[i] for i in range(n_clients)]
    num = sum(p[i] * b[i] * e[i] / H[i] for i in range(n_clients))
    den = sum(p[i] * b[i] for i in range(n_clients))
    return num / den, {"h": h, "p": p, "hess": H, "e": e, "c": c, "P": P, "tau": tau}


def fixed_point_series(n_clients: int, order: int = 2, tau: tuple[int, ...] | None = None
                       ) -> tuple[sp.Expr, dict[str, Any]]:
    """Series of the scalar fixed point in h up to (excluding) h^order.

    ``tau`` fixes the local steps (needed for a closed-form series); default
    tau_i = i + 2.  The h^0 term is LocalAdaptivity eq. (8):
    sum p_i c_i tau_i P_i e_i / sum p_i c_i tau_i P_i h_i.  ``n_clients`` in [1,
    ``MAX_SYMBOLIC_CLIENTS``], ``order`` in [1, ``MAX_SERIES_ORDER``], ``tau`` None or
    ``n_clients`` integers >= 1 (InvalidHyperparameterError otherwise).
    """
    n_clients = _count("fixed_point_series: n_clients", n_clients, MAX_SYMBOLIC_CLIENTS)
    order = _count("fixed_point_series: order", order, MAX_SERIES_ORDER)
    steps = _steps(tau, n_clients) if tau is not None else tuple(i + 2 for i in range(n_clients))
    expr, sym = scalar_fixed_point(n_clients)
    expr = expr.subs({sym["tau"][i]: steps[i] for i in range(n_clients)})
    ser = sp.series(expr, sym["h"], 0, order).removeO()
    sym = dict(sym, tau_values=steps)
    return sp.simplify(ser), sym


def diagonal_fixed_point(dim: int, n_clients: int) -> tuple[sp.Matrix, dict[str, Any]]:
    """Coordinatewise fixed point for diagonal H_i = diag(h_ij), P_i = diag(P_ij):
    x~_j = sum_i p_i b_ij e_ij / h_ij / sum_i p_i b_ij,
    b_ij = 1 - (1 - eta_i P_ij h_ij)^tau_i.  ``dim`` in [1, ``MAX_SYMBOLIC_DIM``], ``n_clients`` in
    [1, ``MAX_SYMBOLIC_CLIENTS``] (InvalidHyperparameterError otherwise)."""
    dim = _count("diagonal_fixed_point: dim", dim, MAX_SYMBOLIC_DIM)
    n_clients = _count("diagonal_fixed_point: n_clients", n_clients, MAX_SYMBOLIC_CLIENTS)
    p = sp.symbols(f"p0:{n_clients}", positive=True)
    eta = sp.symbols(f"eta0:{n_clients}", positive=True)
    tau = sp.symbols(f"tau0:{n_clients}", positive=True, integer=True)
    H = sp.Matrix(n_clients, dim, lambda i, j: sp.Symbol(f"hess{i}_{j}", positive=True))
    P = sp.Matrix(n_clients, dim, lambda i, j: sp.Symbol(f"P{i}_{j}", positive=True))
    e = sp.Matrix(n_clients, dim, lambda i, j: sp.Symbol(f"e{i}_{j}", real=True))
    out = []
    for j in range(dim):
        b = [1 - (1 - eta[i] * P[i, j] * H[i, j]) ** tau[i] for i in range(n_clients)]
        out.append(sum(p[i] * b[i] * e[i, j] / H[i, j] for i in range(n_clients))
                   / sum(p[i] * b[i] for i in range(n_clients)))
    return sp.Matrix(out), {"p": p, "eta": eta, "tau": tau, "hess": H, "P": P, "e": e}


def sgd_contraction_factor() -> tuple[sp.Expr, sp.Expr, dict[str, Any]]:
    """Contraction factor of tau GD steps on a quadratic with spectrum in [mu, L]:
    q(eta)^tau with q = Max(|1 - eta mu|, |1 - eta L|), and the minimiser
    eta* = 2/(mu + L) with q(eta*) = (L - mu)/(L + mu).

    Returns (factor, q_at_optimum, symbols).
    """
    eta, mu, L = sp.symbols("eta mu L", positive=True)
    tau = sp.Symbol("tau", positive=True, integer=True)
    q = sp.Max(sp.Abs(1 - eta * mu), sp.Abs(1 - eta * L))
    eta_opt = 2 / (mu + L)
    # at eta*, both branches are equal: 1 - eta* mu = eta* L - 1 = (L - mu)/(L + mu)
    q_opt = sp.simplify(1 - eta_opt * mu)
    return q ** tau, q_opt, {"eta": eta, "mu": mu, "L": L, "tau": tau, "eta_opt": eta_opt}


def elasticnet_kappa_identity() -> dict[str, Any]:
    """Check kappa' = kappa P/(2m) (FedElasticNet) and the lambda_2 threshold.

    Returns a dict with ``difference`` (kappa' - kappa P/(2m), simplified),
    ``identity_holds`` (bool), ``kappa0_threshold`` (the positive root
    r = (25 + sqrt 825)/2 ~ 26.86 of r^2 - 25 r - 50 = 0) and its numeric
    value, ``numerator_above_27`` (the numerator of kappa_0 at
    lambda_2 = (27 + u) beta, expanded: beta^2 (u^2 + 29 u + 4), positive for
    u >= 0, so lambda_2 > 27 beta gives kappa_0, kappa, kappa' > 0), and the
    expressions.

    The threshold is an "iff" only on the branch lambda_2 > 5 beta, where the
    common denominator lambda_2^2 - 25 beta^2 is positive: there kappa_0 > 0
    iff lambda_2 > r beta.  For lambda_2 < 5 beta numerator and denominator
    are both negative and kappa_0 > 0 again, but kappa and kappa' are then
    negative (the theorem needs lambda_2 > 27 beta anyway).
    """
    beta, l2 = sp.symbols("beta lambda_2", positive=True)
    m, P = sp.symbols("m P", positive=True)
    kappa = (10 * m / P) * (1 / l2) * (l2 + beta) / (l2 ** 2 - 25 * beta ** 2)
    kappa0 = (2 / l2) * (l2 ** 2 - 25 * l2 * beta - 50 * beta ** 2) / (l2 ** 2 - 25 * beta ** 2)
    kappa_p = (5 / l2) * (l2 + beta) / (l2 ** 2 - 25 * beta ** 2)
    diff = sp.simplify(kappa_p - kappa * P / (2 * m))
    r = sp.Symbol("r", positive=True)
    roots = [x for x in sp.solve(r ** 2 - 25 * r - 50, r) if x.is_positive]
    u = sp.Symbol("u", nonnegative=True)
    above = sp.expand((l2 ** 2 - 25 * l2 * beta - 50 * beta ** 2).subs(l2, (27 + u) * beta))
    return {"difference": diff, "identity_holds": diff == 0, "kappa0_threshold": roots[0],
            "numerator_above_27": above, "u": u,
            "kappa0_threshold_value": float(roots[0]), "kappa": kappa, "kappa_0": kappa0,
            "kappa_prime": kappa_p, "symbols": {"beta": beta, "lambda_2": l2, "m": m, "P": P}}


def efl_step_size_condition() -> dict[str, Any]:
    """EFL Theorem 1 step size: eta_tau = 16 E/(mu ((tau+1) E + gamma) S_tau).

    With gamma = 32 E (1 + theta) L/(mu S_min) + g (g >= 0) and S_tau = S_min + s
    (s >= 0), the ratio eta_tau / (1/(2 (1+theta) L)) is returned together with
    the value of its upper bound 16 E/(mu gamma S_tau) (the (tau+1) E term
    dropped) at g = s = 0, which simplifies to 1; the ratio is decreasing in
    tau, g and s (``derivatives``), so eta_tau < 1/(2 (1+theta) L) for all
    tau >= 0.  Likewise gamma >= 4 E^2 theta/S_min
    gives eta_tau <= 4/(mu E theta).
    """
    E, mu, L, theta, Smin, s, g, tau = sp.symbols("E mu L theta S_min s g tau", positive=True)
    gamma = 32 * E * (1 + theta) * L / (mu * Smin) + g
    eta = 16 * E / (mu * ((tau + 1) * E + gamma) * (Smin + s))
    ratio = sp.simplify(eta * 2 * (1 + theta) * L)
    extreme = sp.simplify(16 * E / (mu * (32 * E * (1 + theta) * L / (mu * Smin)) * Smin)
                          * 2 * (1 + theta) * L)
    gamma2 = 4 * E ** 2 * theta / Smin
    extreme2 = sp.simplify(16 * E / (mu * gamma2 * Smin) / (4 / (mu * E * theta)))
    derivs = [sp.simplify(sp.diff(ratio, v)) for v in (tau, g, s)]
    return {"ratio": ratio, "extreme_ratio": extreme, "extreme_ratio_theta_branch": extreme2,
            "derivatives": derivs,
            "symbols": {"E": E, "mu": mu, "L": L, "theta": theta, "S_min": Smin, "s": s,
                        "g": g, "tau": tau}}


def latex(expr: Any) -> str:
    """LaTeX of a derived expression (sympy.latex)."""
    return sp.latex(expr)
