"""A federation written by a user runs everywhere through the contract's defaults.

``QuarticFederation`` below is neither quadratic nor logistic: client i has

    f_i(x) = 1/2 x^T A_i x - e_i^T x + (beta_i / 4) sum_j (x_j - a_ij)^4,

with A_i positive definite, so f_i is smooth and strongly convex with Hessian
A_i + diag(3 beta_i (x - a_i)^2).  It implements only the abstract oracles of
``fltheory.problems.Federation`` (no hook is overridden), so FedProx's exact
solve goes through the generic batched Newton default and the operator
fixed point through the generic rounds.  Every algorithm is held to a plain
per-client loop written here from the update rules, not from fltheory's code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fltheory.algorithms import Algorithm, FedAvg, FedDyn, FedProx, Scaffold, run
from fltheory.errors import InvalidHyperparameterError
from fltheory.problems import Federation
from fltheory.theory import fedopt_operator, operator_fixed_point

N, D = 4, 3
ROUNDS = 6


class QuarticFederation(Federation):
    """Quadratic plus a per-coordinate quartic, implemented with the required oracles only."""

    def __init__(self, A: np.ndarray, e: np.ndarray, a: np.ndarray, beta: np.ndarray) -> None:
        self.A, self.e, self.a, self.beta = A, e, a, beta
        self.n_clients, self.dim = e.shape
        self.weights = np.full(self.n_clients, 1.0 / self.n_clients)
        self.n_samples = None

    def client_loss(self, X: Any, clients: Any = None) -> np.ndarray:
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        R = X - self.a[idx]
        return (0.5 * np.einsum("mi,mij,mj->m", X, self.A[idx], X) - np.einsum("mi,mi->m", self.e[idx], X)
                + 0.25 * self.beta[idx] * np.sum(R ** 4, axis=1))

    def client_grad(self, X: Any, clients: Any = None) -> np.ndarray:
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        R = X - self.a[idx]
        return np.einsum("mij,mj->mi", self.A[idx], X) - self.e[idx] + self.beta[idx, None] * R ** 3

    def client_hess(self, X: Any, clients: Any = None) -> np.ndarray:
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        R = X - self.a[idx]
        diag = 3.0 * self.beta[idx, None] * R ** 2
        return self.A[idx] + diag[:, :, None] * np.eye(self.dim)

    def fisher_diag(self, X: Any, clients: Any = None) -> np.ndarray:
        """Squared gradient (an empirical-Fisher stand-in; unused by the algorithms here)."""
        return self.client_grad(X, clients) ** 2

    def optimum(self) -> np.ndarray:
        return _newton_1(lambda x: self.weights @ self.client_grad(x),
                         lambda x: np.einsum("i,ijk->jk", self.weights, self.client_hess(x)),
                         np.zeros(self.dim))

    def client_optima(self) -> np.ndarray:
        return np.array([_client_argmin(self, i, np.zeros(self.dim), np.zeros(self.dim), np.zeros(self.dim))
                         for i in range(self.n_clients)])

    def without_client(self, a: int) -> QuarticFederation:
        keep = np.delete(np.arange(self.n_clients), a)
        return QuarticFederation(self.A[keep], self.e[keep], self.a[keep], self.beta[keep])

    def with_client(self, other: Federation, **kwargs: Any) -> QuarticFederation:
        assert isinstance(other, QuarticFederation)
        cat = np.concatenate
        return QuarticFederation(cat([self.A, other.A]), cat([self.e, other.e]), cat([self.a, other.a]),
                                 cat([self.beta, other.beta]))


# ------------------------------------------------------------- plain per-client maths
def _f(fed: QuarticFederation, i: int, y: np.ndarray) -> float:
    r = y - fed.a[i]
    return float(0.5 * y @ fed.A[i] @ y - fed.e[i] @ y + 0.25 * fed.beta[i] * np.sum(r ** 4))


def _g(fed: QuarticFederation, i: int, y: np.ndarray) -> np.ndarray:
    return fed.A[i] @ y - fed.e[i] + fed.beta[i] * (y - fed.a[i]) ** 3


def _h(fed: QuarticFederation, i: int, y: np.ndarray) -> np.ndarray:
    return fed.A[i] + np.diag(3.0 * fed.beta[i] * (y - fed.a[i]) ** 2)


def _newton_1(grad: Any, hess: Any, y: np.ndarray) -> np.ndarray:
    """Undamped Newton on a strongly convex smooth function (started close enough here)."""
    for _ in range(100):
        g = grad(y)
        if np.linalg.norm(g) <= 1e-14:
            break
        y = y - np.linalg.solve(hess(y), g)
    return y


def _client_argmin(fed: QuarticFederation, i: int, mu: np.ndarray, b: np.ndarray,
                   y0: np.ndarray) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 sum_j mu_j y_j^2 - b^T y, one client, by Newton with halving
    (stopped at ||grad|| <= 1e-13)."""
    def value(y: np.ndarray) -> float:
        return _f(fed, i, y) + 0.5 * float(mu @ (y * y)) - float(b @ y)

    y = y0.copy()
    for _ in range(200):
        g = _g(fed, i, y) + mu * y - b
        if np.linalg.norm(g) <= 1e-13:
            break
        step = np.linalg.solve(_h(fed, i, y) + np.diag(mu), g)
        t = 1.0     # halve while neither the value nor (where values tie in rounding) ||grad|| drops
        while (value(y - t * step) > value(y)
               and np.linalg.norm(_g(fed, i, y - t * step) + mu * (y - t * step) - b) >= np.linalg.norm(g)
               and t > 1e-8):
            t /= 2
        y = y - t * step
    return y


def _fedavg_loop(fed: QuarticFederation, lr: float, K: int, server_lr: float, x: np.ndarray,
                 rounds: int) -> np.ndarray:
    xs = [x.copy()]
    for _ in range(rounds):
        change = np.zeros_like(x)
        for i in range(N):
            y = x.copy()
            for _k in range(K):
                y = y - lr * _g(fed, i, y)
            change += fed.weights[i] * (y - x)
        x = x + server_lr * change
        xs.append(x.copy())
    return np.array(xs)


def _fedprox_exact_loop(fed: QuarticFederation, mu: float, x: np.ndarray, rounds: int) -> np.ndarray:
    xs = [x.copy()]
    for _ in range(rounds):
        ys = [_client_argmin(fed, i, np.full(D, mu), mu * x, x) for i in range(N)]
        x = x + sum(fed.weights[i] * (ys[i] - x) for i in range(N))
        xs.append(x.copy())
    return np.array(xs)


def _scaffold_loop(fed: QuarticFederation, lr: float, K: int, server_lr: float, x: np.ndarray,
                   rounds: int) -> np.ndarray:
    """Option II, full participation, c and c_i from zero."""
    c = np.zeros(D)
    ci = [np.zeros(D) for _ in range(N)]
    xs = [x.copy()]
    for _ in range(rounds):
        ys, new_ci = [], []
        for i in range(N):
            y = x.copy()
            for _k in range(K):
                y = y - lr * (_g(fed, i, y) - ci[i] + c)
            ys.append(y)
            new_ci.append(ci[i] - c + (x - y) / (K * lr))
        c = c + sum(new_ci[i] - ci[i] for i in range(N)) / N
        ci = new_ci
        x = x + server_lr * sum(y - x for y in ys) / N
        xs.append(x.copy())
    return np.array(xs)


def _feddyn_exact_loop(fed: QuarticFederation, alpha: float, x: np.ndarray, rounds: int) -> np.ndarray:
    """theta_i = argmin f_i(theta) - <g_i, theta> + alpha/2 ||theta - x||^2; g_i -= alpha (theta_i - x);
    h -= (alpha/N) sum (theta_i - x); x = mean theta_i - h/alpha."""
    g_state = [np.zeros(D) for _ in range(N)]
    h = np.zeros(D)
    xs = [x.copy()]
    for _ in range(rounds):
        thetas = [_client_argmin(fed, i, np.full(D, alpha), g_state[i] + alpha * x, x) for i in range(N)]
        for i in range(N):
            g_state[i] = g_state[i] - alpha * (thetas[i] - x)
        h = h - alpha / N * sum(t - x for t in thetas)
        x = sum(thetas) / N - h / alpha
        xs.append(x.copy())
    return np.array(xs)


@pytest.fixture(scope="module")
def fed() -> QuarticFederation:
    rng = np.random.default_rng(11)
    Q = rng.standard_normal((N, D, D))
    A = np.einsum("nij,nkj->nik", Q, Q) / D + 0.5 * np.eye(D)
    return QuarticFederation(A, rng.standard_normal((N, D)), rng.standard_normal((N, D)),
                             rng.uniform(0.2, 1.0, N))


X0 = np.array([0.3, -0.2, 0.1])


def test_the_federation_is_what_it_claims(fed):
    """Oracles against finite differences; the user class overrides no hook."""
    y = np.array([0.4, -0.7, 1.1])
    for i in range(N):
        num = np.array([(_f(fed, i, y + 1e-6 * v) - _f(fed, i, y - 1e-6 * v)) / 2e-6 for v in np.eye(D)])
        np.testing.assert_allclose(fed.client_grad(y[None], [i])[0], num, rtol=1e-6, atol=1e-7)
    for hook in ("shifted_solve", "smoothness_bounds", "client_gaps", "loss_and_grad_norm2",
                 "client_block", "strong_convexity"):
        assert getattr(QuarticFederation, hook) is getattr(Federation, hook)
    assert not fed.has_constant_hessians
    np.testing.assert_allclose(fed.grad(fed.optimum()), 0.0, atol=1e-12)


def test_fedavg(fed):
    hist = run(FedAvg(lr=0.1, local_steps=3, server_lr=0.7), fed, ROUNDS, x0=X0)
    ref = _fedavg_loop(fed, 0.1, 3, 0.7, X0.copy(), ROUNDS)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)


def test_fedprox_exact_uses_the_generic_newton_default(fed):
    hist = run(FedProx(mu=0.8, solver="exact"), fed, ROUNDS, x0=X0)
    ref = _fedprox_exact_loop(fed, 0.8, X0.copy(), ROUNDS)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-11)
    # the default shifted solve meets its optimality condition
    Y = fed.shifted_solve(np.arange(N), np.full((N, D), 0.8), 0.8 * np.tile(X0, (N, 1)), np.tile(X0, (N, 1)))
    G = fed.client_grad(Y) + 0.8 * Y - 0.8 * X0
    assert np.abs(G).max() <= 1e-12


def test_scaffold(fed):
    hist = run(Scaffold(lr=0.1, local_steps=3, server_lr=1.0), fed, ROUNDS, x0=X0)
    ref = _scaffold_loop(fed, 0.1, 3, 1.0, X0.copy(), ROUNDS)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)


def test_feddyn_exact(fed):
    hist = run(FedDyn(alpha=0.9, solver="exact"), fed, ROUNDS, x0=X0)
    ref = _feddyn_exact_loop(fed, 0.9, X0.copy(), ROUNDS)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-10)


def test_operator_fixed_point_is_fixed_under_the_per_client_round(fed):
    """theory.operator_fixed_point on T(x) = sum p_i O_i(x) (FedAvg, server rate replaced by 1):
    the per-client round written here maps the root to itself, for any server rate."""
    T = fedopt_operator(FedAvg(lr=0.1, local_steps=3, server_lr=0.3), fed, x0=X0)
    res = operator_fixed_point(T, X0)
    after = _fedavg_loop(fed, 0.1, 3, 1.0, res.x.copy(), 1)[1]
    np.testing.assert_allclose(after, res.x, rtol=0, atol=1e-11)
    np.testing.assert_allclose(_fedavg_loop(fed, 0.1, 3, 0.3, res.x.copy(), 1)[1], res.x, rtol=0, atol=1e-11)
    assert np.linalg.norm(res.x - fed.optimum()) > 1e-3      # client drift: not the optimum of F


def test_an_algorithm_without_an_averaging_version_is_refused(fed):
    """A user algorithm that does not declare its averaging version never silently keeps its server step."""
    class Halving(Algorithm):
        name = "Halving"

        def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> Any:
            return x0

        def round(self, state: Any, problem: Federation, participation: Any, rng: np.random.Generator) -> Any:
            raise AssertionError("not run")

    with pytest.raises(InvalidHyperparameterError, match="averaging version"):
        fedopt_operator(Halving(), fed)
    assert FedAvg(server_lr=0.3).averaging_version().server_lr == 1.0


def test_constants_fall_back_to_local_estimates(fed):
    """No curvature_bounds hook: L and mu are the extreme eigenvalues of sum p_i H_i(x*), marked
    estimated; no constant Hessians, so G^2 over a ball is a lower estimate, not exact."""
    c = fed.constants(radius=0.5)
    x_star = fed.optimum()
    lam = np.linalg.eigvalsh(sum(fed.weights[i] * _h(fed, i, x_star) for i in range(N)))
    assert c.L == pytest.approx(lam[-1], rel=1e-12) and c.mu == pytest.approx(lam[0], rel=1e-12)
    assert not c.exact["L"] and not c.exact["G2"]
    gaps = fed.client_gaps(np.tile(x_star, (N, 1)), np.arange(N))
    optima = fed.client_optima()
    np.testing.assert_allclose(gaps, [_f(fed, i, x_star) - _f(fed, i, optima[i]) for i in range(N)], rtol=1e-12)
