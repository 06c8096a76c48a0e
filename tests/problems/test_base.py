"""The Federation contract's hooks: the generic defaults against the quadratic and
logistic overrides (each override must compute what the default computes)."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.problems import Federation, LogisticFederation, random_quadratic

from .problem_refs import make_logistic


@pytest.fixture(scope="module")
def quad():
    return random_quadratic(5, 4, L=3.0, mu=0.4, heterogeneity=1.5, seed=2)


def _shift(m: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0.1, 1.0, (m, d)), rng.standard_normal((m, d)), rng.standard_normal((m, d))


def test_shifted_solve_default_newton_equals_the_quadratic_linear_solve(quad):
    clients = np.array([4, 0, 2])
    D, b, Y0 = _shift(3, quad.dim, 0)
    fast = quad.shifted_solve(clients, D, b, Y0)
    generic = Federation.shifted_solve(quad, clients, D, b, Y0)
    np.testing.assert_allclose(generic, fast, rtol=0, atol=1e-12)
    # optimality: H_i y + D y = e_i + b
    G = quad.client_grad(fast, clients) + D * fast - b
    assert np.abs(G).max() <= 1e-12


def test_shifted_solve_default_on_logistic_meets_stationarity():
    fed = make_logistic(0, 4, 3, 12, reg=0.1)
    clients = np.arange(fed.n_clients)
    D, b, Y0 = _shift(fed.n_clients, fed.dim, 1)
    Y = fed.shifted_solve(clients, D, b, Y0)
    G = fed.client_grad(Y, clients) + D * Y - b
    assert np.abs(G).max() <= 1e-12


def test_smoothness_bounds_default_and_override(quad):
    clients = np.array([1, 3])
    Y = np.zeros((2, quad.dim))
    np.testing.assert_allclose(quad.smoothness_bounds(clients, Y), quad.client_L[clients])
    np.testing.assert_allclose(Federation.smoothness_bounds(quad, clients, Y), quad.client_L[clients])


def test_client_gaps_exact_form_equals_the_loss_difference(quad):
    clients = np.arange(quad.n_clients)
    W = np.random.default_rng(3).standard_normal((quad.n_clients, quad.dim))
    exact = quad.client_gaps(W, clients)
    generic = Federation.client_gaps(quad, W, clients)
    np.testing.assert_allclose(generic, exact, rtol=1e-10, atol=1e-12)
    assert np.all(exact > 0)


def test_loss_and_grad_norm2_batched_equals_pointwise(quad):
    X = np.random.default_rng(4).standard_normal((7, quad.dim))
    loss, g2 = quad.loss_and_grad_norm2(X)
    loss_ref, g2_ref = Federation.loss_and_grad_norm2(quad, X)
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(g2, g2_ref, rtol=1e-12, atol=1e-13)


def test_client_block_views_the_data(quad):
    block = quad.client_block(1, 4)
    assert block is not None and block.n_clients == 3
    assert np.shares_memory(block.H, quad.H)
    Y = np.random.default_rng(5).standard_normal((3, quad.dim))
    np.testing.assert_array_equal(block.client_grad(Y, np.arange(3)), quad.client_grad(Y, np.arange(1, 4)))
    assert Federation.client_block(quad, 1, 4) is None
    assert quad.client_data_bytes() == 8 * quad.dim ** 2 and Federation.client_data_bytes(quad) == 8 * quad.dim
    assert quad.with_gradient_noise(0.1).client_block(1, 4) is None


def test_strong_convexity_and_constant_hessians(quad):
    assert quad.strong_convexity() == pytest.approx(quad.mu)
    assert quad.has_constant_hessians
    fed = make_logistic(0, 3, 2, 10, reg=0.2)
    assert isinstance(fed, LogisticFederation)
    assert fed.strong_convexity() == fed.reg and not fed.has_constant_hessians
    assert Federation.strong_convexity(quad) is None


def test_cvxpy_expression_default_is_a_typed_error(quad):
    with pytest.raises(InvalidHyperparameterError, match="cvxpy_client_loss"):
        Federation.cvxpy_client_loss(quad, 0, None)


def test_client_gaps_default_refuses_a_false_minimiser(quad):
    class Shifted(type(quad)):
        def client_optima(self) -> np.ndarray:
            return super().client_optima() + 1.0

    bad = Shifted(quad.H, quad.e)
    with pytest.raises(InvalidProblemError, match="not one"):
        Federation.client_gaps(bad, bad.client_optima() - 1.0, np.arange(bad.n_clients))


def test_curvature_bounds_of_the_shipped_federations(quad):
    cb = quad.curvature_bounds()
    lam = np.linalg.eigvalsh(quad.hess())
    assert cb.exact and cb.L == pytest.approx(lam[-1]) and cb.mu == pytest.approx(lam[0])
    np.testing.assert_allclose(cb.client_L, np.linalg.eigvalsh(quad.H)[:, -1])
    fed = make_logistic(0, 3, 2, 10, reg=0.2)
    assert fed.curvature_bounds().exact and fed.curvature_bounds().mu == 0.2
    multi = make_logistic(0, 3, 2, 10, n_classes=3, reg=0.2)
    assert not multi.curvature_bounds().exact
    assert Federation.curvature_bounds(quad) is None


@pytest.mark.parametrize("clients", [np.arange(5), np.arange(1, 4), np.array([3, 0, 3, 1]), [2],
                                     np.array([1, 2, 3], dtype=np.int32)])
def test_row_gradient_gives_the_bits_of_stochastic_grad(quad, clients):
    """The bound oracle (checked once) against the checked call, for runs (views),
    gathered indices with repeats, lists and other integer dtypes, with and without
    an output buffer; the generic default gives the same."""
    m = len(clients)
    X = np.random.default_rng(20).standard_normal((m, quad.dim))
    want = quad.stochastic_grad(X, clients)
    for grad in (quad.row_gradient(clients, None), Federation.row_gradient(quad, clients, None)):
        np.testing.assert_array_equal(grad(X), want)
        out = np.empty((m, quad.dim))
        got = grad(X, out)
        np.testing.assert_array_equal(got, want)
    fast = quad.row_gradient(clients, None)
    out = np.empty((m, quad.dim))
    assert fast(X, out) is out


def test_row_gradient_checks_the_clients_once(quad):
    for bad in ([5], [-1], np.array([0.5]), [[0, 1]]):
        with pytest.raises(InvalidProblemError):
            quad.row_gradient(bad, None)
        with pytest.raises(InvalidProblemError):
            Federation.row_gradient(quad, bad, None)
    with pytest.raises(InvalidProblemError):          # a run that leaves the federation
        quad.row_gradient(np.arange(3, 6), None)


def test_row_gradient_of_a_noisy_oracle_draws_as_stochastic_grad(quad):
    noisy = quad.with_gradient_noise(0.3)
    clients = np.array([0, 2, 4])
    X = np.random.default_rng(21).standard_normal((3, quad.dim))
    grad = noisy.row_gradient(clients, np.random.default_rng(7))
    a = [grad(X), grad(X)]
    rng = np.random.default_rng(7)
    b = [noisy.stochastic_grad(X, clients, rng), noisy.stochastic_grad(X, clients, rng)]
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], a[1])


@pytest.mark.parametrize("clients, first", [
    (np.arange(3, 9), 3), (np.arange(1), 0), (np.arange(2, 7, dtype=np.int32), 2),
    (np.arange(4, dtype=np.uint64), 0), (np.array([5]), 5),
    (np.array([0, 1, 3]), None), (np.array([2, 1, 0]), None), (np.array([0, 0, 1]), None),
    (np.arange(0), None), (np.arange(4).reshape(2, 2), None), (np.arange(3.0), None),
    ([0, 1, 2], None), (np.array([3, 2], dtype=np.uint8), None)])
def test_first_of_run_finds_exactly_the_runs_of_clients(clients, first):
    """``first_of_run``: a for the integer arrays a, a+1, ..., b-1 (the client lists whose
    data are views), None for anything else (gaps, repeats, descending or unsigned
    wrap-around steps, empty, 2-d, float or non-array lists)."""
    from fltheory.problems.base import first_of_run

    assert first_of_run(clients) == first
