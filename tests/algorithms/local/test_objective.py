"""LocalObjective (algorithms.local.objective) against finite differences and its definition."""

from __future__ import annotations

import numpy as np

from fltheory.algorithms.local import LocalObjective

from .builders import composed


def test_gradient_matches_central_differences():
    m, d = 3, 4
    obj = composed(m, d)
    Y = np.random.default_rng(1).standard_normal((m, d))
    h = 1e-6
    fd = np.zeros((m, d))
    for j in range(d):                              # test code: loop over coordinates
        E = np.zeros((m, d))
        E[:, j] = h
        fd[:, j] = (obj.value(Y + E) - obj.value(Y - E)) / (2 * h)
    np.testing.assert_allclose(obj.grad(Y), fd, rtol=1e-8, atol=1e-8)


def test_proximal_term_is_mu_over_two_squared_distance():
    C = np.array([[1.0, -2.0], [0.5, 0.0]])
    Y = np.array([[0.0, 1.0], [2.0, 2.0]])
    obj = LocalObjective.proximal(np.array([2.0, 0.5]), C)
    expected = np.array([2.0, 0.5]) / 2 * np.sum((Y - C) ** 2, axis=1)
    # value drops the constant (mu/2)||c||^2
    np.testing.assert_allclose(obj.value(Y) + np.array([2.0, 0.5]) / 2 * np.sum(C ** 2, axis=1),
                               expected, rtol=1e-14)
    np.testing.assert_allclose(obj.grad(Y), np.array([2.0, 0.5])[:, None] * (Y - C), rtol=1e-14)
