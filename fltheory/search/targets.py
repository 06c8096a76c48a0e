"""Built-in search targets: the bounds of fltheory.theory whose measured side is
computable exactly, each with a default space that does not single out any
failing region.

* ``efl_eq10_depart``, ``efl_eq11_join``, ``efl_eq11_join_derived``: the
  objective shift of EFL (Ma et al., EFL, Theorem 2, eq. (10)/(11)) as
  :func:`fltheory.theory.objective_shift` computes it (exact minimisers of
  random quadratic federations; measured = ||w* - w^*||^2).
* ``fedopt_theorem1``: Wang et al., Local Adaptivity in FL (LocalAdaptivity),
  Theorem 1 in its unrolled recursion form
  (:func:`fltheory.theory.bounds.fedopt_theorem1_quadratic`) against the exact
  E||x_t - x~||^2 of FedAvg with noisy SGD clients, by second-moment
  propagation (no sampling); the reported pair is the round t = 0..R with the
  largest measured/bound (t >= 1).

Instances: :func:`quadratic_clients` with the candidate's seed (every client
spectrum in [mu, L], both ends attained by client 0 when d >= 2; client optima
spread by ``heterogeneity``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..problems import QuadraticFederation
from ..theory import BoundResult, objective_shift
from ..theory.bounds import fedopt_theorem1_quadratic
from .space import Categorical, Integer, Real, Space
from .target import SearchTarget, register

__all__ = ["build_shift_instance", "fedopt_theorem1_exact_errors", "objective_shift_space", "shift_slack"]

SAMPLES_PER_CLIENT = 100


def quadratic_clients(n_clients: int, dim: int, L: float, mu: float, heterogeneity: float,
                      n_samples: Any, seed: int) -> QuadraticFederation:
    """Random clients f_i(x) = 1/2 (x - x_i*)^T H_i (x - x_i*) from ``seed``.

    H_i = Q_i diag(lambda_i) Q_i^T with Q_i Haar-orthogonal (QR of a Gaussian
    matrix, signs fixed by diag(R)) and lambda_i uniform in [mu, L], client 0
    having exactly mu and L when d >= 2; x_i* = heterogeneity z_i, z_i ~ N(0, I/d).
    """
    rng = np.random.default_rng(seed)
    lam = rng.uniform(mu, L, size=(n_clients, dim))
    if dim >= 2:
        lam[0, :2] = mu, L
    Q, R = np.linalg.qr(rng.standard_normal((n_clients, dim, dim)))
    Q = Q * np.sign(np.diagonal(R, axis1=1, axis2=2))[:, None, :]
    H = np.einsum("nij,nj,nkj->nik", Q, lam, Q)
    H = 0.5 * (H + np.swapaxes(H, 1, 2))
    optima = heterogeneity * rng.standard_normal((n_clients, dim)) / np.sqrt(dim)
    return QuadraticFederation(H, np.einsum("nij,nj->ni", H, optima), n_samples=n_samples)


def objective_shift_space(kind: str) -> Space:
    """Default space of the objective-shift targets.

    The newcomer's (join) or leaver's (depart) share of the data is log-uniform
    over four decades around 1 (``share`` = n_a/n, n the samples of the others),
    N and d small integers, L/mu up to 1e5, client optima spread over four decades.
    """
    return Space([
        Integer("N", 2 if kind == "depart" else 1, 6, shrink=True),
        Integer("d", 1, 5, shrink=True),
        Real("share", 0.01, 100.0, log=True),
        Real("L", 1.0, 100.0, log=True),
        Real("mu", 1e-3, 1.0, log=True),
        Real("heterogeneity", 1e-2, 1e2, log=True),
    ])


def _split(fed: QuadraticFederation, counts: list[int], first: int) -> tuple[QuadraticFederation,
                                                                              QuadraticFederation]:
    head = QuadraticFederation(fed.H[:first], fed.e[:first], n_samples=counts[:first])
    tail = QuadraticFederation(fed.H[first:], fed.e[first:], n_samples=counts[first:])
    return head, tail


def build_shift_instance(point: Mapping[str, Any], seed: int, kind: str
                         ) -> tuple[QuadraticFederation, QuadraticFederation | None]:
    """The federation of an objective-shift point.

    ``kind="join"``: N clients with 100 samples each, and an arriving client with
    n_a = max(1, round(share * 100 N)) samples -> (fed, newcomer).
    ``kind="depart"``: client 0 holds n_a = max(1, round(share * 100 (N - 1)))
    samples, the others 100 each -> (fed, None); client 0 departs.
    """
    N, d = int(point["N"]), int(point["d"])
    if kind == "join":
        n_a = max(1, round(float(point["share"]) * SAMPLES_PER_CLIENT * N))
        counts = [SAMPLES_PER_CLIENT] * N + [n_a]
        fed = quadratic_clients(N + 1, d, float(point["L"]), float(point["mu"]),
                              float(point["heterogeneity"]), counts, seed)
        old, new = _split(fed, counts, N)
        return old, new
    n_a = max(1, round(float(point["share"]) * SAMPLES_PER_CLIENT * (N - 1)))
    counts = [n_a] + [SAMPLES_PER_CLIENT] * (N - 1)
    fed = quadratic_clients(N, d, float(point["L"]), float(point["mu"]),
                          float(point["heterogeneity"]), counts, seed)
    return fed, None


def shift_slack(res: BoundResult) -> float:
    """Rounding allowance of an objective-shift instance.

    Each optimum is solved to about delta = 64 kappa eps s (kappa = L/mu, s a bound
    on the norms of w*, w^* and x_a*), so ||w* - w^*||^2 carries an error up to
    2 ||w* - w^*|| delta + delta^2, and D = 1/2 r^T H_a r (r = w - x_a*, ||r|| >=
    sqrt(2 D/L)) a relative error up to 2 delta / ||r|| (both matter when the shift
    or the residual is tiny: cancellation).
    """
    t = res.terms
    eps = float(np.finfo(float).eps)
    L, mu, D = float(t["L"]), float(t["mu"]), float(t["D_used"])
    scale = float(np.linalg.norm(t["w_star"]) + np.linalg.norm(t["w_hat"])) + math.sqrt(2 * D / mu) + 1.0
    delta = 64 * (L / mu) * eps * scale
    measured, value = float(res.measured or 0.0), float(res.value or 0.0)
    rel = 2 * delta / math.sqrt(2 * D / L) if D > 0 else 0.0
    return 2 * math.sqrt(measured) * delta + delta ** 2 + value * (rel + 1e-12)


def efl_eq10_depart(point: Mapping[str, Any], seed: int) -> BoundResult:
    """EFL Theorem 2 eq. (10) as printed, client 0 departing."""
    fed, _ = build_shift_instance(point, seed, "depart")
    return objective_shift(fed, 0, kind="depart", variant="as_printed")


def efl_eq11_join(point: Mapping[str, Any], seed: int) -> BoundResult:
    """EFL Theorem 2 eq. (11) as printed (D^_a at the new optimum)."""
    fed, new = build_shift_instance(point, seed, "join")
    return objective_shift(fed, kind="join", other=new, variant="as_printed")


def efl_eq11_join_derived(point: Mapping[str, Any], seed: int) -> BoundResult:
    """EFL Theorem 2, join, the bound the standard argument proves (constant 2,
    D_a at the old optimum, mu of the new objective)."""
    fed, new = build_shift_instance(point, seed, "join")
    return objective_shift(fed, kind="join", other=new, variant="derived")


FEDOPT_ROUNDS = 20


def fedopt_space() -> Space:
    """Default space of ``fedopt_theorem1``: eta_i L_i = ``step`` in [0.05, 2.5]
    (stable local GD below 2, outside the theorem's hypothesis eta_i < 2/L_i
    above it, so the search also shows that such points are recorded and
    never counted), tau local steps, noise, server rate, and the reading."""
    return Space([
        Integer("N", 1, 4, shrink=True),
        Integer("d", 1, 3, shrink=True),
        Real("L", 1.0, 10.0, log=True),
        Real("mu", 0.05, 1.0, log=True),
        Real("heterogeneity", 0.0, 10.0),
        Real("step", 0.05, 2.5),
        Integer("tau", 1, 5),
        Real("sigma2", 0.0, 10.0),
        Real("server_lr", 0.1, 1.0),
        Categorical("form", ["squared", "paper"]),
    ])


def fedopt_theorem1_exact_errors(fed: QuadraticFederation, lr: np.ndarray, tau: np.ndarray,
                                 sigma2: np.ndarray, server_lr: float, x0: np.ndarray,
                                 fixed_point: np.ndarray, rounds: int) -> np.ndarray:
    """E||x_t - x~||^2, t = 0..rounds, of FedAvg with server rate eta_s and noisy
    SGD clients (tau_i steps of rate eta_i, noise N(0, sigma_i^2/d I)), exactly.

    With e = x - x~ and M_i = I - eta_i H_i, one round is
    e' = A e + n, A = (1 - eta_s) I + eta_s sum_i p_i M_i^{tau_i}, and n has mean 0
    and covariance C = eta_s^2 sum_i p_i^2 eta_i^2 sigma_i^2/d sum_{j<tau_i} M_i^{2j},
    independent of e; so P = E[e e^T] maps to A P A^T + C and E||e||^2 = tr P.
    """
    N, d = fed.n_clients, fed.dim
    eye = np.eye(d)
    M = eye - lr[:, None, None] * fed.H                               # (N, d, d)
    power = np.broadcast_to(eye, (N, d, d)).copy()                     # M_i^j
    noise = np.zeros((N, d, d))                                        # sum_{j<tau_i} M_i^{2j}
    for j in range(int(tau.max())):                                    # over steps, not clients
        live = (j < tau)[:, None, None]
        noise += live * (power @ np.swapaxes(power, 1, 2))
        power = np.where(live, M @ power, power)
    p = fed.weights
    A = (1 - server_lr) * eye + server_lr * np.einsum("n,nij->ij", p, power)
    C = server_lr ** 2 * np.einsum("n,nij->ij", p ** 2 * lr ** 2 * sigma2 / d, noise)
    e = x0 - fixed_point
    P = np.outer(e, e)
    out = np.empty(rounds + 1)
    out[0] = np.trace(P)
    for t in range(1, rounds + 1):
        P = A @ P @ A.T + C
        out[t] = np.trace(P)
    return out


def fedopt_theorem1(point: Mapping[str, Any], seed: int) -> BoundResult:
    """LocalAdaptivity Theorem 1 (unrolled) against the exact mean squared error; the
    result's value/measured are the bound and the exact error at the round
    t* = argmax_{t >= 1} exact_t / bound_t (``terms["round"]``; at t = 0 both are e_0)."""
    N, d = int(point["N"]), int(point["d"])
    fed = quadratic_clients(N, d, float(point["L"]), float(point["mu"]), float(point["heterogeneity"]),
                          None, seed)
    lr = float(point["step"]) / fed.client_L
    tau = np.full(N, int(point["tau"]))
    sigma2 = np.full(N, float(point["sigma2"]))
    x0 = np.full(d, 3.0)
    res = fedopt_theorem1_quadratic(fed, FEDOPT_ROUNDS, lr=lr, local_steps=tau, sigma2=sigma2,
                                    server_lr=float(point["server_lr"]), x0=x0, form=str(point["form"]))
    if not res.valid:
        return res
    bound = np.asarray(res.terms["per_round"], dtype=np.float64)
    exact = fedopt_theorem1_exact_errors(fed, lr, tau, sigma2, float(point["server_lr"]), x0,
                                         res.terms["fixed_point"], FEDOPT_ROUNDS)
    ratios = np.where(bound > 0, exact / np.where(bound > 0, bound, 1.0), 0.0)
    t = 1 + int(np.argmax(ratios[1:]))          # t = 0 is e_0 on both sides

    terms = dict(res.terms, round=t, exact_per_round=exact)
    return dataclasses.replace(res, value=float(bound[t]), measured=float(exact[t]), terms=terms)


register(SearchTarget(
    "efl_eq10_depart", efl_eq10_depart, objective_shift_space("depart"),
    "Ma et al., EFL (EFL), Theorem 2, eq. (10), as printed",
    "||w* - w^*||^2 when client 0 departs, against 8 L (n_a/n)^2 D^_a / mu^2", shift_slack))
register(SearchTarget(
    "efl_eq11_join", efl_eq11_join, objective_shift_space("join"),
    "Ma et al., EFL (EFL), Theorem 2, eq. (11), as printed",
    "||w* - w^*||^2 when a client joins, against 8 L (n_a/(n+n_a))^2 D^_a / mu^2", shift_slack))
register(SearchTarget(
    "efl_eq11_join_derived", efl_eq11_join_derived, objective_shift_space("join"),
    "Ma et al., EFL (EFL), Theorem 2, eq. (11), derived reading (constant 2, D_a at the old optimum)",
    "||w* - w^*||^2 when a client joins, against 2 L (n_a/(n+n_a))^2 D~_a / mu_new^2", shift_slack))
register(SearchTarget(
    "fedopt_theorem1", fedopt_theorem1, fedopt_space(),
    "Wang et al., Local Adaptivity in FL (LocalAdaptivity), Theorem 1, unrolled recursion",
    "exact E||x_t - x~||^2 of FedAvg with noisy SGD clients, against a^t e_0 + V (1 - a^t)/(1 - a)"))
