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
