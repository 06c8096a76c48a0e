"""LocalAdaptivity (Wang et al., Local Adaptivity in FL), Theorem 1 in the derived
recursion form of docs/theory/fixed-points.md.

Assumptions (restated, docs/theory/fixed-points.md):

* A1: ||E O_i(x) - E O_i(y)||^2 <= rho_i ||x - y||^2, rho_bar = sum p_i rho_i < 1;
* A2: E||O_i(x) - E O_i(x)||^2 <= phi_i, client noises independent;
* server rate eta_s in (0, 1].

Recursion [derived]: with e_t = E||x_t - x~||^2 and x~ the fixed point of
T = sum p_i E O_i,

    e_{t+1} <= (1 - eta_s (1 - rho_bar)) e_t + eta_s^2 sum_i p_i^2 phi_i

(convexity of ||.||^2 for eta_s in [0, 1], Jensen over the clients, and the
independence of the client noises).  Unrolled with a = 1 - eta_s (1 - rho_bar)
and V = eta_s^2 sum p_i^2 phi_i::

    e_t <= a^t e_0 + V (1 - a^t) / (1 - a).

For SGD clients on quadratics with spectrum in [mu_i, L_i] and Gaussian noise
of variance sigma_i^2: the deterministic map is x -> (I - eta H_i)^{tau_i} x + c,
so rho_i = q_i^{2 tau_i} with q_i = max(|1 - eta mu_i|, |1 - eta L_i|)
("squared", exact for the worst direction) or the looser unsquared rho_i = q_i^{tau_i}
("paper"; equal to (1 - eta mu_i)^{tau_i} for eta <= 2/(L_i + mu_i), valid for every eta);
phi_i = tau_i eta^2 sigma_i^2 when q_i <= 1 (the noise injected at step j is damped by (I - eta H)^{tau-1-j}).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validate import checked_arguments, choice, finite_array, instance, per_client, positive
from ...errors import InvalidHyperparameterError, InvalidProblemError
from ..result import Assumption, BoundResult, make_result
from ...aliases import Rate, Steps
from ...problems.quadratic import QuadraticFederation
from ._common import probability_weights, real_values
from .gd_contraction import gd_contraction_factor

__all__ = ["sgd_operator_constants", "fedopt_theorem1", "fedopt_theorem1_quadratic",
           "fedopt_theorem1_from_constants"]

_REF = "LocalAdaptivity (Local Adaptivity) Theorem 1, derived recursion (docs/theory/fixed-points.md)"


@checked_arguments
def sgd_operator_constants(lr: Rate, local_steps: Steps, mu: Any, L: Any, sigma2: ArrayLike, *,
                           form: str = "squared") -> tuple[np.ndarray, np.ndarray, tuple[Assumption, ...]]:
    """(rho_i, phi_i, assumptions) of SGD clients for A1/A2 of LocalAdaptivity.

    ``form="squared"``: rho_i = max(|1 - eta_i mu_i|, |1 - eta_i L_i|)^{2 tau_i}.
    ``form="paper"``: rho_i = q_i^{tau_i}, the unsquared Lipschitz constant of the
    client map (:func:`~fltheory.theory.bounds.gd_contraction.gd_contraction_factor`),
    which is (1 - eta_i mu_i)^{tau_i} for eta_i <= 2/(L_i + mu_i) and valid for
    every eta_i; a contraction iff eta_i < 2/L_i (the former hypothesis
    eta_i <= 1/L_i is relaxed to this).
    phi_i = tau_i eta_i^2 sigma_i^2 (needs q_i <= 1, i.e. eta_i <= 2 / L_i).
    All arguments are scalars or per-client arrays of one common length.
    """
    form = choice("form", form, ("squared", "paper"))
    arrs = [np.atleast_1d(finite_array(name, v, error=InvalidHyperparameterError))
            for name, v in zip(("lr", "local_steps", "mu", "L", "sigma2"), (lr, local_steps, mu, L, sigma2))]
    try:
        eta, tau, mu_, L_, s2 = np.broadcast_arrays(*arrs)
    except ValueError as exc:
        raise InvalidHyperparameterError(
            f"lr, local_steps, mu, L, sigma2 must be scalars or arrays of one length, got shapes "
            f"{[a.shape for a in arrs]}") from exc
    if np.any(eta <= 0) or np.any(tau < 1) or np.any(np.mod(tau, 1) != 0) or np.any(mu_ <= 0) \
            or np.any(L_ < mu_) or np.any(s2 < 0):
        raise InvalidHyperparameterError(
            f"need lr > 0, integer local_steps >= 1, 0 < mu <= L, sigma2 >= 0; got lr={eta}, "
            f"local_steps={tau}, mu={mu_}, L={L_}, sigma2={s2}")
    q = np.maximum(np.abs(1 - eta * mu_), np.abs(1 - eta * L_))
    if form == "squared":
        rho = q ** (2 * tau)
        a_rate = Assumption("A1 with rho_i = q_i^(2 tau_i) (exact worst-case squared contraction)",
                            True, f"q = {q.tolist()}")
    else:
        # q^tau is the tight Lipschitz constant of tau GD steps for every eta; it equals
        # (1 - eta mu)^tau up to eta = 2/(L + mu), so eta <= 1/L is not needed.
        rho = gd_contraction_factor(eta, tau, mu_, L_)
        a_rate = Assumption("eta_i < 2/L_i (rho_i = max(|1 - eta mu|, |1 - eta L|)^tau < 1)",
                            bool(np.all(eta * L_ < 2)), f"eta L = {(eta * L_).tolist()}")
    phi = tau * eta ** 2 * s2
    a_phi = Assumption("q_i <= 1 (noise not amplified; phi_i = tau eta^2 sigma^2)",
                       bool(np.all(q <= 1)), f"q = {q.tolist()}")
    return rho, phi, (a_rate, a_phi)


def _per_client_values(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A finite scalar or per-client array broadcast to ``shape`` (typed errors otherwise)."""
    arr = finite_array(name, value, error=InvalidHyperparameterError)
    try:
        return np.broadcast_to(arr, shape)
    except ValueError:
        raise InvalidHyperparameterError(
            f"{name} must be a scalar or an array of shape {shape}, got shape {arr.shape}") from None


@checked_arguments
def fedopt_theorem1(rounds: int, *, rho: Any, phi: Any, weights: ArrayLike, server_lr: float,
                    init_dist2: float, extra_assumptions: tuple[Assumption, ...] = (),
                    strict: bool = False) -> BoundResult:
    """Unrolled LocalAdaptivity Theorem 1 bound on E||x_R - x~||^2 (docs/theory/fixed-points.md).

    value = a^R e_0 + V (1 - a^R)/(1 - a), a = 1 - eta_s (1 - sum p_i rho_i),
    V = eta_s^2 sum p_i^2 phi_i.  ``terms["per_round"]`` holds the bound for
    t = 0..R.
    """
    R = per_client("rounds", rounds, None, integer=True, minimum=0, strict=False)
    if not isinstance(R, int):
        raise InvalidHyperparameterError(f"rounds must be one integer, got {rounds!r}")
    p = probability_weights("weights", np.atleast_1d(real_values("weights", weights)))
    rho_a = _per_client_values("rho", rho, p.shape)
    phi_a = _per_client_values("phi", phi, p.shape)
    eta_s = positive("server_lr", server_lr)
    e0 = positive("init_dist2", init_dist2, allow_zero=True)
    if isinstance(extra_assumptions, (str, bytes)) or not isinstance(extra_assumptions, (tuple, list)) \
            or not all(isinstance(a, Assumption) for a in extra_assumptions):
        raise InvalidHyperparameterError(
            f"extra_assumptions must be a tuple of Assumption records, got {extra_assumptions!r:.80}")
    rho_bar = float(p @ rho_a)
    V = eta_s ** 2 * float(np.sum(p ** 2 * phi_a))
    a = 1 - eta_s * (1 - rho_bar)
    assumptions = tuple(extra_assumptions) + (
        Assumption("rho_bar = sum p_i rho_i < 1", rho_bar < 1, f"rho_bar = {rho_bar!r}"),
        Assumption("0 < eta_s <= 1", eta_s <= 1, f"eta_s = {eta_s!r}"),
        Assumption("phi_i >= 0", bool(np.all(phi_a >= 0)), f"phi = {phi_a.tolist()}"),
    )
    t = np.arange(R + 1)
    per_round = None
    value = None
    if rho_bar < 1:
        per_round = a ** t * e0 + V * (1 - a ** t) / (1 - a)
        value = float(per_round[-1])
    terms = {"rho_bar": rho_bar, "contraction": a, "noise": V, "per_round": per_round,
             "floor": V / (1 - a) if rho_bar < 1 else None}
    return make_result(value, assumptions, reference=_REF, variant="derived", terms=terms,
                       strict=strict)


@checked_arguments
def fedopt_theorem1_quadratic(fed: QuadraticFederation, rounds: int, *, lr: Rate, local_steps: Steps,
                              sigma2: ArrayLike, server_lr: float, x0: ArrayLike, form: str = "squared",
                              strict: bool = False) -> BoundResult:
    """LocalAdaptivity Theorem 1 for SGD clients on a QuadraticFederation with Gaussian
    gradient noise: constants from the client spectra (fed.client_mu,
    fed.client_L), x~ from :func:`~fltheory.theory.closed_forms.fedopt_quadratic_fixed_point`,
    e_0 = ||x0 - x~||^2."""
    from ..closed_forms import fedopt_quadratic_fixed_point
    instance("fed", fed, QuadraticFederation, "a QuadraticFederation", InvalidProblemError)
    x0 = finite_array("x0", x0, ndim=1, error=InvalidProblemError)
    if x0.shape != (fed.dim,):
        raise InvalidProblemError(f"x0 must have shape ({fed.dim},), got {x0.shape}")
    sigma2 = _per_client_values("sigma2", sigma2, (fed.n_clients,))
    fp = fedopt_quadratic_fixed_point(fed, lr, local_steps)
    rho, phi, extra = sgd_operator_constants(
        np.broadcast_to(lr, (fed.n_clients,)), np.broadcast_to(local_steps, (fed.n_clients,)),
        fed.client_mu, fed.client_L, np.broadcast_to(sigma2, (fed.n_clients,)), form=form)
    res = fedopt_theorem1(rounds, rho=rho, phi=phi, weights=fed.weights, server_lr=server_lr,
                          init_dist2=float(np.sum((x0 - fp.x) ** 2)), extra_assumptions=extra,
                          strict=strict)
    res.terms["fixed_point"] = fp.x
    return res


@checked_arguments
def fedopt_theorem1_from_constants(constants: Any, rounds: int, *, lr: Rate, local_steps: Steps,
                                   weights: ArrayLike, server_lr: float, init_dist2: float,
                                   form: str = "squared", strict: bool = False) -> BoundResult:
    """LocalAdaptivity Theorem 1 for SGD clients with rho_i, phi_i from the per-client
    constants ``client_mu``, ``client_L``, ``sigma2_clients`` of a
    ProblemConstants-like object (see :func:`sgd_operator_constants`).
    ``init_dist2`` is ||x_0 - x~||^2 with x~ the fixed point of T."""
    from ._common import constant_from
    rho, phi, extra = sgd_operator_constants(
        lr, local_steps, constant_from(constants, "client_mu"), constant_from(constants, "client_L"),
        constant_from(constants, "sigma2_clients", "sigma2", default=0.0, required=False), form=form)
    p = probability_weights("weights", np.atleast_1d(real_values("weights", weights)))
    if rho.shape[0] not in (1, p.shape[0]):
        raise InvalidHyperparameterError(
            f"weights has {p.shape[0]} entries but the constants and rates describe {rho.shape[0]} clients")
    return fedopt_theorem1(rounds, rho=np.broadcast_to(rho, p.shape), phi=np.broadcast_to(phi, p.shape),
                           weights=p, server_lr=server_lr, init_dist2=init_dist2,
                           extra_assumptions=extra, strict=strict)
