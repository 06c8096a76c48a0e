"""efl_theorem1 target: exact moment propagation held to a simulation and to the
property test's independent implementation; the search finds violations only in
the two known failure regions of EFL Theorem 1."""

import numpy as np
import pytest

from fltheory.search import evaluate_point, search
from fltheory.search.efl_target import efl_exact_errors, efl_step_distribution
from fltheory.testing import build_quadratic


def test_step_distribution():
    np.testing.assert_allclose(efl_step_distribution(4, 0.2, 0.5), [0.2, 0.4 / 3, 0.4 / 3, 0.4 / 3, 0.4])
    np.testing.assert_allclose(efl_step_distribution(1, 0.3, 0.9), [0.3, 0.7])


def test_exact_errors_match_a_per_replicate_simulation():
    fed = build_quadratic(2, 2, L=3.0, mu=0.5, heterogeneity=2.0, n_samples=[1, 3], seed=3)
    E, sigma2 = 3, np.array([1.0, 2.0])
    probs = np.array([[0.3, 0.2, 0.0, 0.5], [0.1, 0.0, 0.6, 0.3]])
    w0, etas = fed.optimum() + np.array([1.0, -2.0]), np.array([0.3, 0.2, 0.1])
    exact, _ = efl_exact_errors(fed, probs, E, "adaptive", sigma2, w0, etas)
    rng = np.random.default_rng(0)
    M, p, xs, w_star = 3000, fed.weights, fed.client_optima(), fed.optimum()
    err = np.empty((M, len(etas) + 1))
    for r in range(M):
        w = w0.copy()
        err[r, 0] = np.sum((w - w_star) ** 2)
        for t, eta in enumerate(etas):
            new = w.copy()
            for k in range(2):
                s = rng.choice(E + 1, p=probs[k])
                y = w.copy()
                for _ in range(s):
                    y = y - eta * (fed.H[k] @ (y - xs[k]) + np.sqrt(sigma2[k] / 2) * rng.standard_normal(2))
                if s > 0:
                    new += E * p[k] / s * (y - w)
            w = new
            err[r, t + 1] = np.sum((w - w_star) ** 2)
    se = err.std(axis=0, ddof=1) / np.sqrt(M)
    assert np.all(np.abs(err.mean(axis=0) - exact) <= 5 * se + 1e-12)


def test_exact_errors_equal_the_property_test_implementation():
    from tests.properties.test_efl_theorem1_properties import exact_errors
    rng = np.random.default_rng(4)
    for _ in range(4):
        N, d, E = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
        fed = build_quadratic(N, d, 5.0, 0.3, 2.0, list(rng.integers(1, 10, N)), int(rng.integers(100)))
        probs = rng.dirichlet(np.ones(E + 1), size=N)
        sigma2, w0, etas = 3 * rng.random(N), rng.standard_normal(d), [0.1, 0.05, 0.02]
        for weighting in ("plain", "adaptive"):
            a, ga = exact_errors(fed, probs, E, weighting, sigma2, w0, etas)
            b, gb = efl_exact_errors(fed, probs, E, weighting, sigma2, w0, np.array(etas))
            np.testing.assert_allclose(b, a, rtol=1e-12)
            assert gb == pytest.approx(ga, rel=1e-12)


def test_search_finds_violations_only_in_the_known_failure_regions():
    res = search("efl_theorem1", budget=120, seed=0, progress=False)
    violations = [r for r in res.rows if r["violation"]]
    assert violations, "the negative-drift failure of EFL Theorem 1 should be found"
    assert all(r["tag_known_failure"] for r in violations)
    ce = res.counterexample
    again = evaluate_point("efl_theorem1", ce["point"], ce["seed"])
    assert again.valid and again.measured > again.value and again.ratio == ce["ratio"]
