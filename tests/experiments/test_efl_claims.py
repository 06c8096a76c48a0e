"""experiments/efl_claims.py against independent mathematics: the closed-form fixed-step moments against the
maps read off ``averaging_moments``, the inactivity schedules' H_tau by counting, C_tau = O(tau) from the
printed formula, Theorem 2's shift and bound in closed form on scalar clients, the Figure 3 EFL path against
``exact_moments`` of EFL's own round and FedAvg's dropped-straggler mean against a hand enumeration, and the
quick instance's verdicts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from experiments import efl_claims as exp
from experiments._efl_instances import TableSteps
from experiments.efl_corollaries import bound_constants, chained_moments
from fltheory.algorithms import EFL, FedAvg
from fltheory.participation import Bernoulli, FullParticipation, IncompleteSteps
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic
from fltheory.theory import objective_shift
from fltheory.theory.bounds import efl_step_moments, efl_theorem1
from fltheory.theory.moments import AdditiveNoise, averaging_moments, exact_moments


def _fed(n: int = 3, d: int = 2, seed: int = 4) -> QuadraticFederation:
    return random_quadratic(n, d, L=4.0, mu=0.5, heterogeneity=1.0, seed=seed, constants="clients")


def test_fixed_step_moments_equal_the_maps_read_off_averaging_moments():
    fed, E, T, s2 = _fed(), 3, 9, 0.7
    rng = np.random.default_rng(0)
    steps = rng.integers(0, E + 1, size=(T, fed.n_clients))
    eta = 0.05 + 0.1 * rng.random(T)
    x0 = np.array([1.5, -0.4])
    mean, second = exp.fixed_step_moments(fed, eta, E, steps, s2, x0)
    w = np.where(np.arange(E + 1)[None, :] > 0, fed.weights[:, None], 0.0)
    noise = AdditiveNoise(fed.with_gradient_noise(s2).noise_sigma2, fed.n_clients, fed.dim)
    ref_mean, ref_second = chained_moments(fed, eta, E, w, steps, noise, x0, np.outer(x0, x0))
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(second, ref_second, rtol=1e-11, atol=1e-13)


def test_fixed_step_moments_scalar_round_by_hand():
    """One scalar client h = 2, e = 1 (optimum 1/2), two steps of eta = 0.1 with noise variance s2: y_2 =
    0.64 x + 0.1 (1 + 0.8) - noise of variance 0.01 s2 (1 + 0.64); weight 1 so x' = y_2."""
    fed = QuadraticFederation(np.array([[[2.0]]]), np.array([[1.0]]))
    mean, second = exp.fixed_step_moments(fed, np.array([0.1]), 2, np.array([[2]]), 0.3, np.array([3.0]))
    m = 0.64 * 3.0 + 0.18
    assert mean[1, 0] == pytest.approx(m, rel=1e-14)
    assert second[1, 0, 0] == pytest.approx(m * m + 0.01 * 0.3 * 1.64, rel=1e-14)


@pytest.mark.parametrize("T", [1, 7, 64, 1000])
def test_inactivity_schedules_have_the_stated_growth(T):
    assert exp.inactive_rounds("complete", T).sum() == 0
    assert exp.inactive_rounds("log", T).sum() == math.floor(math.log2(T)) + 1
    assert exp.inactive_rounds("sqrt", T).sum() == math.isqrt(T)
    assert exp.inactive_rounds("half", T).sum() == T // 2
    with pytest.raises(ValueError, match="regime"):
        exp.inactive_rounds("cubic", T)


def test_theorem1_C_is_the_printed_max_and_at_most_tau_times_the_per_round_bound():
    """C_tau = max{gamma^2 ||w_0 - w*||^2, (16E/mu)^2 sum_{t<tau} E[B_t]/S_t^2} recomputed from the returned
    B_t and S_t, and C_tau <= tau max{gamma^2 ||w_0 - w*||^2, (16E/mu)^2 max_t E[B_t]/S_t^2}."""
    fed, E, T, init = _fed(), 2, 64, 4.0
    kw = bound_constants(fed, 0.5)
    y = exp.inactive_rounds("sqrt", T)
    probs = np.zeros((T, fed.n_clients, E + 1))
    probs[:, :, E] = 1.0
    probs[y, -1, E], probs[y, -1, 0] = 0.0, 1.0
    mom = efl_step_moments(fed.weights, probs, E)
    for tau in (1, 5, 17, 64):
        r = efl_theorem1(tau, E=E, theta=1.0, G2=3.0, init_dist2=init, moments=mom, **kw).terms
        B, S = np.asarray(r["B"]), np.asarray(r["S"])
        by_hand = max(r["gamma"] ** 2 * init, (16 * E / kw["mu"]) ** 2 * float(np.sum(B / S ** 2)))
        assert r["C"] == pytest.approx(by_hand, rel=1e-12)
        c_star = max(r["gamma"] ** 2 * init, (16 * E / kw["mu"]) ** 2 * float(np.max(B / S ** 2)))
        assert r["C"] <= tau * c_star * (1 + 1e-12)
        assert r["H"] == y[:tau].sum()


@pytest.mark.parametrize("share", [0.1, 0.3, 0.6])
def test_departure_shift_and_eq10_in_closed_form_on_scalar_clients(share):
    """Scalar clients of one curvature h: w* = sum p_k c_k, w^* = the others' weighted mean, so
    w* - w^* = p_a (c_a - w^*), D^_a = h (c_a - w^*)^2 / 2 and eq. 10 = 8 h p_a^2 D^_a / h^2 = 4 p_a^2 (c_a - w^*)^2:
    both grow with the share p_a and with the spread |c_a - w^*|."""
    h, c = 1.5, np.array([2.0, -0.5, 0.25])
    p = np.array([share, (1 - share) * 0.4, (1 - share) * 0.6])
    fed = QuadraticFederation(np.full((3, 1, 1), h), (h * c)[:, None], weights=p)
    res = objective_shift(fed, client=0, kind="depart")
    w_hat = float(p[1:] @ c[1:] / p[1:].sum())
    assert res.measured == pytest.approx(share ** 2 * (c[0] - w_hat) ** 2, rel=1e-12)
    assert res.value == pytest.approx(4 * share ** 2 * (c[0] - w_hat) ** 2, rel=1e-12)


def test_straggler_law_and_efl_weights():
    law = exp.straggler_law(0.2, 3, 4)
    np.testing.assert_allclose(law.sum(axis=1), 1.0)
    np.testing.assert_allclose(law[0], [0.0, 0.8 / 3, 0.8 / 3, 0.8 / 3, 0.2])
    p = np.array([0.5, 0.5])
    np.testing.assert_allclose(exp.efl_step_weights(p, 4, "adaptive")[0], [0.0, 2.0, 1.0, 2 / 3, 0.5])
    np.testing.assert_allclose(exp.efl_step_weights(p, 4, "plain")[0], [0.0, 0.5, 0.5, 0.5, 0.5])


def test_figure3_efl_path_equals_exact_moments_of_efl_own_round():
    fed, E, T, q = _fed(), 3, 4, 0.3
    noisy = fed.with_gradient_noise(0.5)
    x0 = fed.optimum() + np.array([1.0, -1.0])
    law = exp.straggler_law(q, fed.n_clients, E)
    ex = exact_moments(EFL(lr=0.1, local_steps=E, lam=0.0, compression=None, weights="adaptive"), noisy, T,
                       participation=IncompleteSteps(FullParticipation(), TableSteps(law)), x0=x0)
    av = averaging_moments(fed, T, lr=0.1, local_steps=E, weights=exp.efl_step_weights(fed.weights, E, "adaptive"),
                           step_pmf=law, noise=AdditiveNoise(noisy.noise_sigma2, fed.n_clients, fed.dim), x0=x0)
    np.testing.assert_allclose(av.loss_gap, ex.loss_gap, rtol=1e-10)


def test_fedavg_dropping_stragglers_mean_by_enumeration():
    """Noiseless: given x, each subset S of completers has probability q^|S| (1-q)^(N-|S|) and gives
    sum_{k in S} p_k (B_k^E x + b_k) / sum_{k in S} p_k (x itself when S is empty); the mean is affine."""
    fed, E, T, q, lr = _fed(), 2, 3, 0.4, 0.1
    N, d = fed.n_clients, fed.dim
    H, e = np.asarray(fed.H), np.asarray(fed.e)
    A = np.stack([np.linalg.matrix_power(np.eye(d) - lr * H[k], E) for k in range(N)])
    b = np.stack([sum(np.linalg.matrix_power(np.eye(d) - lr * H[k], j) @ (lr * e[k]) for j in range(E))
                  for k in range(N)])
    M, c = np.zeros((d, d)), np.zeros(d)
    for pattern in itertools.product([0, 1], repeat=N):
        sel = np.array(pattern, dtype=bool)
        prob = q ** sel.sum() * (1 - q) ** (N - sel.sum())
        if not sel.any():
            M += prob * np.eye(d)
            continue
        w = fed.weights * sel / (fed.weights @ sel)
        M += prob * np.einsum("k,kij->ij", w, A)
        c += prob * w @ b
    x = np.array([1.0, 2.0])
    ex = exact_moments(FedAvg(lr=lr, local_steps=E), fed, T, participation=Bernoulli(q), x0=x)
    for t in range(1, T + 1):
        x = M @ x + c
        np.testing.assert_allclose(ex.mean[t], x, rtol=1e-11)


def test_quick_instance_verdicts_and_numbers():
    """The quick configuration's verdicts as measured (all six hold) and the numbers the report quotes."""
    res = exp.run(exp.QUICK, np.random.default_rng(0))
    verdicts = {c.theorem: c for c in exp.checks(res)}
    assert set(verdicts) == {t.key for t in exp.THEOREMS}
    assert all(c.status == "holds" for c in verdicts.values())
    T = res["T"]
    half = np.asarray(res["limit"]["half"]["exact"])
    complete = np.asarray(res["limit"]["complete"]["exact"])
    # periodic inactivity (H_tau ~ tau/2) does not vanish like the complete regime
    assert half[T] > 5 * complete[T]
    ratio = np.asarray(res["figure3"]["efl"])[:, 1:] / np.asarray(res["figure3"]["fedavg"])[:, 1:]
    assert np.all(ratio <= 1)
