"""Exact moments of EFL with the Fisher-elastic term (lambda >= 0, no compression) on quadratic clients.

EFL (Ma et al., "Elastic Federated Learning", Alg. 1, eq. 2-6; ``fltheory.algorithms.EFL``
with ``compression=None``) on clients f_k(y) = 1/2 y^T H_k y - e_k^T y with additive gradient
noise of covariance C_k.  Without compression the residuals stay 0 and the client copy equals
the server model x, so the law of the state is that of

    z = (x, w_1, ..., w_N),   w_i = client i's model at its latest report (its anchor),

together with the set R of clients that have reported (u_i = diag(I_i) = Fisher diagonal,
deterministic on quadratic clients; u_i = 0 before the first report).  With
U = sum_{i in R} u_i and V = sum_i u_i * w_i (the elastic term of eq. 3), an active client k
(s_k > 0 completed steps, rate eta_k) runs s_k steps of

    w <- w - eta_k (H_k w - e_k + lambda U * w - lambda V + eps),
    i.e.  w_final = A_k x + P_k (e_k + lambda V) + n_k,   B_k = I - eta_k (H_k + lambda diag U),
    A_k = B_k^{s_k},  P_k = eta_k sum_{j<s_k} B_k^j,  Cov n_k = eta_k^2 sum_{j<s_k} B_k^j C_k B_k^{jT},

and the round sets x' = x + sum_{k active} p_tau^k (w_final,k - x), w_k' = w_final,k, R' = R u active
(p_tau^k = p^k, or E_k p^k / s_k for ``weights="adaptive"``, capped at theta p^k under
``on_excess="clip"``).  Given the outcome (who is active with how many steps) and R this is
z' = M z + c + noise, so with mu = E[z | R], Sigma = E[z z^T | R]:

    E[z'] = M mu + c,   E[z' z'^T] = M Sigma M^T + M mu c^T + c mu^T M^T + c c^T + Q,
    Q = sum_k G_k Cov(n_k) G_k^T  (G_k puts n_k into x with p_tau^k and into w_k with 1).

The law of (z, R) is a finite mixture over R (one component per reported set), the outcomes
are enumerated exactly with :func:`.support.participation_support` (never sampled).  Per
round O(#components x #outcomes x ((N+1) d)^3); the tests hold this path to
:func:`.engine.exact_moments` (which reads the maps off the real round) and to Monte Carlo.

:func:`elastic_anchor_laws` turns the per-round mixture (from this path or from
``exact_moments(EFL(...), keep_states=True)``) into (weight, U, E[V], E[V V^T]) per
component: what the elastic objective F~_{tau,k} of round tau depends on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...algorithms import EFL
from ...algorithms.base import resolve_per_client
from ..._validate import instance, integer
from ...errors import AssumptionError, InvalidHyperparameterError, InvalidProblemError, NotAffineError
from ...participation import Participation
from ...problems.base import Federation
from ...problems.quadratic import QuadraticFederation
from .engine import ExactMoments, StateComponent, quadratic_errors
from .noise import additive_noise_of
from ._checks import finite_result, model_vector, participation_of, quadratic_problem, rounds_of
from .support import support_of

__all__ = ["AnchorLaw", "ElasticState", "efl_elastic_gradient_moments", "efl_elastic_moments",
           "elastic_anchor_laws"]


@dataclass(frozen=True)
class ElasticState:
    """The discrete part of a component of :func:`efl_elastic_moments`: reported (N,) bool, u (N, d)."""

    reported: np.ndarray
    u: np.ndarray

    @property
    def U(self) -> np.ndarray:
        """U = sum_{i reported} u_i."""
        return self.u.sum(axis=0)


@dataclass(frozen=True)
class AnchorLaw:
    """One mixture component of the anchors at the start of a round: its probability ``weight``,
    U = sum_i u_i (d,), E[V] (d,) and E[V V^T] (d, d) with V = sum_i u_i * w_i."""

    weight: float
    U: np.ndarray
    V_mean: np.ndarray
    V_second: np.ndarray


def _client_pieces(problem: QuadraticFederation, eta: np.ndarray, lam: float, U: np.ndarray, E: int,
                   cov: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (N, E+1, d, d) = B^s, P (N, E+1, d, d) = eta sum_{j<s} B^j, Vn (N, E+1, d, d), s = 0..E."""
    N, d = problem.n_clients, problem.dim
    I = np.eye(d)
    B = I - eta[:, None, None] * (problem.H + lam * np.diag(U)[None])
    A = np.empty((N, E + 1, d, d))
    P = np.zeros((N, E + 1, d, d))
    Vn = np.zeros((N, E + 1, d, d))
    A[:, 0] = I
    for s in range(1, E + 1):
        A[:, s] = B @ A[:, s - 1]
        P[:, s] = P[:, s - 1] + eta[:, None, None] * A[:, s - 1]
        Vn[:, s] = B @ Vn[:, s - 1] @ np.swapaxes(B, 1, 2) + eta[:, None, None] ** 2 * cov
    return A, P, Vn


def _weights(alg: EFL, p: np.ndarray, E: np.ndarray, clients: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """p_tau^k of the active clients (EFL section 4.2 and Assumption 5), as the algorithm sets them."""
    ratio = np.ones(clients.shape[0]) if alg.weights == "plain" else E[clients] / steps
    theta = float(E.max()) if alg.theta is None else float(alg.theta)
    over = ratio > theta * (1.0 + 1e-12)
    if np.any(over):
        if alg.on_excess == "raise":
            j = int(np.argmax(over))
            raise AssumptionError(
                f"EFL Assumption 5 (p_tau^k <= theta p^k) fails for client {int(clients[j])} with s = "
                f"{int(steps[j])} steps: ratio {ratio[j]:.6g} > theta = {theta:.6g}")
        ratio = np.where(over, theta, ratio)
    return ratio * p[clients]


@np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
def efl_elastic_moments(algorithm: EFL, problem: Federation, rounds: int, *,
                        participation: Participation | None = None, noise: Any = None, x0: Any = None,
                        max_components: int = 4096, max_outcomes: int = 20_000) -> ExactMoments:
    """Exact E[x_t], E||x_t - x*||^2, E[F(x_t)] - F* of EFL without compression (module docstring).

    Parameters
    ----------
    algorithm : EFL with ``compression=None`` (any lam >= 0, plain or adaptive weights,
        per-client rates and local steps, ``lr_schedule``).
    problem : QuadraticFederation
    rounds : int >= 0
    participation : Participation or None (full); any model with an exact law
        (:func:`.support.participation_support`).
    noise : AdditiveNoise, a covariance, or None (the federation's additive noise).
    x0 : (d,) initial model (zeros by default).

    Returns
    -------
    ExactMoments whose ``states`` hold, for t = 0..R, one :class:`~.engine.StateComponent` per
    reported set: ``state`` an :class:`ElasticState`, ``mean``/``second`` the moments of
    z = (x, w_1, ..., w_N) given that set.
    """
    t0 = time.perf_counter()
    instance("algorithm", algorithm, EFL, "an EFL (compression=None)", error=InvalidHyperparameterError)
    if algorithm.compression is not None:
        raise NotAffineError(
            f"EFL with compression={algorithm.compression!r}: ST ternary top-k is piecewise, not affine; "
            "exact moments need compression=None")
    problem = quadratic_problem(problem)
    rounds = rounds_of(rounds, problem.dim)
    participation_of(participation)
    max_components = integer("max_components", max_components, minimum=1, maximum=None)
    max_outcomes = integer("max_outcomes", max_outcomes, minimum=1, maximum=None)
    model = additive_noise_of(
        problem, noise, "efl_elastic_moments handles additive noise; minibatch noise goes through exact_moments")
    exact = problem.exact()
    if not isinstance(exact, QuadraticFederation):
        raise InvalidProblemError(f"{type(problem).__name__}.exact() is not a QuadraticFederation")
    N, d = problem.n_clients, problem.dim
    n = (N + 1) * d
    E = algorithm.nominal_steps(exact)
    Emax = int(E.max())
    lr = resolve_per_client("lr", algorithm.lr, N)
    lam = float(algorithm.lam)
    p = exact.weights
    cov = np.zeros((N, d, d)) if model is None else model.cov
    fisher = exact.fisher_diag(np.zeros((N, d)), np.arange(N))            # (N, d): diag(I_k), state-free
    x0v = model_vector("x0", x0, d)
    z0 = np.concatenate([x0v, np.zeros(N * d)])
    none = np.zeros(N, dtype=bool)
    comps: dict[bytes, tuple[float, np.ndarray, np.ndarray, np.ndarray]] = {
        none.tobytes(): (1.0, none, z0, np.outer(z0, z0))}

    def snapshot() -> tuple[StateComponent, ...]:
        return tuple(StateComponent(w, ElasticState(R.copy(), fisher * R[:, None]), mu.copy(), S.copy(), None)
                     for w, R, mu, S in comps.values())

    states = [snapshot()]
    means, seconds, ncomp, n_out = [x0v.copy()], [np.outer(x0v, x0v)], [1], []
    xs = slice(0, d)
    for t in range(int(rounds)):
        eta = lr * algorithm.rate_factor(t)
        outcomes = support_of(participation, t, E, max_outcomes)
        n_out.append(len(outcomes))
        new: dict[bytes, list[Any]] = {}
        for w_c, R, mu, Sig in comps.values():
            u = fisher * R[:, None]
            A, P, Vn = _client_pieces(exact, eta, lam, u.sum(axis=0), Emax, cov)
            for o in outcomes:
                act = o.steps > 0
                cl, st = o.clients[act], o.steps[act]
                M = np.eye(n)
                c = np.zeros(n)
                Q = np.zeros((n, n))
                if cl.shape[0]:
                    pt = _weights(algorithm, p, E, cl, st)
                    Ak, Pk, Vk = A[cl, st], P[cl, st], Vn[cl, st]                       # (m, d, d)
                    # columns of the anchors: lambda P_k diag(u_i), i = 1..N -> (m, d, N d)
                    Wk = lam * (Pk[:, :, None, :] * u[None, None, :, :]).reshape(cl.shape[0], d, N * d)
                    bk = np.einsum("mij,mj->mi", Pk, exact.e[cl])
                    M[xs, xs] += np.einsum("m,mij->ij", pt, Ak - np.eye(d))
                    M[xs, d:] += np.einsum("m,mij->ij", pt, Wk)
                    c[xs] = pt @ bk
                    Q[xs, xs] = np.einsum("m,mij->ij", pt * pt, Vk)
                    for j, k in enumerate(cl.tolist()):
                        r = slice(d * (k + 1), d * (k + 2))
                        M[r] = 0.0
                        M[r, xs] = Ak[j]
                        M[r, d:] = Wk[j]
                        c[r] = bk[j]
                        Q[r, r] = Vk[j]
                        Q[xs, r] = pt[j] * Vk[j]
                        Q[r, xs] = pt[j] * Vk[j]
                Mm = M @ mu
                new_mu = Mm + c
                new_S = M @ Sig @ M.T + np.outer(Mm, c) + np.outer(c, Mm) + np.outer(c, c) + Q
                R2 = R.copy()
                R2[cl] = True
                key = R2.tobytes()
                w = w_c * o.prob
                if key in new:
                    e = new[key]
                    e[0] += w
                    e[2] = e[2] + w * new_mu
                    e[3] = e[3] + w * new_S
                else:
                    if len(new) >= max_components:
                        raise InvalidHyperparameterError(
                            f"efl_elastic_moments: more than max_components = {max_components} reported sets "
                            f"in round {t + 1}; raise the limit or use fewer clients")
                    new[key] = [w, R2, w * new_mu, w * new_S]
        comps = {k: (float(v[0]), v[1], v[2] / v[0], 0.5 * (v[3] + v[3].T) / v[0]) for k, v in new.items()}
        mu_all = sum(w * m for w, _, m, _ in comps.values())
        S_all = sum(w * S for w, _, _, S in comps.values())
        means.append(np.asarray(mu_all)[xs])
        seconds.append(np.asarray(S_all)[xs, xs])
        ncomp.append(len(comps))
        states.append(snapshot())
    mean, second = np.array(means), np.array(seconds)
    finite_result("efl_elastic_moments", {"E[x_t]": mean, "E[x_t x_t^T]": second})
    x_star = problem.optimum()
    dist2, gap = quadratic_errors(mean, second, x_star, problem.hess())
    mu_all = sum(w * m for w, _, m, _ in comps.values())
    S_all = sum(w * S for w, _, _, S in comps.values())
    info = {"method": "EFL without compression: mixture over reported sets x enumerated outcomes",
            "noise": "none" if model is None else "AdditiveNoise",
            "participation": "full" if participation is None else repr(participation),
            "outcomes_per_round": n_out, "seconds": time.perf_counter() - t0, "state_dim": n}
    return ExactMoments(mean=mean, dist2=np.maximum(dist2, 0.0), loss_gap=np.maximum(gap, 0.0),
                        second=second, x_star=x_star, state_mean=np.asarray(mu_all),
                        state_second=np.asarray(S_all), components=np.array(ncomp),
                        clip=float(max(0.0, -dist2.min(), -gap.min())), info=info, states=tuple(states))


def elastic_anchor_laws(moments: ExactMoments) -> list[list[AnchorLaw]]:
    """Per round t = 0..R, the components (weight, U, E[V], E[V V^T]) of the anchors of EFL's elastic
    term (module docstring), from :func:`efl_elastic_moments` or from
    ``exact_moments(EFL(...), ..., keep_states=True)`` (states with fields ``u`` and ``v``)."""
    instance("moments", moments, ExactMoments, "an ExactMoments from efl_elastic_moments or "
             "exact_moments(EFL(...), keep_states=True)", error=InvalidHyperparameterError)
    if moments.states is None:
        raise InvalidHyperparameterError(
            "the moments carry no state components: use efl_elastic_moments or exact_moments(keep_states=True)")
    out: list[list[AnchorLaw]] = []
    for comps in moments.states:
        laws = []
        for comp in comps:
            st = comp.state
            if isinstance(st, ElasticState):
                N, d = st.u.shape
                L = np.zeros((d, (N + 1) * d))
                L[:, d:] = np.concatenate([np.diag(ui) for ui in st.u], axis=1)
            elif hasattr(st, "u") and hasattr(st, "v") and comp.layout is not None:
                N, d = st.u.shape
                L = np.zeros((d, comp.layout.dim))
                sl = comp.layout.slices["v"]
                L[:, sl] = np.tile(np.eye(d), (1, N))                            # V = sum_i v_i
            else:
                raise InvalidHyperparameterError(
                    f"state component {type(st).__name__} has no EFL anchors (fields u and v)")
            Vm = L @ comp.mean
            Vs = L @ comp.second @ L.T
            laws.append(AnchorLaw(float(comp.weight), np.asarray(st.U, dtype=np.float64), Vm, 0.5 * (Vs + Vs.T)))
        out.append(laws)
    return out


def efl_elastic_gradient_moments(algorithm: EFL, problem: Federation, moments: ExactMoments, *,
                                 noise: Any = None) -> np.ndarray:
    """Exact E||g||^2 of every stochastic gradient an EFL client computes (EFL Assumption 4).

    Client k's j-th local step of round t (j < s_k) queries w_j = B_k^j x + P_{k,j} (e_k + lambda V) + n_j
    (module docstring, with P_{k,j} = eta sum_{i<j} B_k^i) and receives g = A w_j - e_k - lambda V + eps,
    A = H_k + lambda diag U, E||eps||^2 = tr C_k.  With V = L_V z this is linear in z:
    g = K z + kappa + A n_j + eps, K = A B_k^j L_x + lambda (A P_{k,j} - I) L_V, kappa = A P_{k,j} e_k - e_k, so

        E||g||^2 = tr(K Sigma K^T) + 2 kappa^T K mu + ||kappa||^2 + tr(A Cov(n_j) A^T) + tr C_k

    per reported set, averaged with the component weights (the step counts are independent of z).

    Parameters
    ----------
    algorithm, problem, noise : as given to :func:`efl_elastic_moments`.
    moments : its result.

    Returns
    -------
    (R, N, E_max) array: round t < R, client k, step j (NaN where j >= E_k).
    """
    instance("algorithm", algorithm, EFL, "an EFL (compression=None)", error=InvalidHyperparameterError)
    problem = quadratic_problem(problem)
    instance("moments", moments, ExactMoments, "an ExactMoments from efl_elastic_moments",
             error=InvalidHyperparameterError)
    if moments.states is None or not all(isinstance(c.state, ElasticState) for r in moments.states for c in r):
        raise InvalidHyperparameterError("moments must come from efl_elastic_moments")
    model = additive_noise_of(problem, noise, "efl_elastic_gradient_moments handles additive noise only")
    exact = problem.exact()
    if not isinstance(exact, QuadraticFederation):
        raise InvalidProblemError(f"{type(problem).__name__}.exact() is not a QuadraticFederation")
    N, d = problem.n_clients, problem.dim
    E = algorithm.nominal_steps(exact)
    Emax = int(E.max())
    lr = resolve_per_client("lr", algorithm.lr, N)
    lam = float(algorithm.lam)
    cov = np.zeros((N, d, d)) if model is None else model.cov
    trC = np.einsum("kii->k", cov)
    R = len(moments.states) - 1
    out = np.full((R, N, Emax), np.nan)
    Lx = np.zeros((d, (N + 1) * d))
    Lx[:, :d] = np.eye(d)
    for t in range(R):
        eta = lr * algorithm.rate_factor(t)
        acc = np.zeros((N, Emax))
        for comp in moments.states[t]:
            st = comp.state
            U = st.U
            Bpow, P, Vn = _client_pieces(exact, eta, lam, U, Emax, cov)
            A = exact.H + lam * np.diag(U)[None]                                  # (N, d, d)
            LV = np.zeros((d, (N + 1) * d))
            LV[:, d:] = np.concatenate([np.diag(ui) for ui in st.u], axis=1)
            for j in range(Emax):
                K = np.einsum("kab,kbc->kac", A, Bpow[:, j]) @ Lx \
                    + lam * (np.einsum("kab,kbc->kac", A, P[:, j]) - np.eye(d)[None]) @ LV    # (N, d, n)
                kappa = np.einsum("kab,kbc,kc->ka", A, P[:, j], exact.e) - exact.e
                Km = K @ comp.mean
                val = np.einsum("kan,nm,kam->k", K, comp.second, K) + 2 * np.einsum("ka,ka->k", kappa, Km) \
                    + np.einsum("ka,ka->k", kappa, kappa) + np.einsum("kab,kbc,kac->k", A, Vn[:, j], A) + trC
                acc[:, j] += comp.weight * val
        acc[np.arange(Emax)[None, :] >= E[:, None]] = np.nan
        out[t] = acc
    return out
