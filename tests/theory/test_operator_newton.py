"""Globalised Newton-Krylov and continuation for non-linear operator fixed points."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import FedAvg, FedOpt
from fltheory.errors import DivergenceError, InvalidHyperparameterError
from fltheory.problems.generators import random_quadratic
from fltheory.theory.closed_forms import fedopt_quadratic_fixed_point
from fltheory.theory.operator_newton import continuation_fixed_point, newton_krylov_fixed_point
from fltheory.theory.operators import fedopt_operator, operator_fixed_point

N, D = 6, 8
STEPS = np.array([2, 10, 2, 10, 5, 3])


@pytest.fixture(scope="module")
def fed():
    return random_quadratic(N, D, L=4.0, mu=0.5, heterogeneity=1.0, seed=7)


def adagrad(v0, lr=0.05):
    return FedOpt(client_optimizer=optim.adagrad(lr, initial_accumulator=v0), server_optimizer=optim.sgd(1.0),
                  local_steps=STEPS)


def test_adaptive_clients_agree_with_the_hybrid_solver(fed):
    T = fedopt_operator(adagrad(0.1), fed)
    fp = newton_krylov_fixed_point(T, fed.optimum())
    assert fp.method == "newton-krylov" and fp.success
    assert np.abs(T(fp.x) - fp.x).max() <= 1e-12 * max(1.0, np.abs(fp.x).max())
    ref = operator_fixed_point(T, fed.optimum())
    np.testing.assert_allclose(fp.x, ref.x, rtol=0, atol=1e-10)
    assert fp.spectral_rate == pytest.approx(ref.spectral_rate, abs=1e-6)     # dense Jacobian (d <= 100)


def test_sgd_clients_match_the_closed_form(fed):
    lr = 0.08
    T = fedopt_operator(FedAvg(lr=lr, local_steps=STEPS), fed)
    fp = newton_krylov_fixed_point(T, np.zeros(D), dense_jacobian_max=0)
    closed = fedopt_quadratic_fixed_point(fed, lr, STEPS)
    np.testing.assert_allclose(fp.x, closed.x, rtol=0, atol=1e-10)
    # matrix-free local rate (ARPACK on the Jacobian-vector products) against the closed form
    assert abs(fp.spectral_rate - closed.spectral_rate) <= max(fp.spectral_rate_error, 1e-6)
    assert fp.jacobian is None and fp.contraction_factor is None


def test_identical_client_optima_are_the_fixed_point():
    """With every client minimised at x* (heterogeneity 0) each restarted AdaGrad client stays
    at x* (zero gradients), so x* is a fixed point; Newton finds it from a start nearby."""
    fed0 = random_quadratic(N, D, L=4.0, mu=0.5, heterogeneity=0.0, seed=8)
    T = fedopt_operator(adagrad(0.1), fed0)
    start = fed0.optimum() + 0.05 * np.random.default_rng(0).standard_normal(D)
    fp = newton_krylov_fixed_point(T, start)
    np.testing.assert_allclose(fp.x, fed0.optimum(), rtol=0, atol=1e-10)


def test_no_fixed_point_is_a_typed_failure_with_the_residual():
    with pytest.raises(DivergenceError, match=r"\|\|T\(x\) - x\|\|_inf = 1\.000e\+00"):
        newton_krylov_fixed_point(lambda x: x + 1.0, np.zeros(3), max_newton=5)
    with pytest.raises(DivergenceError, match="budget 4 spent"):
        newton_krylov_fixed_point(lambda x: 0.5 * x + np.sin(x) + 1.0, np.zeros(3), max_evaluations=4)
    with pytest.raises(InvalidHyperparameterError, match="damping"):
        newton_krylov_fixed_point(lambda x: x, np.zeros(3), damping=0.0)
    with pytest.raises(InvalidHyperparameterError, match="x0"):
        newton_krylov_fixed_point(lambda x: x, np.array([np.nan]))


def test_continuation_in_the_initial_accumulator(fed):
    """Restarted AdaGrad with initial accumulator 0: followed from v0 = 1 down to 0, the end
    point is a fixed point of the target operator and the path is recorded."""
    make = lambda v: fedopt_operator(adagrad(v), fed)
    path = [1.0, 1e-2, 1e-4, 1e-6, 1e-8, 0.0]
    fp, solved = continuation_fixed_point(make, path, fed.optimum(), dense_jacobian_max=0)
    assert solved[-1] == 0.0 and set(path) <= set(solved)
    T = make(0.0)
    assert np.abs(T(fp.x) - fp.x).max() <= 1e-9 * max(1.0, np.abs(fp.x).max())
    with pytest.raises(InvalidHyperparameterError, match="path"):
        continuation_fixed_point(make, [], fed.optimum())


def test_continuation_budget_is_a_typed_failure(fed):
    make = lambda v: fedopt_operator(adagrad(v), fed)
    with pytest.raises(DivergenceError, match="continuation stopped"):
        continuation_fixed_point(make, [1.0, 0.0], fed.optimum(), dense_jacobian_max=0, max_evaluations=3)


# ------------------------------------------------ bad input: typed errors naming the argument
from fltheory.errors import InvalidProblemError  # noqa: E402


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"x0": "abc"}, "x0 must be numeric, got the string 'abc'"),
    ({"x0": np.ones(3, dtype=complex)}, r"x0 must be numeric \(real numbers\), got dtype complex128"),
    ({"x0": np.ones((3, 1))}, r"x0 must have 1 dimension\(s\), got shape \(3, 1\)"),
    ({"x0": np.array([])}, "x0 must be a finite non-empty vector"),
    ({"tol": "abc"}, "tol must be a real number, got 'abc'"),
    ({"tol": np.ones(2)}, "tol must be a real number"),
    ({"eta_min": -1.0}, "eta_min must be finite and > 0, got -1.0"),
    ({"damping": 1j}, "damping must be a real number, got 1j"),
    ({"damping": 1.5}, r"damping must lie in \(0, 1\], got 1.5"),
    ({"max_newton": 10**12}, "max_newton must be an integer >= 1 and <= 10000000, got 1000000000000"),
    ({"max_evaluations": 2.0}, "max_evaluations must be an integer, got 2.0"),
    ({"gmres_restart": True}, "gmres_restart must be an integer, got True"),
])
def test_newton_krylov_names_the_bad_argument(kwargs, pattern):
    args = {"T": lambda x: 0.5 * x, "x0": np.zeros(3), **kwargs}
    with pytest.raises(InvalidHyperparameterError, match=pattern) as info:
        newton_krylov_fixed_point(**args)
    assert isinstance(info.value, ValueError)


def test_an_operator_of_the_wrong_shape_is_a_typed_error():
    with pytest.raises(InvalidProblemError, match=r"T must map a vector of shape \(3,\) to real numbers of the "
                                                  r"same shape, got dtype float64 and shape \(2,\)"):
        newton_krylov_fixed_point(lambda x: x[:2], np.zeros(3))
    with pytest.raises(InvalidProblemError, match="got dtype complex128"):
        newton_krylov_fixed_point(lambda x: x + 1j, np.zeros(3))


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"path": "abc"}, "path must be a sequence of numbers, got 'abc'"),
    ({"path": [0.5, "x"]}, "path entry must be a real number, got 'x'"),
    ({"path": [0.5, np.nan]}, "path entry must be finite, got nan"),
    ({"max_halvings": 10**6}, "max_halvings must be an integer >= 0 and <= 60, got 1000000"),
    ({"x0": [np.inf, 0.0, 0.0]}, "x0 contains a non-finite value"),
    ({"bogus": 1}, r"continuation_fixed_point got options \['bogus'\] that newton_krylov_fixed_point does not take"),
])
def test_continuation_names_the_bad_argument(kwargs, pattern):
    args = {"make_operator": lambda s: (lambda x: s * 0.5 * x), "path": [0.5, 1.0], "x0": np.zeros(3), **kwargs}
    with pytest.raises(InvalidHyperparameterError, match=pattern):
        continuation_fixed_point(**args)


def test_fuzz_sweep_with_working_arguments(fed):
    """The public fuzz values, one parameter at a time, with a working operator and start (the
    public suite's T = 1.0 is refused before any other argument is looked at)."""
    from tests._fuzz_support import Outcome, sweep

    def make(v):
        return fedopt_operator(adagrad(v), fed)

    bases = {
        "newton_krylov_fixed_point": (newton_krylov_fixed_point, lambda: {"T": make(0.1), "x0": fed.optimum()}),
        "continuation_fixed_point": (continuation_fixed_point,
                                     lambda: {"make_operator": make, "path": [1.0, 0.1], "x0": fed.optimum()}),
        "operator_fixed_point newton-krylov": (operator_fixed_point, lambda: {
            "T": make(0.1), "x0": fed.optimum(), "method": "newton-krylov", "cross_check": False}),
    }
    for name, (fn, base) in bases.items():
        calls = sweep(name, fn, base=base)
        broken = [c for c in calls if c.outcome in (Outcome.RAW, Outcome.NONFINITE, Outcome.HANG)]
        assert not broken, name + ": " + "\n".join(f"{c.parameter}={c.kind}: {c.outcome.value}: {c.detail}"
                                                  for c in broken[:10])


def test_local_rate_never_nan_when_arpack_returns_nothing(monkeypatch):
    """If ARPACK converges to no eigenvalue, the rate comes from the d forward-difference columns of
    J_T and a dense eigensolve: finite, equal to the spectral radius of the affine map's matrix."""
    import scipy.sparse.linalg as spla

    from fltheory.theory.operator_newton import newton_krylov_fixed_point

    rng = np.random.default_rng(4)
    A = rng.standard_normal((6, 6))
    A *= 0.6 / np.abs(np.linalg.eigvals(A)).max()
    b = rng.standard_normal(6)

    def no_eigenvalue(*args, **kwargs):
        raise spla.ArpackNoConvergence("forced", np.empty(0), np.empty((6, 0)))

    monkeypatch.setattr(spla, "eigs", no_eigenvalue)
    fp = newton_krylov_fixed_point(lambda x: A @ x + b, np.zeros(6), dense_jacobian_max=0)
    assert np.isfinite(fp.spectral_rate) and np.isfinite(fp.spectral_rate_error)
    assert abs(fp.spectral_rate - 0.6) < 1e-6
    np.testing.assert_allclose(fp.x, np.linalg.solve(np.eye(6) - A, b), rtol=1e-9, atol=1e-10)
