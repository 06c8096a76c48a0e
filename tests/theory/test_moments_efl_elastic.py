"""EFL with the Fisher-elastic term: the fast exact-moment path against the general engine (maps read
off the real round), against the lambda = 0 averaging closed form, against real Monte Carlo runs and
against the deterministic run; the exact D_k of Theorem 1 against its definition."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms import EFL, run
from fltheory.errors import InvalidHyperparameterError, NotAffineError
from fltheory.participation import (
    Bernoulli,
    FullParticipation,
    FullSteps,
    IncompleteSteps,
    UniformSampling,
    UniformSteps,
)
from fltheory.problems.generators import random_quadratic
from fltheory.theory.bounds import efl_elastic_constants, efl_heterogeneity
from fltheory.theory.moments import (
    AdditiveNoise,
    averaging_moments,
    efl_elastic_gradient_moments,
    efl_elastic_moments,
    elastic_anchor_laws,
    exact_moments,
)


def _fed(N: int = 2, d: int = 2, seed: int = 3):
    return random_quadratic(N, d, L=4.0, mu=1.0, heterogeneity=1.0, seed=seed,
                            constants="clients").with_gradient_noise([0.5, 1.0, 1.5][:N])


class _Decay:
    """A decreasing rate schedule (the shape of Theorem 1's eta_tau)."""

    def __call__(self, tau: int) -> float:
        return 0.3 / (1.0 + tau)


PARTS = {
    "full": None,
    "inactive": IncompleteSteps(FullParticipation(), FullSteps(), inactive_prob=np.array([0.3, 0.5])),
    "incomplete": IncompleteSteps(FullParticipation(), UniformSteps()),
    "sampled": UniformSampling(1),
    "bernoulli": Bernoulli(0.6),
}


@pytest.mark.parametrize("weights", ["plain", "adaptive"])
@pytest.mark.parametrize("part", list(PARTS))
def test_fast_path_equals_general_engine(weights, part):
    fed = _fed()
    alg = EFL(lr=[1.0, 0.8], local_steps=2, lam=0.7, compression=None, weights=weights, lr_schedule=_Decay())
    x0 = np.array([1.0, -0.5])
    ref = exact_moments(alg, fed, 3, participation=PARTS[part], x0=x0, keep_states=True)
    fast = efl_elastic_moments(alg, fed, 3, participation=PARTS[part], x0=x0)
    np.testing.assert_allclose(fast.mean, ref.mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.second, ref.second, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.dist2, ref.dist2, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(fast.components, ref.components)
    # the anchors' law (what D_k is built from) agrees component for component
    for a, b in zip(elastic_anchor_laws(ref), elastic_anchor_laws(fast)):
        agg = [(sum(c.weight * c.V_mean for c in L), sum(c.weight * c.V_second for c in L)) for L in (a, b)]
        np.testing.assert_allclose(agg[0][0], agg[1][0], atol=1e-12)
        np.testing.assert_allclose(agg[0][1], agg[1][1], atol=1e-12)


def test_lambda_zero_equals_averaging_closed_form():
    """lambda = 0: EFL is the averaging round of ``averaging_moments`` (independent derivation)."""
    fed = _fed(3, 2)
    E, T = 3, 4
    y = np.array([0.0, 0.3, 0.6])
    pmf = np.zeros((3, E + 1))
    pmf[:, 0], pmf[:, E] = y, 1 - y
    eta = 0.25 / (1.0 + np.arange(T))
    alg = EFL(lr=1.0, local_steps=E, lam=0.0, compression=None, lr_schedule=lambda t: float(eta[t]))
    part = IncompleteSteps(FullParticipation(), FullSteps(), inactive_prob=y)
    fast = efl_elastic_moments(alg, fed, T, participation=part, x0=np.ones(2))
    w = np.where(np.arange(E + 1)[None, :] > 0, fed.weights[:, None], 0.0)
    ref = averaging_moments(fed.exact(), T, lr=eta, local_steps=E, weights=w, step_pmf=pmf,
                            noise=AdditiveNoise(fed.noise_sigma2, 3, 2), x0=np.ones(2))
    np.testing.assert_allclose(fast.second, ref.second, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.dist2, ref.dist2, rtol=0, atol=1e-12)


def test_zero_noise_full_participation_is_the_deterministic_run():
    fed = _fed(3, 3).exact()
    alg = EFL(lr=0.2, local_steps=[1, 2, 3], lam=1.3, compression=None)
    x0 = np.array([1.0, 2.0, -1.0])
    fast = efl_elastic_moments(alg, fed, 6, x0=x0)
    hist = run(alg, fed, 6, x0=x0, seed=0)
    np.testing.assert_allclose(fast.mean, hist.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.dist2, hist.dist2, rtol=0, atol=1e-12)
    assert np.all(fast.variance >= -1e-14)


def test_matches_monte_carlo_of_real_runs():
    """Real EFL runs (sampled participation and gradient noise): mean error within 4 standard errors."""
    fed = _fed(3, 2)
    part = IncompleteSteps(FullParticipation(), UniformSteps(), inactive_prob=np.array([0.0, 0.3, 0.5]))
    alg = EFL(lr=0.3, local_steps=2, lam=0.8, compression=None, weights="adaptive")
    T, M = 3, 800
    ex = efl_elastic_moments(alg, fed, T, participation=part, x0=np.ones(2))
    d2 = np.array([run(alg, fed, T, participation=part, seed=s, x0=np.ones(2)).dist2 for s in range(M)])
    se = d2.std(axis=0, ddof=1)[1:] / np.sqrt(M)
    z = np.abs(d2.mean(axis=0)[1:] - ex.dist2[1:]) / se
    assert np.all(z < 4.0), z


def test_elastic_D_against_its_definition_along_the_deterministic_run():
    """Full participation, no noise: the anchors are deterministic, and E[D_{t,k}] is
    F~_{t,k}(w*) - min F~_{t,k} of the run's own state (U, V), minimised by a linear solve."""
    fed = _fed(3, 2).exact()
    lam = 0.9
    alg = EFL(lr=0.2, local_steps=2, lam=lam, compression=None)
    x0 = np.array([2.0, -1.0])
    ec = efl_elastic_constants(fed, lam, elastic_anchor_laws(efl_elastic_moments(alg, fed, 4, x0=x0)))
    w_star = fed.optimum()
    state = alg.init(fed, x0, np.random.default_rng(0))
    for t in range(5):
        for k in range(3):
            A = fed.H[k] + lam * np.diag(state.U)
            b = fed.e[k] + lam * state.V

            def F(w: np.ndarray, A: np.ndarray = A, b: np.ndarray = b) -> float:
                return float(0.5 * w @ A @ w - b @ w)

            assert ec.D[t, k] == pytest.approx(F(w_star) - F(np.linalg.solve(A, b)), rel=1e-10, abs=1e-13)
        state, _ = alg.round(state, fed, None, np.random.default_rng(0))
    np.testing.assert_allclose(ec.D[0], efl_heterogeneity(fed), rtol=1e-12)      # U = 0 in round 0
    np.testing.assert_allclose(ec.D_k, ec.D.max(axis=0))
    H_all = fed.H + lam * np.diag(fed.H.diagonal(axis1=1, axis2=2).sum(axis=0))[None]
    assert ec.L == pytest.approx(float(np.linalg.eigvalsh(H_all).max()), rel=1e-12)
    assert ec.mu == pytest.approx(float(np.linalg.eigvalsh(fed.H).min()), rel=1e-12)


def test_the_literal_reading_of_w_star_gives_a_smaller_weighted_D():
    """EFL eq. 1 defines w* as the minimiser of F = sum_k p^k F~_k, and F~_k carries the elastic term, so read
    literally w*_t = argmin sum_k p^k F~_{t,k} moves with the anchors.  Our reading fixes w* = argmin sum p^k f_k
    (bounds/efl.py, reading (i)).  Derived here: for every round and anchor value, since w*_t minimises
    sum_k p^k F~_{t,k} and the F~*_{t,k} are the same in both readings,
        sum_k p^k [F~_{t,k}(w*) - F~*_{t,k}] >= sum_k p^k [F~_{t,k}(w*_t) - F~*_{t,k}],
    so our weighted D is never the smaller one (the theorem's bound is the larger, more conservative, one);
    both coincide in round 0 (U = 0, V = 0: w*_0 = w*).  Checked along a deterministic run."""
    fed = _fed(3, 2).exact()
    lam = 0.9
    alg = EFL(lr=0.2, local_steps=2, lam=lam, compression=None)
    x0 = np.array([2.0, -1.0])
    ec = efl_elastic_constants(fed, lam, elastic_anchor_laws(efl_elastic_moments(alg, fed, 4, x0=x0)))
    p = fed.weights
    state = alg.init(fed, x0, np.random.default_rng(0))
    gaps = []
    for t in range(5):
        A = fed.H + lam * np.diag(state.U)[None]
        b = fed.e + lam * state.V[None]
        w_t = np.linalg.solve(np.einsum("k,kij->ij", p, A), p @ b)          # argmin sum_k p^k F~_{t,k}
        grad = np.einsum("kij,j->ki", A, w_t) - b
        literal = 0.5 * np.einsum("ki,ki->k", grad, np.linalg.solve(A, grad[..., None])[..., 0])
        gaps.append(float(p @ ec.D[t] - p @ literal))
        assert p @ ec.D[t] >= p @ literal - 1e-12
        state, _ = alg.round(state, fed, None, np.random.default_rng(0))
    assert gaps[0] == pytest.approx(0.0, abs=1e-12)
    assert max(gaps) > 1e-6                                     # the readings do differ once anchors exist


def test_elastic_D_matches_monte_carlo_of_the_random_anchors():
    fed = _fed(3, 2)
    lam = 0.7
    part = IncompleteSteps(FullParticipation(), FullSteps(), inactive_prob=np.array([0.0, 0.3, 0.5]))
    alg = EFL(lr=0.1, local_steps=2, lam=lam, compression=None)
    x0 = np.ones(2)
    ec = efl_elastic_constants(fed, lam, elastic_anchor_laws(efl_elastic_moments(alg, fed, 3, participation=part,
                                                                                 x0=x0)))
    w_star = fed.optimum()
    M = 800
    samples = np.zeros((M, 4, 3))
    for s in range(M):
        rng = np.random.default_rng(s)
        state = alg.init(fed, x0, rng)
        for t in range(4):
            for k in range(3):
                A = fed.H[k] + lam * np.diag(state.U)
                grad = A @ w_star - fed.e[k] - lam * state.V
                samples[s, t, k] = 0.5 * grad @ np.linalg.solve(A, grad)
            if t < 3:
                state, _ = alg.round(state, fed, part, rng)
    se = samples.std(axis=0, ddof=1) / np.sqrt(M)
    z = np.abs(samples.mean(axis=0) - ec.D)[1:] / se[1:]
    assert np.all(z < 4.0), z


def test_bad_input_is_refused():
    fed = _fed()
    with pytest.raises(NotAffineError, match="compression"):
        efl_elastic_moments(EFL(lr=0.1, local_steps=2, lam=0.5, compression="st"), fed, 2)
    with pytest.raises(InvalidHyperparameterError, match="EFL"):
        efl_elastic_moments("FedAvg", fed, 2)  # type: ignore[arg-type]
    with pytest.raises(InvalidHyperparameterError, match="rounds"):
        efl_elastic_moments(EFL(lr=0.1, local_steps=2, compression=None), fed, -1)
    with pytest.raises(InvalidHyperparameterError, match="sum to"):
        efl_elastic_constants(fed, 0.5, [[type("C", (), {"weight": 0.5, "U": np.ones(2), "V_mean": np.zeros(2),
                                                         "V_second": np.zeros((2, 2))})()]])
    with pytest.raises(InvalidHyperparameterError, match="lam"):
        efl_elastic_constants(fed, -1.0, [])


def test_gradient_second_moments_along_the_deterministic_local_steps():
    """No noise, full participation: E||g||^2 is ||grad F~_k(w_j)||^2 at the local iterates of a hand loop."""
    fed = _fed(3, 2).exact()
    lam = 0.6
    alg = EFL(lr=[0.2, 0.1, 0.15], local_steps=[3, 2, 3], lam=lam, compression=None)
    x0 = np.array([1.5, -1.0])
    mom = efl_elastic_moments(alg, fed, 3, x0=x0)
    G = efl_elastic_gradient_moments(alg, fed, mom)
    state = alg.init(fed, x0, np.random.default_rng(0))
    for t in range(3):
        for k in range(3):
            A = fed.H[k] + lam * np.diag(state.U)
            w = state.x.copy()
            for j in range(alg.local_steps[k]):                            # type: ignore[index]
                g = A @ w - fed.e[k] - lam * state.V
                assert G[t, k, j] == pytest.approx(float(g @ g), rel=1e-11, abs=1e-13)
                w = w - alg.lr[k] * g                                     # type: ignore[index]
            assert np.all(np.isnan(G[t, k, alg.local_steps[k]:]))         # type: ignore[index]
        state, _ = alg.round(state, fed, None, np.random.default_rng(0))


def test_gradient_second_moments_match_monte_carlo():
    """Random anchors and gradient noise: E||g||^2 of the first and second local step against samples
    of the real state with sampled noise (the noise of step 1 carried into step 2)."""
    fed = _fed(3, 2)
    lam, eta = 0.7, 0.15
    part = IncompleteSteps(FullParticipation(), FullSteps(), inactive_prob=np.array([0.0, 0.3, 0.5]))
    alg = EFL(lr=eta, local_steps=2, lam=lam, compression=None)
    x0 = np.ones(2)
    mom = efl_elastic_moments(alg, fed, 3, participation=part, x0=x0)
    G = efl_elastic_gradient_moments(alg, fed, mom)
    root = np.sqrt(fed.noise_sigma2 / 2)                                  # isotropic: sigma_k^2 / d per entry
    M = 1500
    samples = np.zeros((M, 3, 3, 2))
    for s in range(M):
        rng = np.random.default_rng(s)
        state = alg.init(fed, x0, rng)
        for t in range(3):
            for k in range(3):
                A = fed.H[k] + lam * np.diag(state.U)
                w = state.x.copy()
                for j in range(2):
                    g = A @ w - fed.e[k] - lam * state.V + root[k] * rng.standard_normal(2)
                    samples[s, t, k, j] = g @ g
                    w = w - eta * g
            state, _ = alg.round(state, fed, part, rng)
    se = samples.std(axis=0, ddof=1) / np.sqrt(M)
    z = np.abs(samples.mean(axis=0) - G) / se
    assert np.all(z < 4.0), z
