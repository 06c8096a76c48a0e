"""SCAFFOLD's block-structured exact moments against the general engine (maps read off the real round),
the deterministic run and Monte Carlo of real runs."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms import Scaffold, run
from fltheory.errors import InvalidHyperparameterError
from fltheory.participation import Bernoulli, UniformSampling
from fltheory.problems.generators import random_quadratic
from fltheory.theory.moments import (
    exact_moments,
    moment_operator,
    scaffold_rounds_to_accuracy,
    scaffold_sampling_moments,
)


def _fed(N: int = 4, d: int = 2, seed: int = 3):
    sig = [0.5, 1.0, 1.5, 0.7, 0.3, 0.9][:N]
    return random_quadratic(N, d, L=4.0, mu=1.0, heterogeneity=1.0, seed=seed,
                            constants="clients").with_gradient_noise(sig)


@pytest.mark.parametrize("option", ["I", "II"])
@pytest.mark.parametrize("S", [None, 1, 2, 3])
def test_block_path_equals_general_engine(option, S):
    fed = _fed()
    alg = Scaffold(lr=[0.1, 0.08, 0.12, 0.05], local_steps=[2, 3, 1, 2], server_lr=0.8, option=option)
    part = None if S is None else UniformSampling(S)
    x0 = np.array([1.0, -2.0])
    ref = exact_moments(alg, fed, 4, participation=part, x0=x0)
    fast = scaffold_sampling_moments(alg, fed, 4, participation=part, x0=x0)
    np.testing.assert_allclose(fast.mean, ref.mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.second, ref.second, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.dist2, ref.dist2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.state_mean, ref.state_mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.state_second, ref.state_second, rtol=0, atol=1e-11)


def test_block_path_equals_dense_operator_at_eight_clients():
    """N = 8, d = 2: the dense moment operator (the largest size it handles) and the block path."""
    fed = random_quadratic(8, 2, L=3.0, mu=0.5, heterogeneity=1.0, seed=4, constants="clients") \
        .with_gradient_noise(0.8)
    alg = Scaffold(lr=0.1, local_steps=3, option="II")
    op = moment_operator(alg, fed, participation=UniformSampling(3), x0=np.ones(2))
    gaps, dists = op.iterate(6)
    fast = scaffold_sampling_moments(alg, fed, 6, participation=UniformSampling(3), x0=np.ones(2))
    np.testing.assert_allclose(fast.loss_gap, gaps, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fast.dist2, dists, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("option", ["I", "II"])
def test_zero_noise_full_participation_is_the_deterministic_run(option):
    fed = _fed(5, 3).exact()
    alg = Scaffold(lr=0.15, local_steps=[1, 2, 3, 2, 1], server_lr=1.3, option=option)
    x0 = np.array([1.0, 2.0, -1.0])
    fast = scaffold_sampling_moments(alg, fed, 7, x0=x0)
    hist = run(alg, fed, 7, x0=x0, seed=0)
    np.testing.assert_allclose(fast.mean, hist.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.dist2, hist.dist2, rtol=0, atol=1e-12)
    assert np.all(fast.variance >= -1e-13) and np.all(np.abs(fast.variance) <= 1e-12)


@pytest.mark.parametrize("option", ["I", "II"])
def test_matches_monte_carlo_of_real_runs(option):
    fed = _fed(4, 2)
    alg = Scaffold(lr=0.1, local_steps=2, option=option)
    part = UniformSampling(2)
    T, M = 3, 600
    ex = scaffold_sampling_moments(alg, fed, T, participation=part, x0=np.ones(2))
    d2 = np.array([run(alg, fed, T, participation=part, seed=s, x0=np.ones(2)).dist2 for s in range(M)])
    z = np.abs(d2.mean(axis=0) - ex.dist2)[1:] / (d2.std(axis=0, ddof=1)[1:] / np.sqrt(M))
    assert np.all(z < 4.0), z


def test_bad_input_is_refused():
    fed = _fed()
    alg = Scaffold(lr=0.1, local_steps=2)
    with pytest.raises(InvalidHyperparameterError, match="UniformSampling"):
        scaffold_sampling_moments(alg, fed, 2, participation=Bernoulli(0.5))
    with pytest.raises(InvalidHyperparameterError, match="exceeds"):
        scaffold_sampling_moments(alg, fed, 2, participation=UniformSampling(9))
    with pytest.raises(InvalidHyperparameterError, match="Scaffold"):
        scaffold_sampling_moments("FedAvg", fed, 2)  # type: ignore[arg-type]
    with pytest.raises(InvalidHyperparameterError, match="rounds"):
        scaffold_sampling_moments(alg, fed, 2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("S", [None, 2])
def test_rounds_to_accuracy_read_off_the_exact_gaps(S):
    """The linearised moment map gives the same gaps as the block recursion: the first round below
    each eps is the one read off ``scaffold_sampling_moments`` (eps between consecutive gaps)."""
    fed = _fed(4, 2)
    alg = Scaffold(lr=0.05, local_steps=3, option="II")
    part = None if S is None else UniformSampling(S)
    ex = scaffold_sampling_moments(alg, fed, 300, participation=part, x0=np.ones(2))
    gap = ex.loss_gap
    lowest = np.minimum.accumulate(gap)
    targets = [float(lowest[t]) * (1 + 1e-9) for t in (0, 3, 17, 60, 299)]
    got = scaffold_rounds_to_accuracy(alg, fed, targets, participation=part, x0=np.ones(2), max_rounds=300)
    expect = [int(np.flatnonzero(gap <= e)[0]) for e in targets]
    np.testing.assert_array_equal(got, expect)
    far = scaffold_rounds_to_accuracy(alg, fed, [1e-30], participation=part, x0=np.ones(2), max_rounds=50)
    assert np.isnan(far[0])
    with pytest.raises(InvalidHyperparameterError, match="eps"):
        scaffold_rounds_to_accuracy(alg, fed, [-1.0])
