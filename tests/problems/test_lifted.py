"""p independent copies of a quadratic federation (block products of round maps)."""

import numpy as np
import pytest

from fltheory.errors import InvalidProblemError
from fltheory.problems.generators import random_quadratic
from fltheory.problems.lifted import LiftedQuadraticFederation

N, D, P = 4, 5, 3


@pytest.fixture(scope="module")
def fed():
    return random_quadratic(N, D, L=2.0, mu=0.3, heterogeneity=1.0, seed=2, weights=[1.0, 2.0, 3.0, 4.0])


def copies(Y):
    """(m, P D) -> list of the P blocks (m, D)."""
    return [Y[:, k * D:(k + 1) * D] for k in range(P)]


def test_oracles_are_the_base_oracles_per_copy(fed):
    twin = fed.lifted(P)
    assert isinstance(twin, LiftedQuadraticFederation) and twin.dim == P * D
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, P * D))
    G = twin.client_grad(X)
    for Xk, Gk in zip(copies(X), copies(G), strict=True):
        np.testing.assert_allclose(Gk, fed.client_grad(Xk), rtol=0, atol=1e-13)
    want = sum(fed.client_loss(Xk) for Xk in copies(X))
    np.testing.assert_allclose(twin.client_loss(X), want, rtol=1e-13)
    idx = np.array([2, 0])
    Gs = twin.client_grad(X[:2], idx)
    for Xk, Gk in zip(copies(X[:2]), copies(Gs), strict=True):
        np.testing.assert_allclose(Gk, fed.client_grad(Xk, idx), rtol=0, atol=1e-13)
    F = twin.fisher_diag(X)
    for Fk in copies(F):
        np.testing.assert_array_equal(Fk, fed.fisher_diag(X[:, :D]))
    Hb = twin.client_hess(X[:1], [1])[0]
    np.testing.assert_array_equal(Hb[D:2 * D, D:2 * D], fed.H[1])
    assert np.all(Hb[:D, D:] == 0)
    np.testing.assert_allclose(twin.optimum(), np.tile(fed.optimum(), P))


@pytest.mark.parametrize("same_shift", [True, False])
def test_shifted_solve_per_copy(fed, same_shift):
    twin = fed.lifted(P)
    rng = np.random.default_rng(1)
    clients = np.array([3, 1])
    D3 = np.tile(rng.uniform(0.1, 1.0, (2, D)), (1, P)) if same_shift else rng.uniform(0.1, 1.0, (2, P * D))
    b = rng.standard_normal((2, P * D))
    Y = twin.shifted_solve(clients, D3, b, np.zeros((2, P * D)))
    for k in range(P):
        sl = slice(k * D, (k + 1) * D)
        np.testing.assert_allclose(Y[:, sl], fed.shifted_solve(clients, D3[:, sl], b[:, sl], np.zeros((2, D))),
                                   rtol=0, atol=1e-12)


def test_client_block_views_the_right_clients(fed):
    twin = fed.lifted(P)
    X = np.random.default_rng(2).standard_normal((2, P * D))
    view = twin.client_block(2, 4)
    np.testing.assert_array_equal(view.client_grad(X), twin.client_grad(X, [2, 3]))
    np.testing.assert_array_equal(view.fisher_diag(X), twin.fisher_diag(X, [2, 3]))
    np.testing.assert_array_equal(view.smoothness_bounds(np.arange(2), X), fed.client_L[2:4])


def test_hook_only_for_the_exact_quadratic_oracle(fed):
    assert fed.with_gradient_noise(0.1).lifted(2) is None
    with pytest.raises(InvalidProblemError, match="copies"):
        fed.lifted(0)
    with pytest.raises(InvalidProblemError, match="view"):
        fed.lifted(2).without_client(0)
