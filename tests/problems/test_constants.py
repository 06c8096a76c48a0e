"""ProblemConstants against per-client loops, brute-force sphere sampling and
the defining inequalities."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.problems import problem_constants, random_least_squares, random_quadratic
from fltheory.problems._trust_region import max_convex_quadratic_on_ball

from .problem_refs import make_logistic


def _sphere(rng, n, d, r):
    Z = rng.standard_normal((n, d))
    return r * Z / np.linalg.norm(Z, axis=1, keepdims=True)


def _ascend_on_sphere(q, grad, s, r, steps=3000, lr=0.05):
    """Projected gradient ascent on ||s|| = r from s (a local refinement)."""
    for _ in range(steps):
        s = s + lr * grad(s)
        s *= r / np.linalg.norm(s)
    return q(s)


@given(st.integers(0, 2**31 - 1), st.integers(2, 4), st.integers(2, 4), st.floats(0.1, 3.0))
def test_quadratic_constants_against_loops_and_sampling(seed, N, d, r):
    fed = random_quadratic(N, d, L=2.0, mu=0.3, heterogeneity=1.0, seed=seed,
                           weights=np.random.default_rng(seed).uniform(0.5, 1.5, N))
    center = np.random.default_rng(seed + 1).standard_normal(d)
    c = problem_constants(fed, radius=r, center=center)
    p, H, e = fed.weights, fed.H, fed.e
    Hbar = sum(p[i] * H[i] for i in range(N))
    xs = np.linalg.solve(Hbar, sum(p[i] * e[i] for i in range(N)))
    f = lambda i, x: 0.5 * x @ H[i] @ x - e[i] @ x + fed.offsets[i]
    zeta2 = sum(p[i] * np.sum((H[i] @ xs - e[i]) ** 2) for i in range(N))
    D_k = np.array([f(i, xs) - f(i, np.linalg.solve(H[i], e[i])) for i in range(N)])
    delta = max(np.linalg.norm(H[i] - Hbar, 2) for i in range(N))
    np.testing.assert_allclose(c.zeta2, zeta2, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(c.D_k, D_k, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(c.D, p @ D_k, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(c.delta, delta, rtol=1e-10)
    assert c.exact["G2"] and c.exact["scaffold_G2"] and c.sigma2 == 0.0
    # G2: sampled sphere values never exceed the exact max and come close to it
    rng = np.random.default_rng(seed + 2)
    S = center + _sphere(rng, 4000, d, r)
    Gs = np.einsum("nij,mj->mni", H, S) - e                      # (points, N, d)
    mean_sq = np.einsum("mni,n->m", Gs ** 2, p)
    max_sq = (Gs ** 2).sum(2).max(1)
    assert mean_sq.max() <= c.G2 * (1 + 1e-12)
    assert max_sq.max() <= c.G2_max * (1 + 1e-12)
    M = sum(p[i] * H[i] @ H[i] for i in range(N))
    q = lambda s: sum(p[i] * np.sum((H[i] @ (center + s) - e[i]) ** 2) for i in range(N))
    dq = lambda s: 2 * sum(p[i] * H[i] @ (H[i] @ (center + s) - e[i]) for i in range(N))
    best = S[np.argmax(mean_sq)] - center
    refined = _ascend_on_sphere(q, dq, best, r, lr=0.2 / np.linalg.eigvalsh(M)[-1])
    assert refined <= c.G2 * (1 + 1e-12)
    assert refined >= c.G2 * (1 - 1e-8)


def test_trust_region_hard_case_against_a_dense_circle():
    M = np.diag([1.0, 3.0])
    g = np.array([1.0, 0.0])                                   # no component on the top eigenvector
    for r in [0.2, 1.0, 3.0]:
        t = np.linspace(0, 2 * np.pi, 400001)
        S = r * np.stack([np.cos(t), np.sin(t)], axis=1)
        brute = (np.einsum("ni,ij,nj->n", S, M, S) + 2 * S @ g + 0.7).max()
        exact = max_convex_quadratic_on_ball(M, g, 0.7, r)
        assert brute <= exact * (1 + 1e-12)
        assert brute >= exact * (1 - 1e-9)


@given(st.integers(0, 2**31 - 1), st.integers(2, 5), st.integers(2, 4))
def test_scaffold_pair_holds_everywhere_and_is_tight(seed, N, d):
    fed = random_quadratic(N, d, L=3.0, mu=0.2, heterogeneity=2.0, seed=seed)
    c = fed.constants()
    rng = np.random.default_rng(seed)
    X = fed.optimum() + rng.standard_normal((200, d)) * rng.choice([0.01, 1.0, 100.0], (200, 1))
    for x in X:
        G = fed.client_grad(x)
        lhs = (G ** 2).sum() / N
        gF = fed.grad(x)
        assert lhs <= c.scaffold_G2 + c.scaffold_B2 * gF @ gF + 1e-9 * (1 + lhs)
    # tightness: G^2 is attained at u* = (B^2 I - K)^{-1} c (the smallest admissible G^2)
    Hinv = np.linalg.inv(fed.hess())
    gs = fed.client_grad(fed.optimum())
    K = sum(Hinv @ Hi @ Hi @ Hinv for Hi in fed.H) / N
    cvec = sum(Hinv @ Hi @ g for Hi, g in zip(fed.H, gs)) / N
    u = np.linalg.solve(c.scaffold_B2 * np.eye(d) - K, cvec)
    x = fed.optimum() + Hinv @ u
    G = fed.client_grad(x)
    np.testing.assert_allclose((G ** 2).sum() / N, c.scaffold_G2 + c.scaffold_B2 * u @ u, rtol=1e-9)
    np.testing.assert_allclose(c.scaffold_B2, 2 * np.linalg.eigvalsh(K)[-1], rtol=1e-12)


def test_oracle_variances():
    fed = random_least_squares(3, 2, rows=[4, 5, 6], seed=1, noise=0.5)
    noisy = fed.with_gradient_noise([0.1, 0.4, 0.2])
    c = noisy.constants()
    np.testing.assert_allclose(c.sigma2_clients, [0.1, 0.4, 0.2])
    assert c.sigma2 == pytest.approx(0.4) and c.exact["sigma2"]
    mb = fed.with_minibatch(2)
    pts = np.random.default_rng(0).standard_normal((5, 2))
    c = mb.constants(points=pts, radius=0.5)
    assert not c.exact["sigma2"]
    # the estimate is the max over the evaluation points, which include the given points
    for x in pts:
        assert np.all(mb.minibatch_variance(x) <= c.sigma2_clients * (1 + 1e-12))


@pytest.mark.parametrize("n_classes", [None, 3])
def test_logistic_constants_at_the_optimum(n_classes):
    fed = make_logistic(2, 3, 2, 8, n_classes=n_classes, reg=0.2)
    c = problem_constants(fed, radius=0.5, rng=np.random.default_rng(0))
    xs = fed.optimum()
    G = fed.client_grad(xs)
    np.testing.assert_allclose(c.zeta2, fed.weights @ (G ** 2).sum(1), rtol=1e-12)
    assert np.all(c.D_k >= 0)
    np.testing.assert_allclose(c.D_k, fed.client_loss(xs) - fed.client_loss(fed.client_optima()), rtol=1e-12)
    H = fed.client_hess(xs)
    Hbar = np.einsum("i,ijk->jk", fed.weights, H)
    np.testing.assert_allclose(c.delta, max(np.linalg.norm(h - Hbar, 2) for h in H), rtol=1e-10)
    assert not c.exact["G2"] and "estimate" in c.notes["G2"]
    # G2 is a max over points inside the ball: every value there is below it ... at those points
    assert c.G2 >= fed.weights @ (G ** 2).sum(1) * (1 - 1e-12)        # x* is in the ball
    assert c.exact["L"] == (n_classes is None)
    assert "zeta2" in c.summary() and "~" in c.summary()
