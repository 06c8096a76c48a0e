"""Affine round maps: recovery, fixed points and rates held to closed forms and long runs."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms.efl import EFL
from fltheory.algorithms.elasticnet import FedElasticNet
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedcurv import FedCurv
from fltheory.algorithms.feddyn import FedDyn
from fltheory.algorithms.fedopt import FedOpt
from fltheory.algorithms.fedprox import FedProx
from fltheory.algorithms.run import run
from fltheory.algorithms.scaffold import Scaffold
from fltheory.algorithms.targets import TemporalEnsemble
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError, NotAffineError
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory import run_affine
from fltheory.theory.affine import affine_round_map, contraction_factor, fixed_point, orbit_rate, spectral_rate
from fltheory.theory.closed_forms import fedopt_quadratic_fixed_point, fedopt_quadratic_round_map

N, D = 4, 3


@pytest.fixture(scope="module")
def fed():
    """Heterogeneous quadratic clients with unequal weights."""
    return random_quadratic(N, D, L=2.0, mu=0.3, heterogeneity=2.0, seed=11,
                            weights=[0.1, 0.2, 0.3, 0.4], constants="clients")


@pytest.fixture(scope="module")
def fed_uniform():
    return random_quadratic(N, D, L=2.0, mu=0.3, heterogeneity=2.0, seed=12, constants="clients")


LR = np.array([0.05, 0.1, 0.2, 0.15])
STEPS = np.array([1, 3, 5, 2])
P_DIAG = np.array([[1.0, 0.5, 1.5], [0.8, 1.2, 1.0], [1.0, 1.0, 0.6], [1.4, 0.9, 1.1]])
X0 = np.array([1.0, -2.0, 0.5])


def fedprox_gd_fixed_point(fed, lr, steps, mu):
    """Own derivation: client GD on f_i + mu/2||y - x||^2, A_i = H_i + mu I, from y = x:
    y = S^tau x + (I - S^tau) A_i^{-1}(e_i + mu x), S = I - eta A_i; fixed point of sum p_i y_i = x."""
    d = fed.dim
    K = np.zeros((d, d))
    r = np.zeros(d)
    for i in range(fed.n_clients):
        A = fed.H[i] + mu * np.eye(d)
        S = np.linalg.matrix_power(np.eye(d) - lr[i] * A, int(steps[i]))
        Ainv = np.linalg.inv(A)
        lin = S + (np.eye(d) - S) @ Ainv * mu            # y = lin x + const
        const = (np.eye(d) - S) @ Ainv @ fed.e[i]
        K += fed.weights[i] * (np.eye(d) - lin)
        r += fed.weights[i] * const
    return np.linalg.solve(K, r)


def uniform_optimum(fed):
    return np.linalg.solve(fed.H.mean(axis=0), fed.e.mean(axis=0))


# ----------------------------------------------------------------- recovery
def test_fedavg_map_equals_closed_form_operator(fed):
    amap = affine_round_map(FedAvg(lr=LR, local_steps=STEPS, server_lr=0.7), fed, x0=X0)
    A, b = fedopt_quadratic_round_map(fed, LR, STEPS, server_lr=0.7)
    assert amap.dim == D and amap.x_slice == slice(0, D)
    np.testing.assert_allclose(amap.M, A, atol=1e-13)
    np.testing.assert_allclose(amap.c, b, atol=1e-13)
    assert amap.residual < 1e-13


def test_fixed_point_equals_closed_form_and_long_run_preconditioned(fed):
    """Heterogeneous rates, local steps and diagonal preconditioners."""
    alg = FedOpt(client_optimizer=optim.preconditioned(1.0, P_DIAG), server_optimizer=optim.sgd(0.8),
                 local_steps=STEPS, client_lr_scale=LR)
    amap = affine_round_map(alg, fed, x0=X0)
    fp = fixed_point(amap)
    closed = fedopt_quadratic_fixed_point(fed, LR, STEPS, preconditioners=P_DIAG)
    np.testing.assert_allclose(fp.x, closed.x, atol=1e-12)
    hist = run(alg, fed, 10_000, x0=X0)
    np.testing.assert_allclose(hist.x[-1], closed.x, atol=1e-8)
    # the fixed point depends on neither the server rate nor the start
    other = fixed_point(affine_round_map(FedAvg(lr=LR, local_steps=STEPS), fed))
    np.testing.assert_allclose(other.x, fedopt_quadratic_fixed_point(fed, LR, STEPS).x, atol=1e-12)


@pytest.mark.parametrize("solver", ["gd", "exact"])
def test_fedprox_fixed_point(fed, solver):
    from fltheory.theory.closed_forms import fedprox_exact_fixed_point
    alg = FedProx(lr=LR, local_steps=STEPS, mu=0.4, solver=solver)
    fp = fixed_point(affine_round_map(alg, fed, x0=X0))
    expected = (fedprox_exact_fixed_point(fed, 0.4) if solver == "exact"
                else fedprox_gd_fixed_point(fed, LR, STEPS, 0.4))
    np.testing.assert_allclose(fp.x, expected, atol=1e-12)


@pytest.mark.parametrize("option", ["I", "II"])
def test_scaffold_fixed_point_is_the_optimum(fed_uniform, option):
    alg = Scaffold(lr=0.1, local_steps=4, option=option)
    amap = affine_round_map(alg, fed_uniform, x0=X0)
    assert amap.dim == (N + 2) * D
    fp = fixed_point(amap)
    np.testing.assert_allclose(fp.x, fed_uniform.optimum(), atol=1e-10)
    # the conserved quantity N c - sum c_i: d directions with eigenvalue 1, excluded from the rate
    assert fp.subspace.n_conserved == D
    assert np.abs(np.linalg.eigvals(amap.M)).max() == pytest.approx(1.0, abs=1e-9)
    assert fp.spectral_rate < 0.99
    # the fixed state keeps c = mean c_i (state reached from zero controls)
    np.testing.assert_allclose(fp.state.c, fp.state.c_clients.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(fp.state.c_clients, fed_uniform.client_grad(fp.x), atol=1e-10)


@pytest.mark.parametrize("kwargs", [dict(alpha=1.0), dict(alpha=2.0, solver="gd", lr=0.05, local_steps=5)])
def test_feddyn_fixed_point_is_the_uniform_average_optimum(fed, kwargs):
    """FedDyn on unequal weights converges to argmin (1/m) sum f_k, not x* of F."""
    fp = fixed_point(affine_round_map(FedDyn(**kwargs), fed, x0=X0))
    target = uniform_optimum(fed)
    np.testing.assert_allclose(fp.x, target, atol=1e-10)
    assert np.linalg.norm(target - fed.optimum()) > 1e-2        # the distinction is visible
    assert fp.subspace.n_conserved == D                         # h - (1/m) sum grad_k


def test_fedcurv_is_affine_with_frozen_fisher(fed):
    alg = FedCurv(lr=LR, local_steps=STEPS, alpha=0.2)
    amap = affine_round_map(alg, fed, x0=X0)
    assert amap.warmup == 1                                     # round 1 has no penalty
    assert amap.frozen_fields == ("I",)
    np.testing.assert_allclose(amap.c[amap.slices["I"]].reshape(N, D),
                               np.einsum("nii->ni", fed.H), atol=1e-14)
    fp = fixed_point(amap)
    hist = run(alg, fed, 3000, x0=X0)
    np.testing.assert_allclose(hist.x[-1], fp.x, atol=1e-8)
    np.testing.assert_allclose(hist.state.W, fp.state.W, atol=1e-8)


# --------------------------------------------------------------------- rates
@pytest.mark.parametrize("make", [
    lambda: FedAvg(lr=LR, local_steps=STEPS),
    lambda: Scaffold(lr=0.1, local_steps=4, option="II"),
    lambda: FedDyn(alpha=2.0),
])
def test_spectral_rate_predicts_error_decay(fed_uniform, make):
    alg = make()
    amap = affine_round_map(alg, fed_uniform, x0=X0)
    fp = fixed_point(amap)
    rho = fp.spectral_rate
    assert 0.3 < rho < 0.97
    R = int(np.ceil(np.log(1e-9) / np.log(rho)))              # error shrinks by ~1e-9
    hist = run(alg, fed_uniform, R, x0=X0)
    err = np.linalg.norm(hist.x - fp.x, axis=1)
    t = np.arange(R // 2, R + 1)
    slope = np.polyfit(t, np.log(err[t]), 1)[0]
    assert slope == pytest.approx(np.log(rho), rel=0.01)


def test_orbit_rate_of_a_start_avoiding_the_slowest_mode(fed_uniform):
    """FedAvg's M is symmetric: a start x0 = x~ + v_k (eigenvector k) decays at |lambda_k|."""
    alg = FedAvg(lr=0.1, local_steps=3)
    amap = affine_round_map(alg, fed_uniform)
    x_fix = fixed_point(amap).x
    lam, V = np.linalg.eigh(amap.M)
    k = int(np.argmin(np.abs(lam)))                              # the fastest mode
    x0 = x_fix + V[:, k]
    assert orbit_rate(amap) == pytest.approx(spectral_rate(amap), rel=1e-12)
    rate = orbit_rate(amap, initial=x0)
    assert rate == pytest.approx(abs(lam[k]), rel=1e-9) and rate < spectral_rate(amap)
    hist = run(alg, fed_uniform, 6, x0=x0)
    err = np.linalg.norm(hist.x - x_fix, axis=1)
    np.testing.assert_allclose(err[1:] / err[:-1], rate, rtol=1e-6)
    assert orbit_rate(amap, initial=x_fix) == 0.0


def test_contraction_factor_bounds_rate(fed_uniform):
    sym = affine_round_map(FedAvg(lr=0.1, local_steps=3), fed_uniform)        # M symmetric
    assert contraction_factor(sym) == pytest.approx(spectral_rate(sym), rel=1e-12)
    sc = affine_round_map(Scaffold(lr=0.1, local_steps=4), fed_uniform)
    assert contraction_factor(sc) >= spectral_rate(sc) - 1e-12


def test_fixed_point_from_another_initial_state(fed_uniform):
    """The fixed point lies on the affine subspace of the start's conserved quantities:
    random client controls with c = mean c_i give the same server model; breaking
    the invariant c = mean c_i shifts it (SCAFFOLD relies on the invariant)."""
    amap = affine_round_map(Scaffold(lr=0.1, local_steps=4), fed_uniform)
    ci = np.random.default_rng(0).standard_normal((N, D))
    S1 = amap.base.copy()
    S1[amap.slices["c_clients"]] = ci.ravel()
    S1[amap.slices["c"]] = ci.mean(axis=0)
    fp0, fp1 = fixed_point(amap), fixed_point(amap, initial=S1)
    np.testing.assert_allclose(fp1.x, fp0.x, atol=1e-10)
    W = fp1.subspace.W
    np.testing.assert_allclose(W.T @ fp1.S, W.T @ S1, atol=1e-10)
    S2 = S1.copy()
    S2[amap.slices["c"]] += 0.5
    fp2 = fixed_point(amap, initial=S2)
    assert np.linalg.norm(fp2.x - fp0.x) > 1e-2
    # and that is where the ordinary algorithm goes from that state
    state = amap.to_state(S2)
    for _ in range(400):
        state, _ = amap.round_map.step(state)
    np.testing.assert_allclose(state.x, fp2.x, atol=1e-9)


# -------------------------------------------------------------- fast path
@pytest.mark.parametrize("make", [
    lambda: FedAvg(lr=LR, local_steps=STEPS, server_lr=0.9),
    lambda: FedProx(lr=LR, local_steps=STEPS, mu=0.3),
    lambda: FedCurv(lr=LR, local_steps=STEPS, alpha=0.2),
    lambda: Scaffold(lr=0.1, local_steps=4),
    lambda: FedDyn(alpha=1.0),
    lambda: FedOpt(client_optimizer=optim.preconditioned(0.1, P_DIAG),
                   server_optimizer=optim.momentum(0.5, 0.5), local_steps=STEPS),
])
def test_run_affine_equals_run(fed, make):
    alg = make()
    R = 60
    slow, fast = run(alg, fed, R, x0=X0), run_affine(alg, fed, R, x0=X0)
    np.testing.assert_allclose(fast.x, slow.x, rtol=0, atol=1e-10)
    for name in ("loss", "loss_gap", "dist2", "grad_norm2"):
        np.testing.assert_allclose(getattr(fast, name), getattr(slow, name), rtol=0, atol=1e-10)
    assert len(fast.clients) == R and all(np.array_equal(a, b) for a, b in zip(fast.clients, slow.clients))
    assert all(np.array_equal(a, b) for a, b in zip(fast.steps, slow.steps))
    assert fast.state.t == slow.state.t == R
    np.testing.assert_allclose(fast.state.x, slow.state.x, atol=1e-10)
    assert fast.communication[-1].floats_up == slow.communication[-1].floats_up
    assert fast.record["method"] == "affine"


def test_run_affine_divergence_names_the_round(fed):
    import re

    from fltheory.errors import DivergenceError
    alg = FedAvg(lr=3.0, local_steps=2)                          # eta > 2/L: the map expands
    with pytest.raises(DivergenceError, match=r"FedAvg diverged in round \d+") as fast:
        run_affine(alg, fed, 5000, x0=X0)
    with pytest.raises(DivergenceError) as slow:
        run(alg, fed, 5000, x0=X0)
    rounds = [re.search(r"round (\d+)", str(e.value)).group(1) for e in (fast, slow)]
    assert rounds[0] == rounds[1]


def test_run_affine_zero_rounds(fed):
    h = run_affine(FedAvg(lr=0.1, local_steps=2), fed, 0, x0=X0)
    assert h.x.shape == (1, D) and h.state.t == 0


# ------------------------------------------------------------ not affine
@pytest.mark.parametrize("make", [
    lambda: FedOpt(client_optimizer=optim.adagrad(0.1), server_optimizer=optim.sgd(1.0), local_steps=3),
    lambda: FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.adam(0.1), local_steps=3),
    lambda: FedElasticNet(base="fedprox", lambda1=0.05, lambda2=0.5, solver="exact"),
    lambda: EFL(lr=0.1, local_steps=3, lam=0.1),
    lambda: FedProx(lr=0.1, local_steps=3, mu=0.3, target=TemporalEnsemble(beta=0.5)),
])
def test_non_affine_algorithms_raise(fed, make):
    alg = make()
    with pytest.raises(NotAffineError, match=alg.name):
        affine_round_map(alg, fed, x0=X0)
    with pytest.raises(NotAffineError):
        run_affine(alg, fed, 5, x0=X0)


def test_logistic_clients_are_not_affine():
    from fltheory.problems.logistic import LogisticFederation
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((6, 2)) for _ in range(3)]
    labels = [np.where(rng.random(6) < 0.5, -1.0, 1.0) for _ in range(3)]
    fed = LogisticFederation(feats, labels, reg=0.1)
    with pytest.raises(NotAffineError, match="FedAvg"):
        affine_round_map(FedAvg(lr=0.5, local_steps=2), fed, x0=np.ones(2))


def test_deterministic_setting_is_required(fed):
    from fltheory.participation import UniformSampling
    alg = FedAvg(lr=0.1, local_steps=2)
    with pytest.raises(InvalidProblemError, match="stochastic"):
        affine_round_map(alg, fed.with_gradient_noise(0.1))
    with pytest.raises(NotAffineError, match="participation"):
        affine_round_map(alg, fed, participation=UniformSampling(2))
    with pytest.raises(InvalidProblemError, match="max_dim"):
        affine_round_map(Scaffold(lr=0.1, local_steps=2), fed, max_dim=10)


def test_piecewise_affine_map_is_caught():
    """FedElasticNet's l1 prox is affine on each sign pattern of e_i - x; the
    second coordinate of e_i - x changes sign at the fixed point (x_2 ~ lambda_1),
    so the checks see two pieces."""
    H = np.broadcast_to(np.eye(2), (2, 2, 2)).copy()
    fed = QuadraticFederation(H, np.array([[50.0, 0.0], [-50.0, 0.0]]))
    alg = FedElasticNet(base="fedprox", lambda1=1e-3, lambda2=0.5, solver="exact")
    with pytest.raises(NotAffineError, match="FedElasticNet is not affine"):
        affine_round_map(alg, fed, x0=np.array([0.0, 100.0]))


# ------------------------------------------------- fast path: honest communication
def _comm_fields(c):
    return (c.floats_up, c.floats_down, c.nonzeros_up, c.nonzeros_down, c.bits_up, c.bits_down,
            c.entries_up)


@pytest.mark.parametrize("make", [
    lambda: FedAvg(lr=LR, local_steps=STEPS, server_lr=0.9),
    lambda: FedCurv(lr=LR, local_steps=STEPS, alpha=0.2),        # one warm-up round
    lambda: Scaffold(lr=0.1, local_steps=4),
])
def test_run_affine_recomputed_communication_equals_run(fed, make):
    """communication='recompute': every round's Communication is that of the ordinary
    round from the affine iterate, i.e. what run() records (value-dependent non-zeros
    and entropy included: the transmitted changes shrink as the model converges)."""
    alg = make()
    R = 25
    slow = run(alg, fed, R, x0=X0)
    fast = run_affine(alg, fed, R, x0=X0, communication="recompute")
    assert fast.record["communication"] == "recomputed each round"
    assert len(fast.communication) == R
    for a, b in zip(fast.communication, slow.communication):
        assert _comm_fields(a) == _comm_fields(b)
        assert a.entropy_up == pytest.approx(b.entropy_up, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(fast.x, slow.x, rtol=0, atol=1e-10)


def test_run_affine_copied_communication_is_labelled(fed):
    """The default copies the recovery round's record; History.record says so, and the
    copy really differs from run()'s per-round entropy once the changes shrink."""
    alg = FedAvg(lr=LR, local_steps=STEPS, server_lr=0.9)
    R = 25
    slow, fast = run(alg, fed, R, x0=X0), run_affine(alg, fed, R, x0=X0)
    assert fast.record["communication"].startswith("per-round constant copy of round 1")
    assert all(c is fast.communication[0] for c in fast.communication)
    assert fast.communication[0].entropy_up == pytest.approx(slow.communication[0].entropy_up)
    assert slow.communication[-1].entropy_up < slow.communication[0].entropy_up
    with pytest.raises(InvalidHyperparameterError, match="communication"):
        run_affine(alg, fed, 3, x0=X0, communication="exact")


def test_non_finite_initial_state_is_refused(fed):
    """A NaN start used to come back as a NaN fixed point / rate."""
    amap = affine_round_map(FedAvg(lr=LR, local_steps=STEPS), fed, x0=X0)
    S = amap.base.copy()
    S[1] = np.nan
    with pytest.raises(InvalidProblemError, match="entry 1"):
        fixed_point(amap, initial=S)
    with pytest.raises(InvalidProblemError, match="finite"):
        orbit_rate(amap, initial=S)
    with pytest.raises(InvalidProblemError, match="finite"):
        fixed_point(amap, initial=amap.to_state(S))
