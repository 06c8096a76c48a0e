"""FedOpt with local adaptivity (seed 001): vectorized == reference loop, FedAvg
reduction, closed-form fixed point, local/joint correction, server wiring, states."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fltheory import optim
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedopt import FedOpt
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.run import run
from fltheory.errors import InvalidHyperparameterError
from fltheory.participation import FullParticipation, IncompleteSteps, UniformSampling, UniformSteps

from ._problems import generated_quadratic, sampled_incomplete, sized_logistic

sampled = sampled_incomplete
quadratic = generated_quadratic
logistic = sized_logistic


def spd(N, d, seed):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, d, d)) / np.sqrt(d)
    return np.einsum("nij,nkj->nik", B, B) + 0.5 * np.eye(d)


CLIENT_OPTS = {
    "sgd": lambda N, d: optim.sgd(0.1),
    "adagrad": lambda N, d: optim.adagrad(0.05, initial_accumulator=0.1),
    "adam": lambda N, d: optim.adam(0.02),
    "momentum": lambda N, d: optim.momentum(0.05, 0.8),
    "precond-matrix": lambda N, d: optim.preconditioned(0.05, spd(N, d, 3)),
}
SETTINGS = [
    ("quad", lambda: quadratic(1), None),
    ("quad-noise-sampled", lambda: quadratic(2).with_gradient_noise(0.3), sampled(3)),
    ("logistic-minibatch-sampled", lambda: logistic(3).with_minibatch(4), sampled(3)),
]


@pytest.mark.parametrize("setting", SETTINGS, ids=[s[0] for s in SETTINGS])
@pytest.mark.parametrize("copt", list(CLIENT_OPTS))
@pytest.mark.parametrize("correction,client_state", [
    ("none", "restart"), ("local", "restart"), ("joint", "restart"),
    ("joint", "persist"), ("local", "synchronise"),
])
def test_vectorized_equals_reference(setting, copt, correction, client_state):
    _, make, part = setting
    fed = make()
    alg = FedOpt(client_optimizer=CLIENT_OPTS[copt](fed.n_clients, fed.dim),
                 server_optimizer=optim.adam(0.05), local_steps=np.arange(fed.n_clients) % 3 + 2,
                 client_lr_scale=np.linspace(0.6, 1.2, fed.n_clients), correction=correction,
                 client_state=client_state)
    x0 = np.linspace(-0.3, 0.4, fed.dim)
    hist = run(alg, fed, 5, participation=part, seed=7, x0=x0)
    ref = reference_run(alg, fed, 5, participation=part, seed=7, x0=x0)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)
    assert np.linalg.norm(hist.x[-1] - hist.x[0]) > 1e-3


@pytest.mark.parametrize("part", [None, sampled(3)])
def test_sgd_client_sgd_one_server_is_fedavg(part):
    fed = quadratic(4).with_gradient_noise(0.2)
    lr = np.linspace(0.05, 0.1, fed.n_clients)
    a = run(FedOpt(client_optimizer=optim.sgd(1.0), server_optimizer=optim.sgd(1.0),
                   client_lr_scale=lr, local_steps=4), fed, 6, participation=part, seed=3)
    b = run(FedAvg(lr=lr, local_steps=4), fed, 6, participation=part, seed=3)
    np.testing.assert_allclose(a.x, b.x, rtol=0, atol=1e-15)


def test_fixed_preconditioner_fixed_point_closed_form():
    """Full participation, client GD with fixed P_i, tau_i steps, no correction:
    x~ = (sum p B_i)^-1 sum p B_i x_i*, B_i = I - (I - eta_i P_i H_i)^tau_i (THEORY.md sec. 3)."""
    fed = quadratic(5, N=4, d=3, het=2.0)
    P = spd(4, 3, 8)
    scale = np.array([1.0, 0.5, 0.8, 1.2])
    tau = np.array([2, 5, 3, 4])
    eta = 0.05
    alg = FedOpt(client_optimizer=optim.preconditioned(eta, P), server_optimizer=optim.sgd(1.0),
                 local_steps=tau, client_lr_scale=scale)
    B = np.array([np.eye(3) - np.linalg.matrix_power(np.eye(3) - eta * s * Pi @ Hi, t)
                  for s, Pi, Hi, t in zip(scale, P, fed.H, tau)])
    xs = fed.client_optima()
    x_tilde = np.linalg.solve(np.einsum("i,ijk->jk", fed.weights, B),
                              np.einsum("i,ijk,ik->j", fed.weights, B, xs))
    hist = run(alg, fed, 1500, seed=0)
    np.testing.assert_allclose(hist.x[-1], x_tilde, rtol=0, atol=1e-9)
    assert np.linalg.norm(x_tilde - fed.optimum()) > 1e-2


def _fixed_point(alg, fed):
    """Fixed point of the deterministic round map x -> T(x) (restarted client states,
    server SGD, full participation) by a root solver, checked by one more round."""
    from scipy.optimize import root

    def T(x):
        state = alg.init(fed, x, np.random.default_rng(0))
        return alg.round(state, fed, None, np.random.default_rng(0))[0].x

    sol = root(lambda x: T(x) - x, fed.optimum(), method="hybr", tol=1e-15)
    assert np.linalg.norm(T(sol.x) - sol.x) < 1e-14, "root solver did not reach the fixed point"
    return sol.x


def test_adagrad_local_correction_bias_is_order_eta():
    """Seed 001 section 5: with local correction the fixed point tends to x* at rate
    O(eta); without it the AdaGrad bias does not vanish as eta -> 0."""
    fed = quadratic(6, N=4, d=3, het=2.0)
    x_star = fed.optimum()
    tau = np.array([2, 6, 3, 8])
    dist_corr, dist_none = [], []
    for eta in (0.04, 0.02, 0.01):
        common = dict(local_steps=tau, client_optimizer=optim.adagrad(eta, initial_accumulator=1.0),
                      server_optimizer=optim.sgd(1.0))
        xj = _fixed_point(FedOpt(correction="joint", **common), fed)
        xn = _fixed_point(FedOpt(correction="none", **common), fed)
        dist_corr.append(np.linalg.norm(xj - x_star))
        dist_none.append(np.linalg.norm(xn - x_star))
    r = np.array(dist_corr[1:]) / np.array(dist_corr[:-1])
    assert np.all(np.abs(r - 0.5) < 0.05), (dist_corr, r)            # O(eta): halves with eta
    assert min(dist_none) > 5 * dist_corr[0]                        # non-vanishing without
    assert abs(dist_none[-1] / dist_none[0] - 1) < 0.3


def test_joint_and_local_correction_share_the_fixed_point():
    fed = quadratic(7, N=4, d=3, het=2.0)
    common = dict(local_steps=np.array([2, 6, 3, 8]), server_optimizer=optim.sgd(1.0),
                  client_optimizer=optim.adagrad(0.03, initial_accumulator=1.0))
    xj = _fixed_point(FedOpt(correction="joint", **common), fed)
    # one local-correction round from the joint fixed point does not move it
    h = run(FedOpt(correction="local", **common), fed, 1, seed=0, x0=xj)
    assert np.linalg.norm(h.x[1] - xj) < 1e-12


def test_local_correction_by_hand_with_sgd():
    """Client SGD, tau_i steps, rate scale s_i: G_i = s_i tau_i, so the corrected
    change is Delta_i / (s_i tau_i) and joint correction divides by sum w_i / (s_i tau_i)."""
    fed = quadratic(8, N=3, d=2)
    s = np.array([0.5, 1.0, 2.0])
    tau = np.array([1, 2, 3])
    x0 = np.array([0.3, -0.2])
    deltas = []
    for i in range(3):
        y = x0.copy()
        for _ in range(tau[i]):
            y = y - 0.1 * s[i] * (fed.H[i] @ y - fed.e[i])
        deltas.append(y - x0)
    deltas = np.array(deltas)
    p = fed.weights
    kw = dict(client_optimizer=optim.sgd(0.1), server_optimizer=optim.sgd(1.0), local_steps=tau,
              client_lr_scale=s)
    local = run(FedOpt(correction="local", **kw), fed, 1, x0=x0).x[1]
    joint = run(FedOpt(correction="joint", **kw), fed, 1, x0=x0).x[1]
    tilde = deltas / (s * tau)[:, None]
    np.testing.assert_allclose(local, x0 + p @ tilde, rtol=0, atol=1e-15)
    np.testing.assert_allclose(joint, x0 + (p @ tilde) / (p @ (1 / (s * tau))), rtol=0, atol=1e-15)


def test_server_adagrad_step_by_hand_and_own_counter():
    """Server AdaGrad on g = -sum p_i Delta_i: x1 = x0 - lr g / (sqrt(g^2) + eps); the
    server state's step counter counts non-empty rounds."""
    fed = quadratic(9)
    x0 = np.linspace(-1, 1, fed.dim)
    one_round = run(FedAvg(lr=0.1, local_steps=3), fed, 1, x0=x0)
    g = -(one_round.x[1] - x0)
    alg = FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.adagrad(0.2, eps=1e-3),
                 local_steps=3)
    h = run(alg, fed, 1, x0=x0)
    np.testing.assert_allclose(h.x[1], x0 - 0.2 * g / (np.abs(g) + 1e-3), rtol=1e-14, atol=1e-15)
    never = IncompleteSteps(UniformSampling(2), UniformSteps(), inactive_prob=0.0)
    h3 = run(alg, fed, 3, participation=never, seed=1)
    assert int(h3.state.server.count[0]) == 3


def test_synchronised_states_are_shared_and_persisted_states_are_per_client():
    fed = quadratic(10)
    kw = dict(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.sgd(1.0), local_steps=3)
    sync = run(FedOpt(client_state="synchronise", **kw), fed, 2, participation=UniformSampling(3), seed=2)
    nu = sync.state.clients.nu
    np.testing.assert_allclose(nu, np.broadcast_to(nu[0], nu.shape), rtol=0, atol=0)
    pers = run(FedOpt(client_state="persist", **kw), fed, 1, participation=UniformSampling(3), seed=2)
    chosen = pers.clients[0]
    others = np.setdiff1d(np.arange(fed.n_clients), chosen)
    assert np.all(pers.state.clients.nu[others] == 0)        # never trained: initial accumulator
    assert np.all(pers.state.clients.nu[chosen] > 0)
    assert np.all(pers.state.clients.count[chosen] == 3)


def test_synchronised_counters_are_shared_so_adam_bias_correction_matches_the_moments():
    """After a synchronised round every client holds the participants' averaged
    moments AND their step count, so a client that never trained applies the
    bias correction 1/(1 - b^count) of the moments it holds, not the one of a
    fresh optimizer (count 0), which would overweight them by 1/(1 - b1)."""
    fed = quadratic(11)
    kw = dict(client_optimizer=optim.adam(0.05), server_optimizer=optim.sgd(1.0), local_steps=4,
              client_state="synchronise")
    hist = run(FedOpt(**kw), fed, 1, participation=UniformSampling(2), seed=5)
    count = hist.state.clients.count
    assert np.all(count == 4), count                     # participants took 4 steps each
    uneven = run(FedOpt(**kw), fed, 1, participation=sampled(3), seed=5)
    steps = uneven.steps[0]
    expected = int(np.rint(np.mean(steps)))
    assert np.all(uneven.state.clients.count == expected), (uneven.state.clients.count, steps)
    for part in (UniformSampling(2), sampled(3)):
        fast = run(FedOpt(**kw), fed, 4, participation=part, seed=7)
        ref = reference_run(FedOpt(**kw), fed, 4, participation=part, seed=7)
        np.testing.assert_allclose(fast.x, ref, rtol=0, atol=1e-12)


def test_synchronised_chain_shares_its_stage_counters_like_the_plain_optimizer():
    """A one-stage chain is the optimizer itself: its stage counter (``s0_count``) is a
    step counter shared under "synchronise" like Adam's ``count``, so clients that never
    trained apply the bias correction of the moments they hold (before, only a field named
    exactly ``count`` was shared: max |x_chain - x_adam| reached 0.069 after 4 rounds)."""
    fed = quadratic(11)
    kw = dict(server_optimizer=optim.sgd(1.0), local_steps=4, client_state="synchronise")
    for part in (UniformSampling(2), sampled(3)):
        plain = run(FedOpt(client_optimizer=optim.adam(0.05), **kw), fed, 4, participation=part, seed=7)
        chained = run(FedOpt(client_optimizer=optim.chain(optim.adam(0.05)), **kw), fed, 4,
                      participation=part, seed=7)
        np.testing.assert_allclose(chained.x, plain.x, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(chained.state.clients.s0_count, plain.state.clients.count)


def test_empty_round_changes_nothing_but_t():
    fed = quadratic(11)
    alg = FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.adam(0.1), local_steps=2)
    st0 = alg.init(fed, np.ones(fed.dim), np.random.default_rng(0))
    nobody = IncompleteSteps(UniformSampling(1), UniformSteps(), inactive_prob=0.0)

    class Empty(type(nobody).__mro__[-2]):      # a Participation that selects no one
        def draw(self, rng, t, local_steps):
            from fltheory.participation import Participants
            return Participants(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    st1, info = alg.round(st0, fed, Empty(), np.random.default_rng(0))
    assert st1.t == 1 and info.clients.size == 0
    np.testing.assert_array_equal(st1.x, st0.x)
    assert int(st1.server.count[0]) == 0


@pytest.mark.parametrize("kw,match", [
    (dict(client_optimizer="adagrad"), "client_optimizer"),
    (dict(server_optimizer=None), "server_optimizer"),
    (dict(correction="global"), "correction"), (dict(client_state="reset"), "client_state"),
    (dict(client_lr_scale=-1.0), "client_lr_scale"), (dict(client_lr_scale=0.0), "client_lr_scale"),
    (dict(local_steps=0), "local_steps"), (dict(aggregation="median"), "aggregation"),
])
def test_bad_hyperparameters(kw, match):
    base = dict(client_optimizer=optim.sgd(0.1), server_optimizer=optim.sgd(1.0))
    base.update(kw)
    with pytest.raises(InvalidHyperparameterError, match=match):
        FedOpt(**base)



@given(seed=st.integers(0, 2 ** 16), q=st.integers(1, 4),
       correction=st.sampled_from(["none", "local", "joint"]),
       client_state=st.sampled_from(["restart", "persist", "synchronise"]))
@settings(deadline=None)
def test_property_vectorized_equals_reference(seed, q, correction, client_state):
    fed = quadratic(seed % 7, N=4, d=3).with_gradient_noise(0.2)
    alg = FedOpt(client_optimizer=optim.yogi(0.05), server_optimizer=optim.fedavgm(1.0, 0.5),
                 local_steps=np.array([1, 3, 2, 4]), correction=correction, client_state=client_state)
    part = sampled(q)
    hist = run(alg, fed, 4, participation=part, seed=seed)
    ref = reference_run(alg, fed, 4, participation=part, seed=seed)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)


def _client_loop(kind, H, e, x0, lr, s, tau, b1=0.9, b2=0.99, eps=1e-3):
    """One client's restarted optimizer written out per step, with the local-correction
    sum G from THEORY.md sec. 2 in closed form (not from ``precond``):
    heavy ball b_k = b1 b_{k-1} + g_k, G = s sum_k (1 - b1^k)/(1 - b1);
    Nesterov step g_k + b1 b_k, G = s sum_k (1 + b1 (1 - b1^k)/(1 - b1));
    Adam (bias-corrected) G = s sum_k 1/(sqrt(v_hat_k) + eps);
    Yogi (no bias correction) G = s sum_k (1 - b1^k)/(sqrt(v_k) + eps)."""
    y = x0.copy()
    buf = np.zeros_like(x0)
    v = np.zeros_like(x0) if kind == "adam" else np.full_like(x0, 1e-6)
    G = np.zeros_like(x0)
    for k in range(1, tau + 1):
        g = H @ y - e
        if kind in ("heavy", "nesterov"):
            buf = b1 * buf + g
            step = buf if kind == "heavy" else g + b1 * buf
            c = (1 - b1 ** k) / (1 - b1)
            G = G + s * (c if kind == "heavy" else 1 + b1 * c)
        else:
            buf = b1 * buf + (1 - b1) * g
            if kind == "adam":
                v = b2 * v + (1 - b2) * g * g
                step = (buf / (1 - b1 ** k)) / (np.sqrt(v / (1 - b2 ** k)) + eps)
                G = G + s / (np.sqrt(v / (1 - b2 ** k)) + eps)
            else:
                v = v - (1 - b2) * g * g * np.sign(v - g * g)
                step = buf / (np.sqrt(v) + eps)
                G = G + s * (1 - b1 ** k) / (np.sqrt(v) + eps)
        y = y - lr * s * step
    return y - x0, G


@pytest.mark.parametrize("kind", ["heavy", "nesterov", "adam", "yogi"])
def test_local_and_joint_correction_by_hand_with_memory_optimizers(kind):
    """Delta~_i = Delta_i / G_i and g = -(sum p_i / G_i)^-1 sum p_i Delta~_i, with G_i the
    EMA-weighted sums written out above (seed 001 sec. 5, THEORY.md sec. 2)."""
    fed = quadratic(14, N=3, d=2)
    lr, s, tau = 0.05, np.array([0.5, 1.0, 2.0]), np.array([2, 4, 3])
    x0 = np.array([0.7, -0.4])
    opt = {"heavy": optim.momentum(lr, 0.9), "nesterov": optim.momentum(lr, 0.9, nesterov=True),
           "adam": optim.adam(lr, 0.9, 0.99, eps=1e-3),
           "yogi": optim.yogi(lr, 0.9, 0.99, eps=1e-3, initial_accumulator=1e-6)}[kind]
    pairs = [_client_loop(kind, fed.H[i], fed.e[i], x0, lr, s[i], tau[i]) for i in range(3)]
    delta = np.array([p[0] for p in pairs])
    G = np.array([p[1] for p in pairs])
    p = fed.weights
    kw = dict(client_optimizer=opt, server_optimizer=optim.sgd(1.0), local_steps=tau,
              client_lr_scale=s)
    none = run(FedOpt(correction="none", **kw), fed, 1, x0=x0).x[1]
    local = run(FedOpt(correction="local", **kw), fed, 1, x0=x0).x[1]
    joint = run(FedOpt(correction="joint", **kw), fed, 1, x0=x0).x[1]
    np.testing.assert_allclose(none, x0 + p @ delta, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(local, x0 + p @ (delta / G), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(joint, x0 + (p @ (delta / G)) / (p @ (1 / G)), rtol=1e-12, atol=1e-15)


def test_local_correction_full_matrix_fixed_point_closed_form():
    """Per-client full P_i, client GD, tau_i steps, scale s_i, local correction:
    Delta~_i = (s_i tau_i P_i)^-1 Delta_i with Delta_i = -B_i (x - x_i*), so the fixed point is
    x~ = (sum p C_i)^-1 sum p C_i x_i*, C_i = (s_i tau_i P_i)^-1 B_i (THEORY.md sec. 3);
    joint correction shares it, and one round from x~ stays there."""
    fed = quadratic(15, N=3, d=3, het=2.0)
    P = spd(3, 3, 4)
    s, tau, eta = np.array([0.6, 1.0, 1.4]), np.array([2, 5, 3]), 0.05
    eye = np.eye(3)
    C = np.array([np.linalg.solve(si * ti * Pi, eye - np.linalg.matrix_power(eye - eta * si * Pi @ Hi, ti))
                  for si, ti, Pi, Hi in zip(s, tau, P, fed.H)])
    p = fed.weights
    x_t = np.linalg.solve(np.einsum("i,ijk->jk", p, C), np.einsum("i,ijk,ik->j", p, C, fed.client_optima()))
    for correction in ("local", "joint"):
        alg = FedOpt(client_optimizer=optim.preconditioned(eta, P), server_optimizer=optim.sgd(1.0),
                     local_steps=tau, client_lr_scale=s, correction=correction)
        h = run(alg, fed, 1, x0=x_t)
        np.testing.assert_allclose(h.x[1], x_t, rtol=0, atol=1e-13)
        # and from elsewhere one round is x + sum p Delta~_i (local) by hand
        x0 = x_t + np.array([0.3, -0.2, 0.1])
        dt = np.einsum("ijk,ik->ij", C, fed.client_optima() - x0)        # (s tau P)^-1 B (x* - x)
        one = run(alg, fed, 1, x0=x0).x[1]
        if correction == "local":
            np.testing.assert_allclose(one, x0 + p @ dt, rtol=0, atol=1e-13)
        else:
            M = np.linalg.inv(s[:, None, None] * tau[:, None, None] * P)
            A = np.einsum("i,ijk->jk", p, M)
            np.testing.assert_allclose(one, x0 + np.linalg.solve(A, p @ dt), rtol=0, atol=1e-13)


def _masked_sgd(lr, zero_coordinate):
    """SGD whose preconditioner is 0 in one coordinate (steps there are 0 too)."""
    base = optim.sgd(lr)

    def update(g, state, params=None):
        g = np.array(g, dtype=float)
        g[:, zero_coordinate] = 0.0
        return base.update(g, state, params)

    def precond(state):
        P = base.precond(state).copy()
        P[:, zero_coordinate] = 0.0
        return P

    return optim.Optimizer(base.init, update, precond, "masked-sgd")


@pytest.mark.parametrize("correction", ["local", "joint"])
def test_zero_preconditioner_sum_raises_instead_of_nan(correction):
    """Delta~ = Delta / G with G = 0 in a coordinate would be 0/0 = NaN."""
    from fltheory.errors import DivergenceError
    fed = quadratic(16, N=3, d=2)
    alg = FedOpt(client_optimizer=_masked_sgd(0.1, 1), server_optimizer=optim.sgd(1.0),
                 local_steps=2, correction=correction)
    state = alg.init(fed, np.ones(2), np.random.default_rng(0))
    with pytest.raises(DivergenceError, match="preconditioner sum G of row 0"):
        alg.round(state, fed, None, np.random.default_rng(0))
    # without correction the same optimizer is fine (no division)
    plain = FedOpt(client_optimizer=_masked_sgd(0.1, 1), server_optimizer=optim.sgd(1.0), local_steps=2)
    x1 = run(plain, fed, 1, x0=np.ones(2)).x[1]
    assert np.isfinite(x1).all() and abs(x1[1] - 1.0) < 1e-15 and abs(x1[0] - 1.0) > 1e-3


def test_singular_full_preconditioner_sum_raises():
    from fltheory.algorithms.fedopt import corrected_changes
    from fltheory.errors import DivergenceError
    G = np.array([[[1.0, 1.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 2.0]]])
    with pytest.raises(DivergenceError, match="not invertible"):
        corrected_changes(np.ones((2, 2)), G, np.array([True, True]))
    dt, M = corrected_changes(np.ones((2, 2)), G, np.array([False, True]))   # row 0 did not step
    np.testing.assert_allclose(dt, [[0.0, 0.0], [0.5, 0.5]], rtol=0)


@pytest.mark.parametrize("client_state,correction", [("restart", "none"), ("persist", "none"),
                                                     ("persist", "local"), ("synchronise", "joint")])
@pytest.mark.parametrize("make", [lambda: optim.adagrad(0.05, initial_accumulator=0.1),
                                  lambda: optim.adam(0.02),
                                  lambda: optim.yogi(0.02, bias_correction=True),
                                  lambda: optim.sgd(0.01)],
                         ids=["adagrad", "adam", "yogi", "sgd"])
def test_fused_client_steps_give_the_pure_update_rounds_bit_for_bit(make, client_state, correction, monkeypatch):
    """The local loop's in-place client steps (``Optimizer.fused``) against the same
    optimizer without them (every step through the pure ``update``): identical models
    and client states, with two cache blocks (N d^2 doubles > 8 MB blocks), per-client rate
    scales, and uneven steps from partial participation in the later rounds."""
    from fltheory.algorithms.local import blocking
    from fltheory.problems.quadratic import QuadraticFederation

    N, d = 300, 60
    rng = np.random.default_rng(5)
    fed = QuadraticFederation(spd(N, d, 4), rng.standard_normal((N, d)))
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 23)
    assert len(blocking.row_blocks(fed, N, d)) > 1
    fused = make()
    plain = fused._replace(fused=None)

    def at_least_two(r, t, E):
        return r.integers(2, E + 1)
    scale = rng.uniform(0.5, 1.5, N)
    runs = []
    for opt in (fused, plain):
        alg = FedOpt(client_optimizer=opt, server_optimizer=optim.sgd(1.0), local_steps=4,
                     client_lr_scale=scale, correction=correction, client_state=client_state)
        r = np.random.default_rng(0)
        st = alg.init(fed, np.zeros(d), r)
        for _ in range(2):
            st, _ = alg.round(st, fed, None, r)
        for _ in range(2):                   # all clients (two blocks), 2 to 4 steps each
            st, _ = alg.round(st, fed, IncompleteSteps(FullParticipation(), at_least_two), r)
        st, _ = alg.round(st, fed, IncompleteSteps(UniformSampling(50), at_least_two), r)   # one gathered block
        runs.append(st)
    assert runs[0].x.tobytes() == runs[1].x.tobytes()
    if client_state != "restart":
        for f, g in zip(runs[0].clients, runs[1].clients, strict=True):
            assert np.asarray(f).tobytes() == np.asarray(g).tobytes()


@pytest.mark.parametrize("setting", SETTINGS, ids=[s[0] for s in SETTINGS])
@pytest.mark.parametrize("copt", ["adagrad", "adam"])
def test_fused_client_steps_bit_for_bit_on_stochastic_and_logistic_clients(setting, copt):
    """Fused against pure client steps on every reference setting (gradient noise, minibatches,
    sampled clients with incomplete steps: the oracle draws in the same order), persisted states,
    local correction: identical runs."""
    _, make_problem, part = setting
    histories = []
    for fused in (True, False):
        prob = make_problem()
        opt = CLIENT_OPTS[copt](prob.n_clients, prob.dim)
        if not fused:
            opt = opt._replace(fused=None)
        alg = FedOpt(client_optimizer=opt, server_optimizer=optim.adam(0.05), local_steps=3,
                     correction="local", client_state="persist")
        histories.append(run(alg, prob, 4, participation=part, seed=11, metrics=()))
    assert histories[0].x.tobytes() == histories[1].x.tobytes()


def test_fused_client_steps_replace_the_pure_update_while_every_client_is_active():
    """With full participation and every client doing all its steps, the local loop takes
    only the fused steps: the pure ``update`` is never called (counted through a wrapper),
    and it is called once per step again when ``fused`` is removed."""
    calls = [0]
    base = optim.adagrad(0.05)

    def counted(g, s, y):
        calls[0] += 1
        return base.update(g, s, y)

    fed = quadratic(3)
    for opt, expected in ((base._replace(update=counted), 0), (base._replace(update=counted, fused=None), 2 * 4)):
        calls[0] = 0
        run(FedOpt(client_optimizer=opt, server_optimizer=optim.sgd(1.0), local_steps=4), fed, 2, metrics=())
        assert calls[0] == expected


def test_restarted_clients_discard_the_final_state_without_changing_the_round(monkeypatch):
    """FedOpt with restarted clients asks ``local_descent`` not to join the blocks' final
    optimizer states (``keep_opt_state=False``); the blocked loop then returns None for it,
    and the models equal those of the loop that keeps it, bit for bit (two cache blocks)."""
    from fltheory.algorithms.local import blocking, local_descent
    from fltheory.problems.quadratic import QuadraticFederation

    N, d = 300, 60
    rng = np.random.default_rng(8)
    fed = QuadraticFederation(spd(N, d, 4), rng.standard_normal((N, d)))
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 23)
    assert len(blocking.row_blocks(fed, N, d)) > 1
    X0 = np.broadcast_to(rng.standard_normal(d), (N, d))
    args = (fed, X0, np.arange(N), np.full(N, 3), np.ones(N), None)
    opt = optim.adagrad(0.05)
    Y_keep, info_keep = local_descent(*args, optimizer=opt)
    Y_drop, info_drop = local_descent(*args, optimizer=opt, keep_opt_state=False)
    assert info_drop["opt_state"] is None and info_keep["opt_state"].nu.shape == (N, d)
    assert Y_drop.tobytes() == Y_keep.tobytes()


def test_user_fused_steps_with_a_kernel_attribute_are_called_through_step():
    """Only the library's own fused steps (optim.base.KernelSteps) hand out a kernel; a user's
    fused object that happens to have an attribute named ``kernel`` is stepped through its
    ``step`` (review finding: the bare loop called any ``kernel`` attribute)."""
    base = optim.sgd(0.05)

    class UserFused:
        kernel = np.ones(1)

        def __init__(self, state):
            self._state = state

        def step(self, grads, params, rate):
            params -= rate * (0.05 * grads)

        def state(self):
            return self._state

    user = base._replace(fused=UserFused)
    fed = generated_quadratic(0, N=6, d=3)
    runs = [run(FedOpt(client_optimizer=opt, server_optimizer=optim.sgd(1.0), local_steps=3), fed, 3, seed=0,
                metrics=()).x for opt in (user, base._replace(fused=None))]
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-14, atol=1e-15)
