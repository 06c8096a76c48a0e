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


# ------------------------------------------------ bad input: typed errors naming the argument
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError  # noqa: E402
from fltheory.theory import krylov  # noqa: E402

_A = np.diag(np.linspace(0.1, 0.8, 20))
_GOOD = {"apply": lambda V: _A @ V, "project": I, "start": np.random.default_rng(0).standard_normal((20, 2)),
         "symmetric": True}


@pytest.mark.parametrize(("change", "pattern"), [
    ({"apply": float("nan")}, "apply must be a function of an \\(n, b\\) float array, got nan"),
    ({"project": "abc"}, "project must be a function .* got 'abc'"),
    ({"start": np.full((20, 2), np.nan)}, "start contains a non-finite value .*nan.* at index \\(0, 0\\)"),
    ({"start": np.ones(20)}, "start must have 2 dimension\\(s\\), got shape \\(20,\\)"),
    ({"start": np.ones((20, 2), dtype=complex)}, "start must be numeric \\(real numbers\\), got dtype complex128"),
    ({"start": np.ones((20, 0))}, "start must be an \\(n, b\\) array with n, b >= 1, got shape \\(20, 0\\)"),
    ({"rhs": np.ones(3)}, "rhs must be None or a vector of shape \\(20,\\), got \\(3,\\)"),
    ({"rhs": np.full(20, np.inf)}, "rhs contains a non-finite value .*inf"),
    ({"symmetric": "yes"}, "symmetric must be True or False, got 'yes'"),
    ({"want_eig": 1}, "want_eig must be True or False, got 1"),
    ({"eig_tol": -1.0}, "eig_tol must be finite and > 0, got -1.0"),
    ({"eig_tol": lambda rate: float("nan")}, "eig_tol\\(rate\\) must be finite, got nan"),
    ({"solve_tol": 1j}, "solve_tol must be a real number, got 1j"),
    ({"max_vectors": 0}, "max_vectors must be an integer >= 1, got 0"),
    ({"max_vectors": 2.5}, "max_vectors must be an integer, got 2.5"),
    ({"min_blocks": 0}, "min_blocks must be an integer >= 1, got 0"),
    ({"apply": lambda V: np.full_like(V, np.nan)}, "apply returned NaN/inf for a finite argument of shape \\(20, 2\\)"),
    ({"apply": lambda V: V[:3]},
     "apply must return an array of the shape of its argument \\(20, 2\\), got shape \\(3, 2\\)"),
    ({"project": lambda v: None}, "project must return an array of the shape of its argument \\(20,\\), got None"),
])
def test_block_krylov_names_the_bad_argument(change, pattern):
    with pytest.raises((InvalidHyperparameterError, InvalidProblemError), match=pattern) as info:
        block_krylov(**{**_GOOD, **change})
    assert isinstance(info.value, ValueError)


def test_block_krylov_refuses_a_space_beyond_the_memory_cap(monkeypatch):
    monkeypatch.setattr(krylov, "MAX_SPACE_BYTES", 16 * 20 * 10)
    with pytest.raises(InvalidHyperparameterError, match=r"max_vectors=400 columns of length 20 need 6\.4e\+03 bytes"):
        block_krylov(**_GOOD)
    res = block_krylov(**_GOOD, max_vectors=10)            # fits: a rate within its own error of the truth
    assert res.dimension == 10 and abs(res.eig.rate - 0.8) <= res.eig.error + 1e-15


def test_huge_max_vectors_is_capped_by_the_dimension():
    res = block_krylov(**_GOOD, rhs=np.linspace(1, 2, 20), max_vectors=10**12, eig_tol=1e-300, solve_tol=1e-300)
    assert res.dimension <= 20
    np.testing.assert_allclose(res.z, np.linalg.solve(np.eye(20) - _A, np.linspace(1, 2, 20)), atol=1e-12)


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"n": float("nan")}, "n must be an integer, got nan"),
    ({"n": 0}, "n must be an integer >= 1, got 0"),
    ({"n": 10**12}, "n=1000000000000 and capacity=32 ask for 5.12e\\+14 bytes"),
    ({"n": 4, "capacity": True}, "capacity must be an integer, got True"),
    ({"n": 4, "capacity": 10**12}, "capacity=1000000000000 ask for"),
])
def test_krylov_space_names_the_bad_argument(kwargs, pattern):
    with pytest.raises(InvalidHyperparameterError, match=pattern):
        krylov.KrylovSpace(**kwargs)


def test_ritz_orbit_rate_is_right_or_undecided_on_random_spectra():
    """Random diagonalizable M (symmetric or not, some with a multiple leading eigenvalue),
    e0 a combination of random eigenvectors with coefficients over six decades, block spaces
    of random width cut at random sizes: the answer is the dense rule's
    max {|lambda_k| : |a_k| > 1e-9 max |a|} to 1e-8, or None; never another number."""
    from fltheory.theory.krylov import ritz_orbit_rate

    right = undecided = 0
    for seed in range(120):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(10, 50))
        sym = bool(rng.integers(0, 2))
        lam = np.sort(rng.uniform(-0.95, 0.95, n))[::-1]
        if rng.random() < 0.3:
            lam[: n // 4] = lam[0]
        if sym:
            U, _ = np.linalg.qr(rng.standard_normal((n, n)))
            A = (U * lam) @ U.T
        else:
            U = np.eye(n) + 0.3 * rng.standard_normal((n, n)) / np.sqrt(n)
            A = (U * lam) @ np.linalg.inv(U)
            U = U / np.linalg.norm(U, axis=0)
        k = int(rng.integers(1, n))
        chosen = rng.choice(n, size=k, replace=False)
        e0 = U[:, chosen] @ (rng.standard_normal(k) * 10.0 ** rng.uniform(-6, 0, k))
        b = int(rng.integers(1, 5))
        start = np.column_stack([e0, rng.standard_normal((n, b - 1))])
        cap = n if seed % 2 else int(rng.integers(5, n + 1))
        res = block_krylov(lambda V, A=A: A @ V, I, start, symmetric=sym, max_vectors=cap)
        got = ritz_orbit_rate(res.space, e0, symmetric=sym)
        a = np.linalg.solve(U, e0)
        want = np.abs(lam[np.abs(a) > 1e-9 * np.abs(a).max()]).max()
        if got is None:
            undecided += 1
        else:
            assert got == pytest.approx(want, abs=1e-8), (seed, sym, n, cap)
            right += 1
    assert right >= 40
