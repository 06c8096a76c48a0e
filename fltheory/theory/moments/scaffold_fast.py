"""Block-structured exact moments of SCAFFOLD under uniform sampling (closed forms in pi_1, pi_2).

SCAFFOLD (Karimireddy et al., SCAFFOLD-v1, Alg. 1, options I and II; ``fltheory.algorithms.Scaffold``)
on quadratic clients f_i(y) = 1/2 y^T H_i y - e_i^T y with additive gradient noise of covariance C_i.
The state is (x, c_1, ..., c_N) with c = (1/N) sum_k c_k (an invariant of the round, all controls start
at 0).  A selected client i runs K_i steps y <- y - eta_i (H_i y - e_i + eps + c - c_i) from x, so with
B_i = I - eta_i H_i, A_i = B_i^{K_i}, P_i = eta_i sum_{j<K_i} B_i^j:

    D_i = y_i - x = (A_i - I) x - P_i c + P_i c_i + P_i e_i + n_i,
    Cov n_i = V_i = eta_i^2 sum_{j<K_i} B_i^j C_i B_i^{jT},
    Delta c_i = c_i^+ - c_i = F_i x + G_i c + J_i c_i + h_i + m_i, where
      option II (c_i^+ = c_i - c + (x - y_i)/(K_i eta_i)):  Delta c_i = -c - D_i / (K_i eta_i),
      option I  (c_i^+ = g_i(x), a fresh call):  F_i = H_i, G_i = 0, J_i = -I, h_i = -e_i,
                m_i independent of n_i with Cov C_i;

and the server sets x^+ = x + (eta_g / S) sum_{i in S} D_i, c_i^+ = c_i + chi_i Delta c_i (chi_i = 1 if
i is sampled).  Uniform sampling of S of N without replacement has E[chi_i] = pi_1 = S/N and
E[chi_i chi_j] = pi_2 = S(S-1)/(N(N-1)) (i != j); draws are independent of the state and of the noise,
and the noise of different clients is independent.  Hence, with sums over clients (pi_ij = pi_2 off and
pi_1 on the diagonal):

    E[x^+]   = E[x] + (eta_g/S) pi_1 sum_i E[D_i],           E[c_i^+] = E[c_i] + pi_1 E[Delta c_i],
    E[x^+ x^+T] = E[x x^T] + (eta_g/S) pi_1 sum_i (E[x D_i^T] + E[D_i x^T])
                  + (eta_g/S)^2 (sum_ij pi_ij E[D_i D_j^T]_0 + pi_1 sum_i V_i),
    E[x^+ c_j^+T] = E[x c_j^T] + pi_1 E[x Delta c_j^T] + (eta_g/S) (pi_1 sum_i E[D_i c_j^T]
                  + sum_i pi_ij E[D_i Delta c_j^T]_0 + pi_1 E[n_j m_j^T]),
    E[c_i^+ c_j^+T] = E[c_i c_j^T] + pi_1 (E[Delta c_i c_j^T] + E[c_i Delta c_j^T])
                  + pi_ij E[Delta c_i Delta c_j^T]_0 + [i = j] pi_1 Cov m_i,

where [.]_0 is the noise-free part: an affine image of the state moments.  The only terms that couple
two clients through their own controls are A_i E[c_i c_j^T] B_j^T; everything else is a per-client
product or a rank-d outer product.  The state second moment is kept in blocks E[x x^T] (d, d),
E[x c_j^T] (d, N, d) and E[c_i c_j^T] (N, d, N, d), and a round costs O(N^2 d^3) time and O(N^2 d^2)
memory (the dense map on the (N+2) d state costs O(N^3 d^3) per round; an n^2 x n^2 matrix is never
formed).  Full participation is S = N (pi_1 = pi_2 = 1).  The tests hold this path to
:func:`.engine.exact_moments` (which reads the maps off the real round) and to Monte Carlo.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...algorithms import Scaffold
from ...algorithms.base import resolve_per_client
from ..._validate import _short, finite_array, instance
from ...errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ...participation import FullParticipation, Participation, UniformSampling
from ...problems.base import Federation
from ...problems.quadratic import QuadraticFederation
from ._checks import count, finite_result, model_vector, participation_of, quadratic_problem, rounds_of
from .engine import ExactMoments, quadratic_errors
from .noise import additive_noise_of, noise_of

__all__ = ["scaffold_rounds_to_accuracy", "scaffold_sampling_moments"]


def _client_maps(problem: QuadraticFederation, eta: np.ndarray, K: np.ndarray, cov: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A_i, P_i, V_i of the module docstring, (N, d, d) each, batched over clients."""
    N, d = problem.n_clients, problem.dim
    B = np.eye(d) - eta[:, None, None] * problem.H
    A = np.broadcast_to(np.eye(d), (N, d, d)).copy()
    P = np.zeros((N, d, d))
    V = np.zeros((N, d, d))
    for k in range(int(K.max())):
        on = (K > k)[:, None, None]
        P = np.where(on, P + eta[:, None, None] * A, P)
        A = np.where(on, B @ A, A)
        V = np.where(on, B @ V @ np.swapaxes(B, 1, 2) + eta[:, None, None] ** 2 * cov, V)
    return A, P, V


def _T(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _right(X: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Y[n, a, j, c] = sum_b X[n, a, j, b] M[j, c, b] (each column block j times M_j^T): O(N^2 d^3)."""
    N, d = X.shape[0], X.shape[1]
    Y = np.matmul(np.transpose(X, (2, 0, 1, 3)).reshape(M.shape[0], N * d, -1), _T(M))     # (j, n a, c)
    return np.transpose(Y.reshape(M.shape[0], N, d, -1), (1, 2, 0, 3))


def _outer_blocks(X: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Y[n, a, j, c] = sum_b X[n, a, b] M[j, c, b] (one (N d, d) x (d, N d) product)."""
    N, d = X.shape[0], X.shape[1]
    return (X.reshape(N * d, -1) @ M.reshape(-1, M.shape[2]).T).reshape(N, d, M.shape[0], M.shape[1])


def _cross(maps: tuple[np.ndarray, ...], mx: np.ndarray, mc: np.ndarray, Sxx: np.ndarray, Sxc: np.ndarray,
           Scc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For Q_i = Mx_i x + Mg_i c + Mc_i c_i + v_i: E[Q_i] (N, d), E[Q_i x^T] (N, d, d), E[Q_i c^T] (N, d, d),
    E[Q_i c_j^T] (N, d, N, d)."""
    Mx, Mg, Mc, v = maps
    N, d = mc.shape
    mg = mc.mean(axis=0)
    Sgx = Sxc.mean(axis=1).T                                                 # E[c x^T]
    Sgc = Scc.mean(axis=0)                                                   # (d, N, d): E[c c_j^T]
    Scx = np.transpose(Sxc, (1, 2, 0))                                       # (N, d, d): E[c_i x^T]
    mean = Mx @ mx + Mg @ mg + np.einsum("nij,nj->ni", Mc, mc) + v
    with_x = Mx @ Sxx + Mg @ Sgx + Mc @ Scx + v[:, :, None] * mx[None, None, :]
    with_cj = (np.matmul(Mx, Sxc.reshape(d, N * d)) + np.matmul(Mg, Sgc.reshape(d, N * d))
               + np.matmul(Mc, Scc.reshape(N, d, N * d))).reshape(N, d, N, d) \
        + v[:, :, None, None] * mc[None, None, :, :]
    return mean, with_x, with_cj.mean(axis=2), with_cj


def _round(mx: np.ndarray, mc: np.ndarray, Sxx: np.ndarray, Sxc: np.ndarray, Scc: np.ndarray,
           dmaps: tuple[np.ndarray, ...], cmaps: tuple[np.ndarray, ...], V: np.ndarray, W: np.ndarray,
           Z: np.ndarray, g: float, p1: float, p2: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One round of the recursion of the module docstring on the blocks."""
    Ax, Ag, Ac, b = dmaps
    Fx, Fg, Fc, h = cmaps
    N, d = mc.shape
    idx = np.arange(N)
    dD, Dx, Dg, Dcj = _cross(dmaps, mx, mc, Sxx, Sxc, Scc)                  # D_i with the state
    dC, Cx, Cg, Ccj = _cross(cmaps, mx, mc, Sxx, Sxc, Scc)                  # Delta c_i with the state
    Dii = Dcj[idx, :, idx, :]                                                # E[D_i c_i^T] (N, d, d)
    # x^+ x^+T
    sumD_x, sumD_g, sumD_c, sumdD = Dx.sum(axis=0), Dg.sum(axis=0), Dcj.sum(axis=0), dD.sum(axis=0)
    DD_all = sumD_x @ Ax.sum(axis=0).T + sumD_g @ Ag.sum(axis=0).T + np.einsum("ajc,jbc->ab", sumD_c, Ac) \
        + np.outer(sumdD, b.sum(axis=0))                                     # E[(sum D)(sum D)^T]_0
    DD_diag = (Dx @ _T(Ax) + Dg @ _T(Ag) + Dii @ _T(Ac) + dD[:, :, None] * b[:, None, :]).sum(axis=0)
    xD = sumD_x.T                                                            # sum_i E[x D_i^T]
    new_Sxx = Sxx + g * p1 * (xD + xD.T) + g * g * (p2 * DD_all + (p1 - p2) * DD_diag + p1 * V.sum(axis=0))
    # x^+ c_j^+T: sum_i E[D_i Delta c_j^T]_0 (all i, and i = j)
    allDC = (np.einsum("ab,jcb->ajc", sumD_x, Fx) + np.einsum("ab,jcb->ajc", sumD_g, Fg)
             + np.einsum("ajb,jcb->ajc", sumD_c, Fc) + sumdD[:, None, None] * h[None])
    diagDC = Dx @ _T(Fx) + Dg @ _T(Fg) + Dii @ _T(Fc) + dD[:, :, None] * h[:, None, :]     # (N, d, d)
    new_Sxc = Sxc + p1 * np.transpose(Cx, (2, 0, 1)) + g * (
        p1 * sumD_c + p2 * allDC + np.transpose((p1 - p2) * diagDC + p1 * Z, (1, 0, 2)))
    # c_i^+ c_j^+T
    CC = _outer_blocks(Cx, Fx) + _outer_blocks(Cg, Fg) + _right(Ccj, Fc) \
        + dC[:, :, None, None] * h[None, None, :, :]                         # E[Delta c_i Delta c_j^T]_0
    new_Scc = Scc + p1 * (Ccj + np.transpose(Ccj, (2, 3, 0, 1))) + p2 * CC
    new_Scc[idx, :, idx, :] += (p1 - p2) * CC[idx, :, idx, :] + p1 * W
    return (mx + g * p1 * sumdD, mc + p1 * dC, 0.5 * (new_Sxx + new_Sxx.T), new_Sxc,
            0.5 * (new_Scc + np.transpose(new_Scc, (2, 3, 0, 1))))


def _setup(algorithm: Scaffold, problem: Federation, participation: Participation | None, noise: Any
           ) -> tuple[Callable[..., tuple[np.ndarray, ...]], QuadraticFederation]:
    """Validate the inputs and return the one-round map on the blocks (mx, mc, Sxx, Sxc, Scc)."""
    instance("algorithm", algorithm, Scaffold, "a Scaffold (the SCAFFOLD block path)", error=InvalidHyperparameterError)
    problem = quadratic_problem(problem)
    participation_of(participation)
    model = additive_noise_of(problem, noise, "the SCAFFOLD block path handles additive noise; use exact_moments")
    exact = problem.exact()
    if not isinstance(exact, QuadraticFederation):
        raise InvalidProblemError(f"{type(problem).__name__}.exact() is not a QuadraticFederation")
    N, d = problem.n_clients, problem.dim
    S, p1, p2 = _sampling(participation, N)
    eta = resolve_per_client("lr", algorithm.lr, N)
    K = algorithm.nominal_steps(exact)
    cov = np.zeros((N, d, d)) if model is None else model.cov
    A, P, V = _client_maps(exact, eta, K, cov)
    I = np.eye(d)
    e = exact.e
    Ax, Ag, Ac, b = A - I, -P, P, np.einsum("nij,nj->ni", P, e)          # D_i = Ax x + Ag c + Ac c_i + b
    if algorithm.option == "II":
        s = (1.0 / (K * eta))[:, None, None]
        Fx, Fg, Fc = -s * Ax, -I[None] - s * Ag, -s * Ac
        h = -s[:, :, 0] * b
        W, Z = s * s * V, -s * V                                             # Cov m_i, E[n_i m_i^T]
    else:
        Fx, Fg, Fc = exact.H.copy(), np.zeros((N, d, d)), -np.broadcast_to(I, (N, d, d)).copy()
        h = -e
        W, Z = cov.copy(), np.zeros((N, d, d))
    g = float(algorithm.server_lr) / S

    def step(mx: np.ndarray, mc: np.ndarray, Sxx: np.ndarray, Sxc: np.ndarray, Scc: np.ndarray
             ) -> tuple[np.ndarray, ...]:
        return _round(mx, mc, Sxx, Sxc, Scc, (Ax, Ag, Ac, b), (Fx, Fg, Fc, h), V, W, Z, g, p1, p2)

    return step, exact


def _sampling(participation: Participation | None, N: int) -> tuple[int, float, float]:
    """(S, pi_1, pi_2) of full participation or uniform sampling."""
    if participation is None or type(participation) is FullParticipation:
        return N, 1.0, 1.0
    if type(participation) is UniformSampling:
        S = int(participation.S)
        if S > N:
            raise InvalidHyperparameterError(f"UniformSampling: S = {S} exceeds N = {N}")
        return S, S / N, (S * (S - 1) / (N * (N - 1)) if N > 1 else 0.0)
    raise InvalidHyperparameterError(
        f"scaffold_sampling_moments handles full participation and UniformSampling, got {participation!r}; "
        "use exact_moments")


@np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
def scaffold_sampling_moments(algorithm: Scaffold, problem: Federation, rounds: int, *,
                              participation: Participation | None = None, noise: Any = None,
                              x0: Any = None) -> ExactMoments:
    """Exact E[x_t], E||x_t - x*||^2, E[F(x_t)] - F* of SCAFFOLD (module docstring).

    Parameters
    ----------
    algorithm : Scaffold (option I or II, per-client rates and local steps, any server rate)
    problem : QuadraticFederation
    rounds : int >= 0
    participation : None / FullParticipation, or UniformSampling(S)
    noise : AdditiveNoise, a covariance, or None (the federation's additive noise)
    x0 : (d,) initial model (zeros by default)

    Returns
    -------
    ExactMoments; ``state_mean``/``state_second`` are those of the whole state (x, c, c_1, ..., c_N)
    in the order of ``ScaffoldState``; x* is the minimiser of F = sum_i p_i f_i (as in exact_moments).
    """
    t0 = time.perf_counter()
    step, exact = _setup(algorithm, problem, participation, noise)
    model = noise_of(problem, noise)
    N, d = problem.n_clients, problem.dim
    R = rounds_of(rounds, d)
    mx = model_vector("x0", x0, d)
    mc = np.zeros((N, d))
    Sxx = np.outer(mx, mx)
    Sxc = np.zeros((d, N, d))
    Scc = np.zeros((N, d, N, d))
    means, seconds = [mx.copy()], [Sxx.copy()]
    for _ in range(R):
        mx, mc, Sxx, Sxc, Scc = step(mx, mc, Sxx, Sxc, Scc)
        means.append(mx.copy())
        seconds.append(Sxx.copy())
    mean, second = np.array(means), np.array(seconds)
    finite_result("scaffold_sampling_moments", {"E[x_t]": mean, "E[x_t x_t^T]": second})
    x_star = problem.optimum()
    dist2, gap = quadratic_errors(mean, second, x_star, exact.hess())
    # whole state (x, c, c_1..c_N): c = mean_k c_k
    mg = mc.mean(axis=0)
    n = (N + 2) * d
    state_mean = np.concatenate([mx, mg, mc.ravel()])
    Sgx = Sxc.mean(axis=1).T                                                 # E[c x^T]
    Sgc = Scc.mean(axis=0).reshape(d, N * d)                                 # E[c c_j^T]
    state_second = np.empty((n, n))
    state_second[:d, :d] = Sxx
    state_second[d:2 * d, :d] = Sgx
    state_second[:d, d:2 * d] = Sgx.T
    state_second[d:2 * d, d:2 * d] = Sgc.reshape(d, N, d).mean(axis=1)
    state_second[:d, 2 * d:] = Sxc.reshape(d, N * d)
    state_second[2 * d:, :d] = Sxc.reshape(d, N * d).T
    state_second[d:2 * d, 2 * d:] = Sgc
    state_second[2 * d:, d:2 * d] = Sgc.T
    state_second[2 * d:, 2 * d:] = Scc.reshape(N * d, N * d)
    info = {"method": "closed form in pi_1, pi_2 on per-client blocks (O(N^2 d^3) per round)",
            "noise": "none" if model is None else "AdditiveNoise",
            "participation": "full" if participation is None else repr(participation),
            "seconds": time.perf_counter() - t0, "state_dim": n}
    return ExactMoments(mean=mean, dist2=np.maximum(dist2, 0.0), loss_gap=np.maximum(gap, 0.0),
                        second=second, x_star=x_star, state_mean=state_mean, state_second=state_second,
                        components=np.ones(len(means), dtype=np.int64),
                        clip=float(max(0.0, -dist2.min(), -gap.min())), info=info)


@np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
def scaffold_rounds_to_accuracy(algorithm: Scaffold, problem: Federation, eps: Any, *,
                                participation: Participation | None = None, noise: Any = None, x0: Any = None,
                                max_rounds: int = 100_000) -> np.ndarray:
    """Exact expected rounds to accuracy: for each eps, the first t with E[F(x_t)] - F* <= eps.

    The round of :func:`scaffold_sampling_moments` is affine in the packed moments
    v = (E x, E c_k, E[x x^T], E[x c_j^T], E[c_i c_j^T]) (P = d + N d + d^2 + N d^2 + N^2 d^2 numbers):
    v' = L v + l.  L and l are read off the block round (l at v = 0, column k as the image of the
    k-th unit vector minus l; exact, the map is affine), and the recursion is iterated as one
    (P, P) matrix-vector product per round, E[F(x_t)] - F* = 1/2 tr(Hbar (E[x x^T] - E x x*^T
    - x* E x^T + x* x*^T)) read off v.  Meant for small N d (P^2 memory).

    Returns
    -------
    (len(eps),) float array of rounds (NaN where eps is not reached within ``max_rounds``).
    """
    step, exact = _setup(algorithm, problem, participation, noise)
    targets = np.atleast_1d(finite_array("eps", eps, error=InvalidHyperparameterError))
    if targets.ndim != 1 or targets.size == 0 or np.any(targets <= 0):
        raise InvalidHyperparameterError(f"eps must be one or a 1-D array of accuracies > 0, got {_short(eps)}")
    max_rounds = count("max_rounds", max_rounds, minimum=0,
                       why="every round is one (P, P) matrix-vector product of the moment recursion")
    N, d = problem.n_clients, problem.dim
    x0v = model_vector("x0", x0, d)
    shapes = [(d,), (N, d), (d, d), (d, N, d), (N, d, N, d)]
    sizes = [int(np.prod(sh)) for sh in shapes]
    P = sum(sizes)
    if P > 5000:
        raise InvalidHyperparameterError(
            f"scaffold_rounds_to_accuracy forms a ({P}, {P}) matrix; use scaffold_sampling_moments for N = {N}, "
            f"d = {d}")
    cuts = np.cumsum(sizes)[:-1]

    def apply(v: np.ndarray) -> np.ndarray:
        parts = [a.reshape(sh) for a, sh in zip(np.split(v, cuts), shapes)]
        return np.concatenate([np.ravel(a) for a in step(*parts)])

    lvec = apply(np.zeros(P))
    L = np.empty((P, P))
    for k in range(P):
        unit = np.zeros(P)
        unit[k] = 1.0
        L[:, k] = apply(unit) - lvec
    v = np.concatenate([x0v, np.zeros(N * d), np.outer(x0v, x0v).ravel(), np.zeros(N * d * d + (N * d) ** 2)])
    x_star, Hbar = problem.optimum(), exact.hess()
    # gap = 1/2 tr(Hbar Sxx) - x*^T Hbar E x + 1/2 x*^T Hbar x*: a linear read-out of v
    read = np.zeros(P)
    read[:d] = -Hbar @ x_star
    read[sizes[0] + sizes[1]:sizes[0] + sizes[1] + d * d] = 0.5 * Hbar.ravel()
    offset = 0.5 * float(x_star @ Hbar @ x_star)
    out = np.full(targets.shape[0], np.nan)
    pending = np.ones(targets.shape[0], dtype=bool)
    for t in range(max_rounds + 1):
        gap = float(read @ v) + offset
        if not np.isfinite(gap):
            raise OutOfRangeError(
                f"scaffold_rounds_to_accuracy: E[F(x_t)] - F* leaves float64 range at round {t} (the moments of "
                "a diverging step size, or of a start x0 too large)")
        hit = pending & (gap <= targets)
        out[hit] = t
        pending &= ~hit
        if not pending.any():
            break
        v = L @ v + lvec
    return out
