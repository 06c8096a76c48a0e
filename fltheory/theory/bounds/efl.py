"""EFL (Ma et al.) Theorem 1 (eq. 7), its corollaries (eq. 8-9,
section 4.1) and the incomplete-client rate (section 4.2).

Notation: N clients with base weights p^k, E local steps per round, client k
completes s_t^k in {0..E} steps in round t (random, any distribution), the
aggregation weight p_t^k is ``"plain"`` (p^k) or ``"adaptive"``
(E p^k / s_t^k, section 4.2); an inactive client (s = 0) is not aggregated:
p_t^k = 0 (so the s = 0 terms of every sum vanish and sum_k p_t^k counts
active clients only).

Theorem 1 (eq. 7)::

    eta_tau = 16 E / (mu ((tau + 1) E + gamma) S_tau),  S_tau = E[sum_k p_tau^k s_tau^k]
    E||w_{tau E} - w*||^2 <= C_tau / (tau E + gamma)^2 + H_tau J / (tau E + gamma)
    gamma = max{4 E^2 theta / min_tau S_tau, 32 E (1 + theta) L / (mu min_tau S_tau)}
    H_tau = sum_{t < tau} E[r_t]
    C_tau = max{gamma^2 ||w_0 - w*||^2, (16 E / mu)^2 sum_{t < tau} E[B_t] / S_t^2}
    B_t = sum (p_t^k)^2 s_t^k sigma_k^2 + 2 (2 + theta) L sum p_t^k s_t^k D_k
          + (2 + mu / (2 (1 + theta) L)) E (E - 1) G^2 (sum p s + theta (sum p - 2) + sum p s^K)
          + 2 E G^2 sum ((p_t^k)^2 / p^k) s_t^k

Readings (docs/theory/index.md#bounds), ``variant="corrected"`` (default) vs ``"as_printed"``:

* J.  Printed: max_tau 32 E sum_k E[p s] / (D_k / mu E[sum p s]) with D_k
  outside its sum; as printed we evaluate the unbound D_k as D = sum p^k D_k,
  i.e. J = 32 E mu sum_k E[p s] / (D S_tau) (units inverted).  Corrected:
  J = max_tau (32 E / mu) sum_k E[p_tau^k s_tau^k] D_k / S_tau.
* s_t^K in B_t.  Corrected: s_t^k.  As printed we read the capital K as the full
  local step count E (its usual meaning), i.e. the last sum is E sum_k p_t^k.
* r_t (both variants): 0 when E[p_t^k s_t^k] / p^k is the same for every k,
  1 otherwise (section 4.3 uses r = 1 after a departure).
* D_k = F~_k(w*) - F~_k* (EFL section 3.1, below eq. 3) is supplied by the
  caller.  With lambda = 0, F~_k = F_k and :func:`efl_heterogeneity` gives it.
  With lambda > 0 the elastic objective of round tau (eq. 2-3),
      F~_{tau,k}(w) = f_k(w) + (lambda/2) sum_i (w - w_{tau-1}^i)^T diag(I_{tau-1,i}) (w - w_{tau-1}^i),
  depends on the clients' previous models, so it is random and changes every
  round; :func:`efl_elastic_constants` evaluates the reading we take from the
  paper.  (i) w* is the minimiser of F = sum_k p^k f_k: it is the only point
  that minimises F = sum_k p^k F~_{tau,k} (eq. 1) whenever the anchors sit at
  it (the elastic gradient vanishes there), the point EFL converges to, and
  the theorem's left side has one fixed w*.  (ii) D_k enters the proof through
  the one-round inequality of every round tau, inside the expectation over
  the anchors (the step counts are independent of them), so the constant the
  theorem needs is D_k = max_tau E[F~_{tau,k}(w*) - F~_{tau,k}*], the maximum
  over the rounds of the run of the exact expectation over the anchors'
  law; on quadratic clients F~_{tau,k}(w*) - F~_{tau,k}* =
  1/2 grad^T (H_k + lambda diag U)^{-1} grad with grad = grad f_k(w*) +
  lambda (U * w* - V), U = sum_i diag(I_i), V = sum_i diag(I_i) w^i, whose
  expectation needs only E[V] and E[V V^T] per value of U (exact moments).
  (iii) mu and L of Assumptions 1-2 range over every F~_{tau,k} and F that
  occurs: the extreme eigenvalues of H_k + lambda diag U and
  sum_k p^k H_k + lambda diag U.  In round 0 nobody has reported (U = 0), so
  D_k is never below its lambda = 0 value and mu never above it.
  Review note on (i): read literally, EFL eq. 1 sets F = sum_k p^k F~_k with the
  elastic F~_k, so "w* minimiser of F" (section 3.1) would be
  w*_tau = argmin sum_k p^k F~_{tau,k}, a point that moves with the (random)
  anchors; the proof (supplementary material) is not in the text we have, so
  which point it uses cannot be checked.  We keep the fixed w* because the
  theorem's left side E||w_{tau E} - w*||^2 and its "converges to a global
  optimal" need one target, and w*_tau -> w* as the anchors converge.  The
  literal reading never gives the larger weighted heterogeneity: per round and
  anchor value sum_k p^k (F~_{tau,k}(w*) - F~*_{tau,k}) >= the same sum at
  w*_tau, since w*_tau minimises sum_k p^k F~_{tau,k} (test
  ``test_the_literal_reading_of_w_star_gives_a_smaller_weighted_D``); per-client
  D_k are not ordered.
* Eq. (6) sums j = 0..s, the update has s terms (j = 0..s-1); this concerns the
  algorithm, not the value of the bound.

Every expectation is linear in the per-client moments E[p s], E[p],
E[p^2 s], so E[B_t] is evaluated from them exactly.

Finding (tests/theory/test_bounds_efl.py, strict xfail): the factor
sum p s + theta (sum p - 2) + sum p s of the E(E-1) G^2 term
(``terms["drift_factor"]``) is negative under low participation
(sum_k E[p_t^k] < 2 - 2 S_t/theta); it lowers E[B_t] below what the error
needs (the property test found a single client, inactive or one step of
E = 2 each w.p. 1/2, started at w*, with E[B_t] > 0 and the bound below the
exact error), and E[B_t] can be negative for every admissible G^2.  C_tau = max{gamma^2 ||w_0 - w*||^2,
(16E/mu)^2 sum E[B_t]/S_t^2} then loses its variance/heterogeneity part and
the bound fails (e.g. it is 0 from w_0 = w* while the error is positive).
The value is returned as printed (no clipping); ``terms["B_negative"]`` flags
those rounds.  A second finding, independent of both printed defects
(E = 1, D_k = 0, E[B_t] >= 0): C_tau is a max, not a sum, so while
gamma^2 ||w_0 - w*||^2 is the larger branch the bound is below ||w_0 - w*||^2,
yet the gradient noise of the first round can raise the error above it when a
client is often inactive (exact two-client counterexample, same test file).
A third supports the corrected J: with J as printed (32 E mu / D) the bound
fails after a client departure on a deterministic two-client instance where
the corrected J holds (same test file).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ..._validate import checked_arguments, choice, instance, per_client, positive, scalar_int
from ...errors import InvalidHyperparameterError, InvalidProblemError
from ..result import Assumption, BoundResult, make_result
from ._common import constant_from, probability_weights, real_values, uniform_convexity, uniform_smoothness
from ...problems.base import Federation

__all__ = ["ElasticConstants", "StepMoments", "efl_step_moments", "efl_heterogeneity", "efl_elastic_constants",
           "efl_theorem1",
           "efl_theorem1_from_constants", "efl_inactive_rate", "efl_abandonment",
           "efl_incomplete_rate"]

_REF = "EFL (EFL) Theorem 1, eq. (7)"


class StepMoments(NamedTuple):
    """Per-round, per-client moments of (p_t^k, s_t^k), arrays of shape (T, N).

    ps = E[p_t^k s_t^k], p = E[p_t^k], p2s = E[(p_t^k)^2 s_t^k],
    max_ratio = max over the support of p_t^k / p^k (Assumption 5 needs <= theta).
    """

    ps: np.ndarray
    p: np.ndarray
    p2s: np.ndarray
    max_ratio: float


@checked_arguments
def efl_step_moments(weights: ArrayLike, step_probs: ArrayLike, E: int, *,
                     weighting: str = "plain") -> StepMoments:
    """Moments of the aggregation weights from step distributions.

    Parameters
    ----------
    weights : array (N,)
        Base weights p^k (positive, sum 1).
    step_probs : array (N, E+1) or (T, N, E+1)
        P(s_t^k = j) for j = 0..E (rows sum to 1); a 2-D array is the same
        distribution every round.
    E : int
        Local steps of a complete client.
    weighting : {"plain", "adaptive"}
        p_t^k = p^k, or E p^k / s_t^k (EFL section 4.2), for s_t^k > 0;
        p_t^k = 0 when s_t^k = 0.
    """
    weighting = choice("weighting", weighting, ("plain", "adaptive"))
    E = scalar_int("E", E, minimum=1, strict=False)
    p = probability_weights("weights", weights)
    q = real_values("step_probs", step_probs)
    if q.ndim == 2:
        q = q[None]
    if q.ndim != 3 or q.shape[1:] != (p.shape[0], E + 1):
        raise InvalidHyperparameterError(
            f"step_probs must have shape (N, E+1) = ({p.shape[0]}, {E + 1}) or (T, N, E+1), got "
            f"{np.asarray(step_probs).shape}")
    if not np.all(np.isfinite(q)) or np.any(q < 0) or np.any(np.abs(q.sum(-1) - 1) > 1e-9):
        raise InvalidHyperparameterError("step_probs rows must be probability vectors (>= 0, sum 1)")
    s = np.arange(E + 1, dtype=np.float64)
    active = s > 0
    if weighting == "plain":
        ratio = active.astype(np.float64)                       # p_t^k / p^k as a function of s
    else:
        ratio = np.where(active, E / np.where(active, s, 1.0), 0.0)
    pk = p[None, :, None]
    ps = np.sum(q * pk * ratio * s, axis=-1)
    pe = np.sum(q * pk * ratio, axis=-1)
    p2s = np.sum(q * (pk * ratio) ** 2 * s, axis=-1)
    support = q > 0
    max_ratio = float(np.max(np.where(support, ratio[None, None, :], 0.0)))
    return StepMoments(ps, pe, p2s, max_ratio)


@checked_arguments
def efl_heterogeneity(fed: Federation) -> np.ndarray:
    """D_k = F_k(w*) - F_k* for every client, with lambda = 0 (F~_k = F_k)."""
    instance("fed", fed, Federation, "a Federation", InvalidProblemError)
    from ..objective_shift import suboptimality_gaps
    return suboptimality_gaps(fed, fed.optimum())


class ElasticConstants(NamedTuple):
    """Constants of EFL Theorem 1 with the elastic term (module docstring, reading (i)-(iii)).

    D : (T, N) E[F~_{t,k}(w*) - F~_{t,k}*] per round t and client k;
    D_k : (N,) their maximum over the rounds (the theorem's constant);
    mu, L : smallest / largest eigenvalue of every H_k + lambda diag U and
    sum_k p^k H_k + lambda diag U that occurs with positive probability.
    """

    D: np.ndarray
    D_k: np.ndarray
    mu: float
    L: float


@checked_arguments
def efl_elastic_constants(fed: Federation, lam: float, anchor_laws: Any) -> ElasticConstants:
    """Exact D_k, mu and L of EFL Theorem 1 for lambda >= 0 on quadratic clients.

    Parameters
    ----------
    fed : Federation with constant client Hessians (quadratic clients)
    lam : float >= 0
        The elastic coefficient lambda of EFL eq. 2.
    anchor_laws : sequence over rounds t of sequences of components, each with attributes
        ``weight``, ``U`` (d,), ``V_mean`` (d,), ``V_second`` (d, d): the law of the anchors
        U = sum_i diag(I_i), V = sum_i diag(I_i) w^i at the start of round t
        (``fltheory.theory.moments.elastic_anchor_laws``).

    Returns
    -------
    ElasticConstants.  For each component, with A_k = H_k + lambda diag U and
    a_k = grad f_k(w*) + lambda U * w*:
        E[D_{t,k} | U] = 1/2 (a_k^T A_k^{-1} a_k - 2 lambda a_k^T A_k^{-1} E[V]
                              + lambda^2 tr(A_k^{-1} E[V V^T])),
    averaged with the component weights.
    """
    instance("fed", fed, Federation, "a Federation", InvalidProblemError)
    lam = positive("lam", lam, allow_zero=True)
    N, d = fed.n_clients, fed.dim
    w_star = fed.optimum()
    X = np.broadcast_to(w_star, (N, d))
    H = fed.client_hess(X)
    if not np.allclose(H, fed.client_hess(X + 1.0), rtol=1e-12, atol=1e-12):
        raise InvalidProblemError("efl_elastic_constants needs quadratic clients (constant Hessians)")
    g = fed.client_grad(X)
    Hbar = np.einsum("k,kij->ij", fed.weights, H)
    try:
        rounds = [list(r) for r in anchor_laws]
    except TypeError as exc:
        raise InvalidHyperparameterError(
            f"anchor_laws must be a sequence over rounds of sequences of components, got {anchor_laws!r}") from exc
    if not rounds or any(not r for r in rounds):
        raise InvalidHyperparameterError("anchor_laws needs at least one round, each with at least one component")
    D = np.zeros((len(rounds), N))
    mu, L = np.inf, 0.0
    for t, comps in enumerate(rounds):
        total = 0.0
        for c in comps:
            try:
                w = float(c.weight)
                U = np.asarray(c.U, dtype=np.float64)
                Vm = np.asarray(c.V_mean, dtype=np.float64)
                Vs = np.asarray(c.V_second, dtype=np.float64)
            except (AttributeError, TypeError, ValueError) as exc:
                raise InvalidHyperparameterError(
                    f"anchor law components need weight, U, V_mean, V_second; got {c!r}") from exc
            if U.shape != (d,) or Vm.shape != (d,) or Vs.shape != (d, d) or not (0.0 <= w <= 1.0 + 1e-9) \
                    or not (np.all(np.isfinite(U)) and np.all(np.isfinite(Vm)) and np.all(np.isfinite(Vs))):
                raise InvalidHyperparameterError(
                    f"round {t}: a component needs weight in [0, 1], U ({d},), V_mean ({d},), V_second "
                    f"({d}, {d}), all finite; got weight {w!r}, shapes {U.shape}, {Vm.shape}, {Vs.shape}")
            if w == 0.0:
                continue
            total += w
            A = H + lam * np.diag(U)[None]                              # (N, d, d)
            a = g + lam * (U * w_star)[None]                            # (N, d)
            Ainv = np.linalg.inv(A)
            Aa = np.einsum("kij,kj->ki", Ainv, a)
            D[t] += w * 0.5 * (np.einsum("ki,ki->k", a, Aa) - 2 * lam * Aa @ Vm
                               + lam ** 2 * np.einsum("kij,ji->k", Ainv, Vs))
            eig = np.concatenate([np.linalg.eigvalsh(A).ravel(), np.linalg.eigvalsh(Hbar + lam * np.diag(U))])
            mu, L = min(mu, float(eig.min())), max(L, float(eig.max()))
        if abs(total - 1.0) > 1e-9:
            raise InvalidHyperparameterError(f"round {t}: component weights sum to {total!r}, not 1")
    return ElasticConstants(D=D, D_k=D.max(axis=0), mu=mu, L=L)


@checked_arguments
def efl_theorem1(tau: int, *, E: int, theta: float, mu: float, L: float, sigma2: ArrayLike,
                 D: ArrayLike, G2: float, weights: ArrayLike, init_dist2: float,
                 step_probs: ArrayLike | None = None, weighting: str = "plain",
                 moments: StepMoments | None = None, variant: str = "corrected",
                 strict: bool = False) -> BoundResult:
    """EFL Theorem 1 (EFL eq. 7) after ``tau`` rounds; see the module docstring.

    Parameters
    ----------
    tau : int
        Rounds (the bound is on E||w_{tau E} - w*||^2).
    E, theta, mu, L, G2 : constants of Assumptions 1-5.
    sigma2, D : scalar or array (N,)
        Per-client gradient-noise variance sigma_k^2 and heterogeneity D_k.
    weights : array (N,)
        Base weights p^k.
    init_dist2 : float
        ||w_0 - w*||^2.
    step_probs, weighting : see :func:`efl_step_moments`; or pass ``moments``.
        With T < tau rounds of distributions the last one is repeated.  The
        supplied rounds are the schedule of the run: min_tau in gamma runs
        over all of them (also those after ``tau``), since eta_t depends on
        gamma and is fixed before the run.  J's max_tau runs over t < tau
        only (it enters the bound, not the step sizes; over the whole
        schedule it could only be larger).
    variant : {"corrected", "as_printed"}

    Returns
    -------
    BoundResult with terms gamma, J, H, C, eta (step sizes for t < tau),
    S (E[sum p s] per round), B (E[B_t] per round), drift_factor (the factor
    sum p s + theta (sum p - 2) + sum p s^k of the E(E-1) G^2 term, per
    round), B_negative (E[B_t] < 0, per round; a negative drift factor with
    E >= 2 is the failure mode of the printed bound, see the module
    docstring), r (per round).
    """
    variant = choice("variant", variant, ("corrected", "as_printed"))
    T = scalar_int("tau", tau, minimum=1, strict=False)
    E = scalar_int("E", E, minimum=1, strict=False)
    theta = positive("theta", theta)
    mu = positive("mu", mu)
    L = positive("L", L)
    G2 = positive("G2", G2, allow_zero=True)
    w0 = positive("init_dist2", init_dist2, allow_zero=True)
    p = probability_weights("weights", weights)
    N = p.shape[0]
    if moments is not None:
        instance("moments", moments, StepMoments, "a StepMoments (from efl_step_moments) or None",
                 InvalidHyperparameterError)
        if moments.ps.ndim != 2 or moments.ps.shape[1] != N:
            raise InvalidHyperparameterError(
                f"moments must have one column per client ({N}), got ps of shape {moments.ps.shape}")
    sig = np.broadcast_to(np.asarray(per_client("sigma2", sigma2, N, strict=False), float), (N,))
    Dk = np.broadcast_to(np.asarray(per_client("D", D, N, strict=False), float), (N,))
    if moments is None:
        if step_probs is None:
            step_probs = np.zeros((N, E + 1))
            step_probs[:, E] = 1.0
        moments = efl_step_moments(p, step_probs, E, weighting=weighting)
    rows = np.minimum(np.arange(T), moments.ps.shape[0] - 1)
    ps, pe, p2s = moments.ps[rows], moments.p[rows], moments.p2s[rows]      # (T, N)
    S = ps.sum(axis=1)
    # gamma's min_tau runs over the whole schedule of the run (every supplied
    # round, not only t < tau): the step sizes eta_t are fixed before the run.
    S_all = np.concatenate([moments.ps.sum(axis=1), S])

    assumptions = [
        Assumption("Assumption 1-2: 0 < mu <= L", mu <= L, f"mu = {mu!r}, L = {L!r}"),
        Assumption("Assumption 5: p_tau^k <= theta p^k", moments.max_ratio <= theta,
                   f"max p_tau^k / p^k = {moments.max_ratio!r}, theta = {theta!r}"),
        Assumption("E[sum_k p_tau^k s_tau^k] != 0 every round", bool(np.all(S_all > 0)),
                   f"min_tau E[sum p s] = {float(S_all.min())!r}"),
    ]
    value = None
    terms: dict[str, Any] = {"S": S}
    if np.all(S_all > 0):
        Smin = float(S_all.min())
        gamma = max(4 * E ** 2 * theta / Smin, 32 * E * (1 + theta) * L / (mu * Smin))
        t = np.arange(T)
        eta = 16 * E / (mu * ((t + 1) * E + gamma) * S)
        ratio = ps / p[None, :]
        r = (np.ptp(ratio, axis=1) > 1e-12 * np.abs(ratio).max(axis=1)).astype(float)
        H = float(r.sum())
        sum_p = pe.sum(axis=1)
        last = S if variant == "corrected" else E * sum_p
        drift_factor = S + theta * (sum_p - 2) + last
        B = (p2s @ sig + 2 * (2 + theta) * L * (ps @ Dk)
             + (2 + mu / (2 * (1 + theta) * L)) * E * (E - 1) * G2 * drift_factor
             + 2 * E * G2 * (p2s / p[None, :]).sum(axis=1))
        if variant == "corrected":
            J: float | None = float(np.max(32 * E / mu * (ps @ Dk) / S))
        else:
            Dbar = float(p @ Dk)
            J = float(np.max(32 * E * mu * ps.sum(axis=1) / (Dbar * S))) if Dbar > 0 else None
            if J is not None and not np.isfinite(J):
                J = None                                  # D so small that 1/D overflows
        C = max(gamma ** 2 * w0, (16 * E / mu) ** 2 * float(np.sum(B / S ** 2)))
        assumptions.append(Assumption(
            "J is finite (as printed it divides by D)", J is not None,
            f"D = sum p^k D_k = {float(p @ Dk)!r}"))
        if J is not None:
            value = C / (T * E + gamma) ** 2 + H * J / (T * E + gamma)
        terms.update(gamma=gamma, eta=eta, r=r, H=H, J=J, B=B, B_negative=B < 0,
                     drift_factor=drift_factor, C=C,
                     eta_max_allowed=1 / (2 * (1 + theta) * L),
                     first_term=C / (T * E + gamma) ** 2,
                     second_term=None if J is None else H * J / (T * E + gamma))
    return make_result(value, assumptions, reference=_REF, variant=variant, terms=terms,
                       strict=strict)


@checked_arguments
def efl_theorem1_from_constants(constants: Any, tau: int, *, E: int, theta: float,
                                weights: ArrayLike, init_dist2: float, G2: float | None = None,
                                **kwargs: Any) -> BoundResult:
    """:func:`efl_theorem1` with the constants read from a ProblemConstants-like object.

    Assumptions 1-2 of EFL ask every F~_k (and F) to be L-smooth and
    mu-strongly convex: L = max ``client_L`` and mu = min ``client_mu`` when
    those attributes exist (else ``L``, ``mu``).  sigma_k^2 from
    ``sigma2_clients`` (else ``sigma2``, else 0); D_k from ``D_k``.
    Assumption 4 bounds E||g_k||^2 = ||grad f_k||^2 + sigma_k^2 for every
    client: G2 defaults to ``G2_max + max sigma_k^2`` (``G2_max`` is the max
    over a ball of max_k ||grad f_k||^2, so the bound is valid while the
    iterates stay in that ball); pass ``G2`` explicitly otherwise.
    """
    sig = constant_from(constants, "sigma2_clients", "sigma2", default=0.0, required=False)
    if G2 is None:
        g_max = constant_from(constants, "G2_max", "G2", required=False, default=None)
        if g_max is None:
            raise InvalidHyperparameterError(
                "the constants carry no G2_max/G2 (no radius given); pass G2= explicitly")
        G2 = float(g_max) + float(np.max(sig))
    return efl_theorem1(
        tau, E=E, theta=theta, weights=weights, init_dist2=init_dist2,
        mu=uniform_convexity(constants), L=uniform_smoothness(constants), sigma2=sig,
        D=constant_from(constants, "D_k", "D"), G2=G2, **kwargs)


@checked_arguments
def efl_inactive_rate(tau: int, inactive: ArrayLike, J: float, E: int, *, constant: float = 1.0) -> float:
    """Section 4.1: the rate with inactive clients, constant * sum_{t<tau} y_t J / (tau E + E^2).

    ``inactive`` holds y_t for t = 0..tau-1 (indicators or probabilities, in [0, 1])."""
    tau = scalar_int("tau", tau, minimum=1, strict=False)
    E = scalar_int("E", E, minimum=1, strict=False)
    y = real_values("inactive", inactive)
    if y.shape != (int(tau),):
        raise InvalidHyperparameterError(f"inactive must have shape ({tau},), got {y.shape}")
    if not np.all((y >= 0) & (y <= 1)):
        raise InvalidHyperparameterError(f"inactive y_t must lie in [0, 1], got {y.tolist()}")
    positive("J", J, allow_zero=True)
    return float(constant * y.sum() * J / (tau * E + E ** 2))


@checked_arguments
def efl_abandonment(y_a: float, J: float, C: float, T: int, E: int, tau0: int,
                    gamma: float, *, constant: float = 1.0) -> BoundResult:
    """Corollary 1 (EFL eq. 8-9): abandon an inactive client a when
    y^a J > f_1(T) = C~_T / (E (T - tau0) + gamma~)^2 with C~_T = T C and
    gamma~ = gamma (the paper's approximations C_tau ~ C~_tau = tau C).

    Returns a BoundResult with value = f_1(T), measured = y^a J (f_0, the bound
    when the client is kept); ``terms["abandon"]`` is the eq. (8) decision and
    ``terms["eq9_threshold"]`` = constant * (C / J) / (T E) (eq. 9).  E >= 1, C >= 0 and
    gamma > 0 (the constants of Theorem 1) are checked hypotheses like the others:
    when one fails, value, ``f1``, ``abandon`` and ``eq9_threshold`` are None.
    """
    y_a = float(y_a)
    assumptions = (
        Assumption("0 < y^a < 1", 0 < y_a < 1, f"y^a = {y_a!r}"),
        Assumption("0 <= tau0 < T", 0 <= tau0 < T, f"tau0 = {tau0!r}, T = {T!r}"),
        Assumption("J > 0", J > 0, f"J = {J!r}"),
        Assumption("E >= 1, C >= 0, gamma > 0 (Theorem 1's constants)", E >= 1 and C >= 0 and gamma > 0,
                   f"E = {E!r}, C = {C!r}, gamma = {gamma!r}"),
    )
    held = all(a.held for a in assumptions)
    f1 = T * C / (E * (T - tau0) + gamma) ** 2 if held else None
    kept = y_a * J
    terms = {"f0": kept, "f1": f1, "abandon": kept > f1 if f1 is not None else None,
             "eq9_threshold": constant * (C / J) / (T * E) if held else None}
    return make_result(f1, assumptions, reference="EFL (EFL) Corollary 1, eq. (8)-(9)",
                       variant="as_printed", terms=terms, measured=kept)


@checked_arguments
def efl_incomplete_rate(tau: int, E: int, weights: ArrayLike, sigma2: ArrayLike, inv_steps: ArrayLike, *,
                        constant: float = 1.0) -> float:
    """Section 4.2 rate with adaptive weights p_t^k = E p^k / s_t^k::

        constant * (E^5 sum_t sum_k p^k E[1/s_t^k] + E^2 sum_t sum_k (p^k sigma_k)^2 E[1/s_t^k])
                   / (tau E + E^2)^2

    ``inv_steps`` holds E[1/s_t^k] as (N,) (every round) or (tau, N); the
    adaptive weight needs s_t^k >= 1, so E[1/s_t^k] lies in [1/E, 1] (an
    inactive client has no finite E[1/s]); ``sigma2`` is sigma_k^2 (so
    (p^k sigma_k)^2 = (p^k)^2 sigma_k^2).
    """
    tau = scalar_int("tau", tau, minimum=1, strict=False)
    E = scalar_int("E", E, minimum=1, strict=False)
    p = probability_weights("weights", weights)
    inv_values, s2_values = real_values("inv_steps", inv_steps), real_values("sigma2", sigma2)
    try:
        inv = np.broadcast_to(inv_values, (int(tau), p.shape[0]))
        s2 = np.broadcast_to(s2_values, p.shape)
    except ValueError as exc:
        raise InvalidHyperparameterError(
            f"inv_steps must have shape ({p.shape[0]},) or ({tau}, {p.shape[0]}) and sigma2 "
            f"({p.shape[0]},) or scalar; got {np.shape(inv_steps)} and {np.shape(sigma2)}") from exc
    if not np.all((inv >= 1.0 / E - 1e-12) & (inv <= 1.0 + 1e-12)):
        raise InvalidHyperparameterError(
            f"E[1/s_t^k] must lie in [1/E, 1] = [{1.0 / E}, 1] (s in 1..E), got {np.asarray(inv_steps).tolist()}")
    if np.any(s2 < 0) or not np.all(np.isfinite(s2)):
        raise InvalidHyperparameterError(f"sigma2 must be finite and >= 0, got {np.asarray(sigma2).tolist()}")
    num = E ** 5 * np.sum(inv @ p) + E ** 2 * np.sum(inv @ (p ** 2 * s2))
    return float(constant * num / (tau * E + E ** 2) ** 2)
