"""Block Krylov Rayleigh-Ritz against dense eigenvalues and solves."""

import numpy as np
import pytest

from fltheory.theory.krylov import block_krylov

I = lambda v: v


@pytest.mark.parametrize("b", [1, 3])
def test_general_rate_and_galerkin_solve(b):
    rng = np.random.default_rng(0)
    n = 80
    A = 0.6 * rng.standard_normal((n, n)) / np.sqrt(n)
    rhs = rng.standard_normal(n)
    res = block_krylov(lambda V: A @ V, I, rng.standard_normal((n, b)), symmetric=False, rhs=rhs,
                       eig_tol=1e-12, max_vectors=n)
    assert res.converged
    assert res.eig.rate == pytest.approx(np.abs(np.linalg.eigvals(A)).max(), abs=1e-11)
    np.testing.assert_allclose(res.z, np.linalg.solve(np.eye(n) - A, rhs), rtol=0, atol=1e-11)


def test_symmetric_error_estimate_is_honest_and_quadratic():
    """A spectrum with a continuum below a small gap (the FedAvg case): the Kato-Temple
    estimate bounds the true error at every size of the space, and it is far below the
    residual (the error is quadratic in it)."""
    rng = np.random.default_rng(1)
    n = 400
    lam = np.concatenate([[0.9], 0.9 - 1e-3 - np.sort(rng.uniform(0, 0.6, n - 1))])
    Qr, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Qr * lam) @ Qr.T
    for cap in (20, 40, 80, 160):
        res = block_krylov(lambda V: A @ V, I, rng.standard_normal((n, 2)), symmetric=True, eig_tol=1e-300,
                           max_vectors=cap)
        err = abs(res.eig.rate - 0.9)
        assert err <= res.eig.error + 1e-15
    assert res.eig.error < 1e-9 and res.eig.residuals[0] > 10 * res.eig.error


def test_invariant_start_stops_with_exact_answer():
    n = 30
    A = np.diag(np.linspace(0.1, 0.5, n))
    X = np.zeros((n, 2))
    X[0, 0] = X[1, 1] = 1.0            # spans an invariant subspace of A
    res = block_krylov(lambda V: A @ V, I, X, symmetric=True, max_vectors=n)
    assert res.invariant and res.dimension == 2
    assert res.eig.rate == pytest.approx(np.linspace(0.1, 0.5, n)[1], abs=1e-15)
