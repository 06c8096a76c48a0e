"""Random families: exact constants and heterogeneity, FedProx Synthetic,
partitions, seeding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.problems import (
    dirichlet_partition,
    lognormal_sizes,
    m_class_partition,
    random_least_squares,
    random_quadratic,
    synthetic_fedprox,
)


@given(st.integers(1, 6), st.integers(2, 8), st.floats(1.0, 100.0), st.floats(0.0, 3.0),
       st.integers(0, 2**31 - 1), st.booleans())
def test_random_quadratic_hits_global_L_mu_and_heterogeneity(N, d, kappa, h, seed, weighted):
    L, mu = 2.5, 2.5 / kappa
    w = np.random.default_rng(seed).uniform(0.2, 1.0, N) if weighted else None
    h = h if N > 1 else 0.0
    fed = random_quadratic(N, d, L=L, mu=mu, heterogeneity=h, seed=seed, weights=w)
    lam = np.linalg.eigvalsh(fed.hess())
    assert abs(lam[-1] - L) <= 1e-12 * L
    assert abs(lam[0] - mu) <= 1e-12 * mu
    x_star, X = fed.optimum(), fed.client_optima()
    spread = np.sqrt(fed.weights @ ((X - x_star) ** 2).sum(1))
    assert abs(spread - h) <= 1e-10 * (1 + h)
    np.testing.assert_allclose(fed.client_loss(X, np.arange(N)), 0.0, atol=1e-12 * (1 + h * h) * L)


@given(st.integers(1, 5), st.integers(2, 7), st.integers(0, 2**31 - 1))
def test_random_quadratic_client_constants(N, d, seed):
    fed = random_quadratic(N, d, L=4.0, mu=0.5, heterogeneity=0.0 if N == 1 else 1.0, seed=seed,
                           constants="clients")
    np.testing.assert_allclose(fed.client_L, 4.0, rtol=1e-12)
    np.testing.assert_allclose(fed.client_mu, 0.5, rtol=1e-12)
    lam = np.linalg.eigvalsh(fed.hess())
    assert 0.5 * (1 - 1e-12) <= lam[0] and lam[-1] <= 4.0 * (1 + 1e-12)


def test_zero_heterogeneity_gives_identical_client_optima_and_seeding():
    fed = random_quadratic(4, 3, L=3.0, mu=1.0, heterogeneity=0.0, seed=5)
    np.testing.assert_allclose(fed.client_optima(), np.broadcast_to(fed.optimum(), (4, 3)), atol=1e-12)
    a = random_quadratic(4, 3, L=3.0, mu=1.0, heterogeneity=1.0, seed=5)
    b = random_quadratic(4, 3, L=3.0, mu=1.0, heterogeneity=1.0, seed=np.random.default_rng(5))
    np.testing.assert_array_equal(a.H, b.H)
    np.testing.assert_array_equal(a.e, b.e)
    c = random_quadratic(4, 3, L=3.0, mu=1.0, heterogeneity=1.0, seed=6)
    assert np.abs(a.H - c.H).max() > 1e-3


def test_random_least_squares_targets():
    fed = random_least_squares(3, 4, rows=[6, 9, 12], seed=0, heterogeneity=0.7)
    X = fed.client_optima()
    # noise-free: the client optima are the targets w_i = w0 + h v_i, |v_i| = 1
    dist = np.linalg.norm(X[:, None] - X[None], axis=2)
    assert np.all(dist <= 2 * 0.7 + 1e-10) and dist.max() > 0.1
    A, b = fed._A, fed._b
    for i, n in enumerate([6, 9, 12]):
        np.testing.assert_allclose(A[i, :n] @ X[i], b[i, :n], atol=1e-10)   # exact fit
    np.testing.assert_array_equal(fed.n_samples, [6, 9, 12])
    same = random_least_squares(3, 4, rows=[6, 9, 12], seed=0, heterogeneity=0.0)
    np.testing.assert_allclose(same.client_optima(), np.broadcast_to(same.client_optima()[0], (3, 4)),
                               atol=1e-10)


def test_lognormal_sizes():
    s = lognormal_sizes(2000, seed=1)
    assert s.min() >= 50 and s.dtype == np.int64
    # log(n - 50) ~ floor of N(4, 2): the median of n - 50 is about e^4 = 54.6
    assert 40 <= np.median(s - 50) <= 70


@pytest.mark.parametrize("iid", [False, True])
def test_synthetic_fedprox_shapes_sizes_labels(iid):
    data = synthetic_fedprox(0.5, 0.5, iid=iid, seed=3, n_devices=8, dim=12, n_classes=4)
    assert len(data.X_train) == 8 and data.train.n_clients == 8 and data.test.n_clients == 8
    assert np.all(data.sizes >= 50)
    n_tr = np.array([x.shape[0] for x in data.X_train])
    n_te = np.array([x.shape[0] for x in data.X_test])
    np.testing.assert_array_equal(n_tr, (0.9 * data.sizes).astype(int))
    np.testing.assert_array_equal(n_tr + n_te, data.sizes)
    assert data.train.dim == 13 * 4 and data.train.n_features == 13
    for x, y, k in zip(data.X_train, data.y_train, range(8)):
        assert x.shape[1] == 12 and set(np.unique(y)) <= set(range(4))
        np.testing.assert_array_equal(y, np.argmax(x @ data.W[k] + data.b[k], axis=1))
    if iid:
        np.testing.assert_array_equal(data.W, np.broadcast_to(data.W[0], data.W.shape))
        np.testing.assert_array_equal(data.v, 0.0)
    else:
        assert np.abs(data.W[0] - data.W[1]).max() > 0


def test_synthetic_covariance_scale_and_alpha_beta_zero():
    data = synthetic_fedprox(0.0, 0.0, seed=4, n_devices=30, dim=10, n_classes=3)
    resid = np.concatenate([np.vstack([a, b]) - v for a, b, v in zip(data.X_train, data.X_test, data.v)])
    var = resid.var(axis=0, ddof=0)
    target = np.arange(1, 11) ** -1.2
    n = resid.shape[0]
    # sample variance of a Gaussian: sd = target sqrt(2/n); allow 5 sd
    assert np.all(np.abs(var - target) <= 5 * target * np.sqrt(2 / n) + 5 * target / np.sqrt(n))
    # alpha = beta = 0: u_k = B_k = 0, so W_k ~ N(0, 1) and v_k ~ N(0, 1) (means near 0)
    assert abs(data.W.mean()) < 5 / np.sqrt(data.W.size)
    assert abs(data.v.mean()) < 5 / np.sqrt(data.v.size)


def test_synthetic_alpha_moves_model_means():
    """alpha is a standard deviation: the per-device means u_k of W_k spread like N(0, alpha^2)."""
    data = synthetic_fedprox(3.0, 0.0, seed=7, n_devices=200, dim=4, n_classes=3)
    u_hat = data.W.reshape(200, -1).mean(axis=1)         # u_k + N(0, 1/12) noise
    assert 2.5 < u_hat.std() < 3.5


def test_synthetic_same_seed_same_data():
    a = synthetic_fedprox(1.0, 1.0, seed=11, n_devices=4, dim=5, n_classes=3)
    b = synthetic_fedprox(1.0, 1.0, seed=11, n_devices=4, dim=5, n_classes=3)
    for x, y in zip(a.X_train + a.X_test, b.X_train + b.X_test):
        np.testing.assert_array_equal(x, y)
    x = np.linspace(-1, 1, a.train.dim)
    np.testing.assert_array_equal(a.train.client_grad(x), b.train.client_grad(x))


@given(st.integers(0, 2**31 - 1), st.integers(2, 8), st.floats(0.05, 50.0))
def test_dirichlet_partition_is_a_partition(seed, N, gamma):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, 200)
    parts = dirichlet_partition(labels, N, gamma, np.random.default_rng(seed))
    allidx = np.concatenate(parts)
    np.testing.assert_array_equal(np.sort(allidx), np.arange(200))
    sizes = np.array([p.size for p in parts])
    assert sizes.max() - sizes.min() <= 1


def test_dirichlet_partition_skew_follows_gamma():
    labels = np.repeat(np.arange(10), 500)
    def mean_classes(gamma):
        parts = dirichlet_partition(labels, 20, gamma, np.random.default_rng(0))
        return np.mean([np.unique(labels[p]).size for p in parts])
    assert mean_classes(0.01) < 3 < 9 < mean_classes(100.0)


@given(st.integers(0, 2**31 - 1), st.integers(1, 12), st.integers(1, 5))
def test_m_class_partition_exactly_m_classes(seed, N, m):
    labels = np.random.default_rng(seed).permutation(np.repeat(np.arange(6), 40))
    m = min(m, 6)
    parts = m_class_partition(labels, N, m, np.random.default_rng(seed))
    assert len(parts) == N
    for p in parts:
        assert np.unique(labels[p]).size == m
    allidx = np.concatenate(parts)
    assert np.unique(allidx).size == allidx.size
    if N * m >= 6:
        assert allidx.size == 240


def test_synthetic_with_intercept_is_separable_so_needs_ridge():
    """Each device's labels are an argmax of affine functions of x, so with the
    constant feature every client's unregularised softmax loss has no minimiser;
    in the IID variant the pooled data share the rule, so F has none either."""
    from fltheory.errors import InvalidProblemError
    data = synthetic_fedprox(1.0, 1.0, seed=2, n_devices=3, dim=4, n_classes=3)
    with pytest.raises(InvalidProblemError, match="client 0"):
        data.train.client_optima()
    iid = synthetic_fedprox(0.0, 0.0, iid=True, seed=2, n_devices=3, dim=4, n_classes=3)
    with pytest.raises(InvalidProblemError, match="global"):
        iid.train.optimum()
    ridged = synthetic_fedprox(1.0, 1.0, seed=2, n_devices=3, dim=4, n_classes=3, reg=0.05)
    assert np.linalg.norm(ridged.train.grad(ridged.train.optimum())) <= 1e-10
    G = ridged.train.client_grad(ridged.train.client_optima())
    assert np.all(np.linalg.norm(G, axis=1) <= 1e-10)


@pytest.mark.parametrize(("build", "match"), [
    (lambda: random_least_squares(3, 2, rows=4, heterogeneity=1e308, seed=0),
     r"random_least_squares\(heterogeneity = 1e\+308\): the generated problem overflows float64 \(b has"),
    (lambda: random_quadratic(3, 2, L=1e308, mu=1e300, heterogeneity=1e300, seed=0),
     r"random_quadratic\(L = 1e\+308, mu = 1e\+300, heterogeneity = 1e\+300\): .* \(H has"),
    (lambda: random_quadratic(3, 2, L=1e300, mu=1e299, heterogeneity=1e10, seed=0), r"\(e has non-finite"),
    (lambda: random_quadratic(3, 2, L=2.0, mu=1.0, heterogeneity=1.0, seed=0, optimum=[1e300, 1e300]),
     r"optimum = \[1e\+300, 1e\+300\]\): .* \(offsets has"),
])
def test_overflowing_scales_name_the_arguments_without_warnings(build, match):
    """Arguments each finite but of extreme scale: one OutOfRangeError naming the generator's
    scale arguments (it used to name an internal array, after numpy overflow warnings)."""
    import warnings

    from fltheory.errors import OutOfRangeError
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(OutOfRangeError, match=match):
            build()
