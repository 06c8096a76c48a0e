"""EFL (seed 000 Alg. 1-2): fast path vs reference loop, the FedAvg reduction,
error-feedback conservation both ways, ST inside the round, adaptive weights and
Assumption 5, the U/V bookkeeping, bad hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.algorithms.efl import EFL
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.run import run
from fltheory.errors import AssumptionError, InvalidHyperparameterError
from fltheory.participation import (FixedSteps, FullParticipation, IncompleteSteps, UniformSampling, UniformSteps)
from fltheory.problems.logistic import LogisticFederation
from fltheory.problems.quadratic import QuadraticFederation

from ._problems import RandomParticipation, shifted_logistic, spread_quadratic


def quadratic(seed: int, N: int = 4, d: int = 6, spread: float = 3.0, weights=None) -> QuadraticFederation:
    return spread_quadratic(seed, N, d, spread, weights)


def logistic(seed: int, N: int = 4, f: int = 5) -> LogisticFederation:
    return shifted_logistic(seed, N, f, shift=0.5)


LR = np.array([0.05, 0.08, 0.1, 0.06])
STEPS = np.array([3, 4, 2, 5])
WEIGHTS = np.array([0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize("kind", ["quadratic", "logistic"])
@pytest.mark.parametrize("kwargs", [
    dict(lam=0.3, weights="adaptive", compression="st", q=0.34),
    dict(lam=0.3, weights="plain", compression="st", q=0.5),
    dict(lam=0.2, weights="adaptive", compression=None),
    dict(lam=0.2, weights="adaptive", theta=2.0, on_excess="clip", compression="st", q=0.2),
    dict(lam=0.3, weights="adaptive", compression="st", q=0.34, server_update="consistent"),
    dict(lam=0.3, weights="adaptive", compression="st", q=0.5, lr_schedule=lambda tau: 2.0 / (tau + 2)),
    dict(lam=0.3, weights="adaptive", compression="st", q=0.34, error_feedback=False),
])
def test_fast_path_equals_reference_loop(kind, kwargs):
    if kind == "quadratic":
        fed = quadratic(1, weights=WEIGHTS).with_gradient_noise(0.2)
    else:
        fed = logistic(2).with_minibatch(3)
    alg = EFL(lr=LR, local_steps=STEPS, **kwargs)
    part = RandomParticipation()
    x0 = np.linspace(-1, 1, fed.dim)
    fast = run(alg, fed, 6, participation=part, seed=5, x0=x0).x
    ref = reference_run(alg, fed, 6, participation=part, seed=5, x0=x0)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12)
    assert np.max(np.abs(fast[-1] - fast[0])) > 1e-3


def test_fast_path_equals_reference_with_package_participation():
    fed = quadratic(3, weights=WEIGHTS).with_gradient_noise(0.1)
    part = IncompleteSteps(UniformSampling(3), UniformSteps(), inactive_prob=0.2)
    alg = EFL(lr=0.05, local_steps=4, lam=0.5, weights="adaptive", q=0.5)
    fast = run(alg, fed, 5, participation=part, seed=2, x0=np.ones(fed.dim)).x
    ref = reference_run(alg, fed, 5, participation=part, seed=2, x0=np.ones(fed.dim))
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["quadratic", "logistic"])
def test_uncompressed_plain_lambda_zero_full_steps_is_fedavg(kind):
    """The issue's reduction, with compression off (ST with q = 1 is ternary, not the identity)."""
    fed = quadratic(4, weights=WEIGHTS).with_gradient_noise(0.3) if kind == "quadratic" \
        else logistic(5).with_minibatch(2)
    a = run(EFL(lr=LR, local_steps=STEPS, lam=0.0, weights="plain", compression=None), fed, 5, seed=9).x
    b = run(FedAvg(lr=LR, local_steps=STEPS), fed, 5, seed=9).x
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)


def test_st_with_q_one_is_not_the_identity():
    fed = quadratic(4, weights=WEIGHTS)
    a = run(EFL(lr=0.05, local_steps=3, lam=0.0, compression="st", q=1.0), fed, 1).extra[0]
    sent = a["sent"]
    # every entry becomes +-mu with mu the row's mean |Delta|, which differs from Delta
    mu = np.abs(a["local_change"]).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(np.abs(sent), np.broadcast_to(mu, sent.shape), rtol=1e-14)
    assert np.max(np.abs(sent - a["local_change"])) > 1e-3


def test_consistent_server_copy_is_client_copy_plus_residual():
    fed = quadratic(8, weights=WEIGHTS)
    hist = run(EFL(lr=0.05, local_steps=3, lam=0.2, q=0.34, server_update="consistent"), fed, 6,
               participation=RandomParticipation(), seed=4)
    s = hist.state
    np.testing.assert_allclose(s.x, s.x_client + s.residual_global, rtol=0, atol=1e-13)
    assert np.linalg.norm(s.residual_global) > 1e-6


@given(seed=st.integers(0, 10_000), q=st.sampled_from([0.2, 0.34, 0.5, 1.0]))
def test_error_feedback_conserves_both_ways_and_st_is_ternary(seed, q):
    fed = quadratic(seed % 7, weights=WEIGHTS)
    d = fed.dim
    k = max(int(np.floor(d * q)), 1)
    alg = EFL(lr=0.05, local_steps=3, lam=0.4, weights="adaptive", q=q)
    rng = np.random.default_rng(seed)
    part = IncompleteSteps(FullParticipation(), UniformSteps())
    state = alg.init(fed, np.zeros(d), rng)
    total_sent, residual_sum = np.zeros(d), np.zeros(d)
    for _ in range(5):
        new, info = alg.round(state, fed, part, rng)
        ex = info.extra
        act = ex["active"]
        # client side: R^k_new + ST(Delta^k) = R^k_old + (w_final - x_client); others untouched
        np.testing.assert_allclose(new.residuals[act] + ex["sent"],
                                   state.residuals[act] + ex["local_change"], rtol=0, atol=1e-14)
        idle = np.setdiff1d(np.arange(fed.n_clients), act)
        np.testing.assert_array_equal(new.residuals[idle], state.residuals[idle])
        # server side: Delta^G = R^G_old + sum p_tau ST(Delta^k) = x_new - x_old = R^G_new + broadcast
        w = ex["weights"][ex["weights"] > 0]
        delta_g = state.residual_global + w @ ex["sent"]
        np.testing.assert_allclose(new.x - state.x, delta_g, rtol=0, atol=1e-14)
        np.testing.assert_allclose(new.residual_global + ex["broadcast"], delta_g, rtol=0, atol=1e-14)
        # client copy + server residual = x0 + all aggregated client messages, each once
        total_sent += w @ ex["sent"]
        np.testing.assert_allclose(new.x_client + new.residual_global, total_sent, rtol=0, atol=1e-13)
        np.testing.assert_allclose(ex["client_model"], new.x_client, rtol=0, atol=0)
        # the server copy as printed re-adds every past server residual
        residual_sum += new.residual_global
        np.testing.assert_allclose(new.x - new.x_client, residual_sum, rtol=0, atol=1e-13)
        # ST: ternary {-mu, 0, mu} with exactly k non-zeros, mu = mean of the k largest |T|
        T = state.residuals[act] + ex["local_change"]
        for msg, row in zip(np.vstack([ex["sent"], ex["broadcast"][None]]),
                            np.vstack([T, delta_g[None]])):
            nz = msg[msg != 0]
            assert nz.size == k
            mu = np.sort(np.abs(row))[::-1][:k].mean()
            np.testing.assert_allclose(np.abs(nz), mu, rtol=1e-13)
            assert np.all(np.sign(nz) == np.sign(row[msg != 0]))
        state = new


def test_adaptive_weights_and_assumption_five():
    fed = quadratic(6, weights=WEIGHTS)
    part = IncompleteSteps(FullParticipation(), FixedSteps(np.array([4, 2, 1, 0])))
    info = run(EFL(lr=0.05, local_steps=4, weights="adaptive", q=0.5), fed, 1,
               participation=part).extra[0]
    np.testing.assert_allclose(info["weight_ratio"], [1.0, 2.0, 4.0, 0.0], rtol=1e-15)
    np.testing.assert_allclose(info["weights"], [0.1, 0.4, 1.2, 0.0], rtol=1e-15)
    with pytest.raises(AssumptionError, match="client 2"):
        run(EFL(lr=0.05, local_steps=4, weights="adaptive", theta=3.0, q=0.5), fed, 1,
            participation=part)
    clipped = run(EFL(lr=0.05, local_steps=4, weights="adaptive", theta=3.0, on_excess="clip", q=0.5),
                  fed, 1, participation=part).extra[0]
    assert clipped["clipped"] == [2]
    np.testing.assert_allclose(clipped["weights"], [0.1, 0.4, 0.9, 0.0], rtol=1e-15)


def test_fisher_sums_keep_latest_reports():
    """u^k = diag(I_k) at the final model and v^k = u^k * w^k; silent clients keep their report."""
    fed = logistic(7)
    alg = EFL(lr=0.1, local_steps=3, lam=0.5, compression=None)
    rng = np.random.default_rng(0)
    state = alg.init(fed, np.zeros(fed.dim), rng)
    state, info = alg.round(state, fed, None, rng)
    W = info.extra["local_change"]                 # final local models (x_client = x0 = 0)
    np.testing.assert_allclose(state.u, fed.fisher_diag(W), rtol=0, atol=1e-15)
    np.testing.assert_allclose(state.V, (fed.fisher_diag(W) * W).sum(axis=0), rtol=0, atol=1e-14)
    part = IncompleteSteps(FullParticipation(), FixedSteps(np.array([0, 3, 3, 1])))
    before = state
    state, info = alg.round(state, fed, part, rng)
    np.testing.assert_array_equal(state.u[0], before.u[0])
    np.testing.assert_array_equal(state.v[0], before.v[0])
    assert not np.allclose(state.v[1], before.v[1])


@pytest.mark.parametrize("kwargs", [
    dict(q=0.0), dict(q=1.5), dict(lam=-1.0), dict(theta=0.5), dict(local_steps=0), dict(lr=-0.1),
    dict(weights="uniform"), dict(compression="topk"), dict(on_excess="ignore"),
    dict(server_update="fixed"), dict(lr_schedule=0.5), dict(error_feedback="yes"),
])
def test_bad_hyperparameters(kwargs):
    with pytest.raises(InvalidHyperparameterError):
        EFL(**kwargs)


def test_schedule_with_a_bad_value_is_rejected_when_used():
    fed = quadratic(0)
    with pytest.raises(InvalidHyperparameterError, match="lr_schedule"):
        run(EFL(lr=0.1, local_steps=2, lr_schedule=lambda tau: 1.0 - tau), fed, 3)


def test_local_steps_follow_the_fisher_elastic_objective_of_eq_2():
    """Round 2's local SGD on f_k(w) + (lam/2) sum_i (w - w_i)^T diag(I_i) (w - w_i), with w_i the
    final models of round 1 and I_i their Fisher diagonals (eq. 2), written out term by term."""
    fed = logistic(9)
    lam, lr, E = 0.7, 0.2, 3
    alg = EFL(lr=lr, local_steps=E, lam=lam, compression=None)
    rng = np.random.default_rng(0)
    state = alg.init(fed, np.zeros(fed.dim), rng)
    state, info1 = alg.round(state, fed, None, rng)
    w_prev = info1.extra["local_change"]                      # x_client was 0 in round 1
    I_prev = fed.fisher_diag(w_prev)
    start = state.x_client.copy()
    new, info2 = alg.round(state, fed, None, rng)
    for k in range(fed.n_clients):
        w = start.copy()
        for _ in range(E):
            g = fed.client_grad(w[None], [k])[0]
            for i in range(fed.n_clients):
                g = g + lam * I_prev[i] * (w - w_prev[i])
            w = w - lr * g
        np.testing.assert_allclose(info2.extra["local_change"][k], w - start, rtol=0, atol=1e-13)


def test_schedule_is_recorded_as_text_in_provenance():
    fed = quadratic(0)
    hist = run(EFL(lr=0.1, local_steps=2, lr_schedule=lambda tau: 1.0 / (tau + 1)), fed, 2)
    assert isinstance(hist.record["hyperparameters"]["lr_schedule"], str)


def test_without_error_feedback_every_message_is_the_compressed_change_alone():
    """error_feedback=False: the client sends ST(Delta^k) of its own change only,
    the server aggregates sum p^k ST(Delta^k) and broadcasts ST of that; no
    residual is carried (R^k = R^G = 0), so the client copy moves by exactly the
    broadcast and the message is recomputable from the round alone."""
    from fltheory.compression import st as st_compress

    fed = quadratic(3, weights=WEIGHTS)
    alg = EFL(lr=LR, local_steps=STEPS, lam=0.1, q=0.25, error_feedback=False)
    hist = run(alg, fed, 4, seed=1, x0=np.ones(fed.dim))
    assert np.all(hist.state.residuals == 0) and np.all(hist.state.residual_global == 0)
    client = np.ones(fed.dim)
    for info in hist.extra:
        np.testing.assert_array_equal(info["sent"], st_compress(info["local_change"], 0.25))
        p = fed.weights[info["active"]] * info["weight_ratio"]
        np.testing.assert_allclose(info["broadcast"], st_compress((p @ info["sent"])[None, :], 0.25)[0],
                                   rtol=0, atol=1e-15)
        client = client + info["broadcast"]
        np.testing.assert_allclose(info["client_model"], client, rtol=0, atol=1e-14)
    with_ef = run(EFL(lr=LR, local_steps=STEPS, lam=0.1, q=0.25), fed, 4, seed=1, x0=np.ones(fed.dim))
    assert np.max(np.abs(with_ef.x[-1] - hist.x[-1])) > 1e-6   # the residuals change the run
