"""The FedOpt operator T, its fixed points, local contraction and Lipschitz ratios."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory import optim
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedopt import FedOpt
from fltheory.algorithms.fedprox import FedProx
from fltheory.algorithms.run import run
from fltheory.algorithms.scaffold import Scaffold
from fltheory.errors import AssumptionError, DivergenceError, InvalidHyperparameterError, InvalidProblemError
from fltheory.problems.generators import random_quadratic
from fltheory.problems.logistic import LogisticFederation
from fltheory.theory.closed_forms import (fedopt_quadratic_fixed_point, fedopt_quadratic_round_map,
                                          fedopt_small_rate_limit)
from fltheory.theory.operators import (anderson_fixed_point, fedopt_operator,
                                       lipschitz_ratios, minimizer_inconsistency,
                                       operator_fixed_point, sgd_contraction_bound)

N, D = 4, 3
STEPS = np.array([1, 3, 5, 2])
SCALE = np.array([0.5, 1.0, 2.0, 1.5])


@pytest.fixture(scope="module")
def fed():
    return random_quadratic(N, D, L=2.0, mu=0.3, heterogeneity=2.0, seed=21,
                            weights=[0.1, 0.2, 0.3, 0.4], constants="clients")


def adagrad_fedopt(lr, *, server=1.0, correction="none"):
    return FedOpt(client_optimizer=optim.adagrad(lr, initial_accumulator=0.1),
                  server_optimizer=optim.sgd(server), local_steps=STEPS, client_lr_scale=SCALE,
                  correction=correction)


def adagrad_client_loop(fed, x, i, lr, v0=0.1, eps=1e-8):
    """AdaGrad from a restarted state (seed 001, THEORY.md section 2), one client."""
    y, v = x.copy(), np.full(x.shape, v0)
    for _ in range(STEPS[i]):
        g = fed.H[i] @ y - fed.e[i]
        v = v + g * g
        y = y - SCALE[i] * lr * g / (np.sqrt(v) + eps)
    return y


def test_client_maps_and_operator_match_per_client_loop(fed):
    T = fedopt_operator(adagrad_fedopt(0.1), fed)
    x = np.array([0.4, -1.0, 2.0])
    O = T.client_maps(np.broadcast_to(x, (N, D)))
    for i in range(N):
        np.testing.assert_allclose(O[i], adagrad_client_loop(fed, x, i, 0.1), atol=1e-14)
    np.testing.assert_allclose(T(x), fed.weights @ O, atol=1e-14)       # T = sum p_i O_i


def test_adagrad_fixed_point_equals_end_of_long_simulation(fed):
    T = fedopt_operator(adagrad_fedopt(0.1), fed)
    fp = operator_fixed_point(T, np.zeros(D))
    assert fp.residual < 1e-12 and fp.cross_check_gap < 1e-9
    # server SGD(1) is the Picard iteration, SGD(0.5) a Mann iteration: same fixed point
    for server in (1.0, 0.5):
        hist = run(adagrad_fedopt(0.1, server=server), fed, 1500)
        np.testing.assert_allclose(hist.x[-1], fp.x, atol=1e-9)
    # the local rate of the Picard iteration is rho(J)
    assert 0 < fp.spectral_radius <= fp.spectral_norm + 1e-12
    hist = run(adagrad_fedopt(0.1), fed, 200)
    err = np.linalg.norm(hist.x - fp.x, axis=1)
    t = np.arange(100, 201)
    slope = np.polyfit(t, np.log(err[t]), 1)[0]
    assert slope == pytest.approx(np.log(fp.spectral_radius), rel=0.02)


def test_jacobian_of_affine_operator_is_exact(fed):
    lr = np.array([0.05, 0.1, 0.2, 0.15])
    T = fedopt_operator(FedAvg(lr=lr, local_steps=STEPS, server_lr=0.3), fed)
    fp = operator_fixed_point(T, np.ones(D))
    A, _ = fedopt_quadratic_round_map(fed, lr, STEPS)                  # server rate 1
    np.testing.assert_allclose(fp.jacobian, A, atol=1e-9)
    np.testing.assert_allclose(fp.x, fedopt_quadratic_fixed_point(fed, lr, STEPS).x, atol=1e-11)
    assert fp.spectral_radius == pytest.approx(np.abs(np.linalg.eigvals(A)).max(), rel=1e-8)


def test_logistic_fedprox_fixed_point():
    rng = np.random.default_rng(3)
    feats = [rng.standard_normal((8, 2)) + k for k in range(3)]
    labels = [np.where(rng.random(8) < 0.5, -1.0, 1.0) for _ in range(3)]
    fed = LogisticFederation(feats, labels, reg=0.2)
    alg = FedProx(mu=0.5, solver="exact")
    fp = operator_fixed_point(fedopt_operator(alg, fed), np.zeros(2))
    hist = run(alg, fed, 300)
    np.testing.assert_allclose(hist.x[-1], fp.x, atol=1e-9)
    assert fp.spectral_norm < 1


def test_anderson_on_a_linear_contraction():
    A = np.array([[0.5, 0.2], [0.0, 0.9]])
    b = np.array([1.0, -1.0])
    x, iters = anderson_fixed_point(lambda x: A @ x + b, np.zeros(2))
    np.testing.assert_allclose(x, np.linalg.solve(np.eye(2) - A, b), atol=1e-11)
    assert iters < 20


# ------------------------------------------------------------ Assumption 1
@given(seed=st.integers(0, 10_000), frac=st.floats(0.05, 1.0), tau=st.integers(1, 6))
def test_sgd_lipschitz_ratios_never_exceed_bound(seed, frac, tau):
    """||O_i(x) - O_i(y)|| <= (1 - eta mu_i)^tau ||x - y|| for eta <= 1/L_i (unsquared)."""
    fed = random_quadratic(3, 3, L=3.0, mu=0.2, heterogeneity=1.0, seed=seed, constants="clients")
    eta = frac / fed.client_L.max()
    T = fedopt_operator(FedAvg(lr=eta, local_steps=tau), fed)
    rat = lipschitz_ratios(T, np.random.default_rng(seed), n_pairs=5, radius=2.0)
    bound = sgd_contraction_bound(fed, eta, tau)
    assert np.all(rat.ratios <= bound * (1 + 1e-12))
    assert np.all(rat.squared <= bound * (1 + 1e-12))             # the squared form of A1
    assert np.all(rat.operator_ratios <= fed.weights @ bound * (1 + 1e-12))


def test_sgd_bound_is_attained_on_the_slowest_eigenvector(fed):
    """The bound is tight: x - y along the eigenvector of mu_i gives equality."""
    eta, tau = 0.2, 3
    T = fedopt_operator(FedAvg(lr=eta, local_steps=tau), fed)
    lam, V = np.linalg.eigh(fed.H[0])
    x, y = np.zeros(D), V[:, 0]
    O = T.client_maps(np.stack([x, y]), [0, 0])
    ratio = np.linalg.norm(O[0] - O[1])
    assert ratio == pytest.approx(sgd_contraction_bound(fed, eta, tau)[0], rel=1e-12)


def test_sgd_bound_refuses_large_rates(fed):
    with pytest.raises(AssumptionError, match="1/L"):
        sgd_contraction_bound(fed, 1.1 / fed.client_L.min(), 2)


# --------------------------------------------------- minimizer inconsistency
def test_local_adaptivity_bias_and_its_removal(fed):
    """Seed 001 section 4: without correction ||x~ - x*|| tends to a non-zero
    constant as the client rate shrinks; with local (or joint) correction it is O(eta)."""
    rates = np.array([0.02, 0.01, 0.005, 0.0025])
    plain = minimizer_inconsistency(lambda h: adagrad_fedopt(h), fed, rates)
    corrected = minimizer_inconsistency(lambda h: adagrad_fedopt(h, correction="local"), fed, rates)
    joint = minimizer_inconsistency(lambda h: adagrad_fedopt(h, correction="joint"), fed, rates)
    assert plain.distances.min() > 0.1
    assert plain.distances[-1] > 0.9 * plain.distances[-2]            # not shrinking with eta
    ratios = corrected.distances / rates
    np.testing.assert_allclose(ratios[1:], ratios[:-1], rtol=0.05)     # linear in eta
    np.testing.assert_allclose(joint.distances, corrected.distances, rtol=1e-6)


def test_fixed_preconditioner_limit_matches_seed_001_eq_8(fed):
    """With fixed P_i, x~(h) -> (sum p c tau P H)^{-1} sum p c tau P e at rate O(h)."""
    P = np.array([[1.0, 0.5, 1.5], [0.8, 1.2, 1.0], [1.0, 1.0, 0.6], [1.4, 0.9, 1.1]])
    make = lambda h: FedOpt(client_optimizer=optim.preconditioned(h, P), server_optimizer=optim.sgd(1.0),
                            local_steps=STEPS, client_lr_scale=SCALE)
    limit = fedopt_small_rate_limit(fed, SCALE, STEPS, preconditioners=P)
    rates = np.array([0.004, 0.002, 0.001])
    inc = minimizer_inconsistency(make, fed, rates)
    gaps = np.linalg.norm(inc.fixed_points - limit, axis=1)
    np.testing.assert_allclose(gaps / rates, (gaps / rates)[0], rtol=0.05)
    assert np.linalg.norm(limit - fed.optimum()) > 0.1                 # a real, non-vanishing bias


# ------------------------------------------------------------------ refusals
def test_operator_refusals(fed):
    with pytest.raises(InvalidHyperparameterError, match="restart"):
        fedopt_operator(FedOpt(client_optimizer=optim.adagrad(0.1), server_optimizer=optim.sgd(1.0),
                               client_state="persist"), fed)
    with pytest.raises(InvalidHyperparameterError, match="not only the server model"):
        fedopt_operator(Scaffold(lr=0.1, local_steps=2), fed)
    with pytest.raises(InvalidProblemError, match="stochastic"):
        fedopt_operator(FedAvg(lr=0.1, local_steps=2), fed.with_gradient_noise(0.5))
    with pytest.raises(InvalidHyperparameterError, match="rates"):
        minimizer_inconsistency(lambda h: FedAvg(lr=h), fed, [0.1, -1.0])


# ------------------------------------- minimizer inconsistency: per-rate failures
def _fedavg_fixed_point(fed, eta, tau):
    """THEORY.md section 3: x~ = (sum p_i B_i)^{-1} sum p_i B_i x_i*, B_i = I - (I - eta H_i)^tau."""
    B = np.array([np.eye(D) - np.linalg.matrix_power(np.eye(D) - eta * H, tau) for H in fed.H])
    xi = np.array([np.linalg.solve(H, e) for H, e in zip(fed.H, fed.e)])
    return np.linalg.solve(np.einsum("i,ijk->jk", fed.weights, B),
                           np.einsum("i,ijk,ik->j", fed.weights, B, xi))


@pytest.mark.parametrize("warm_start", [True, False])
def test_inconsistency_sweep_records_a_failed_rate_and_continues(fed, warm_start):
    """eta = 5 with 20 local steps: I - eta H_i has entries ~ 9^20, T(x) - x is too
    ill-conditioned for the root solver.  The other rates are still solved, the
    failed one is masked (never a number that looks valid) with the solver's message."""
    tau = 20
    rates = np.array([0.1, 5.0, 0.05])
    inc = minimizer_inconsistency(lambda h: FedAvg(lr=h, local_steps=tau), fed, rates,
                                  warm_start=warm_start)
    np.testing.assert_array_equal(inc.converged, [True, False, True])
    np.testing.assert_array_equal(inc.failed_rates, [5.0])
    assert "did not find a fixed point" in inc.messages[1]
    assert inc.distances.mask.tolist() == [False, True, False]
    assert inc.distances.tolist()[1] is None
    assert inc.fixed_points.mask[1].all() and not inc.fixed_points.mask[[0, 2]].any()
    for k in (0, 2):
        exact = _fedavg_fixed_point(fed, rates[k], tau)
        np.testing.assert_allclose(inc.fixed_points[k].data, exact, atol=1e-9)
        assert inc.distances[k] == pytest.approx(np.linalg.norm(exact - fed.optimum()), rel=1e-8)
    assert np.all(inc.evaluations > 0)


def test_inconsistency_warm_start_starts_at_previous_root(fed):
    """Warm start: the second rate starts at the first rate's root.  On an affine T
    with a start at the root of the *same* map, hybr needs no iteration beyond the
    first residual and Jacobian, so identical rates cost fewer rounds warm than cold."""
    make = lambda h: FedAvg(lr=h, local_steps=3)
    far = np.full(D, 50.0)
    warm = minimizer_inconsistency(make, fed, [0.1, 0.1], x0=far, warm_start=True)
    cold = minimizer_inconsistency(make, fed, [0.1, 0.1], x0=far, warm_start=False)
    assert warm.converged.all() and cold.converged.all()
    np.testing.assert_allclose(warm.fixed_points.data, cold.fixed_points.data, atol=1e-10)
    assert warm.evaluations[1] < cold.evaluations[1]
    assert cold.evaluations[1] == cold.evaluations[0]


# ------------------------------------- Anderson cross-check: damped (Mann) iteration
@pytest.fixture(scope="module")
def adagrad_kink_operator():
    """Restarted AdaGrad (initial accumulator 0: the first step is eta g / |g|) with
    heterogeneous steps: T is steep near points where a client's gradient coordinate
    vanishes.  The root is fine, but undamped Anderson of x <- T(x) stalls."""
    fed5 = random_quadratic(4, 3, L=4.0, mu=0.5, heterogeneity=1.0, seed=5, constants="clients")
    alg = FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.sgd(1.0),
                 local_steps=np.array([1, 2, 5, 10]))
    return fed5, fedopt_operator(alg, fed5)


def test_damped_anderson_cross_check_confirms_the_root(adagrad_kink_operator):
    fed5, T = adagrad_kink_operator
    fp = operator_fixed_point(T, fed5.optimum())
    assert fp.cross_check_agrees is True and fp.cross_check_message == ""
    assert np.abs(T(fp.x) - fp.x).max() < 1e-12
    assert fp.cross_check_gap < 1e-12
    # the root is a fixed point of the damped iteration run plainly as well
    x = fed5.optimum()
    for _ in range(300):
        x = 0.5 * x + 0.5 * T(x)
    np.testing.assert_allclose(x, fp.x, atol=1e-10)


def test_undamped_cross_check_disagreement_is_reported(adagrad_kink_operator):
    fed5, T = adagrad_kink_operator
    with pytest.raises(DivergenceError, match=r"cross-check failed.*damping 1"):
        operator_fixed_point(T, fed5.optimum(), damping=1.0, cross_check_max_iter=300)
    fp = operator_fixed_point(T, fed5.optimum(), damping=1.0, cross_check_max_iter=300,
                              strict_cross_check=False)
    assert fp.cross_check_agrees is False and "damping 1" in fp.cross_check_message
    assert fp.cross_check is None and fp.cross_check_gap is None
    assert np.abs(T(fp.x) - fp.x).max() < 1e-12            # the root is kept


def test_anderson_damping_validated_and_same_fixed_point():
    A = np.array([[0.5, 0.2], [-0.1, -0.9]])                # eigenvalues of both signs
    b = np.array([1.0, -2.0])
    exact = np.linalg.solve(np.eye(2) - A, b)
    for a in (0.3, 0.5, 1.0):
        x, _ = anderson_fixed_point(lambda x: A @ x + b, np.zeros(2), damping=a)
        np.testing.assert_allclose(x, exact, atol=1e-11)
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(InvalidHyperparameterError, match="damping"):
            anderson_fixed_point(lambda x: A @ x + b, np.zeros(2), damping=bad)


def test_non_finite_operator_is_refused_not_returned():
    """A T that is NaN everywhere: the residual test must not let a NaN residual pass
    (NaN > bound is False), and no result with NaN fields is returned."""
    with pytest.raises(DivergenceError, match="non-finite"):
        operator_fixed_point(lambda x: x * np.nan, np.zeros(2), cross_check=False)


def test_jacobian_of_a_map_with_a_pole_raises():
    from fltheory.theory.operators import operator_jacobian
    T = lambda x: np.array([1.0 / x[0] if x[0] > 0 else np.inf, x[1]])
    with pytest.raises(DivergenceError, match="coordinate 0"):
        operator_jacobian(T, np.array([1e-7, 1.0]))
    np.testing.assert_allclose(operator_jacobian(T, np.array([2.0, 1.0])), [[-0.25, 0.0], [0.0, 1.0]],
                               rtol=1e-8)


# ------------------------------------------------ method dispatch: root methods and Newton-Krylov
NEWTON_N, NEWTON_D = 6, 8
NEWTON_STEPS = np.array([2, 10, 2, 10, 5, 3])


@pytest.fixture(scope="module")
def fed8():
    return random_quadratic(NEWTON_N, NEWTON_D, L=4.0, mu=0.5, heterogeneity=1.0, seed=7)


def _adaptive(kind):
    opt = optim.adagrad(0.05, initial_accumulator=0.1) if kind == "adagrad" else optim.adam(0.05)
    return FedOpt(client_optimizer=opt, server_optimizer=optim.sgd(1.0), local_steps=NEWTON_STEPS,
                  client_lr_scale=np.linspace(0.5, 1.5, NEWTON_N))


@pytest.mark.parametrize("kind", ["adagrad", "adam"])
@pytest.mark.parametrize("method", ["lm", "broyden1", "newton-krylov", "continuation"])
def test_every_method_reaches_the_same_fixed_point_with_adaptive_clients(fed8, kind, method):
    """FedOpt with restarted AdaGrad / Adam clients (non-linear T): each method's fixed point
    equals Powell's hybrid method's to 1e-10 (both solve T(x) = x to 1e-12 relative), has a
    residual T(x) - x below 1e-12 max(1, |x|), the same Jacobian-based local rate to 1e-7,
    and passes the Anderson cross-check."""
    ref = operator_fixed_point(fedopt_operator(_adaptive(kind), fed8), fed8.optimum())
    T = fedopt_operator(_adaptive(kind), fed8)
    fp = operator_fixed_point(T, fed8.optimum(), method=method)
    assert fp.method == method and fp.success and fp.cross_check_agrees
    np.testing.assert_allclose(fp.x, ref.x, rtol=0, atol=1e-10)
    assert np.abs(T(fp.x) - fp.x).max() <= 1e-12 * max(1.0, np.abs(fp.x).max())
    assert fp.jacobian is not None and fp.spectral_rate == pytest.approx(ref.spectral_rate, abs=1e-7)


def test_continuation_in_the_client_rate_matches_the_closed_form(fed8):
    """SGD clients (FedAvg): the fixed point is known in closed form (LocalAdaptivity Theorem 2
    with identity preconditioners); continuation through client rates lr/8, lr/4, lr/2, lr
    and Newton-Krylov both reach it to 1e-10, and the path is reported."""
    lr = 0.08
    closed = fedopt_quadratic_fixed_point(fed8, lr, NEWTON_STEPS)
    for method in ("newton-krylov", "continuation"):
        fp = operator_fixed_point(fedopt_operator(FedAvg(lr=lr, local_steps=NEWTON_STEPS), fed8),
                                  np.zeros(NEWTON_D), method=method)
        np.testing.assert_allclose(fp.x, closed.x, rtol=0, atol=1e-10)
        assert fp.spectral_rate == pytest.approx(closed.spectral_rate, abs=1e-7)
    assert "client-rate multipliers [0.125, 0.25, 0.5, 1.0]" in fp.message


def test_newton_krylov_above_the_dense_jacobian_size(monkeypatch, fed8):
    """Above NEWTON_DENSE_JACOBIAN_MAX the result carries the ARPACK rate and its error and no
    dense Jacobian; the rate still matches the closed form within the reported error."""
    import fltheory.theory.operators as ops

    monkeypatch.setattr(ops, "NEWTON_DENSE_JACOBIAN_MAX", 4)
    lr = 0.08
    closed = fedopt_quadratic_fixed_point(fed8, lr, NEWTON_STEPS)
    fp = operator_fixed_point(fedopt_operator(FedAvg(lr=lr, local_steps=NEWTON_STEPS), fed8), np.zeros(NEWTON_D),
                              method="newton-krylov")
    assert fp.jacobian is None and fp.contraction_factor is None and fp.cross_check_agrees
    np.testing.assert_allclose(fp.x, closed.x, rtol=0, atol=1e-10)
    assert abs(fp.spectral_rate - closed.spectral_rate) <= max(fp.spectral_rate_error, 1e-6)


def test_unknown_method_names_the_valid_ones(fed8):
    T = fedopt_operator(_adaptive("adagrad"), fed8)
    with pytest.raises(InvalidHyperparameterError,
                       match=r"method must be one of \('hybr', .*'newton-krylov', 'continuation'\), got 'bogus'"):
        operator_fixed_point(T, method="bogus")
    assert T.evaluations == 0


@pytest.mark.parametrize(("T_kind", "kwargs", "pattern"), [
    ("callable", {"method": "continuation"}, "needs T from fedopt_operator"),
    ("fedopt", {"method": "continuation", "continuation_path": [0.5, 0.25, 1.0]},
     "continuation_path must increase strictly and end at 1"),
    ("fedopt", {"method": "continuation", "continuation_path": [0.5]}, "continuation_path must increase strictly"),
    ("fedopt", {"method": "continuation", "continuation_path": [0.0, 1.0]},
     r"continuation_path entry must lie in \(0, 1\], got 0.0"),
    ("fedopt", {"method": "continuation", "continuation_path": "abc"}, "continuation_path must be a sequence"),
    ("fedopt", {"method": "hybr", "continuation_path": [0.5, 1.0]},
     "continuation_path is used by method='continuation' only"),
])
def test_continuation_arguments_are_checked_before_any_evaluation(fed8, T_kind, kwargs, pattern):
    T = fedopt_operator(_adaptive("adagrad"), fed8)
    target = (lambda x: 0.5 * x) if T_kind == "callable" else T
    with pytest.raises(InvalidHyperparameterError, match=pattern):
        operator_fixed_point(target, np.zeros(NEWTON_D), **kwargs)
    assert T.evaluations == 0
