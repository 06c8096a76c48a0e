"""Tight Lipschitz constant of tau gradient steps on smooth strongly convex functions.

For f twice differentiable, mu-strongly convex and L-smooth, the gradient step
G(x) = x - eta grad f(x) has Jacobian I - eta hess f(x), whose spectrum lies in
[1 - eta L, 1 - eta mu]; by the mean-value theorem in integral form

    ||G(x) - G(y)|| <= q ||x - y||,   q = max(|1 - eta mu|, |1 - eta L|),

for *every* eta > 0, and tau steps compose to q^tau.  The constant is attained by
a quadratic whose Hessian has the eigenvalues mu and L (take x - y along the
eigenvector of the extreme factor), so it is tight.  q < 1 exactly when
0 < eta < 2 / L, and q = 1 - eta mu exactly when eta <= 2 / (L + mu): the
familiar (1 - eta mu)^tau of the eta <= 1/L analysis therefore holds unchanged
up to eta = 2 / (L + mu), and beyond that the factor is (eta L - 1)^tau.

This is the constant of Assumption 1 of Wang et al., "Local Adaptivity in
Federated Learning: Convergence and Consistency" (arXiv:2106.02305), for
clients running plain local gradient descent with a restarted state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._validate import real_array
from ...errors import InvalidHyperparameterError, OutOfRangeError

__all__ = ["gd_contraction_factor", "gd_rate_threshold", "gd_step_factor"]


def _arrays(**named: Any) -> list[np.ndarray]:
    arrs = [np.atleast_1d(real_array(k, v, InvalidHyperparameterError).astype(np.float64)) for k, v in named.items()]
    try:
        out = list(np.broadcast_arrays(*arrs))
    except ValueError as exc:
        raise InvalidHyperparameterError(
            f"{', '.join(named)} must be scalars or arrays of one length, got shapes "
            f"{[a.shape for a in arrs]}") from exc
    for name, arr in zip(named, out, strict=True):
        if not np.all(np.isfinite(arr)):
            raise InvalidHyperparameterError(f"{name} must be finite, got {arr.tolist()}")
    return out


def _in_range(what: str, value: np.ndarray, **named: np.ndarray) -> np.ndarray:
    """``value`` when every entry is finite, else OutOfRangeError naming the inputs."""
    if not np.all(np.isfinite(value)):
        i = int(np.flatnonzero(~np.isfinite(value))[0])
        given = ", ".join(f"{k}={float(v[i])!r}" for k, v in named.items())
        raise OutOfRangeError(f"{what} leaves float64 range at {given} (entry {i})")
    return value


def gd_step_factor(lr: Any, mu: Any, L: Any) -> np.ndarray:
    """q = max(|1 - eta mu|, |1 - eta L|): Lipschitz constant of one gradient step.

    Parameters
    ----------
    lr, mu, L : float or array
        Step eta > 0 and the curvature bounds 0 < mu <= L (broadcast together).

    Returns
    -------
    numpy.ndarray
        q per entry (1-D).  q < 1 iff eta < 2/L; q = 1 - eta mu iff eta <= 2/(L + mu).

    Raises
    ------
    InvalidHyperparameterError
        If eta <= 0, mu <= 0 or L < mu (naming the values).
    OutOfRangeError
        If eta L overflows float64.
    """
    eta, mu_, L_ = _arrays(lr=lr, mu=mu, L=L)
    if np.any(eta <= 0) or np.any(mu_ <= 0) or np.any(L_ < mu_):
        raise InvalidHyperparameterError(
            f"need lr > 0 and 0 < mu <= L; got lr={eta.tolist()}, mu={mu_.tolist()}, L={L_.tolist()}")
    with np.errstate(over="ignore"):
        q = np.maximum(np.abs(1.0 - eta * mu_), np.abs(1.0 - eta * L_))
    return _in_range("q = max(|1 - eta mu|, |1 - eta L|)", q, lr=eta, mu=mu_, L=L_)


def gd_contraction_factor(lr: Any, local_steps: Any, mu: Any, L: Any) -> np.ndarray:
    """q^tau = max(|1 - eta mu|, |1 - eta L|)^tau: tight Lipschitz constant of tau GD steps.

    Valid for every eta > 0 on mu-strongly convex, L-smooth (twice
    differentiable) functions; a contraction iff eta < 2/L.  Equals the
    classical (1 - eta mu)^tau for eta <= 2/(L + mu).

    Parameters
    ----------
    lr : float or array
        Step eta > 0.
    local_steps : int or array
        Number of steps tau >= 1 (integer).
    mu, L : float or array
        0 < mu <= L.

    Returns
    -------
    numpy.ndarray
        q^tau per entry (1-D).

    Raises
    ------
    InvalidHyperparameterError
        On a non-integer or < 1 ``local_steps`` or the conditions of :func:`gd_step_factor`.
    """
    eta, tau, mu_, L_ = _arrays(lr=lr, local_steps=local_steps, mu=mu, L=L)
    if np.any(tau < 1) or np.any(np.mod(tau, 1) != 0):
        raise InvalidHyperparameterError(f"local_steps must be integers >= 1, got {tau.tolist()}")
    with np.errstate(over="ignore"):
        factor = gd_step_factor(eta, mu_, L_) ** tau
    return _in_range("q^tau", factor, lr=eta, local_steps=tau, mu=mu_, L=L_)


def gd_rate_threshold(mu: Any, L: Any) -> tuple[np.ndarray, np.ndarray]:
    """(2 / (L + mu), 2 / L): the step up to which q = 1 - eta mu, and the step
    below which q < 1.  Raises InvalidHyperparameterError unless 0 < mu <= L."""
    mu_, L_ = _arrays(mu=mu, L=L)
    if np.any(mu_ <= 0) or np.any(L_ < mu_):
        raise InvalidHyperparameterError(f"need 0 < mu <= L; got mu={mu_.tolist()}, L={L_.tolist()}")
    with np.errstate(over="ignore", divide="ignore"):
        first, second = 2.0 / (L_ + mu_), 2.0 / L_
    return (_in_range("2 / (L + mu)", first, mu=mu_, L=L_), _in_range("2 / L", second, mu=mu_, L=L_))
