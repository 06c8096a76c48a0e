"""Objective shift when a client departs or joins (EFL, EFL, Theorem 2, eq. 10-11).

EFL section 4.3-4.4 / Theorem 2: the global objective shifts F -> F^ and
its minimiser w* -> w^*; D^_k = F_k(w^*) - F_k* is measured "with respect to
the new objective".  We therefore define, per direction:

* ``kind="depart"``: w* = argmin of the federation *with* client a (old),
  w^* = argmin *without* a (new); n = total samples before the shift
  (a included).  Eq. (10): ||w* - w^*||^2 <= 8 L n_a^2 D^_a / (mu^2 n^2).
* ``kind="join"``: w* = argmin *without* a (old), w^* = argmin *with* a (new);
  n = samples before the shift (a excluded).
  Eq. (11): ||w* - w^*||^2 <= 8 L n_a^2 D^_a / (mu^2 (n + n_a)^2).

Hypotheses (Assumptions 1-2 of EFL, with lambda = 0: the elastic term is
not part of F_k here): every F_k is L-smooth and F is mu-strongly convex.  We
take L = max_k L_k over all clients involved and mu = min of the strong-
convexity constants of the objective before and after the shift (both are
"F" at some time), the most generous constants the hypotheses allow.

``variant="derived"`` evaluates what the standard argument proves
(first-order optimality + strong convexity + ||grad F_a||^2 <= 2 L (F_a(w) - F_a*)):

* depart: grad F_old(w^*) = (n_a/n) grad F_a(w^*), so
  ||w* - w^*||^2 <= 2 L (n_a/n)^2 D^_a / mu_old^2;
* join: grad F_new(w*) = (n_a/(n+n_a)) grad F_a(w*), so
  ||w* - w^*||^2 <= 2 L (n_a/(n+n_a))^2 D~_a / mu_new^2 with
  D~_a = F_a(w*) - F_a* evaluated at the *old* optimum.

For a join, eq. (11) with D^_a at the *new* optimum follows from the old
objective's strong convexity (||w* - w^*||^2 <= 2 L (n_a/n)^2 D^_a / mu_old^2)
only when (1 + n_a/n)^2 <= 4, i.e. n_a <= n; for n_a > n it fails:
tests/properties/test_objective_shift_properties.py keeps the counterexample
(scalar quadratics, ratio 1/(4 (1 - q)^2) with q = n_a/(n + n_a)) as a strict
xfail.

When the federation has no sample counts, n_a/n is read from the weights of
the federation that contains a: p_a = n_a/n (depart), p_a = n_a/(n+n_a) (join).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import choice, finite_array, flag, instance, integer, real_scalar
from ..problems import Federation
from ..errors import InvalidProblemError, OutOfRangeError
from . import _checks
from .result import Assumption, BoundResult, make_result
from ..aliases import ClientSelection

__all__ = ["objective_shift", "suboptimality_gaps"]

_REF = {"depart": "EFL (EFL) Theorem 2, eq. (10)",
        "join": "EFL (EFL) Theorem 2, eq. (11)"}


def _smoothness(fed: Any) -> np.ndarray:
    """Per-client smoothness constants L_k: the analytic ones of the federation hook
    ``curvature_bounds()``, else a ``client_L`` attribute of a duck-typed federation."""
    hook = getattr(fed, "curvature_bounds", None)
    bounds = hook() if callable(hook) else None
    if bounds is not None:
        return np.asarray(bounds.client_L, dtype=np.float64)
    if hasattr(fed, "client_L"):
        return np.asarray(fed.client_L, dtype=np.float64)
    raise InvalidProblemError(
        f"{type(fed).__name__} exposes no client_L; pass L= explicitly to objective_shift")


def _strong_convexity(fed: Any) -> float:
    """A global strong-convexity constant of F: the federation hook
    ``strong_convexity()`` (quadratic: lambda_min(sum p_i H_i); logistic: reg,
    the infimum over R^d of lambda_min of the Hessian), else a ``reg`` or ``mu``
    attribute of a duck-typed federation."""
    hook = getattr(fed, "strong_convexity", None)
    value = hook() if callable(hook) else None
    if value is not None:
        return float(value)
    if hasattr(fed, "reg"):
        return float(fed.reg)
    if hasattr(fed, "mu"):
        return float(fed.mu)
    raise InvalidProblemError(
        f"{type(fed).__name__} exposes no strong-convexity constant; pass mu= explicitly")


def suboptimality_gaps(fed: Federation, W: Any, clients: ClientSelection = None) -> np.ndarray:
    """F_k(w_r) - F_k* for the r-th listed client k -> (m,).

    The federation hook ``Federation.client_gaps``: quadratic clients give
    1/2 (w - x_k*)^T H_k (w - x_k*) exactly (no cancellation); the default is
    the loss difference at the client minimiser, a negative result within
    rounding (|gap| <= 64 eps max(1, |F_k*|)) reported as 0 and a larger
    negative one raising InvalidProblemError (the client minimiser is then not
    a minimiser).
    """
    instance("fed", fed, Federation, "a Federation")
    idx = _checks.client_indices("clients", clients, fed.n_clients)
    W = finite_array("W", W, error=InvalidProblemError)
    if W.ndim not in (1, 2) or W.shape[-1] != fed.dim:
        raise InvalidProblemError(f"W must be a point (d,) or rows (m, d) with d = {fed.dim}, got shape {W.shape}")
    if W.ndim == 2 and W.shape[0] not in (1, idx.shape[0]):
        raise InvalidProblemError(f"W has {W.shape[0]} rows but {idx.shape[0]} clients are listed "
                                  f"(clients={clients!r}); give one row per listed client or a single point")
    W = np.broadcast_to(np.atleast_2d(W), (idx.shape[0], fed.dim))
    with np.errstate(over="ignore", invalid="ignore"):
        gaps = fed.client_gaps(W, idx)
    if not np.all(np.isfinite(gaps)):
        raise OutOfRangeError(f"suboptimality_gaps: F_k(w) - F_k* overflows float64 at W with max |W| = "
                              f"{float(np.abs(W).max()):.3g} (clients {idx.tolist()}); expected points whose gaps "
                              f"are representable (|gap| < 1.8e308)")
    return gaps


def objective_shift(fed: Federation, client: int | None = None, kind: str = "depart",
                    other: Any = None, *, variant: str = "as_printed",
                    L: float | None = None, mu: float | None = None,
                    weight: float | None = None, strict: bool = False) -> BoundResult:
    """Exact objective shift ||w* - w^*||^2 and the EFL Theorem 2 bound.

    Parameters
    ----------
    fed : Federation (quadratic or logistic)
        The federation *before* the shift.
    client : int
        ``kind="depart"``: index of the departing client a in ``fed``.
    kind : {"depart", "join"}
    other : Federation with one client
        ``kind="join"``: the arriving client a (``fed.with_client(other)``).
    variant : {"as_printed", "derived"}
        ``"as_printed"``: eq. (10)/(11) exactly as printed (constant 8, D^_a at
        the new optimum).  ``"derived"``: the bound the standard proof gives
        (constant 2; for a join D_a at the old optimum and mu of the new F).
    weight : float, optional
        ``kind="join"`` on federations with explicit weights: the newcomer's
        weight, forwarded to ``fed.with_client(other, weight=weight)``.
    L, mu : float, optional
        Override the constants (default: max_k L_k over all clients; min of the
        strong-convexity constants of F before and after).
    strict : bool
        Raise AssumptionError when a hypothesis fails.

    Returns
    -------
    BoundResult
        ``measured`` = ||w* - w^*||^2 (exact), ``value`` = the bound,
        ``ratio`` = measured / value; ``terms`` hold w_star, w_hat, D_hat,
        L, mu, share (n_a/n or n_a/(n+n_a)) and the constants used.
    """
    instance("fed", fed, Federation, "a Federation")
    kind = choice("kind", kind, ("depart", "join"))
    variant = choice("variant", variant, ("as_printed", "derived"))
    L = None if L is None else real_scalar("L", L)          # signs are hypotheses, reported below
    mu = None if mu is None else real_scalar("mu", mu)
    weight = None if weight is None else real_scalar("weight", weight)
    strict = flag("strict", strict)
    if other is not None:
        instance("other", other, Federation, "a Federation with one client (the arriving client)")
    if kind == "depart":
        if other is not None:
            raise InvalidProblemError("kind='depart' takes client=, not other=")
        if client is None:
            raise InvalidProblemError("kind='depart' needs the index of the departing client")
        client = integer("client", client, minimum=0, maximum=fed.n_clients - 1, error=InvalidProblemError)
        with_a, without_a = fed, fed.without_client(client)
        a_idx = int(client)
        old, new = with_a, without_a
    else:
        if other is None:
            raise InvalidProblemError("kind='join' needs other= (the arriving client's federation)")
        if other.n_clients != 1:
            raise InvalidProblemError(f"other must hold exactly one client, got {other.n_clients}")
        with_a = fed.with_client(other) if weight is None else fed.with_client(other, weight=weight)
        without_a = fed
        a_idx = with_a.n_clients - 1
        old, new = without_a, with_a
    p_a = float(with_a.weights[a_idx])
    w_star, w_hat = old.optimum(), new.optimum()
    D_new, D_old = suboptimality_gaps(with_a, np.stack([w_hat, w_star]), [a_idx, a_idx])
    D_new, D_old = float(D_new), float(D_old)   # D^_a at the new optimum (Theorem 2); at the old one
    L_val = float(np.max(_smoothness(with_a))) if L is None else float(L)
    mu_old = _strong_convexity(old) if mu is None else float(mu)
    mu_new = _strong_convexity(new) if mu is None else float(mu)
    mu_val = min(mu_old, mu_new)

    share = p_a        # n_a / n for a departure, n_a / (n + n_a) for a join
    n_ratio = p_a if kind == "depart" else p_a / (1.0 - p_a)   # n_a / n

    if variant == "as_printed":
        D_used, mu_used, const = D_new, mu_val, 8.0
    elif kind == "depart":
        D_used, mu_used, const = D_new, mu_old, 2.0
    else:
        D_used, mu_used, const = D_old, mu_new, 2.0
    measured = float(np.sum((w_star - w_hat) ** 2))
    assumptions = (
        Assumption("F mu-strongly convex, mu > 0", mu_used > 0,
                   f"mu = {mu_used!r} (before shift {mu_old!r}, after {mu_new!r})"),
        Assumption("each F_k L-smooth with L >= mu", L_val > 0 and L_val >= mu_used,
                   f"L = max_k L_k = {L_val!r}, mu = {mu_used!r}"),
        Assumption("client a has a positive share n_a/n < 1 (depart) / any n_a > 0 (join)",
                   0 < p_a < 1, f"p_a = {p_a!r}"),
    )
    value = None
    if all(a.held for a in assumptions):
        try:
            value = const * L_val * share ** 2 * D_used / mu_used ** 2
        except (OverflowError, ZeroDivisionError):
            raise OutOfRangeError(f"the EFL Theorem 2 bound leaves float64 range at L = {L_val!r}, "
                                  f"mu = {mu_used!r}, D = {D_used!r}") from None
    terms = {"w_star": w_star, "w_hat": w_hat, "D_hat": D_new, "D_old_optimum": D_old,
             "D_used": D_used, "L": L_val, "mu": mu_used, "mu_before": mu_old,
             "mu_after": mu_new, "share": share, "n_a_over_n": n_ratio, "constant": const,
             "kind": kind}
    return make_result(value, assumptions, reference=_REF[kind], variant=variant,
                       terms=terms, measured=measured, strict=strict)
