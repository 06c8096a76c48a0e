"""QuadraticFederation oracles against finite differences, per-client loops
and Monte Carlo; the base-class RNG convention."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.errors import InvalidProblemError
from fltheory.problems import QuadraticFederation, random_least_squares, random_quadratic

from .problem_refs import fd_grad, fd_jac, mc_interval


@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.integers(2, 5), st.booleans())
def test_quadratic_oracles_vs_loop_and_finite_differences(seed, N, d, weighted):
    w = np.random.default_rng(seed).uniform(0.1, 1.0, N) if weighted else None
    fed = random_quadratic(N, d, L=5.0, mu=0.5, heterogeneity=0.0 if N == 1 else 1.0, seed=seed, weights=w)
    rng = np.random.default_rng(seed + 1)
    clients = rng.integers(0, N, 6)
    X = rng.standard_normal((6, d))
    loss, grad, hess = fed.client_loss(X, clients), fed.client_grad(X, clients), fed.client_hess(X, clients)
    for r, i in enumerate(clients):
        H, e, c = fed.H[i], fed.e[i], fed.offsets[i]
        assert loss[r] == pytest.approx(0.5 * X[r] @ H @ X[r] - e @ X[r] + c, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(grad[r], H @ X[r] - e, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(hess[r], H, rtol=0, atol=0)
        fd = fd_grad(lambda z: fed.client_loss(z, [i])[0], X[r])
        np.testing.assert_allclose(grad[r], fd, atol=1e-6 * (1 + np.abs(grad[r]).max()))
        fdH = fd_jac(lambda z: fed.client_grad(z, [i])[0], X[r])
        np.testing.assert_allclose(hess[r], fdH, atol=1e-6 * (1 + np.abs(fdH).max()))
    x = X[0]
    np.testing.assert_allclose(fed.grad(x), sum(fed.weights[i] * (fed.H[i] @ x - fed.e[i]) for i in range(N)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("config", ["minibatch", "noise"])
def test_quadratic_rng_convention(config):
    fed = random_least_squares(4, 3, rows=[3, 5, 7, 4], seed=2, noise=0.3)
    fed = fed.with_minibatch(2) if config == "minibatch" else fed.with_gradient_noise(0.5)
    clients = np.array([3, 1, 1, 0, 2])
    X = np.random.default_rng(0).standard_normal((5, 3))
    batched = fed.stochastic_grad(X, clients, np.random.default_rng(4))
    rng = np.random.default_rng(4)
    loop = np.stack([fed.stochastic_grad(X[r], [c], rng)[0] for r, c in enumerate(clients)])
    np.testing.assert_allclose(batched, loop, rtol=0, atol=1e-14)


@given(st.integers(0, 2**31 - 1), st.integers(1, 3))
def test_quadratic_minibatch_unbiased_with_exact_variance(seed, b):
    fed = random_least_squares(3, 2, rows=[2, 4, 5], seed=seed, noise=1.0, heterogeneity=1.0).with_minibatch(b)
    X = np.random.default_rng(seed).standard_normal((3, 2))
    rng = np.random.default_rng(seed + 7)
    G = np.stack([fed.stochastic_grad(X, None, rng) for _ in range(3000)])
    exact, var = fed.client_grad(X), fed.minibatch_variance(X)
    for i in range(3):
        for k in range(2):
            lo, hi = mc_interval(G[:, i, k])
            assert lo - 1e-12 <= exact[i, k] <= hi + 1e-12
        lo, hi = mc_interval(((G[:, i] - exact[i]) ** 2).sum(1))
        assert lo - 1e-12 <= var[i] <= hi + 1e-12


def test_gaussian_noise_variance_is_exact_sigma2():
    fed = random_quadratic(2, 4, L=1.0, mu=0.5, heterogeneity=0.3, seed=0).with_gradient_noise([0.3, 1.7])
    X = np.zeros((2, 4))
    rng = np.random.default_rng(1)
    sq = np.stack([((fed.stochastic_grad(X, None, rng) - fed.client_grad(X)) ** 2).sum(1) for _ in range(4000)])
    for i, s2 in enumerate([0.3, 1.7]):
        lo, hi = mc_interval(sq[:, i])
        assert lo <= s2 <= hi


def test_quadratic_optima_and_shift_constructors():
    fed = random_quadratic(3, 3, L=2.0, mu=0.4, heterogeneity=1.0, seed=3, n_samples=[2, 3, 5])
    np.testing.assert_allclose(fed.grad(fed.optimum()), 0.0, atol=1e-12)
    np.testing.assert_allclose(fed.client_grad(fed.client_optima()), 0.0, atol=1e-12)
    small = fed.without_client(2)
    np.testing.assert_allclose(small.weights, [0.4, 0.6])
    back = small.with_client(QuadraticFederation(fed.H[2:], fed.e[2:], n_samples=[5]))
    np.testing.assert_allclose(back.optimum(), fed.optimum(), atol=1e-12)


def test_threaded_gradient_is_identical_to_single_threaded():
    fed = random_quadratic(1000, 20, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)   # 400k floats: threaded
    X = np.random.default_rng(1).standard_normal((1000, 20))
    single, two = fed.client_grad(X), fed.with_threads(2).client_grad(X)
    np.testing.assert_array_equal(single, two)
    np.testing.assert_allclose(single, np.einsum("nij,nj->ni", fed.H, X) - fed.e, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(fed.client_loss(X), fed.with_threads(2).client_loss(X))
    from fltheory.errors import InvalidHyperparameterError
    with pytest.raises(InvalidHyperparameterError, match="threads"):
        fed.with_threads(0)


def _construction_peak(H, e):
    import tracemalloc
    tracemalloc.start()
    try:
        fed = QuadraticFederation(H, e)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return fed, peak


@pytest.mark.parametrize("as_float32", [False, True])
def test_construction_peaks_below_one_and_a_half_times_the_hessians(as_float32):
    """Checking, symmetrising and factorising H chunk by chunk: the constructor's
    allocations peak at <= 1.5x the stored Hessians (it used to be 3x), and the
    stored H is 0.5 (H + H^T) to the bit, never an alias of the caller's array."""
    base = random_quadratic(400, 50, L=4.0, mu=0.5, heterogeneity=1.0, seed=0)
    rng = np.random.default_rng(1)
    H = base.H + 1e-12 * rng.standard_normal(base.H.shape)     # asymmetric within tolerance
    e = base.e.copy()
    if as_float32:
        H = (0.5 * (H + np.swapaxes(H, 1, 2))).astype(np.float32)
    before = H.copy()
    fed, peak = _construction_peak(H, e)
    assert peak <= 1.5 * fed.H.nbytes
    H64 = np.asarray(before, dtype=np.float64)
    assert np.array_equal(fed.H, 0.5 * (H64 + np.swapaxes(H64, 1, 2)))
    assert np.array_equal(H, before) and not np.may_share_memory(fed.H, H)


def test_construction_errors_name_the_client_across_chunks():
    base = random_quadratic(300, 30, L=4.0, mu=0.5, heterogeneity=1.0, seed=0)
    H = base.H.copy()
    H[250, 0, 1] += 1e-3
    with pytest.raises(InvalidProblemError, match=r"H\[250\] is not symmetric"):
        QuadraticFederation(H, base.e)
    H = base.H.copy()
    H[7] *= -0.1
    H[280] *= -1.0
    with pytest.raises(InvalidProblemError, match=r"H\[280\] is not positive definite"):
        QuadraticFederation(H, base.e)


def test_row_gradient_reuses_views_only_for_the_same_arrays():
    """The bound exact gradient remembers the (m, 1, d) views of the last (X, out) pair; a
    new point array, a new buffer or the same objects given another shape are recomputed
    (each result equals client_grad)."""
    rng = np.random.default_rng(0)
    B = rng.standard_normal((4, 3, 3))
    fed = QuadraticFederation(B @ np.swapaxes(B, 1, 2) + np.eye(3), rng.standard_normal((4, 3)))
    grad = fed.row_gradient(np.arange(4), None)
    X, out = rng.standard_normal((4, 3)), np.empty((4, 3))
    for _ in range(2):
        np.testing.assert_array_equal(grad(X, out), fed.client_grad(X, np.arange(4)))
        X += 1.0                                           # same objects, new values
    X2, out2 = rng.standard_normal((4, 3)), np.empty((4, 3))
    np.testing.assert_array_equal(grad(X2, out), fed.client_grad(X2, np.arange(4)))
    np.testing.assert_array_equal(grad(X2, out2), fed.client_grad(X2, np.arange(4)))
    np.testing.assert_array_equal(grad(X2), fed.client_grad(X2, np.arange(4)))
    flat = rng.standard_normal((2, 6))                     # the same memory seen with another shape
    flat_out = np.empty((2, 6))
    grad2 = QuadraticFederation(np.stack([np.eye(6)] * 2), np.zeros((2, 6))).row_gradient(np.arange(2), None)
    grad2(flat, flat_out)
    np.testing.assert_array_equal(grad2(flat, flat_out), flat)


def test_first_of_run_remembers_only_immutable_arrays():
    from fltheory.participation import full_participants
    from fltheory.problems.quadratic import _first_of_run
    part = full_participants(5, 2)
    assert _first_of_run(part.clients, 5) == 0
    assert _first_of_run(part.clients, 5) == 0            # recognised by identity
    assert _first_of_run(part.clients, 4) is None          # more clients than the federation has
    writable = np.arange(5, dtype=np.int64)
    assert _first_of_run(writable, 5) == 0
    writable[2] = 7                                        # a mutable array is checked again
    assert _first_of_run(writable, 10) is None


def test_global_quadratic_is_recomputed_when_an_array_is_replaced():
    """The averaged quadratic (Hbar, ebar, cbar) is cached while H, e, offsets and weights are the
    same objects, and recomputed when any of them is replaced."""
    f = random_quadratic(5, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=1)
    first = f._global_quadratic()
    assert f._global_quadratic() is first
    f.weights = np.full(5, 0.2)
    Hbar, ebar, cbar = f._global_quadratic()
    assert np.allclose(Hbar, f.H.mean(axis=0), rtol=1e-14) and np.allclose(ebar, f.e.mean(axis=0), rtol=1e-14)
    f.e = f.e + 1.0
    assert np.allclose(f._global_quadratic()[1], ebar + 1.0, rtol=1e-14)
