"""FedDyn: fast path vs reference loop, first-order condition of the exact solve,
the h = (1/m) sum_k grad_k invariant, convergence to the minimiser of the uniform
average (not of a weighted F), bad hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.feddyn import FedDyn
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.run import run
from fltheory.errors import InvalidHyperparameterError

from ._problems import RandomParticipation, shifted_logistic, spread_quadratic

quadratic = spread_quadratic
logistic = shifted_logistic


@pytest.mark.parametrize("kind", ["quadratic", "logistic"])
@pytest.mark.parametrize("solver", ["exact", "gd"])
def test_fast_path_equals_reference_loop(kind, solver):
    fed = quadratic(1) if kind == "quadratic" else logistic(2)
    kwargs = {}
    if solver == "gd":
        fed = fed.with_gradient_noise(0.2) if kind == "quadratic" else fed.with_minibatch(3)
        kwargs = dict(lr=np.array([0.05, 0.08, 0.1, 0.06]), local_steps=np.array([3, 4, 2, 5]))
    alg = FedDyn(alpha=0.7, solver=solver, **kwargs)
    part = RandomParticipation()
    x0 = np.linspace(-1, 1, fed.dim)
    fast = run(alg, fed, 6, participation=part, seed=11, x0=x0).x
    ref = reference_run(alg, fed, 6, participation=part, seed=11, x0=x0)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12)
    assert np.max(np.abs(fast[-1] - fast[0])) > 1e-3


def test_exact_solve_meets_first_order_condition():
    """Seed 003 eq. 9: after a round grad_k = grad f_k(theta_k) for every participant."""
    fed = logistic(3)
    alg = FedDyn(alpha=0.5)
    state = alg.init(fed, np.zeros(fed.dim), np.random.default_rng(0))
    state, _ = alg.round(state, fed, None, np.random.default_rng(0))
    x1 = state.x
    state2, _ = alg.round(state, fed, None, np.random.default_rng(0))
    # theta_k of round 2 from grad_k^new = grad_k - alpha (theta_k - x1)
    theta = x1 - (state2.grads - state.grads) / alg.alpha
    np.testing.assert_allclose(state2.grads, fed.client_grad(theta), rtol=0, atol=1e-10)


@given(seed=st.integers(0, 10_000))
def test_h_is_mean_of_gradient_states(seed):
    """h_t = -(alpha/m) sum of all changes = (1/m) sum_k grad_k, with sampling too."""
    fed = quadratic(seed, N=5, d=2)
    gaps = []
    run(FedDyn(alpha=1.3), fed, 6, participation=RandomParticipation(), seed=seed,
        callback=lambda t, s, i: gaps.append(np.max(np.abs(s.h - s.grads.mean(axis=0)))))
    assert max(gaps) <= 1e-12


def test_reaches_uniform_average_optimum_where_fedavg_stalls():
    fed = quadratic(5, spread=10.0)          # equal weights: x* of F is the uniform-average optimum
    x_star = fed.optimum()
    hist = run(FedDyn(alpha=2.0), fed, 200)
    assert np.linalg.norm(hist.x[-1] - x_star) <= 1e-10
    np.testing.assert_allclose(hist.state.grads, fed.client_grad(x_star), rtol=0, atol=1e-9)
    np.testing.assert_allclose(hist.state.h, 0.0, atol=1e-10)
    gd = run(FedDyn(alpha=2.0, solver="gd", lr=0.1, local_steps=5), fed, 300)
    assert np.linalg.norm(gd.x[-1] - x_star) <= 1e-10
    avg = run(FedAvg(lr=0.1, local_steps=5), fed, 300)
    assert np.linalg.norm(avg.x[-1] - x_star) > 1e-2


def test_fixed_point_ignores_unequal_weights():
    """FedDyn minimises (1/m) sum f_k whatever the federation weights p_k are."""
    fed = quadratic(6, weights=np.array([0.1, 0.2, 0.3, 0.4]))
    uniform_opt = np.linalg.solve(fed.H.mean(axis=0), fed.e.mean(axis=0))
    hist = run(FedDyn(alpha=2.0), fed, 200)
    assert np.linalg.norm(hist.x[-1] - uniform_opt) <= 1e-10
    assert np.linalg.norm(fed.optimum() - uniform_opt) > 1e-1


@pytest.mark.parametrize("kwargs", [
    dict(alpha=0.0), dict(alpha=-1.0), dict(solver="newton"), dict(solver="gd"),
    dict(solver="gd", lr=0.1), dict(solver="exact", lr=0.1), dict(solver="gd", lr=-0.1, local_steps=2),
    dict(solver="gd", lr=0.1, local_steps=0),
])
def test_bad_hyperparameters(kwargs):
    with pytest.raises(InvalidHyperparameterError):
        FedDyn(**kwargs)


def test_reaches_optimum_with_client_sampling():
    """With exact local solves and S = 2 of 4 clients per round FedDyn still converges to x*."""
    from fltheory.participation import UniformSampling

    fed = quadratic(12, spread=10.0)
    hist = run(FedDyn(alpha=2.0), fed, 400, participation=UniformSampling(2), seed=1)
    assert np.linalg.norm(hist.x[-1] - fed.optimum()) <= 1e-10


def test_affine_round_map_fixed_point_is_uniform_optimum():
    """The affine round map on (x, h, grad_k) has its fixed point at the uniform-average optimum."""
    from fltheory.theory.affine import affine_round_map, fixed_point

    fed = quadratic(14, weights=np.array([0.4, 0.3, 0.2, 0.1]))
    uniform_opt = np.linalg.solve(fed.H.mean(axis=0), fed.e.mean(axis=0))
    for alg in (FedDyn(alpha=1.5), FedDyn(alpha=1.5, solver="gd", lr=0.1, local_steps=4)):
        fp = fixed_point(affine_round_map(alg, fed))
        np.testing.assert_allclose(fp.x, uniform_opt, rtol=0, atol=1e-10)
        np.testing.assert_allclose(fp.state.h, 0.0, atol=1e-10)
        assert fp.spectral_rate < 1.0
