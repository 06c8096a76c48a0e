"""Exact moments: hand closed forms, deterministic runs, exact_scalar_efl, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments.efl_convergence import exact_scalar_efl
from fltheory.algorithms import (
    EFL,
    FedAvg,
    FedCurv,
    FedDyn,
    FedOpt,
    FedProx,
    Scaffold,
    run,
)
from fltheory.errors import (
    InvalidHyperparameterError,
    InvalidProblemError,
    NotAffineError,
)
from fltheory.optim import adagrad, momentum, sgd
from fltheory.participation import (
    Bernoulli,
    FullParticipation,
    FullSteps,
    IncompleteSteps,
    Schedule,
    TimeVarying,
    UniformSampling,
    UniformSteps,
)
from fltheory.problems import QuadraticFederation, random_quadratic
from fltheory.theory.moments import (
    AdditiveNoise,
    MinibatchNoise,
    averaging_moments,
    exact_moments,
    fedavg_sampling_moments,
    inclusion_probabilities,
    participation_support,
)


def small_fed(N: int = 3, d: int = 2, seed: int = 0) -> QuadraticFederation:
    return random_quadratic(N, d, L=2.0, mu=0.5, heterogeneity=1.0, seed=seed)


DETERMINISTIC = [
    FedAvg(lr=0.2, local_steps=3, server_lr=0.8),
    FedProx(lr=0.2, local_steps=3, mu=0.5),
    FedProx(mu=0.5, solver="exact"),
    FedCurv(lr=0.2, local_steps=3, alpha=0.3),
    Scaffold(lr=0.2, local_steps=3, option="I"),
    Scaffold(lr=0.2, local_steps=3, option="II", server_lr=0.7),
    FedDyn(alpha=1.0, solver="exact"),
    FedDyn(alpha=1.0, lr=0.1, local_steps=3, solver="gd"),
    FedOpt(client_optimizer=sgd(0.2), server_optimizer=momentum(0.5, beta=0.5), local_steps=3),
    FedOpt(client_optimizer=momentum(0.1, beta=0.3), server_optimizer=sgd(1.0), local_steps=2,
           client_state="persist"),
    EFL(lr=0.2, local_steps=3, lam=0.4, compression=None),
]


@pytest.mark.parametrize("alg", DETERMINISTIC, ids=lambda a: f"{a.name}")
def test_zero_noise_full_participation_is_the_deterministic_run(alg):
    fed = small_fed()
    x0 = np.array([1.0, -2.0])
    ex = exact_moments(alg, fed, 6, x0=x0)
    hist = run(alg, fed, 6, seed=0, x0=x0)
    np.testing.assert_allclose(ex.mean, hist.x, rtol=0, atol=1e-12 * max(1.0, np.abs(hist.x).max()))
    np.testing.assert_allclose(ex.dist2, hist.dist2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ex.loss_gap, hist.loss_gap, rtol=1e-10, atol=1e-12)
    # no randomness: the second moment is the outer product of the mean
    np.testing.assert_allclose(ex.variance, 0.0, atol=1e-12)


def test_fedavg_one_dimensional_variance_recursion_by_hand():
    h = np.array([1.0, 2.0, 0.5])
    c = np.array([1.0, -1.0, 3.0])
    p = np.array([0.2, 0.5, 0.3])
    sig = np.array([0.3, 1.0, 0.1])
    eta, K, x0, R = 0.3, 4, 2.0, 8
    fed = QuadraticFederation(h[:, None, None], (h * c)[:, None], weights=p).with_gradient_noise(sig)
    ex = exact_moments(FedAvg(lr=eta, local_steps=K), fed, R, x0=[x0])
    a = (1 - eta * h) ** K
    b = (1 - a) * c
    v = eta ** 2 * sig * np.sum([(1 - eta * h) ** (2 * k) for k in range(K)], axis=0)
    A, B, V = p @ a, p @ b, p ** 2 @ v
    m, M = x0, x0 ** 2
    xs = np.sum(p * h * c) / np.sum(p * h)
    for t in range(1, R + 1):
        m, M = A * m + B, A * A * M + 2 * A * B * m + B * B + V
        assert ex.mean[t, 0] == pytest.approx(m, rel=1e-13, abs=1e-14)
        assert ex.dist2[t] == pytest.approx(M - 2 * xs * m + xs ** 2, rel=1e-12, abs=1e-14)


def test_agrees_with_exact_scalar_efl():
    h = np.array([1.0, 0.5])
    c = np.array([1.0, -1.0])
    p = np.array([0.5, 0.5])
    sig = np.array([0.4, 0.9])
    E, y = 2, np.array([0.3, 0.6])
    eta = np.array([0.4, 0.3, 0.25, 0.2, 0.15])
    probs = np.zeros((2, E + 1))
    probs[:, 0], probs[:, E] = y, 1 - y
    ref = exact_scalar_efl(h, c, p, sig, probs, eta, 1.5)
    fed = QuadraticFederation(h[:, None, None], (h * c)[:, None], weights=p).with_gradient_noise(sig)
    alg = EFL(lr=1.0, local_steps=E, compression=None, lr_schedule=lambda tau: float(eta[tau]))
    ex = exact_moments(alg, fed, eta.shape[0], x0=[1.5],
                       participation=IncompleteSteps(FullParticipation(), inactive_prob=y))
    np.testing.assert_allclose(ex.mean[1:, 0], ref["mean"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ex.dist2[1:], ref["error"], rtol=1e-12, atol=1e-12)


def test_uniform_sampling_inclusion_probabilities_closed_form_and_enumeration():
    N, S = 6, 3
    pi, Pi = inclusion_probabilities(UniformSampling(S), N)
    assert np.allclose(pi, S / N) and Pi[0, 1] == pytest.approx(S * (S - 1) / (N * (N - 1)))
    # the same numbers by enumerating the C(N, S) subsets (through a Schedule that removes nobody)
    pi_e, Pi_e = inclusion_probabilities(Schedule(UniformSampling(S)), N)
    np.testing.assert_allclose(pi_e, pi, atol=1e-15)
    np.testing.assert_allclose(Pi_e, Pi, atol=1e-15)
    support = participation_support(UniformSampling(S), 0, np.full(N, 2))
    assert len(support) == math.comb(N, S)
    p = np.array([0.2, 0.5, 0.9])
    _, Pi_b = inclusion_probabilities(Schedule(Bernoulli(p)), 3)
    np.testing.assert_allclose(Pi_b, np.outer(p, p) + np.diag(p - p * p), atol=1e-15)


def test_step_law_support_probabilities():
    part = IncompleteSteps(UniformSampling(1), UniformSteps(), inactive_prob=0.25)
    support = participation_support(part, 0, np.array([2, 3]))
    total = {o.key: o.prob for o in support}
    # client 0: P(s = 0) = 1/2 (1/4 + 3/4 * 1/3), P(s = 1) = P(s = 2) = 1/2 * 3/4 * 1/3
    assert total[((0,), (0,))] == pytest.approx(0.5 * (0.25 + 0.75 / 3))
    assert total[((0,), (2,))] == pytest.approx(0.5 * 0.75 / 3)
    assert total[((1,), (3,))] == pytest.approx(0.5 * 0.75 / 4)
    assert sum(total.values()) == pytest.approx(1.0, abs=1e-15)


def test_schedule_departure_changes_the_support():
    part = Schedule(FullParticipation(), departures={1: 2}, arrivals={2: 1})
    E = np.array([1, 1, 1])
    assert [o.key for o in participation_support(part, 0, E)] == [((0, 1), (1, 1))]
    assert [o.key for o in participation_support(part, 1, E)] == [((0, 1, 2), (1, 1, 1))]
    assert [o.key for o in participation_support(part, 2, E)] == [((0, 2), (1, 1))]


@pytest.mark.parametrize("part", [None, UniformSampling(2), Bernoulli(0.5)], ids=["full", "uniform", "bern"])
def test_fedavg_fast_path_equals_the_general_engine(part):
    fed = random_quadratic(4, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=3).with_gradient_noise(
        [0.5, 0.1, 0.2, 1.0])
    alg = FedAvg(lr=[0.1, 0.2, 0.3, 0.15], local_steps=[1, 2, 3, 2], server_lr=0.8, aggregation="uniform")
    a = exact_moments(alg, fed, 4, participation=part, x0=[1.0, 1.0])
    b = fedavg_sampling_moments(alg, fed, 4, participation=part, x0=[1.0, 1.0])
    np.testing.assert_allclose(b.mean, a.mean, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(b.second, a.second, rtol=1e-11, atol=1e-13)


def test_full_covariance_noise_matches_its_isotropic_special_case():
    fed = small_fed()
    sig = np.array([0.3, 0.6, 0.9])
    alg = Scaffold(lr=0.2, local_steps=2)
    a = exact_moments(alg, fed.with_gradient_noise(sig), 3, participation=UniformSampling(2), x0=[1, 1])
    full = (sig / 2)[:, None, None] * np.eye(2)
    b = exact_moments(alg, fed, 3, participation=UniformSampling(2), x0=[1, 1], noise=full)
    c = exact_moments(alg, fed, 3, participation=UniformSampling(2), x0=[1, 1],
                      noise=np.repeat((sig / 2)[:, None], 2, axis=1))
    np.testing.assert_allclose(b.second, a.second, rtol=1e-12)
    np.testing.assert_allclose(c.second, a.second, rtol=1e-12)


def test_expected_error_is_never_negative_and_second_moment_psd():
    fed = small_fed(N=3, d=3, seed=4)
    cov = np.stack([np.diag([0.5, 0.0, 0.1]), np.zeros((3, 3)), np.eye(3)])
    ex = exact_moments(Scaffold(lr=0.3, local_steps=2, option="I"), fed, 5, x0=np.zeros(3),
                       participation=Bernoulli([0.3, 0.8, 0.5]), noise=cov)
    assert np.all(ex.dist2 >= 0) and np.all(ex.loss_gap >= 0)
    assert ex.clip < 1e-12
    cov_x = ex.second - np.einsum("ti,tj->tij", ex.mean, ex.mean)
    assert np.linalg.eigvalsh(cov_x).min() > -1e-12
    assert np.linalg.eigvalsh(0.5 * (ex.state_second + ex.state_second.T)).min() > -1e-10


def test_minibatch_noise_without_replacement_of_all_rows_is_no_noise():
    rng = np.random.default_rng(0)
    A = [rng.standard_normal((4, 2)) for _ in range(2)]
    b = [rng.standard_normal(4) for _ in range(2)]
    fed = QuadraticFederation.from_least_squares(A, b)
    alg = FedAvg(lr=0.1, local_steps=2)
    exact = exact_moments(alg, fed, 3, x0=[1, 1])
    full_batch = exact_moments(alg, fed, 3, x0=[1, 1], noise=MinibatchNoise.of(fed, 4, replace=False))
    np.testing.assert_allclose(full_batch.second, exact.second, rtol=1e-13, atol=1e-15)
    noisy = exact_moments(alg, fed, 3, x0=[1, 1], noise=MinibatchNoise.of(fed, 4, replace=True))
    assert np.all(noisy.variance[1:] > 1e-6)


# ------------------------------------------------------------------------------ errors
def test_non_psd_covariance_is_refused_naming_the_eigenvalue():
    fed = small_fed()
    bad = np.stack([np.eye(2), np.array([[1.0, 2.0], [2.0, 1.0]]), np.eye(2)])
    with pytest.raises(InvalidProblemError, match="client 1 is not positive semidefinite: eigenvalue"):
        exact_moments(FedAvg(), fed, 2, noise=bad)
    with pytest.raises(InvalidProblemError, match="symmetric"):
        AdditiveNoise(np.stack([np.array([[1.0, 1.0], [0.0, 1.0]])] * 3), 3, 2)
    with pytest.raises(InvalidProblemError, match=">= 0"):
        AdditiveNoise([0.1, -0.2, 0.3], 3, 2)


def test_probabilities_outside_the_unit_interval_are_refused():
    with pytest.raises(InvalidHyperparameterError, match=r"1\.5"):
        exact_moments(FedAvg(), small_fed(), 2, participation=Bernoulli([0.2, 1.5, 0.3]))
    with pytest.raises(InvalidHyperparameterError, match=r"-0\.1"):
        IncompleteSteps(FullParticipation(), inactive_prob=-0.1)


@pytest.mark.parametrize("alg, why", [
    (FedOpt(client_optimizer=adagrad(0.1), server_optimizer=sgd(1.0), local_steps=2), "adaptive"),
    (EFL(lr=0.1, local_steps=2, compression="st"), "ST ternary"),
], ids=["adagrad", "efl-st"])
def test_non_affine_algorithms_are_refused_saying_why(alg, why):
    with pytest.raises(NotAffineError, match=why):
        exact_moments(alg, small_fed(), 2)


def test_non_affine_round_is_detected_by_the_affinity_check():
    from fltheory.algorithms import FedElasticNet

    alg = FedElasticNet(lambda1=0.3, lambda2=0.1)
    with pytest.raises(NotAffineError, match="l1"):
        exact_moments(alg, small_fed(), 1)


def test_non_quadratic_federation_is_refused():
    from fltheory.problems import LogisticFederation

    rng = np.random.default_rng(0)
    fed = LogisticFederation([rng.standard_normal((5, 2))] * 2, [np.array([1, -1, 1, -1, 1])] * 2)
    with pytest.raises(InvalidProblemError, match="quadratic"):
        exact_moments(FedAvg(), fed, 1)


def test_minibatch_covariance_trace_is_the_federations_exact_minibatch_variance():
    rng = np.random.default_rng(1)
    A = [rng.standard_normal((6, 3)) for _ in range(2)]
    b = [rng.standard_normal(6) for _ in range(2)]
    fed = QuadraticFederation.from_least_squares(A, b, ridge=0.1).with_minibatch(3)
    noise = MinibatchNoise.of(fed, 3, replace=True)
    Y = rng.standard_normal((2, 3))
    for i in range(2):
        w = np.append(Y[i], 1.0)
        tr = np.trace(noise.expected_cov(i, np.outer(w, w)))
        assert tr == pytest.approx(fed.minibatch_variance(Y[i:i + 1], [i])[0], rel=1e-12)
    # without replacement: the finite-population factor (n - b) / (n - 1)
    wo = MinibatchNoise.of(fed, 3, replace=False)
    w = np.append(Y[0], 1.0)
    assert np.trace(wo.expected_cov(0, np.outer(w, w))) == pytest.approx(
        fed.minibatch_variance(Y[:1], [0])[0] * (6 - 3) / (6 - 1), rel=1e-12)


def _table_steps_participation(pmf):
    from fltheory.participation import StepDistribution

    class Table(StepDistribution):
        def pmf(self, t, E, client):
            return pmf[client]

        def __call__(self, rng, t, E, clients):
            raise AssertionError("exact moments never sample")

    return IncompleteSteps(FullParticipation(), Table())


def test_averaging_path_equals_the_general_engine_for_efl_and_fedavg():
    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=7)
    sig = np.array([0.4, 0.8, 0.2])
    noisy = fed.with_gradient_noise(sig)
    eta = np.array([0.3, 0.2, 0.25, 0.1])
    E = 2
    pmf = np.array([[0.2, 0.3, 0.5], [0.0, 0.5, 0.5], [0.6, 0.0, 0.4]])
    # EFL, adaptive weights E p / s (weight 0 for s = 0), independent step laws, decreasing rate
    alg = EFL(lr=1.0, local_steps=E, compression=None, weights="adaptive", theta=2.0,
              lr_schedule=lambda tau: float(eta[tau]))
    a = exact_moments(alg, noisy, 4, participation=_table_steps_participation(pmf), x0=[1.0, 2.0])
    s = np.arange(E + 1)
    w = np.where(s > 0, E * fed.weights[:, None] / np.maximum(s, 1), 0.0)
    b = averaging_moments(fed, 4, lr=eta, local_steps=E, weights=w, step_pmf=pmf,
                          noise=AdditiveNoise(sig, 3, 2), x0=[1.0, 2.0])
    np.testing.assert_allclose(b.second, a.second, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(b.mean, a.mean, rtol=1e-12, atol=1e-13)
    # EFL under uniform sampling: weights p^k, not renormalised
    alg = EFL(lr=0.2, local_steps=E, compression=None)
    a = exact_moments(alg, noisy, 3, participation=UniformSampling(2), x0=[1.0, 2.0])
    b = averaging_moments(fed, 3, lr=0.2, local_steps=E, weights=fed.weights, sampled=2,
                          noise=AdditiveNoise(sig, 3, 2), x0=[1.0, 2.0])
    np.testing.assert_allclose(b.second, a.second, rtol=1e-11, atol=1e-13)
    # FedAvg with server rate 0.7 and inactive clients (a listed client with s = 0 keeps its weight)
    alg = FedAvg(lr=0.2, local_steps=E, server_lr=0.7)
    part = IncompleteSteps(FullParticipation(), inactive_prob=[0.1, 0.5, 0.3])
    a = exact_moments(alg, noisy, 3, participation=part, x0=[1.0, 2.0])
    pmf2 = np.zeros((3, E + 1))
    pmf2[:, 0], pmf2[:, E] = [0.1, 0.5, 0.3], [0.9, 0.5, 0.7]
    b = averaging_moments(fed, 3, lr=0.2, local_steps=E, weights=fed.weights, step_pmf=pmf2, server_lr=0.7,
                          noise=AdditiveNoise(sig, 3, 2), x0=[1.0, 2.0])
    np.testing.assert_allclose(b.second, a.second, rtol=1e-11, atol=1e-13)


def test_moment_operator_iterates_the_engine_and_finds_the_stationary_law():
    from fltheory.theory.moments import moment_operator

    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=2).with_gradient_noise(0.7)
    alg = Scaffold(lr=0.1, local_steps=2, option="II")
    op = moment_operator(alg, fed, participation=UniformSampling(2), x0=[1.0, -1.0])
    gap, dist = op.iterate(6)
    ex = exact_moments(alg, fed, 6, participation=UniformSampling(2), x0=[1.0, -1.0])
    np.testing.assert_allclose(gap, ex.loss_gap, rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(dist, ex.dist2, rtol=1e-11, atol=1e-14)
    floor, _, rounds = op.stationary(rtol=1e-12)
    # one more exact round from the stationary moments leaves them unchanged
    g_long, _ = op.iterate(rounds + 200)
    assert g_long[-1] == pytest.approx(floor, rel=1e-9)
    # SCAFFOLD's deviation from its common fixed point (x*, grad f_i(x*)) evolves by maps free of the
    # client offsets: the stationary error is the same for every heterogeneity
    other = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=5.0, seed=2).with_gradient_noise(0.7)
    floor5 = moment_operator(alg, other, participation=UniformSampling(2), x0=[1.0, -1.0]).stationary(rtol=1e-12)[0]
    assert floor5 == pytest.approx(floor, rel=1e-8)


def test_moment_operator_refuses_a_law_that_changes_after_round_one():
    """The operator reuses round 0's outcomes for every round: a departure at round 3 or a step law
    that switches at round 2 passed the rounds-0-and-1 comparison and gave E[F] - F* of 0.0589
    against the exact 0.1640 (at t = 6); now refused, and laws that cannot change still agree
    with exact_moments."""
    from fltheory.theory.moments import moment_operator

    fed = random_quadratic(4, 2, L=3.0, mu=0.5, heterogeneity=1.0, seed=1)
    alg, x0 = FedAvg(lr=0.2, local_steps=2), [1.0, -2.0]
    late = [(Schedule(UniformSampling(2), departures={0: 3}), "client 0 departs at round 3"),
            (Schedule(UniformSampling(2), arrivals={1: 2}), "client 1 arrives at round 2"),
            (IncompleteSteps(FullParticipation(), TimeVarying(lambda t: FullSteps() if t < 2 else UniformSteps())),
             "TimeVarying")]
    for part, says in late:
        with pytest.raises(InvalidHyperparameterError, match=says):
            moment_operator(alg, fed, participation=part, x0=x0)
    for part in (Schedule(UniformSampling(2), departures={0: 0}),
                 IncompleteSteps(Bernoulli(0.5), UniformSteps(), inactive_prob=0.1)):
        gaps = moment_operator(alg, fed, participation=part, x0=x0).iterate(6)[0]
        exact = exact_moments(alg, fed, 6, participation=part, x0=x0).loss_gap
        np.testing.assert_allclose(gaps, exact, rtol=1e-12, atol=1e-15)


def test_moment_operator_refuses_what_is_not_one_time_invariant_map():
    from dataclasses import dataclass

    from fltheory.theory.moments import moment_operator

    fed = small_fed().with_gradient_noise(0.1)
    # EFL's Fisher diagonals u^k are set in round 1: a mixture over who has reported
    with pytest.raises(NotAffineError, match="mixture"):
        moment_operator(EFL(lr=0.2, local_steps=2, compression=None), fed, x0=[1.0, 1.0])
    with pytest.raises(InvalidHyperparameterError, match="does not change with t"):
        moment_operator(FedAvg(), fed, participation=Schedule(FullParticipation(), departures={0: 1}))

    @dataclass(frozen=True, kw_only=True, eq=False)
    class DecayingFedAvg(FedAvg):
        def round(self, state, problem, participation, rng):
            slow = FedAvg(lr=self.lr / (state.t + 1), local_steps=self.local_steps)
            return slow.round(state, problem, participation, rng)

    with pytest.raises(NotAffineError, match="changes between rounds 0 and 1"):
        moment_operator(DecayingFedAvg(lr=0.2, local_steps=2), fed, x0=[1.0, 1.0])


def test_running_mean_moments_match_monte_carlo_of_the_time_average():
    """E[R(mean_{t<T} x_t)] of FedAvg under sampling: the cross-round terms of the running mean."""
    from fltheory.theory.moments import moment_operator

    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=9).with_gradient_noise(2.0)
    alg = FedAvg(lr=0.2, local_steps=2, aggregation="uniform")
    op = moment_operator(alg, fed, participation=UniformSampling(1), x0=[2.0, -1.0])
    mean, second = op.running_mean(np.eye(2), 4)
    # Monte Carlo of the real runs
    M = 800
    avg = np.empty((M, 4, 2))
    for r in range(M):
        X = run(alg, fed, 4, participation=UniformSampling(1), seed=r, x0=[2.0, -1.0]).x
        avg[r] = np.cumsum(X[:4], axis=0) / np.arange(1, 5)[:, None]
    se = avg.std(axis=0, ddof=1) / np.sqrt(M)
    assert np.all(np.abs(avg.mean(axis=0) - mean) <= 4 * se + 1e-12)
    sq = np.einsum("rti,rti->rt", avg, avg)
    se2 = sq.std(axis=0, ddof=1) / np.sqrt(M)
    assert np.all(np.abs(sq.mean(axis=0) - np.einsum("tii->t", second)) <= 4 * se2)
    # T = 1: the mean of x_0 alone
    np.testing.assert_allclose(mean[0], [2.0, -1.0])
    np.testing.assert_allclose(second[0], np.outer([2.0, -1.0], [2.0, -1.0]))
