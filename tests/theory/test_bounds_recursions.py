"""The unrolling lemmas (Stich's Lemma 3 as LocalAdaptivity Lemma 3; SCAFFOLD-v1 Lemma 5 in our explicit
constant-step form) held to worst-case sequences, and LocalAdaptivity Theorem 1's final rate (eq. 7) and its
SGD special case (eq. 77) held to the exact errors computed by experiments/local_adaptivity_rates.py, which
are held here to Monte Carlo runs of FedOpt / FedAvg.

Worst case of a recursion r_{t+1} <= (1 - a g_t) r_t - b g_t s_t + c g_t^2: equality, with s_t any
non-negative sequence that keeps r_{t+1} >= 0 (s_t = u_t ((1 - a g_t) r_t + c g_t^2) / (b g_t), u_t in
[0, 1]); any sequence satisfying the inequality has a smaller r_{T+1} and Psi is monotone in r.  Random u
samples that family; the exact supremum over it (a backward recursion, see supremum_coefficients) is what
the *_exact_supremum_* tests hold the lemmas to.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments.local_adaptivity_rates import fedopt_sgd_errors, identical_clients, sgd_errors
from fltheory.algorithms import FedOpt
from fltheory import optim
from fltheory.errors import FLTheoryError
from fltheory.problems.generators import random_quadratic
from fltheory.theory import fedopt_quadratic_fixed_point
from fltheory.theory.bounds import sgd_operator_constants
from fltheory.theory.bounds.recursions import (constant_step_bound, constant_step_choice, constant_step_rate,
                                               constant_step_weights, fedopt_theorem1_rate, psi, stich_bound,
                                               stich_schedule, weighted_output)


def worst_case(r0, a, b, c, gammas, u):
    """r_0..r_{T+1} and s_0..s_T of the equality recursion."""
    r = [r0]
    s = []
    for g, ut in zip(gammas, u, strict=True):
        room = (1 - a * g) * r[-1] + c * g * g
        st_ = ut * room / (b * g) if b > 0 else 0.0
        s.append(st_)
        r.append(room - b * g * st_)
    return np.array(r), np.array(s)


@st.composite
def recursions(draw):
    d = draw(st.floats(0.1, 10.0))
    a = d * draw(st.floats(1e-3, 1.0))
    b = draw(st.sampled_from([0.0, 0.5, 3.0]))
    c = draw(st.sampled_from([0.0, 1e-6, 1.0, 100.0]))
    r0 = draw(st.floats(0.0, 1e4))
    T = draw(st.integers(1, 400))
    seed = draw(st.integers(0, 2**31 - 1))
    return r0, a, b, c, d, T, np.random.default_rng(seed).uniform(0, 1, T + 1)


@given(recursions())
def test_stich_lemma_holds_on_worst_case_sequences(case):
    r0, a, b, c, d, T, u = case
    gamma, w = stich_schedule(T, a, d)
    assert np.all(gamma <= 1 / d + 1e-15) and np.all(w >= 0) and w.sum() > 0
    r, s = worst_case(r0, a, b, c, gamma, u)
    assert psi(r, s, w, a, b) <= stich_bound(r0, c, T, a, d) * (1 + 1e-12) + 1e-300


def supremum_coefficients(gamma, w, a):
    """(log alpha_0, beta_0) with sup Psi_T = alpha_0 r_0 + beta_0 c over ALL admissible sequences (b > 0).

    Independent route (derived here): with s_t = u_t room_t / (b g_t), room_t = (1 - a g_t) r_t + c g_t^2 and
    r_{t+1} = (1 - u_t) room_t, Psi_T is affine in each u_t separately, so its supremum over [0, 1]^{T+1} is at a
    vertex and the value function V_t(r) = max over u_t..u_T is affine, V_t(r) = alpha_t r + beta_t c, with
    alpha_{T+1} = a, beta_{T+1} = 0 and m_t = max(w_t / (W_T g_t), alpha_{t+1}) (u_t = 1 pays w_t room_t /
    (W_T g_t), u_t = 0 hands room_t on): alpha_t = m_t (1 - a g_t), beta_t = beta_{t+1} + m_t g_t^2.
    alpha is kept as a logarithm (it underflows for long runs).
    """
    W = float(np.sum(w))
    log_alpha, beta = math.log(a), 0.0
    for g, wt in zip(gamma[::-1], w[::-1], strict=True):
        log_m = max(math.log(wt / (W * g)) if wt > 0 else -math.inf, log_alpha)
        log_alpha = log_m + (math.log1p(-a * g) if a * g < 1 else -math.inf)
        beta += math.exp(log_m) * g * g
    return log_alpha, beta


@pytest.mark.parametrize("ratio", [1.0, 0.999, 0.5, 0.1, 0.01, 0.001])
@pytest.mark.parametrize("T", [1, 2, 3, 7, 10, 11, 50, 999, 1000, 1001, 20000])
def test_stich_bound_holds_for_the_exact_supremum_over_all_sequences(ratio, T):
    # The lemma's two constants are checked separately: sup Psi_T = alpha_0 r_0 + beta_0 c must satisfy
    # alpha_0 <= 32 d exp(-a T / (2 d)) and beta_0 <= 36 / (a T).  Measured worst ratios over a wider grid
    # (a/d in [1e-3, 1], T in 1..20000): 0.016 for the first constant, 0.333 for the second.
    a, d = ratio * 2.5, 2.5
    gamma, w = stich_schedule(T, a, d)
    log_alpha, beta = supremum_coefficients(gamma, w, a)
    assert log_alpha <= math.log(32 * d) - a * T / (2 * d) + 1e-12
    assert beta <= 36 / (a * T) * (1 + 1e-12)
    # the supremum is attained at a vertex: brute force over all u in {0, 1}^{T+1} for short runs
    if T <= 7:
        best = max(psi(*worst_case(1.0, a, 1.0, 1.0, gamma, np.array(u, dtype=float)), w, a, 1.0)
                   for u in itertools.product([0, 1], repeat=T + 1))
        assert best == pytest.approx(math.exp(log_alpha) + beta, rel=1e-12)
    # and it dominates random admissible sequences (b = 1, c = 1, r0 = 1)
    if T <= 1000:
        rng = np.random.default_rng(T)
        for _ in range(5):
            r, s = worst_case(1.0, a, 1.0, 1.0, gamma, rng.integers(0, 2, T + 1).astype(float))
            assert psi(r, s, w, a, 1.0) <= math.exp(log_alpha) + beta + 1e-12 * (1 + beta)


@given(recursions())
def test_constant_step_lemma_telescopes_and_gives_the_stated_rate(case):
    r0, a, b, c, d, T, u = case
    if a == d:
        a = 0.999 * d                                  # weights (1 - a gamma)^{-(t+1)} need a gamma < 1
    gamma = constant_step_choice(r0, c, T, a, d)
    assert 0 < gamma <= 1 / d
    w = constant_step_weights(T, a, gamma)
    r, s = worst_case(r0, a, b, c, np.full(T + 1, gamma), u)
    if not np.all(np.isfinite(w)):
        return
    value = psi(r, s, w, a, b)
    assert value <= constant_step_bound(r0, c, T, a, gamma) * (1 + 1e-9) + 1e-300
    assert constant_step_bound(r0, c, T, a, gamma) <= constant_step_rate(r0, c, T, a, d) * (1 + 1e-12)


def test_constant_step_identity_is_tight_when_b_is_zero():
    # b = 0, equality: (w_T/(g W_T)) r_{T+1} = r_0/(g W_T) + c g exactly (the telescoped identity)
    a, g, c, r0, T = 0.3, 0.5, 2.0, 7.0, 25
    w = constant_step_weights(T, a, g)
    r, _ = worst_case(r0, a, 0.0, c, np.full(T + 1, g), np.zeros(T + 1))
    W = w.sum()
    assert w[-1] / (g * W) * r[-1] == pytest.approx(r0 / (g * W) + c * g, rel=1e-12)


def test_stich_schedule_by_hand():
    gamma, w = stich_schedule(3, 1.0, 10.0)              # T = 3 <= d/a = 10: constant 1/d
    np.testing.assert_allclose(gamma, 0.1)
    np.testing.assert_allclose(w, 0.9 ** -np.arange(1.0, 5.0))
    gamma, w = stich_schedule(10, 1.0, 2.0)              # t0 = 5, kappa = 4
    np.testing.assert_allclose(gamma, [0.5] * 5 + [2 / (4 + k) for k in range(6)])
    np.testing.assert_allclose(w, [0.0] * 5 + [(4 + k) ** 2 for k in range(6)])


def test_output_weights_are_positive_and_the_average_is_exact():
    w = constant_step_weights(4, 0.2, 0.5)
    assert np.all(w > 0) and np.all(np.diff(w) > 0)      # later iterates weigh more
    xs = np.arange(10.0).reshape(5, 2)
    np.testing.assert_allclose(weighted_output(xs, w), (w[:, None] * xs).sum(axis=0) / w.sum(), rtol=1e-15)
    with pytest.raises(FLTheoryError):
        weighted_output(xs, -w)
    with pytest.raises(FLTheoryError):
        constant_step_weights(4, 2.0, 0.5)


def test_bad_constants_raise_typed_errors():
    for call in (lambda: stich_schedule(0, 1.0, 1.0), lambda: stich_schedule(5, 2.0, 1.0),
                 lambda: stich_bound(-1.0, 0.0, 5, 1.0, 1.0), lambda: constant_step_choice(1.0, -1.0, 5, 1.0, 1.0),
                 lambda: fedopt_theorem1_rate(1, rho=0.5, phi=0.0, weights=[1.0], init_dist2=1.0),
                 lambda: psi([1.0], [1.0], [1.0], 1.0, 1.0)):
        with pytest.raises(FLTheoryError):
            call()


# --- LocalAdaptivity Theorem 1, eq. 7 ----------------------------------------------------------------------

def _eq7_case(R, sigma2_value, lr=(0.3, 0.2, 0.4)):
    fed = random_quadratic(3, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=3, constants="clients")
    lr, tau = np.array(lr), np.array([2, 3, 1])
    sigma2 = np.full(3, sigma2_value)
    rho, phi, _ = sgd_operator_constants(lr, tau, fed.client_mu, fed.client_L, sigma2, form="squared")
    xt = fedopt_quadratic_fixed_point(fed, lr, tau).x
    x0 = xt + 5.0
    res = fedopt_theorem1_rate(R, rho=rho, phi=phi, weights=fed.weights,
                               init_dist2=float(np.sum((x0 - xt) ** 2)))
    return fed, lr, tau, sigma2, x0, xt, res


@pytest.mark.parametrize("R", [2, 5, 30, 300])
@pytest.mark.parametrize("sigma2", [0.0, 1.0])
def test_eq7_rate_bounds_the_exact_error_under_the_lemma_schedule(R, sigma2):
    fed, lr, tau, s2, x0, xt, res = _eq7_case(R, sigma2)
    assert res.valid, str(res)
    gamma = res.terms["server_lr"]
    exact = fedopt_sgd_errors(fed, lr, tau, s2, gamma[: R], x0, xt)
    assert exact[R] <= res.value
    # the one-step recursion (eq. 61) the rate is unrolled from holds at every round
    a, c = res.terms["a"], res.terms["noise"]
    assert np.all(exact[1:] <= (1 - gamma[:R] * a) * exact[:-1] + gamma[:R] ** 2 * c + 1e-12)


def test_eq7_exact_error_matches_fedopt_runs_with_the_schedule():
    # the exact second moment above is the algorithm's: Monte Carlo of FedOpt rounds with server SGD at
    # the schedule's rates (one FedOpt per round; server SGD keeps no state between rounds)
    R, M = 8, 300
    fed, lr, tau, s2, x0, xt, res = _eq7_case(R, 1.0, lr=(0.3, 0.3, 0.3))   # FedOpt: one client rate
    noisy = fed.with_gradient_noise(s2)
    gamma = res.terms["server_lr"][:R]
    exact = fedopt_sgd_errors(fed, lr, tau, s2, gamma, x0, xt)
    algs = [FedOpt(client_optimizer=optim.sgd(0.3), server_optimizer=optim.sgd(float(g)),
                   local_steps=tau) for g in gamma]
    rng = np.random.default_rng(0)
    sq = np.empty((M, R + 1))
    for m in range(M):
        state = algs[0].init(noisy, x0, rng)
        sq[m, 0] = np.sum((state.x - xt) ** 2)
        for t, alg in enumerate(algs):
            state, _ = alg.round(state, noisy, None, rng)
            sq[m, t + 1] = np.sum((state.x - xt) ** 2)
    se = sq.std(axis=0, ddof=1) / math.sqrt(M)
    assert np.all(np.abs(sq.mean(axis=0) - exact) <= 5 * se + 1e-12)


def test_eq7_rate_is_order_noise_over_R():
    # the bound's noise term decays as 1/R: R times the bound tends to 36 c / a^2 once exp(-a R/2) is gone
    _, _, _, _, _, _, r1 = _eq7_case(4000, 1.0)
    _, _, _, _, _, _, r2 = _eq7_case(8000, 1.0)
    a, c = r1.terms["a"], r1.terms["noise"]
    assert r1.value * 3999 == pytest.approx(36 * c / a**2, rel=1e-6)
    assert r2.value / r1.value == pytest.approx(3999 / 7999, rel=1e-6)


# --- LocalAdaptivity App. C, special case SGD (eq. 77) ------------------------------------------------------

def _identical_clients(N, seed=0):
    return identical_clients(N, 3, 2.0, 0.5, np.random.default_rng(seed))


@pytest.mark.parametrize("N", [1, 4, 16])
def test_eq77_rate_bounds_the_exact_error_and_scales_as_one_over_N_t(N):
    from fltheory.theory.bounds.recursions import sgd_special_case_rate
    fed = _identical_clients(N)
    x0 = fed.optimum() + 3.0
    R, s2 = 3000, 2.0
    res = sgd_special_case_rate(R, mu=0.5, L=2.0, sigma2=s2, n_clients=N,
                                init_dist2=float(np.sum((x0 - fed.optimum()) ** 2)))
    exact = sgd_errors(fed, res.terms["client_lr"], s2, x0)
    assert np.all(exact <= res.terms["per_round"] * (1 + 1e-12))
    # late rounds: E||x_t - x*||^2 ~ C sigma^2 / (N t), C independent of N
    late = exact[-1] * N * (R + res.terms["gamma"])
    ref = sgd_errors(_identical_clients(1), res.terms["client_lr"], s2, x0)[-1] * (R + res.terms["gamma"])
    assert late == pytest.approx(ref, rel=0.05)
    # the noise term 4 sigma^2 / (mu^2 N (t + gamma)) is within a constant of the truth (here ~0.18 of it)
    assert exact[-1] > 0.1 * 4 * s2 / (0.25 * N * (R + res.terms["gamma"]))


def test_eq77_exact_errors_match_fedavg_runs_with_the_decaying_rate():
    from fltheory.algorithms import FedAvg
    from fltheory.theory.bounds.recursions import sgd_special_case_rate
    N, R, M, s2 = 4, 10, 400, 2.0
    fed = _identical_clients(N)
    x0 = fed.optimum() + 3.0
    res = sgd_special_case_rate(R, mu=0.5, L=2.0, sigma2=s2, n_clients=N, init_dist2=27.0)
    rates = res.terms["client_lr"]
    exact = sgd_errors(fed, rates, s2, x0)
    noisy = fed.with_gradient_noise(s2)
    algs = [FedAvg(lr=float(eta), local_steps=1) for eta in rates]
    rng = np.random.default_rng(1)
    sq = np.empty((M, R + 1))
    for m in range(M):
        state = algs[0].init(noisy, x0, rng)
        sq[m, 0] = np.sum((state.x - fed.optimum()) ** 2)
        for t, alg in enumerate(algs):
            state, _ = alg.round(state, noisy, None, rng)
            sq[m, t + 1] = np.sum((state.x - fed.optimum()) ** 2)
    se = sq.std(axis=0, ddof=1) / math.sqrt(M)
    assert np.all(np.abs(sq.mean(axis=0) - exact) <= 5 * se + 1e-12)


@pytest.mark.parametrize("a_gamma", [0.9, 0.5, 0.1, 0.01])
@pytest.mark.parametrize("T", [0, 1, 5, 100, 3000])
def test_constant_step_bound_holds_for_the_exact_supremum_over_all_sequences(a_gamma, T):
    # (U) against the exact worst case (supremum_coefficients): r_0 term alpha_0 <= exp(-a gamma (T+1)) / gamma,
    # c term beta_0 <= gamma; the telescoped identity makes the c term tight when no s_t is paid (b = 0)
    a, gamma = 0.7, a_gamma / 0.7
    w = (1 - a * gamma) ** (T - np.arange(T + 1.0))            # w_t / w_T (constant_step_weights overflows)
    if T <= 100:
        np.testing.assert_allclose(w, constant_step_weights(T, a, gamma) / constant_step_weights(T, a, gamma)[-1],
                                   rtol=1e-12)
    log_alpha, beta = supremum_coefficients(np.full(T + 1, gamma), w, a)
    assert log_alpha <= -math.log(gamma) - a * gamma * (T + 1) + 1e-12
    assert beta <= gamma * (1 + 1e-12)
    assert constant_step_bound(1.0, 1.0, T, a, gamma) >= math.exp(log_alpha) + beta - 1e-12
