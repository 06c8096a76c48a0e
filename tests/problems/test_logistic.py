"""LogisticFederation oracles against per-sample loops, finite differences and
Monte Carlo; stability for huge margins."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.problems import LogisticFederation

from .problem_refs import fd_grad, fd_jac, make_logistic, mc_interval, ref_binary, ref_multi

instances = st.fixed_dictionaries({
    "seed": st.integers(0, 2**31 - 1),
    "n_clients": st.integers(1, 4),
    "n_feat": st.integers(1, 4),
    "max_rows": st.integers(1, 7),
    "reg": st.sampled_from([0.0, 0.3]),
    "weights": st.booleans(),
})


def _point_rows(fed, seed, clients):
    return np.random.default_rng(seed + 1).standard_normal((len(clients), fed.dim))


@given(instances, st.sampled_from([None, 2, 3]))
def test_batched_oracles_equal_per_sample_loops(inst, n_classes):
    fed = make_logistic(**inst, n_classes=n_classes)
    rng = np.random.default_rng(inst["seed"] + 2)
    clients = rng.integers(0, fed.n_clients, 5)            # repeats and any order
    X = _point_rows(fed, inst["seed"], clients)
    loss, grad, hess = fed.client_loss(X, clients), fed.client_grad(X, clients), fed.client_hess(X, clients)
    feats, labs = fed.features, fed.labels
    for r, i in enumerate(clients):
        if n_classes is None:
            l, g, H = ref_binary(feats[i], labs[i], X[r], fed.reg)
        else:
            l, g, H = ref_multi(feats[i], labs[i], X[r], fed.reg, n_classes)
        np.testing.assert_allclose(loss[r], l, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(grad[r], g, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(hess[r], H, rtol=1e-11, atol=1e-13)
    # the global objective is the weighted sum of the clients
    x = X[0]
    np.testing.assert_allclose(fed.loss(x), fed.weights @ fed.client_loss(x), rtol=1e-13)


@given(instances, st.sampled_from([None, 3]))
def test_gradient_and_hessian_match_central_differences(inst, n_classes):
    fed = make_logistic(**inst, n_classes=n_classes)
    x = np.random.default_rng(inst["seed"]).standard_normal(fed.dim)
    for i in range(fed.n_clients):
        g = fed.client_grad(x, [i])[0]
        H = fed.client_hess(x, [i])[0]
        fd_g = fd_grad(lambda z: fed.client_loss(z, [i])[0], x)
        fd_H = fd_jac(lambda z: fed.client_grad(z, [i])[0], x)
        np.testing.assert_allclose(g, fd_g, atol=1e-7 * (1 + np.abs(g).max()))
        np.testing.assert_allclose(H, fd_H, atol=1e-7 * (1 + np.abs(H).max()))
    np.testing.assert_allclose(fed.grad(x), fd_grad(fed.loss, x), atol=1e-7 * (1 + np.abs(fed.grad(x)).max()))


@given(instances, st.sampled_from([None, 3]))
def test_fishers_per_sample_gradients_and_sample_mask(inst, n_classes):
    fed = make_logistic(**inst, n_classes=n_classes)
    X = _point_rows(fed, inst["seed"], range(fed.n_clients))
    G = fed.per_sample_grads(X)
    mask = fed.sample_mask()
    assert np.all(G[~mask] == 0.0)
    # f_i is the mean of the per-sample objectives
    np.testing.assert_allclose(G.sum(axis=1) / mask.sum(axis=1)[:, None], fed.client_grad(X),
                               rtol=1e-11, atol=1e-13)
    # empirical Fisher: mean of squared per-sample *data* gradients (ridge removed)
    D = (G - fed.reg * X[:, None, :]) * mask[:, :, None]
    np.testing.assert_allclose(fed.empirical_fisher_diag(X), (D ** 2).sum(axis=1) / mask.sum(axis=1)[:, None],
                               rtol=1e-11, atol=1e-14)
    # true Fisher = diagonal of the Hessian without the ridge term
    H = fed.client_hess(X)
    np.testing.assert_allclose(fed.fisher_diag(X), np.einsum("mii->mi", H) - fed.reg, rtol=1e-11, atol=1e-13)


def test_true_fisher_is_expected_outer_product_under_the_model():
    """Multinomial: sum_y p(y|a) g_y g_y^T = Hessian of the data term (exactly)."""
    fed = make_logistic(3, 2, 3, 5, n_classes=4, reg=0.2)
    x = np.random.default_rng(9).standard_normal(fed.dim)
    a, C = fed.features[0], 4
    F = np.zeros((fed.dim, fed.dim))
    for j in range(a.shape[0]):
        z = a[j] @ x.reshape(3, C)
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        for c in range(C):
            g = np.outer(a[j], p - np.eye(C)[c]).ravel()
            F += p[c] * np.outer(g, g)
    F /= a.shape[0]
    np.testing.assert_allclose(F, fed.client_hess(x, [0])[0] - 0.2 * np.eye(fed.dim), atol=1e-13)
    np.testing.assert_allclose(np.diag(F), fed.fisher_diag(x, [0])[0], atol=1e-13)


@pytest.mark.parametrize("n_classes", [None, 3])
def test_margins_of_1e4_are_stable(n_classes):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 2))
    a /= np.abs(a @ np.array([1.0, 0.5]))[:, None]          # |a^T x0| = 1 for x0 below
    y = np.array([1.0, -1, 1, -1, 1, -1]) if n_classes is None else np.array([0, 1, 2, 0, 1, 2])
    fed = LogisticFederation([a], [y], n_classes=n_classes)
    base = np.array([1.0, 0.5])
    x = 1e4 * (base if n_classes is None else np.kron(base, np.array([1.0, -1.0, 0.0])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = [fed.client_loss(x), fed.client_grad(x), fed.client_hess(x), fed.fisher_diag(x),
               fed.empirical_fisher_diag(x), fed.per_sample_grads(x)]
    for v in out:
        assert np.all(np.isfinite(v))
    if n_classes is None:
        # each row loss is log(1 + e^{-z}) with z = +-1e4: either ~0 or exactly |z|
        z = y * (a @ x)
        np.testing.assert_allclose(out[0][0], np.mean(np.where(z < 0, -z, 0.0)), rtol=1e-12)
        assert np.abs(out[2]).max() < 1e-300      # s(z) s(-z) underflows to 0, no NaN


@given(instances)
def test_minibatch_oracle_unbiased_with_the_stated_variance(inst):
    fed = make_logistic(**{**inst, "max_rows": max(inst["max_rows"], 2)}, n_classes=None).with_minibatch(2)
    X = _point_rows(fed, inst["seed"], range(fed.n_clients))
    rng = np.random.default_rng(inst["seed"])
    reps = 4000
    G = np.stack([fed.stochastic_grad(X, None, rng) for _ in range(reps)])    # (reps, N, d)
    exact = fed.client_grad(X)
    var = fed.minibatch_variance(X)
    sq = ((G - exact) ** 2).sum(axis=2)
    for i in range(fed.n_clients):
        for k in range(fed.dim):
            lo, hi = mc_interval(G[:, i, k])
            assert lo - 1e-12 <= exact[i, k] <= hi + 1e-12
        lo, hi = mc_interval(sq[:, i])
        assert lo - 1e-12 <= var[i] <= hi + 1e-12


def test_minibatch_variance_by_enumeration():
    """b = 1: the variance is the population variance of the per-sample gradients."""
    fed = make_logistic(5, 2, 3, 6, n_classes=3, reg=0.4).with_minibatch(1)
    X = _point_rows(fed, 5, range(2))
    for i in range(2):
        a, y = fed.features[i], fed.labels[i]
        gs = [ref_multi(a[j:j + 1], y[j:j + 1], X[i], 0.4, 3)[1] for j in range(a.shape[0])]
        gs = np.array(gs)
        np.testing.assert_allclose(fed.minibatch_variance(X)[i],
                                   ((gs - gs.mean(0)) ** 2).sum(1).mean(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("config", ["minibatch", "noise"])
def test_rng_convention_batched_equals_one_client_at_a_time(config):
    fed = make_logistic(11, 4, 3, 6, n_classes=None)
    fed = fed.with_minibatch(3) if config == "minibatch" else fed.with_gradient_noise([0.1, 0.2, 0.3, 0.4])
    clients = np.array([2, 0, 3, 3, 1])
    X = np.random.default_rng(1).standard_normal((5, 3))
    batched = fed.stochastic_grad(X, clients, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    rows = np.stack([fed.stochastic_grad(X[r:r + 1], clients[r:r + 1], rng)[0] for r in range(5)])
    if config == "minibatch":
        np.testing.assert_array_equal(batched, rows)
    else:
        # Gaussian noise: one standard_normal((m, d)) call fills rows in order
        np.testing.assert_allclose(batched, rows, rtol=0, atol=1e-15)


def test_gaussian_noise_oracle_variance():
    fed = make_logistic(4, 2, 3, 5).with_gradient_noise([0.5, 2.0])
    X = _point_rows(fed, 4, range(2))
    rng = np.random.default_rng(3)
    sq = np.stack([((fed.stochastic_grad(X, None, rng) - fed.client_grad(X)) ** 2).sum(1) for _ in range(4000)])
    for i, s2 in enumerate([0.5, 2.0]):
        lo, hi = mc_interval(sq[:, i])
        assert lo <= s2 <= hi


def test_smoothness_constants():
    fed = make_logistic(6, 3, 3, 8, reg=0.1)
    rng = np.random.default_rng(0)
    # binary: L_i is the Hessian norm at x = 0 and bounds it everywhere
    H0 = fed.client_hess(np.zeros(fed.dim))
    np.testing.assert_allclose(fed.client_L, np.linalg.eigvalsh(H0)[:, -1], rtol=1e-12)
    for _ in range(5):
        H = fed.client_hess(rng.standard_normal(fed.dim) * 3)
        assert np.all(np.linalg.eigvalsh(H)[:, -1] <= fed.client_L * (1 + 1e-12))
        assert np.all(np.linalg.eigvalsh(H)[:, 0] >= fed.client_mu * (1 - 1e-12))
    np.testing.assert_allclose(fed.L, np.linalg.eigvalsh(fed.hess(np.zeros(fed.dim)))[-1], rtol=1e-12)
    multi = make_logistic(6, 3, 2, 8, n_classes=3, reg=0.1)
    for _ in range(5):
        H = multi.client_hess(rng.standard_normal(multi.dim) * 3)
        assert np.all(np.linalg.eigvalsh(H)[:, -1] <= multi.client_L * (1 + 1e-12))


def test_without_and_with_client_round_trip():
    fed = make_logistic(8, 3, 2, 6, n_classes=3)
    x = np.random.default_rng(0).standard_normal(fed.dim)
    small = fed.without_client(1)
    assert small.n_clients == 2
    np.testing.assert_allclose(small.client_grad(x), fed.client_grad(x, [0, 2]), rtol=1e-14)
    np.testing.assert_allclose(small.weights, fed.n_samples[[0, 2]] / fed.n_samples[[0, 2]].sum())
    back = small.with_client(fed.without_client(0).without_client(1))
    np.testing.assert_allclose(back.client_loss(x), fed.client_loss(x, [0, 2, 1]), rtol=1e-14)
    np.testing.assert_allclose(back.weights, fed.weights[[0, 2, 1]], rtol=1e-14)


def test_accuracy_counts_correct_rows():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    fed = LogisticFederation([a, a[:2]], [np.array([1.0, -1.0, 1.0]), np.array([-1.0, -1.0])])
    x = np.array([1.0, -0.5])                  # margins 1, -0.5, 0.5 -> signs +, -, +
    np.testing.assert_allclose(fed.accuracy(x), [1.0, 0.5])
    multi = LogisticFederation([a], [np.array([0, 1, 1])], n_classes=2)
    W = np.array([[1.0, 0.0], [0.0, 2.0]])     # logits: (1,0), (0,2), (1,2)
    np.testing.assert_allclose(multi.accuracy(W.ravel()), [1.0])


def test_newton_reports_divergence_with_a_typed_error():
    from fltheory.errors import DivergenceError
    from fltheory.problems.newton import newton
    fed = make_logistic(1, 2, 3, 6, reg=0.01)
    with pytest.raises(DivergenceError, match="rows"):
        newton(lambda X, r: fed.client_loss(X, r), lambda X, r: fed.client_grad(X, r),
               lambda X, r: fed.client_hess(X, r), np.full((2, 3), 50.0), tol=1e-10, max_iter=1)


def test_blocked_multinomial_hessian_equals_one_block(monkeypatch):
    from fltheory.problems import _logistic_oracles as lo
    fed = make_logistic(12, 3, 2, 9, n_classes=3, reg=0.1)
    X = np.random.default_rng(2).standard_normal((3, fed.dim))
    whole = fed.client_hess(X)
    monkeypatch.setattr(lo, "_BLOCK_FLOATS", 1)            # one row per block
    np.testing.assert_allclose(fed.client_hess(X), whole, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("n_classes", [None, 3])
def test_hessian_of_very_unequal_clients(n_classes):
    """Sizes 1..60 trigger the size-bucketed Hessian path; it must equal the loop."""
    rng = np.random.default_rng(0)
    sizes = [1, 60, 2, 3, 40, 1]
    feats = [rng.standard_normal((n, 2)) for n in sizes]
    labs = [np.where(rng.random(n) < 0.5, -1.0, 1.0) if n_classes is None else rng.integers(0, 3, n)
            for n in sizes]
    fed = LogisticFederation(feats, labs, reg=0.2, n_classes=n_classes)
    clients = np.array([1, 0, 5, 4, 4, 2, 3])
    X = rng.standard_normal((7, fed.dim))
    H = fed.client_hess(X, clients)
    for r, i in enumerate(clients):
        ref = ref_binary if n_classes is None else (lambda a, y, x, g: ref_multi(a, y, x, g, 3))
        np.testing.assert_allclose(H[r], ref(feats[i], labs[i], X[r], 0.2)[2], rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("kind", ["binary", "multinomial", "multinomial unequal sizes", "no ridge"])
def test_fused_loss_and_gradient_hook_gives_the_bits_of_the_default(kind):
    """loss_and_grad_norm2 takes one pass over the data per point (loss and gradient
    from the same logits) and must give exactly what Federation's default computes
    from loss() and grad() separately; the gradient is also checked against finite
    differences of F."""
    from fltheory.problems import Federation
    from fltheory.problems.synthetic import synthetic_fedprox
    if kind == "multinomial unequal sizes":
        fed = synthetic_fedprox(1.0, 1.0, seed=1, reg=1e-3, n_devices=12, dim=5, n_classes=3).train
    else:
        fed = make_logistic(3, 6, 4, 30, n_classes=None if kind == "binary" else 3,
                            reg=0.0 if kind == "no ridge" else 0.1, weights=True)
    X = 0.4 * np.random.default_rng(4).standard_normal((3, fed.dim))
    loss, g2 = fed.loss_and_grad_norm2(X)
    want = Federation.loss_and_grad_norm2(fed, X)
    np.testing.assert_array_equal(loss, want[0])
    np.testing.assert_array_equal(g2, want[1])
    g = fd_grad(fed.loss, X[0])
    assert g2[0] == pytest.approx(float(g @ g), rel=1e-6)


def test_fused_loss_and_gradient_hook_refuses_bad_points():
    from fltheory.errors import FLTheoryError
    fed = make_logistic(5, 3, 2, 10)
    for bad in (np.array([[np.nan, 0.0]]), np.array([[1e308, 1e308]]) * 10, np.zeros((1, 3))):
        with pytest.raises(FLTheoryError):
            fed.loss_and_grad_norm2(bad)


@pytest.mark.parametrize("kind", ["binary", "multinomial", "multinomial unequal sizes"])
@pytest.mark.parametrize("clients", [None, np.array([3, 1, 1, 0])])
def test_bound_gradient_gives_the_bits_of_client_grad(kind, clients):
    """row_gradient binds the size groups (and label positions) once; every call must
    equal client_grad bit for bit, with or without an output buffer; noisy oracles
    fall back to the generic hook (same draws as stochastic_grad)."""
    from fltheory.problems.synthetic import synthetic_fedprox
    if kind == "multinomial unequal sizes":
        fed = synthetic_fedprox(1.0, 1.0, seed=2, reg=1e-3, n_devices=12, dim=5, n_classes=3).train
    else:
        fed = make_logistic(6, 6, 4, 30, n_classes=None if kind == "binary" else 3, reg=0.1)
    idx = np.arange(fed.n_clients) if clients is None else clients
    X = 0.5 * np.random.default_rng(8).standard_normal((idx.shape[0], fed.dim))
    grad = fed.row_gradient(idx, None)
    want = fed.client_grad(X, idx)
    np.testing.assert_array_equal(grad(X), want)
    np.testing.assert_array_equal(grad(X, np.empty_like(X)), want)
    noisy = fed.with_gradient_noise(0.2)
    g = noisy.row_gradient(idx, np.random.default_rng(1))(X)
    np.testing.assert_array_equal(g, noisy.stochastic_grad(X, idx, np.random.default_rng(1)))


def test_optima_reach_the_rounding_floor_when_feature_scales_mix():
    """One feature of 1e8 among features of 1: the relative stopping tolerance (1e-10 x the
    largest row norm, here 1e-2) left ||grad F(x*)|| = 4.6e-3 and the small coordinate of x*
    1% off; the polished Newton steps end at the floor, where BFGS (gtol 1e-14) agrees."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    A = [rng.standard_normal((40, 2)) for _ in range(2)]
    A[0][0, 0] = 1e8
    y = [np.sign(rng.standard_normal(40)) for _ in range(2)]
    fed = LogisticFederation(A, y, reg=1e-3)
    x = fed.optimum()
    assert np.linalg.norm(fed.grad(x)) < 1e-12
    ref = minimize(fed.loss, np.zeros(2), jac=fed.grad, method="BFGS", options={"gtol": 1e-14}).x
    np.testing.assert_allclose(x, ref, rtol=1e-6)
    Xi = fed.client_optima()
    assert np.abs(fed.client_grad(Xi, np.arange(2))).max() < 1e-12


def test_curvature_constants_beyond_float64_range_are_a_typed_error():
    """Features of 1e155: A^T A overflows, and L, client_L came back NaN; the optimum's
    tolerance (squared row norms) overflowed to inf and x = 0 was returned with
    ||grad F|| = 2.5e199.  Now L raises, and so does the optimum (its Hessians overflow)."""
    from fltheory.errors import DivergenceError, OutOfRangeError
    fed = LogisticFederation([np.array([[1e155, 1.0], [0.5, 2.0]])], [np.array([1.0, -1.0])], reg=1e-3)
    for read in (lambda: fed.L, lambda: fed.client_L):
        with pytest.raises(OutOfRangeError, match="rescale the features"):
            read()
    with pytest.raises(DivergenceError, match=r"did not reach \|\|grad\|\| <= 1e\+145"):
        fed.optimum()
