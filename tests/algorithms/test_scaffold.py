"""SCAFFOLD: fast path vs the per-client reference loop, convergence to x* where
FedAvg stalls at its closed-form fixed point, the c = mean(c_i) invariant,
controls at the fixed point, communication, bad hyperparameters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.run import run
from fltheory.algorithms.scaffold import Scaffold
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.problems.quadratic import QuadraticFederation

from ._problems import RandomParticipation, shifted_logistic, spread_quadratic
from ._blocked import one_batch_and_blocked, three_rounds

quadratic = spread_quadratic
logistic = shifted_logistic


@pytest.mark.parametrize("option", ["I", "II"])
@pytest.mark.parametrize("kind", ["quadratic", "logistic"])
def test_fast_path_equals_reference_loop(option, kind):
    if kind == "quadratic":
        fed = quadratic(1).with_gradient_noise(np.array([0.1, 0.2, 0.3, 0.4]))
        lr = np.array([0.05, 0.08, 0.1, 0.06])
    else:
        fed = logistic(2).with_minibatch(3)
        lr = 0.3
    alg = Scaffold(lr=lr, local_steps=np.array([3, 4, 2, 5]), server_lr=0.9, option=option)
    part = RandomParticipation()
    x0 = np.linspace(-1, 1, fed.dim)
    fast = run(alg, fed, 6, participation=part, seed=7, x0=x0).x
    ref = reference_run(alg, fed, 6, participation=part, seed=7, x0=x0)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12)
    assert np.max(np.abs(fast[-1] - fast[0])) > 1e-3       # it moved


def fedavg_fixed_point(fed: QuadraticFederation, lr: float, K: int) -> np.ndarray:
    """THEORY.md section 3: x~ = (sum p_i B_i)^{-1} sum p_i B_i x_i*, B_i = I - (I - lr H_i)^K."""
    d = fed.dim
    B = np.eye(d) - np.array([np.linalg.matrix_power(np.eye(d) - lr * H, K) for H in fed.H])
    xi = fed.client_optima()
    lhs = np.einsum("i,ijk->jk", fed.weights, B)
    rhs = np.einsum("i,ijk,ik->j", fed.weights, B, xi)
    return np.linalg.solve(lhs, rhs)


@pytest.mark.parametrize("option", ["I", "II"])
def test_reaches_x_star_where_fedavg_stalls(option):
    fed = quadratic(3, spread=10.0)                 # equal weights: x* of the uniform average
    x_star = fed.optimum()
    lr, K, R = 0.1, 5, 150
    hist = run(Scaffold(lr=lr, local_steps=K, option=option), fed, R)
    assert np.linalg.norm(hist.x[-1] - x_star) <= 1e-10
    # the controls converge to the client gradients at x* (no drift left)
    np.testing.assert_allclose(hist.state.c_clients, fed.client_grad(x_star), rtol=0, atol=1e-9)
    avg = run(FedAvg(lr=lr, local_steps=K), fed, R)
    x_tilde = fedavg_fixed_point(fed, lr, K)
    np.testing.assert_allclose(avg.x[-1], x_tilde, rtol=0, atol=1e-9)
    stall = np.linalg.norm(avg.x[-1] - x_star)
    assert stall == pytest.approx(np.linalg.norm(x_tilde - x_star), rel=1e-8)
    assert stall > 1e-2                          # a fixed distance, far above SCAFFOLD's error


@given(seed=st.integers(0, 10_000), option=st.sampled_from(["I", "II"]))
def test_global_control_is_mean_of_client_controls(seed, option):
    fed = quadratic(seed, N=5, d=2).with_gradient_noise(0.5)
    gaps = []

    def check(t, state, info):
        gaps.append(np.max(np.abs(state.c - state.c_clients.mean(axis=0))))
        # clients that took no step keep their control
        untouched = np.setdiff1d(np.arange(5), info.clients[info.steps > 0])
        prev = check.prev
        np.testing.assert_array_equal(state.c_clients[untouched], prev[untouched])
        check.prev = state.c_clients.copy()

    check.prev = np.zeros((5, 2))
    run(Scaffold(lr=0.05, local_steps=4, option=option), fed, 8,
        participation=RandomParticipation(), seed=seed, callback=check)
    assert max(gaps) <= 1e-12


def test_option_two_control_is_mean_gradient_used():
    """Exact oracle, one round from x0: c_i^+ = (1/K) sum_k grad f_i(y_i^k)."""
    fed = quadratic(4)
    lr, K = 0.07, 4
    x0 = np.ones(fed.dim)
    hist = run(Scaffold(lr=lr, local_steps=K, option="II"), fed, 1, x0=x0)
    for i in range(fed.n_clients):
        y, grads = x0.copy(), []
        for _ in range(K):                        # c = c_i = 0 in round 1
            g = fed.H[i] @ y - fed.e[i]
            grads.append(g)
            y = y - lr * g
        np.testing.assert_allclose(hist.state.c_clients[i], np.mean(grads, axis=0), rtol=0, atol=1e-12)


def test_communication_counts_two_vectors_each_way():
    fed = quadratic(5)
    hist = run(Scaffold(lr=0.1, local_steps=2), fed, 2, x0=np.full(fed.dim, 3.0))
    comm = hist.communication[-1]
    N, d = fed.n_clients, fed.dim
    assert comm.floats_up == 2 * d * N
    assert comm.floats_down == 2 * d * N


@pytest.mark.parametrize("kwargs", [
    dict(lr=-0.1), dict(lr=0.0), dict(local_steps=0), dict(local_steps=1.5), dict(server_lr=0.0),
    dict(option="III"), dict(option=2), dict(lr=np.array([[0.1]])),
])
def test_bad_hyperparameters(kwargs):
    with pytest.raises(InvalidHyperparameterError):
        Scaffold(**kwargs)


def test_per_client_length_checked_against_problem():
    fed = quadratic(0)
    with pytest.raises(InvalidHyperparameterError, match="clients"):
        run(Scaffold(lr=np.array([0.1, 0.2])), fed, 1)


@pytest.mark.parametrize("option", ["I", "II"])
def test_reaches_x_star_with_client_sampling(option):
    """The fixed point is x* for any sampling pattern (exact gradients): S = 2 of 4 clients."""
    from fltheory.participation import UniformSampling

    fed = quadratic(12, spread=10.0)
    hist = run(Scaffold(lr=0.1, local_steps=5, option=option), fed, 400,
               participation=UniformSampling(2), seed=1)
    assert np.linalg.norm(hist.x[-1] - fed.optimum()) <= 1e-10


def test_fast_path_equals_reference_with_package_participation():
    from fltheory.participation import IncompleteSteps, UniformSampling, UniformSteps

    fed = quadratic(13).with_gradient_noise(0.2)
    part = IncompleteSteps(UniformSampling(3), UniformSteps(), inactive_prob=0.2)
    for option in ("I", "II"):
        alg = Scaffold(lr=0.05, local_steps=4, option=option)
        fast = run(alg, fed, 5, participation=part, seed=3, x0=np.ones(fed.dim)).x
        ref = reference_run(alg, fed, 5, participation=part, seed=3, x0=np.ones(fed.dim))
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("option", ["I", "II"])
def test_affine_round_map_fixed_point_is_x_star(option):
    """THEORY.md section 3: on quadratics the round map on (x, c, c_i) is affine; its fixed
    point (reachable from c = c_i = 0) has x = x* exactly and c_i = grad f_i(x*)."""
    from fltheory.theory.affine import affine_round_map, fixed_point

    fed = quadratic(14, spread=10.0)
    amap = affine_round_map(Scaffold(lr=0.1, local_steps=5, option=option), fed)
    fp = fixed_point(amap)
    np.testing.assert_allclose(fp.x, fed.optimum(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(fp.state.c_clients, fed.client_grad(fed.optimum()), rtol=0, atol=1e-9)
    assert fp.spectral_rate < 1.0


def test_one_local_step_makes_options_one_and_two_equal():
    """K = 1, exact gradients: option II gives c_i^+ = c_i - c + (x - (x - lr (g_i(x) + c - c_i)))/lr
    = g_i(x), which is option I; the two runs coincide (with client sampling)."""
    from fltheory.participation import UniformSampling

    fed = quadratic(15, spread=4.0)
    runs = [run(Scaffold(lr=0.2, local_steps=1, server_lr=0.7, option=o), fed, 12,
                participation=UniformSampling(2), seed=5) for o in ("I", "II")]
    np.testing.assert_allclose(runs[0].x, runs[1].x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(runs[0].state.c_clients, runs[1].state.c_clients, rtol=0, atol=1e-12)
    assert np.max(np.abs(runs[0].state.c_clients)) > 1e-2       # the controls did move


@pytest.mark.parametrize("option", ["I", "II"])
def test_full_in_order_exact_round_equals_reference_and_keeps_old_state(option):
    """Full participation in client order with the exact oracle: the round reuses c_i - c
    and y - x for the option II controls and takes the new control rows without a
    scatter; it must match the per-client reference loop and leave the previous
    state's arrays untouched and unshared."""
    fed = quadratic(4)
    alg = Scaffold(lr=0.07, local_steps=4, server_lr=0.8, option=option)
    x0 = np.linspace(-1, 1, fed.dim)
    fast = run(alg, fed, 5, seed=3, x0=x0).x
    ref = reference_run(alg, fed, 5, seed=3, x0=x0)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12)
    rng = np.random.default_rng(0)
    s0 = alg.init(fed, x0, rng)
    s1, _ = alg.round(s0, fed, None, rng)
    s2, _ = alg.round(s1, fed, None, rng)
    kept = [a.copy() for a in (s1.x, s1.c, s1.c_clients)]
    s3, _ = alg.round(s2, fed, None, rng)
    for a, b in zip((s1.x, s1.c, s1.c_clients), kept):
        np.testing.assert_array_equal(a, b)
    assert not np.shares_memory(s3.c_clients, s2.c_clients)
    # the invariant c = mean_i c_i survives the scatter-free path
    np.testing.assert_allclose(s3.c, s3.c_clients.mean(axis=0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("N, d", [(5, 1), (5, 3), (70, 1), (70, 3)])
def test_option_ii_server_sums_equal_the_plain_column_sums_bit_for_bit(N, d):
    """Option II with every client stepping: x^+ = x + (eta_g/N) sum_i (y_i - x) and
    c^+ = c + (1/N) sum_i (c_i^+ - c_i) with c_i^+ = (c_i - c) - (y_i - x)/(K eta), written
    with numpy's own ``sum(axis=0)`` from the same local models, equal the round bit for bit
    (few and many rows: numpy sum and the einsum column sums; d = 1 and 3)."""
    from fltheory.algorithms.local import LocalObjective, local_descent
    from fltheory.compression import Communication
    from fltheory.problems import QuadraticFederation
    rng = np.random.default_rng(N + d)
    B = rng.standard_normal((N, d, d))
    fed = QuadraticFederation(B @ np.swapaxes(B, 1, 2) / d + 0.5 * np.eye(d), rng.standard_normal((N, d)))
    alg = Scaffold(lr=0.07, local_steps=3, server_lr=0.9, option="II")
    state = alg.init(fed, rng.standard_normal(d), None)
    state, _ = alg.round(state, fed, None, None)                # non-zero controls
    new, info = alg.round(state, fed, None, None)
    x, c, C = state.x, state.c, state.c_clients
    shift = C - c
    Y, _ = local_descent(fed, np.broadcast_to(x, (N, d)), np.arange(N), np.full(N, 3), np.full(N, 0.07),
                         None, LocalObjective.linear(shift))
    delta = Y - x
    C_new = shift - delta / np.full(N, 3 * 0.07)[:, None]
    assert new.x.tobytes() == (x + (0.9 / N) * delta.sum(axis=0)).tobytes()
    assert new.c.tobytes() == (c + (C_new - C).sum(axis=0) / N).tobytes()
    assert new.c_clients.tobytes() == C_new.tobytes()
    up = np.hstack([delta, C_new - C])
    expected = Communication.measure(up, np.broadcast_to(np.concatenate([x, c]), (N, 2 * d)), up_kind="dense")
    assert info.communication == expected


@pytest.mark.parametrize("participation", [None, RandomParticipation()])
@pytest.mark.parametrize("field, bad", [("c_clients", (3, 2)), ("c_clients", (4, 3)), ("c_clients", (2,)),
                                        ("c", (3,)), ("c", (1, 2))])
def test_controls_of_the_wrong_shape_give_a_typed_error_naming_the_shapes(participation, field, bad):
    """A state whose client controls have the wrong number of clients (or whose controls
    have the wrong dimension) raises InvalidProblemError naming the shapes given and
    expected, not numpy's broadcast error, and nothing is computed."""
    fed = spread_quadratic(0, N=4, d=2)
    alg = Scaffold(lr=0.05, local_steps=2)
    rng = np.random.default_rng(0)
    state = alg.init(fed, np.zeros(2), rng)
    bad_state = dataclasses.replace(state, **{field: np.zeros(bad)})
    with pytest.raises(InvalidProblemError) as err:
        alg.round(bad_state, fed, participation, rng)
    message = str(err.value)
    assert "(4, 2)" in message and "(2,)" in message and str(bad) in message
    assert isinstance(err.value, ValueError)
    alg.round(state, fed, participation, rng)                  # the state of this problem still works


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("option, lr, steps, part", [
    ("II", 0.07, 3, None),                                       # one k and rate: the scalar division
    ("II", np.linspace(0.03, 0.08, 23), 1 + np.arange(23) % 4, None),   # per-client rates and steps
    ("II", 0.07, 3, RandomParticipation()),                      # partial: some clients do no step
    ("I", np.linspace(0.03, 0.08, 23), 3, None),
])
def test_blocked_rounds_equal_one_batch_rounds_bit_for_bit(monkeypatch, threads, option, lr, steps, part):
    """The per-row work of the round (y - x, c_i^+, c_i^+ - c_i) runs in the blocks of the local
    loop on its threads: states and communication must be the bits of the one-batch round
    (23 clients in blocks of about 4 rows)."""
    from fltheory.problems.generators import random_quadratic

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=12)
    alg = Scaffold(lr=lr, local_steps=steps, server_lr=0.9, option=option)

    def rounds():
        return three_rounds(alg, fed, part, 13,
                            lambda state, info: (state.x.tobytes(), state.c.tobytes(),
                                                 state.c_clients.tobytes(), info.communication))

    one, many = one_batch_and_blocked(monkeypatch, fed, threads, rounds)
    assert one == many


@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("option", ["I", "II"])
def test_a_diverging_round_raises_before_any_state_and_keeps_the_old_one(monkeypatch, blocked, option):
    """Local steps overflowing (rate 1e100) raise DivergenceError from the local loop (one batch,
    or blocks whose per-row work skips non-finite rows), with no RuntimeWarning, and the input
    state is left as it was."""
    import warnings

    from fltheory.algorithms.local import blocking
    from fltheory.errors import DivergenceError
    from fltheory.problems.generators import random_quadratic

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=20)
    lr = np.full(23, 0.05)
    lr[9] = 1e100
    alg = Scaffold(lr=lr, local_steps=60, option=option)
    rng = np.random.default_rng(21)
    state, _ = Scaffold(lr=0.05, local_steps=2, option=option).round(
        alg.init(fed, np.ones(fed.dim), rng), fed, None, rng)
    kept = [a.copy() for a in (state.x, state.c, state.c_clients)]
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * fed.dim * fed.dim * 4 if blocked else 2 ** 62)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DivergenceError, match="non-finite"):
            alg.round(state, fed, None, rng)
    for a, b in zip((state.x, state.c, state.c_clients), kept, strict=True):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("option", ["I", "II"])
@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_integer_and_float32_client_controls_give_the_float64_round(option, dtype):
    """Client controls given as integers or float32 (a hand-built state) are read as the full
    pass c_i - c reads them: the round equals the round from the same controls in float64, bit
    for bit, and the new controls are float64."""
    fed = spread_quadratic(1, N=5, d=3)
    alg = Scaffold(lr=0.05, local_steps=3, option=option)
    rng = np.random.default_rng(0)
    s0 = alg.init(fed, np.ones(fed.dim), rng)
    C = np.arange(fed.n_clients * fed.dim).reshape(fed.n_clients, fed.dim) % 3 - 1
    given_state = dataclasses.replace(s0, c_clients=C.astype(dtype), c=np.zeros(fed.dim))
    wide_state = dataclasses.replace(s0, c_clients=C.astype(np.float64), c=np.zeros(fed.dim))
    a, _ = alg.round(given_state, fed, None, np.random.default_rng(1))
    b, _ = alg.round(wide_state, fed, None, np.random.default_rng(1))
    for u, v in zip((a.x, a.c, a.c_clients), (b.x, b.c, b.c_clients)):
        assert u.dtype == np.float64
        np.testing.assert_array_equal(u, v)


def test_complex_client_controls_are_a_typed_error():
    fed = spread_quadratic(1, N=5, d=3)
    alg = Scaffold(lr=0.05, local_steps=3)
    rng = np.random.default_rng(0)
    s0 = alg.init(fed, np.ones(fed.dim), rng)
    bad = dataclasses.replace(s0, c_clients=s0.c_clients.astype(complex))
    with pytest.raises(InvalidProblemError, match=r"state.c_clients must hold real numbers.*complex128"):
        alg.round(bad, fed, None, rng)
