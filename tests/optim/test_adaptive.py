"""AdaGrad, Adam, Yogi and the FedOpt server helpers against the formulas,
written out by hand and as readable per-coordinate loops."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory import optim


def _loop_reference(rule, G, lr, b1, b2, eps, nu0, bc):
    """Per-row, per-coordinate reference with Python floats.
    Returns steps (K, m, d) and the local-correction weights m_k (K, m, d)."""
    K, m, d = G.shape
    steps = np.zeros((K, m, d))
    weights = np.zeros((K, m, d))
    for i in range(m):
        for j in range(d):
            mu, nu = 0.0, nu0
            for k in range(1, K + 1):
                g = float(G[k - 1, i, j])
                mu = b1 * mu + (1 - b1) * g
                if rule == "adagrad":
                    nu = nu + g * g
                elif rule == "adam":
                    nu = b2 * nu + (1 - b2) * g * g
                else:
                    diff = nu - g * g
                    sgn = (diff > 0) - (diff < 0)
                    nu = nu - (1 - b2) * g * g * sgn
                mh = mu / (1 - b1 ** k) if bc else mu
                vh = nu / (1 - b2 ** k) if bc else nu
                steps[k - 1, i, j] = -lr * mh / (math.sqrt(vh) + eps)
                s1 = 1 / (1 - b1 ** k) if bc else 1.0
                weights[k - 1, i, j] = (1 - b1 ** k) * s1 / (math.sqrt(vh) + eps)
    return steps, weights


def _run(opt, G):
    s = opt.init(np.zeros(G.shape[1:]))
    steps, pre = [], []
    for g in G:
        u, s = opt.update(g, s, None)
        steps.append(u)
        pre.append(opt.precond(s))
    return np.array(steps), np.array(pre), s


def test_adagrad_first_step_by_hand():
    g = np.array([[3.0, -4.0], [0.5, 0.0]])
    opt = optim.adagrad(0.1, eps=1e-8, initial_accumulator=1.0)
    s = opt.init(np.zeros((2, 2)))
    u, s = opt.update(g, s, None)
    expected = -0.1 * g / (np.sqrt(1.0 + g * g) + 1e-8)
    np.testing.assert_allclose(u, expected, rtol=1e-15)
    np.testing.assert_allclose(opt.precond(s), 1 / (np.sqrt(1.0 + g * g) + 1e-8), rtol=1e-15)


def test_adam_first_step_with_bias_correction_is_signed_lr():
    """k = 1: mu_hat = g, nu_hat = g^2 so u = -lr g/(|g| + eps)."""
    g = np.array([[2.0, -0.25, 1e-3]])
    lr, eps = 0.01, 1e-8
    opt = optim.adam(lr, 0.9, 0.999, eps, bias_correction=True)
    u, s = opt.update(g, opt.init(np.zeros((1, 3))), None)
    np.testing.assert_allclose(u, -lr * g / (np.abs(g) + eps), rtol=1e-12)
    # without correction: mu = 0.1 g, nu = 0.001 g^2
    opt2 = optim.adam(lr, 0.9, 0.999, eps, bias_correction=False)
    u2, _ = opt2.update(g, opt2.init(np.zeros((1, 3))), None)
    np.testing.assert_allclose(u2, -lr * 0.1 * g / (np.sqrt(0.001) * np.abs(g) + eps), rtol=1e-12)


def test_yogi_first_step_by_hand():
    """nu_0 = 0.5: coordinate with g^2 = 4 > nu grows by (1-b2) g^2; with
    g^2 = 0.01 < nu it shrinks by (1-b2) g^2."""
    g = np.array([[2.0, 0.1]])
    lr, b1, b2, eps = 0.05, 0.9, 0.99, 1e-3
    opt = optim.yogi(lr, b1, b2, eps, initial_accumulator=0.5)
    u, s = opt.update(g, opt.init(np.zeros((1, 2))), None)
    nu = np.array([0.5 + 0.01 * 4.0, 0.5 - 0.01 * 0.01])
    np.testing.assert_allclose(s.nu, [nu], rtol=1e-15)
    np.testing.assert_allclose(u, -lr * 0.1 * g / (np.sqrt(nu) + eps), rtol=1e-13)
    # bias-corrected variant on its first step
    optb = optim.yogi(lr, b1, b2, eps, initial_accumulator=0.5, bias_correction=True)
    ub, _ = optb.update(g, optb.init(np.zeros((1, 2))), None)
    np.testing.assert_allclose(ub, -lr * g / (np.sqrt(nu / 0.01) + eps), rtol=1e-13)


CASES = [("adagrad", dict(lr=0.3, eps=1e-6, initial_accumulator=0.2), 0.0, 0.0, False),
         ("adam", dict(lr=0.1, b1=0.8, b2=0.95, eps=1e-7, bias_correction=True), 0.8, 0.95, True),
         ("adam", dict(lr=0.1, b1=0.8, b2=0.95, eps=1e-7, bias_correction=False), 0.8, 0.95, False),
         ("yogi", dict(lr=0.1, b1=0.5, b2=0.9, eps=1e-3, initial_accumulator=0.3), 0.5, 0.9, False),
         ("yogi", dict(lr=0.1, b1=0.5, b2=0.9, eps=1e-3, initial_accumulator=0.3,
                       bias_correction=True), 0.5, 0.9, True)]


@pytest.mark.parametrize("rule,kw,b1,b2,bc", CASES)
def test_multi_step_against_loop(rule, kw, b1, b2, bc):
    rng = np.random.default_rng(7)
    G = rng.normal(size=(7, 3, 4)) * rng.uniform(0.1, 3, size=(1, 1, 4))
    opt = getattr(optim, rule)(**kw)
    steps, pre, s = _run(opt, G)
    nu0 = kw.get("initial_accumulator", 0.0)
    ref, w = _loop_reference(rule, G, kw["lr"], b1, b2, kw["eps"], nu0, bc)
    np.testing.assert_allclose(steps, ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pre, w, rtol=1e-12)
    assert s.count.tolist() == [7, 7, 7]


@pytest.mark.parametrize("rule,kw,b1,b2,bc", CASES)
def test_correction_weight_sums_gradient_weights(rule, kw, b1, b2, bc):
    """Seed 001 section 5: Delta = -lr sum_j A^(j) g_j with
    A^(j) = sum_{k>=j} (1-b1) b1^(k-j) D_k, D_k = s_k/(sqrt(nu_hat_k)+eps)
    (b1 = 0: A^(j) = D_j); the optimizer's sum_k precond_k equals sum_j A^(j)."""
    rng = np.random.default_rng(11)
    K = 6
    G = rng.normal(size=(K, 1, 3))
    opt = getattr(optim, rule)(**kw)
    steps, pre, _ = _run(opt, G)
    _, w = _loop_reference(rule, G, kw["lr"], b1, b2, kw["eps"], kw.get("initial_accumulator", 0.0), bc)
    # D_k = w_k / (1 - b1^k) (w is the loop's m_k)
    D = np.array([w[k - 1] / (1 - b1 ** k) for k in range(1, K + 1)])
    A = np.array([sum((1 - b1) * b1 ** (k - j) * D[k] for k in range(j, K)) for j in range(K)])
    np.testing.assert_allclose(steps.sum(0), -kw["lr"] * (A * G).sum(0), rtol=1e-11)
    np.testing.assert_allclose(pre.sum(0), A.sum(0), rtol=1e-11)


@given(st.sampled_from(["sgd", "momentum", "nesterov", "adagrad", "adam", "yogi"]),
       st.floats(0.01, 2.0))
def test_updates_linear_in_lr(name, lr):
    rng = np.random.default_rng(5)
    G = rng.normal(size=(5, 2, 3))
    make = {"sgd": lambda a: optim.sgd(a), "momentum": lambda a: optim.momentum(a, 0.9),
            "nesterov": lambda a: optim.momentum(a, 0.9, nesterov=True),
            "adagrad": lambda a: optim.adagrad(a), "adam": lambda a: optim.adam(a),
            "yogi": lambda a: optim.yogi(a)}[name]
    s1, p1, _ = _run(make(lr), G)
    s2, p2, _ = _run(make(1.0), G)
    np.testing.assert_allclose(s1, lr * s2, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(p1, p2, rtol=1e-15)


@pytest.mark.parametrize("name", ["sgd", "momentum", "adagrad", "adam", "yogi", "nesterov"])
def test_constant_gradient_step_is_minus_lr_precond_times_g(name):
    """With a constant gradient g every step equals -lr m_k g (m_k = precond)."""
    lr = 0.2
    opt = {"sgd": optim.sgd(lr), "momentum": optim.momentum(lr, 0.7),
           "nesterov": optim.momentum(lr, 0.7, nesterov=True), "adagrad": optim.adagrad(lr),
           "adam": optim.adam(lr, 0.9, 0.99), "yogi": optim.yogi(lr)}[name]
    g = np.array([[0.5, -1.5, 2.0]])
    s = opt.init(np.zeros((1, 3)))
    for _ in range(5):
        u, s = opt.update(g, s, None)
        np.testing.assert_allclose(u, -lr * opt.precond(s) * g, rtol=1e-13)


# ---- server helpers (Reddi et al. 2021, Algorithm 2) ---------------------------------

def _reddi_loop(rule, deltas, x0, eta, b1, b2, tau):
    """Algorithm 2 of Reddi et al. in Delta form, one coordinate at a time."""
    x = x0.astype(float).copy()
    m = np.zeros_like(x)
    v = np.full_like(x, tau * tau)
    out = [x.copy()]
    for D in deltas:
        for j in range(x.size):
            m[j] = b1 * m[j] + (1 - b1) * D[j]
            if rule == "adagrad":
                v[j] = v[j] + D[j] ** 2
            elif rule == "adam":
                v[j] = b2 * v[j] + (1 - b2) * D[j] ** 2
            else:
                v[j] = v[j] - (1 - b2) * D[j] ** 2 * np.sign(v[j] - D[j] ** 2)
            x[j] = x[j] + eta * m[j] / (math.sqrt(v[j]) + tau)
        out.append(x.copy())
    return np.array(out)


@pytest.mark.parametrize("rule", ["adagrad", "adam", "yogi"])
def test_server_helpers_follow_reddi_algorithm_2(rule):
    rng = np.random.default_rng(2)
    deltas = rng.normal(size=(6, 4)) * 0.3
    x0 = rng.normal(size=4)
    eta, b1, b2, tau = 0.1, 0.9, 0.99, 1e-2
    opt = {"adagrad": optim.fedadagrad(eta, tau=tau, b1=b1),
           "adam": optim.fedadam(eta, b1, b2, tau), "yogi": optim.fedyogi(eta, b1, b2, tau)}[rule]
    x = x0[None, :].copy()
    s = opt.init(x)
    xs = [x[0].copy()]
    for D in deltas:
        u, s = opt.update(-D[None, :], s, x)          # pseudo-gradient g = -Delta
        x = x + u
        xs.append(x[0].copy())
    np.testing.assert_allclose(np.array(xs), _reddi_loop(rule, deltas, x0, eta, b1, b2, tau),
                               rtol=1e-12, atol=1e-14)


def test_server_sgd_one_is_fedavg():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(1, 3))
    Y = rng.normal(size=(5, 3))
    p = rng.uniform(0.5, 2, size=5)
    p /= p.sum()
    g = -(p[:, None] * (Y - x)).sum(0, keepdims=True)
    opt = optim.fedavg(1.0)
    u, _ = opt.update(g, opt.init(x), x)
    np.testing.assert_allclose(x + u, (p[:, None] * Y).sum(0, keepdims=True), rtol=1e-13)


def test_fedavgm_is_heavy_ball_on_pseudo_gradient():
    g = np.array([[1.0, -1.0]])
    opt = optim.fedavgm(0.5, 0.9)
    s = opt.init(np.zeros((1, 2)))
    u1, s = opt.update(g, s, None)
    u2, s = opt.update(g, s, None)
    np.testing.assert_allclose(u1, -0.5 * g, rtol=1e-15)
    np.testing.assert_allclose(u2, -0.5 * 1.9 * g, rtol=1e-15)


def _literal_recursion(rule, G, lr, b1, b2, eps, nu0, bc):
    """The update with the first moment always computed, mu = b1 mu + (1 - b1) g
    (the form used before b1 = 0 skipped it), in the same numpy operations."""
    mu = np.zeros(G.shape[1:])
    nu = np.full(G.shape[1:], nu0)
    out = []
    for k, g in enumerate(G, start=1):
        mu = b1 * mu + (1.0 - b1) * g
        if rule == "adagrad":
            nu = nu + g * g
        elif rule == "adam":
            nu = b2 * nu + (1.0 - b2) * (g * g)
        else:
            nu = nu - (1.0 - b2) * (g * g) * np.sign(nu - g * g)
        s1 = 1.0 / (1.0 - b1 ** float(k)) if bc else 1.0
        s2 = 1.0 / (1.0 - b2 ** float(k)) if bc else 1.0
        out.append(-lr * ((s1 * mu) / (np.sqrt(s2 * nu) + eps)))
    return np.array(out)


@pytest.mark.parametrize("rule,make,b2,eps,nu0,bc", [
    ("adagrad", lambda: optim.adagrad(0.3, eps=1e-8, initial_accumulator=0.1), 0.0, 1e-8, 0.1, False),
    ("adagrad", lambda: optim.fedadagrad(0.3, tau=1e-2), 0.0, 1e-2, 1e-4, False),
    ("adagrad", lambda: optim.fedadagrad(0.3, tau=1e-2, bias_correction=True), 0.0, 1e-2, 1e-4, True),
    ("adam", lambda: optim.adam(0.3, b1=0.0, b2=0.9), 0.9, 1e-8, 0.0, True),
    ("adam", lambda: optim.adam(0.3, b1=0.0, b2=0.9, bias_correction=False), 0.9, 1e-8, 0.0, False),
    ("yogi", lambda: optim.yogi(0.3, b1=0.0, b2=0.9), 0.9, 1e-3, 1e-6, False),
])
def test_b1_zero_skips_first_moment_bit_for_bit(rule, make, b2, eps, nu0, bc):
    """b1 = 0: the step uses g directly (mu is not computed and stays 0); the
    steps are bit-identical to the literal recursion with mu = 0 mu + 1 g."""
    rng = np.random.default_rng(3)
    G = rng.normal(size=(6, 3, 4)) * rng.uniform(0.01, 5.0, size=(1, 1, 4))
    steps, _, s = _run(make(), G)
    ref = _literal_recursion(rule, G, 0.3, 0.0, b2, eps, nu0, bc)
    assert steps.tobytes() == ref.tobytes()
    assert not np.any(s.mu)


@pytest.mark.parametrize("rule,kw,b1,b2,bc", CASES)
def test_update_is_pure_and_step_is_a_fresh_array(rule, kw, b1, b2, bc):
    """The update works in place on its own temporaries: the gradient and the old state
    must come back unchanged, and the returned step must share no memory with the
    gradient or the new state (the local loop scales fresh steps in place)."""
    rng = np.random.default_rng(13)
    opt = getattr(optim, rule)(**kw)
    s = opt.init(np.zeros((3, 4)))
    for _ in range(2):
        g = rng.normal(size=(3, 4))
        g_before = g.copy()
        old = [np.array(f, copy=True) for f in s]
        u, s_new = opt.update(g, s, None)
        np.testing.assert_array_equal(g, g_before)
        for f, f0 in zip(s, old):
            np.testing.assert_array_equal(f, f0)
        assert not np.shares_memory(u, g)
        assert not any(np.shares_memory(u, f) for f in s_new)
        assert not np.shares_memory(s_new.nu, s.nu)
        s = s_new


FUSED_CASES = [*((rule, kw) for rule, kw, *_ in CASES),
               ("adagrad", dict(lr=0.3)),
               ("adam", dict(lr=0.1, b1=0.0, b2=0.9)),
               ("yogi", dict(lr=0.1, b1=0.0, b2=0.9, bias_correction=True))]
RATES = {"unit": lambda m: 1.0, "scalar": lambda m: 0.7,
         "column": lambda m: np.linspace(0.3, 1.7, m)[:, None]}


def _uneven_state(opt, rng, m, d):
    """A state whose rows took 0, 1, 2, ... steps (so bias corrections differ by row)."""
    s = opt.init(rng.normal(size=(m, d)))
    for k in range(1, m):
        rows = np.arange(k, m)
        _, sub = opt.update(rng.normal(size=(rows.size, d)), optim.take_rows(s, rows), None)
        s = optim.put_rows(s, rows, sub)
    return s


#: every optimizer with fused steps (SGD's are not adaptive: only the bit-for-bit tests apply)
ALL_FUSED = [*FUSED_CASES, ("sgd", dict(lr=0.3))]


@pytest.mark.parametrize("rate", list(RATES))
@pytest.mark.parametrize("rule,kw", ALL_FUSED)
def test_fused_steps_equal_update_bit_for_bit(rule, kw, rate):
    """fused(state).step(g, y, rate) == (u, s = update(g, s, y); y += rate * u), bit for bit,
    on the point and every state field, from a state with per-row step counters; the given
    state and the gradient are left unchanged."""
    rng = np.random.default_rng(17)
    m, d = 5, 6
    opt = getattr(optim, rule)(**kw)
    s0 = _uneven_state(opt, rng, m, d)
    before = [np.array(f, copy=True) for f in s0]
    r = RATES[rate](m)
    Y_ref = rng.normal(size=(m, d))
    Y = Y_ref.copy()
    fused = opt.fused(s0)
    s_ref = s0
    for _ in range(6):
        g = rng.normal(size=(m, d)) * rng.uniform(0.01, 5.0, size=(1, d))
        g_before = g.copy()
        u, s_ref = opt.update(g, s_ref, Y_ref)
        Y_ref += r * u
        fused.step(g, Y, r)
        assert g.tobytes() == g_before.tobytes()
        assert Y.tobytes() == Y_ref.tobytes()
        for f, f_ref in zip(fused.state(), s_ref, strict=True):
            assert np.asarray(f).dtype == np.asarray(f_ref).dtype
            assert np.asarray(f).tobytes() == np.asarray(f_ref).tobytes()
    for f, f0 in zip(s0, before, strict=True):
        np.testing.assert_array_equal(f, f0)


@pytest.mark.parametrize("rule,kw", ALL_FUSED)
def test_fused_steps_are_freed_without_the_garbage_collector(rule, kw):
    """A fused-steps object holds (m, d) buffers: it must not sit in a reference cycle
    (e.g. a bound method stored on itself), which would keep them alive until the cyclic
    collector runs; a round then re-faults fresh memory pages every time."""
    import gc
    import weakref
    opt = getattr(optim, rule)(**kw)
    fused = opt.fused(opt.init(np.zeros((4, 3))))
    fused.step(np.ones((4, 3)), np.zeros((4, 3)), 1.0)
    ref = weakref.ref(fused)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del fused
        assert ref() is None
    finally:
        if enabled:
            gc.enable()


@pytest.mark.parametrize("nu0", [0.0, -0.0, 0.25])
@pytest.mark.parametrize("rule", ["adagrad", "adam", "yogi"])
def test_init_state_is_zero_moments_and_the_accumulator_bit_for_bit(rule, nu0):
    """init: count 0, mu = +0.0 and nu = nu_0 entrywise, down to the sign of a zero nu_0
    (the +0.0 fast path must not turn -0.0 into +0.0)."""
    opt = getattr(optim, rule)(0.1, initial_accumulator=nu0)
    X = np.arange(6.0).reshape(2, 3)
    s = opt.init(X)
    assert s.count.dtype == np.int64 and s.count.tolist() == [0, 0]
    assert s.mu.tobytes() == np.zeros_like(X).tobytes()
    assert s.nu.dtype == np.float64 and s.nu.tobytes() == np.full_like(X, nu0).tobytes()
    assert s.mu.shape == s.nu.shape == X.shape and not s.nu.flags.writeable    # constant views
    with pytest.raises(ValueError):          # their shared one-number buffer cannot be made writable
        s.nu.flags.writeable = True
    full = optim.put_rows(s, np.array([1]), optim.take_rows(s, np.array([0])))   # rows copy out writable
    assert full.nu.flags.writeable and full.nu.tobytes() == s.nu.tobytes()


def test_optimizers_without_fused_steps_say_so():
    """fused is optional: None for optimizers that only have the pure update."""
    assert optim.momentum(0.1).fused is None
    assert optim.preconditioned(0.1, np.ones(3)).fused is None
    assert optim.sgd(0.1).fused is not None and optim.adagrad(0.1).fused is not None
    assert optim.Optimizer(optim.sgd(0.1).init, optim.sgd(0.1).update, optim.sgd(0.1).precond).fused is None


@pytest.mark.parametrize("rule,kw", FUSED_CASES)
def test_precond_is_the_written_out_weight_bit_for_bit(rule, kw):
    """precond == where(count > 0, (1 - b1^k) s1 / (sqrt(s2 nu) + eps), 0) with k = max(count, 1),
    written out literally, bit for bit, on a state whose rows took 0, 1, 2, ... steps."""
    rng = np.random.default_rng(23)
    opt = getattr(optim, rule)(**kw)
    s = _uneven_state(opt, rng, 5, 4)
    b1 = kw.get("b1", 0.9 if rule != "adagrad" else 0.0)
    b2 = kw.get("b2", 0.999 if rule != "adagrad" else 0.0)
    eps = kw.get("eps", 1e-8 if rule != "yogi" else 1e-3)
    bc = kw.get("bias_correction", rule == "adam")
    k = np.maximum(s.count, 1).astype(np.float64)[:, None]
    s1 = 1.0 / (1.0 - b1 ** k) if bc else np.ones_like(k)
    s2 = 1.0 / (1.0 - b2 ** k) if bc else np.ones_like(k)
    ref = np.where((s.count > 0)[:, None], ((1.0 - b1 ** k) * s1) / (np.sqrt(s2 * s.nu) + eps), 0.0)
    assert s.count[0] == 0 and s.count[-1] == 4
    got = opt.precond(s)
    assert got.dtype == ref.dtype and got.tobytes() == ref.tobytes()


def _linear_oracle(A, b):
    """g(y) = y A - b rowwise, written into the caller's buffer (the local loop's oracle contract)."""
    def grad(Y, out):
        np.matmul(Y, A, out=out)
        out -= b
        return out
    return grad


@pytest.mark.parametrize("start", ["init", "uneven"])
@pytest.mark.parametrize("rate", list(RATES))
@pytest.mark.parametrize("rule,kw", FUSED_CASES)
def test_fused_run_equals_update_steps_bit_for_bit(rule, kw, rate, start):
    """fused(state).run(grad, buf, y, rate, K) == K times (u, s = update(grad(y), s, y); y += rate * u),
    bit for bit on the point and every state field: from init's constant start (plain AdaGrad
    then writes nu_0 + g*g into a fresh array) and from a state with per-row counters."""
    rng = np.random.default_rng(23)
    m, d, K = 5, 4, 7
    opt = getattr(optim, rule)(**kw)
    s0 = opt.init(rng.normal(size=(m, d))) if start == "init" else _uneven_state(opt, rng, m, d)
    A = rng.normal(size=(d, d)) * 0.3
    b = rng.normal(size=(m, d))
    grad = _linear_oracle(A, b)
    r = RATES[rate](m)
    Y_ref = rng.normal(size=(m, d))
    Y = Y_ref.copy()
    s_ref = s0
    for _ in range(K):
        u, s_ref = opt.update(grad(Y_ref, np.empty((m, d))), s_ref, Y_ref)
        Y_ref += r * u
    fused = opt.fused(s0)
    fused.run(grad, np.empty((m, d)), Y, r, K)
    assert Y.tobytes() == Y_ref.tobytes()
    for f, f_ref in zip(fused.state(), s_ref, strict=True):
        assert np.asarray(f).dtype == np.asarray(f_ref).dtype
        assert np.asarray(f).tobytes() == np.asarray(f_ref).tobytes()


@pytest.mark.parametrize("nu0", [0.0, -0.0, 0.25])
def test_fused_adagrad_without_steps_returns_its_start(nu0):
    """No step taken: the state is the start state (nu_0 entrywise, sign of a zero included),
    also after zero ``run`` steps; one step then gives nu_0 + g*g exactly."""
    opt = optim.adagrad(0.1, initial_accumulator=nu0)
    s = opt.init(np.zeros((3, 2)))
    fused = opt.fused(s)
    fused.run(_linear_oracle(np.eye(2), np.ones((3, 2))), np.empty((3, 2)), np.zeros((3, 2)), 1.0, 0)
    out = fused.state()
    assert out.count.tolist() == [0, 0, 0]
    assert out.nu.tobytes() == np.full((3, 2), nu0).tobytes()
    g = np.arange(6.0).reshape(3, 2)
    fused.step(g, np.zeros((3, 2)), 1.0)
    assert fused.state().nu.tobytes() == (np.full((3, 2), nu0) + g * g).tobytes()


def test_init_reuses_its_read_only_start_views_per_shape():
    """init hands out the same read-only constant views for one shape (never written: a state is
    a value) and fresh counters; other shapes get their own views."""
    opt = optim.adagrad(0.1, initial_accumulator=0.5)
    a, b = opt.init(np.zeros((3, 2))), opt.init(np.ones((3, 2)))
    assert a.nu is b.nu and a.mu is b.mu and a.count is not b.count
    c = opt.init(np.zeros((4, 2)))
    assert c.nu.shape == (4, 2) and c.nu.tobytes() == np.full((4, 2), 0.5).tobytes()
    for shape in [(k, 1) for k in range(1, 20)]:          # more shapes than kept: still right
        s = opt.init(np.zeros(shape))
        assert s.nu.shape == shape and not s.nu.flags.writeable and (s.nu == 0.5).all()


def test_fused_adagrad_copies_a_constant_view_of_writable_memory_at_once():
    """Only init's views of read-only buffers are read lazily at the first step; a broadcast view of
    a caller's writable array is copied when the fused steps are made (a later write to that array
    does not reach them), and blocks of init's state (take_rows) are still read lazily."""
    opt = optim.adagrad(0.1)
    acc = np.array([0.5])
    s = opt.init(np.zeros((3, 2)))._replace(nu=np.broadcast_to(acc, (3, 2)))
    fused = opt.fused(s)
    acc[0] = 100.0
    g = np.ones((3, 2))
    fused.step(g, np.zeros((3, 2)), 1.0)
    assert fused.state().nu.tobytes() == np.full((3, 2), 1.5).tobytes()
    assert opt.fused(optim.take_rows(opt.init(np.zeros((5, 2))), slice(0, 2))).start is not None
