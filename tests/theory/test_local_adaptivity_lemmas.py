"""LocalAdaptivity's technical lemmas (App. B.1 Lemmas 1-2, App. F.2 Lemma 4) on random instances.

The printed inequalities were lost in the text we have; the proofs' text fixes their content, which is
what we check (our reading, the registry entries say so):

* Lemma 1 (eq. 12-13, "by linearity of the integral"): for twice-differentiable f,
  grad f(x) - grad f(y) = Hbar (x - y) with Hbar = int_0^1 hess f(y + s (x - y)) ds.  Checked on logistic
  clients (not quadratic) with Gauss-Legendre quadrature of the exact Hessians.
* Lemma 2 (eqs. 14-16; x, y random with the same random sources, f L-smooth and mu-strongly convex; the
  proof uses Lemma 1 and mu I <= Hbar <= L I): the gradient-step contraction
  E||x - y - eta (grad f(x) - grad f(y))||^2 <= max(|1 - eta mu|, |1 - eta L|)^2 E||x - y||^2, the
  monotonicity mu E||x - y||^2 <= E<grad f(x) - grad f(y), x - y> <= L E||x - y||^2 and co-coercivity
  E||grad f(x) - grad f(y)||^2 <= L E<grad f(x) - grad f(y), x - y>, with sample means over a shared
  additive noise (which cancels in the differences, the "same random sources").
* Lemma 4 (eq. 101, symmetric positive definite A_1..A_n, used in eq. 117 to bound the locally corrected
  change): the matrix-weighted Jensen inequality
  (sum A_k u_k)^T (sum A_k)^{-1} (sum A_k u_k) <= sum_k u_k^T A_k u_k and its Euclidean consequence
  ||(sum A_k)^{-1} sum A_k u_k||^2 <= (a_max / (n a_min)) sum_k ||u_k||^2 for spectra in [a_min, a_max].
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fltheory.problems import LogisticFederation


def _logistic(seed: int, d: int, reg: float) -> LogisticFederation:
    rng = np.random.default_rng(seed)
    feats = [rng.standard_normal((12, d)) * 2.0 for _ in range(2)]
    labels = [np.where(rng.uniform(size=12) < 0.5, 1.0, -1.0) for _ in range(2)]
    return LogisticFederation(feats, labels, reg=reg)


@given(st.integers(0, 2**31 - 1), st.integers(1, 4))
def test_lemma1_gradient_difference_is_the_averaged_hessian(seed, d):
    fed = _logistic(seed, d, reg=0.1)
    rng = np.random.default_rng(seed + 1)
    x, y = rng.standard_normal(d) * 3, rng.standard_normal(d) * 3
    nodes, w16 = np.polynomial.legendre.leggauss(16)          # composite: 32 panels of 16 nodes on [0, 1]
    left = np.arange(32) / 32
    s = (left[:, None] + (nodes[None, :] + 1) / 64).ravel()
    w = np.tile(w16 / 32, 32)
    pts = y[None, :] + s[:, None] * (x - y)[None, :]
    for i in range(fed.n_clients):
        H = fed.client_hess(pts, np.full(s.shape[0], i))              # (512, d, d)
        Hbar = np.einsum("q,qij->ij", w / 2, H)
        gx, gy = fed.client_grad(np.stack([x, y]), np.array([i, i]))
        np.testing.assert_allclose(gx - gy, Hbar @ (x - y), rtol=1e-10, atol=1e-12)


@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.floats(0.01, 2.5))
def test_lemma2_inequalities_in_expectation_over_shared_noise(seed, d, eta_times_L):
    fed = _logistic(seed, d, reg=0.2)
    mu, L = fed.client_mu, fed.client_L
    rng = np.random.default_rng(seed + 2)
    M = 64
    X = rng.standard_normal((M, d)) * 2
    Y = X + rng.standard_normal((M, d))
    xi = rng.standard_normal((M, d))                                   # the shared random source
    for i in range(fed.n_clients):
        eta = eta_times_L / L[i]
        ids = np.full(M, i)
        gX = fed.client_grad(X, ids) + xi
        gY = fed.client_grad(Y, ids) + xi
        diff, dg = X - Y, gX - gY
        q = max(abs(1 - eta * mu[i]), abs(1 - eta * L[i]))
        lhs = np.mean(np.sum((diff - eta * dg) ** 2, axis=1))
        sq = np.mean(np.sum(diff ** 2, axis=1))
        inner = np.mean(np.sum(dg * diff, axis=1))
        assert lhs <= q * q * sq * (1 + 1e-12)
        assert mu[i] * sq * (1 - 1e-12) <= inner <= L[i] * sq * (1 + 1e-12)
        assert np.mean(np.sum(dg ** 2, axis=1)) <= L[i] * inner * (1 + 1e-12)


def test_lemma2_contraction_is_attained_by_a_quadratic_direction():
    # f(x) = x^T diag(mu, L) x / 2: x - y along e_1 contracts by exactly |1 - eta mu| (the bound is tight)
    mu, L, eta = 0.5, 4.0, 0.2
    H = np.diag([mu, L])
    v = np.array([1.0, 0.0])
    assert np.linalg.norm(v - eta * H @ v) == max(abs(1 - eta * mu), abs(1 - eta * L)) * np.linalg.norm(v)


@st.composite
def spd_families(draw):
    n = draw(st.integers(1, 5))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**31 - 1))
    cond = draw(st.floats(1.0, 1e3))
    rng = np.random.default_rng(seed)
    A = []
    for _ in range(n):
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        A.append(Q @ np.diag(np.exp(rng.uniform(0, np.log(cond), d))) @ Q.T)
    return np.stack(A), rng.standard_normal((n, d)) * 3


@given(spd_families())
def test_lemma4_matrix_weighted_jensen_and_its_euclidean_form(case):
    A, U = case
    n = A.shape[0]
    S = A.sum(axis=0)
    z = np.einsum("kij,kj->i", A, U)
    lhs = z @ np.linalg.solve(S, z)
    rhs = np.einsum("ki,kij,kj->", U, A, U)
    assert lhs <= rhs * (1 + 1e-9) + 1e-12
    eig = np.linalg.eigvalsh(A)
    a_min, a_max = eig.min(), eig.max()
    avg = np.linalg.solve(S, z)
    assert avg @ avg <= a_max / (n * a_min) * np.sum(U ** 2) * (1 + 1e-9) + 1e-12


def test_lemma4_is_an_equality_for_equal_vectors():
    # u_k = u for all k: the weighted average is u itself and both sides equal u^T S u
    rng = np.random.default_rng(0)
    B = rng.standard_normal((3, 2, 2))
    A = B @ B.transpose(0, 2, 1) + np.eye(2)
    u = np.array([1.0, -2.0])
    S = A.sum(axis=0)
    z = S @ u
    np.testing.assert_allclose(z @ np.linalg.solve(S, z), np.einsum("i,kij,j->", u, A, u), rtol=1e-12)


# --- Assumptions 4 and 5 (App. F) for restarted client AdaGrad -------------------------------------------
# A4: P_k = diag(1/(sqrt(nu_k) + eps)) is symmetric positive definite with ||P_k|| <= 1/(sqrt(nu_0) + eps)
# (nu only grows).  A5: nu_k >= g_k^2 elementwise (nu is updated before the division), so every coordinate
# of P_k g_k has modulus < 1 and ||P_k g_k|| < sqrt(d) whatever the gradients [derived].

@given(st.integers(0, 2**31 - 1), st.integers(1, 6), st.floats(0.0, 4.0), st.floats(1e-8, 1.0),
       st.floats(-6.0, 6.0))
def test_assumptions_4_and_5_hold_for_adagrad_with_explicit_constants(seed, d, nu0, eps, log_scale):
    from fltheory import optim
    rng = np.random.default_rng(seed)
    lr = 0.3
    opt = optim.adagrad(lr, eps=eps, initial_accumulator=nu0)
    params = np.zeros((2, d))
    state = opt.init(params)
    bound_a4 = 1.0 / (np.sqrt(nu0) + eps)
    for _ in range(20):
        g = rng.standard_normal((2, d)) * 10.0 ** log_scale * rng.uniform(0, 3, (2, 1))
        u, state = opt.update(g, state, params)
        P = 1.0 / (np.sqrt(state.nu) + eps)
        np.testing.assert_allclose(u, -lr * P * g, rtol=1e-12, atol=1e-300)
        assert np.all(P > 0) and np.all(P <= bound_a4 * (1 + 1e-15))
        assert np.all(np.linalg.norm(u / lr, axis=1) <= np.sqrt(d))
