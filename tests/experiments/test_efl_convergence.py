"""experiments/efl_convergence.py: the step-distribution table sampler and the way
the experiment drives EFL with Theorem 1's step size, held to hand computations.

* ``_TableSteps`` draws s_k from P(s_k = j): frequencies over many draws lie
  within 5 binomial standard deviations of the table.
* ``_Schedule`` + ``EFL(lr=1, lr_schedule=...)``: one round with exact
  gradients equals the readable loop w <- w + sum_k p_k (y_k - w), y_k after E
  steps y <- y - eta_0 grad f_k(y), with eta_0 = 16 E / (mu (E + gamma) S) and
  gamma = max(4 E^2 theta / S, 32 E (1 + theta) L / (mu S)), S = sum_k p_k E
  (seed 000 Theorem 1, complete clients, plain weights, theta = 1).
"""

from __future__ import annotations

import numpy as np

from experiments import efl_convergence as exp
from fltheory.algorithms import EFL, run
from fltheory.problems.generators import random_quadratic
from fltheory.theory.bounds import efl_step_moments, efl_theorem1_from_constants


def test_table_steps_frequencies_match_the_table():
    rng = np.random.default_rng(7)
    probs = np.array([[0.0, 0.2, 0.3, 0.5], [0.4, 0.0, 0.0, 0.6], [0.1, 0.2, 0.3, 0.4]])
    draw = exp._TableSteps(probs)
    n = 20000
    clients = np.repeat(np.arange(3), n)
    s = draw(rng, 0, np.full(clients.shape[0], 3), clients).reshape(3, n)
    for k in range(3):
        freq = np.bincount(s[k], minlength=4) / n
        sd = np.sqrt(probs[k] * (1 - probs[k]) / n)
        assert np.all(np.abs(freq - probs[k]) <= 5 * sd + 1e-12), (k, freq, probs[k])
        assert np.all(freq[probs[k] == 0] == 0)


def test_step_tables_are_the_declared_distributions():
    y = np.array([0.0, 0.5])
    np.testing.assert_allclose(exp._step_table("full", 2, 3, y), [[0, 0, 0, 1], [0, 0, 0, 1]])
    np.testing.assert_allclose(exp._step_table("incomplete", 2, 3, y), [[0, 1 / 3, 1 / 3, 1 / 3]] * 2)
    np.testing.assert_allclose(exp._step_table("inactive", 2, 3, y), [[0, 0, 0, 1], [0.5, 0, 0, 0.5]])
    np.testing.assert_allclose(exp._step_table("sampled", 2, 3, y, 0.25), [[0.75, 0, 0, 0.25]] * 2)


def test_first_round_uses_theorem_step_size():
    fed = random_quadratic(3, 2, L=3.0, mu=0.5, heterogeneity=1.0, seed=11, constants="clients")
    E, x0 = 2, np.array([1.0, -2.0])
    p = fed.weights
    mu, L = float(fed.client_mu.min()), float(fed.client_L.max())
    S = float(np.sum(p * E))
    gamma = max(4 * E ** 2 * 1.0 / S, 32 * E * 2.0 * L / (mu * S))
    eta0 = 16 * E / (mu * (E + gamma) * S)
    mom = efl_step_moments(p, exp._step_table("full", 3, E, np.zeros(3)), E)
    res = efl_theorem1_from_constants(fed.constants(), 3, E=E, theta=1.0, weights=p, init_dist2=1.0,
                                      G2=0.0, moments=mom)
    np.testing.assert_allclose(res.terms["eta"][0], eta0, rtol=1e-13)
    alg = EFL(lr=1.0, local_steps=E, lam=0.0, compression=None, theta=1.0,
              lr_schedule=exp._Schedule(res.terms["eta"]))
    hist = run(alg, fed, 1, x0=x0)
    w = x0.copy()
    change = np.zeros(2)
    for k in range(3):                                  # readable reference loop
        y = x0.copy()
        for _ in range(E):
            y = y - eta0 * (fed.H[k] @ y - fed.e[k])
        change += p[k] * (y - x0)
    np.testing.assert_allclose(hist.x[1], w + change, rtol=1e-12, atol=1e-14)
