"""EFL Theorem 1 (seed 000 eq. 7, corrected reading) against Monte Carlo runs of EFL with
lambda = 0 (so F~_k = F_k and D_k = F_k(w*) - F_k*), no compression, random incomplete and
inactive clients with plain or adaptive weights, and the theorem's step size eta_tau,
simulated here on quadratic clients with Gaussian gradient noise.

Constants: mu = min_k mu_k, L = max_k L_k (Assumptions 1-2), sigma_k^2 exact, theta =
max p_tau^k / p^k (Assumption 5), G^2 = the largest E||g||^2 = ||grad f_k(w)||^2 +
sigma_k^2 over every local iterate of the run, estimated by the replicate mean
(Assumption 4 is only needed along the iterates).
Statistics: M = 300 replicates, one-sided lower limit mean - 4 s/sqrt(M) per round."""

import numpy as np
from hypothesis import given, strategies as st

from fltheory.testing import quadratic_federations
from fltheory.theory.bounds import efl_heterogeneity, efl_step_moments, efl_theorem1

M, T, Z = 300, 8, 4.0


@st.composite
def instances(draw):
    fed = draw(quadratic_federations(n_clients=st.integers(1, 4), dim=st.integers(1, 3),
                                     L=st.floats(1.0, 10.0), mu=st.floats(0.1, 1.0),
                                     heterogeneity=st.floats(0.0, 5.0)))
    N = fed.n_clients
    E = draw(st.integers(1, 4))
    raw = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=N * (E + 1), max_size=N * (E + 1))))
    probs = raw.reshape(N, E + 1)
    probs[:, E] += 0.1                         # every client completes with positive probability
    probs /= probs.sum(axis=1, keepdims=True)
    weighting = draw(st.sampled_from(["plain", "adaptive"]))
    sigma2 = np.array(draw(st.lists(st.floats(0.0, 4.0), min_size=N, max_size=N)))
    return fed, E, probs, weighting, sigma2, draw(st.integers(0, 2 ** 32 - 1))


@given(instances())
def test_efl_theorem1_bounds_monte_carlo_error(case):
    fed, E, probs, weighting, sigma2, seed = case
    rng = np.random.default_rng(seed)
    N, d, p = fed.n_clients, fed.dim, fed.weights
    mu, L = float(fed.client_mu.min()), float(fed.client_L.max())
    mom = efl_step_moments(p, probs, E, weighting=weighting)
    theta = max(mom.max_ratio, 1.0)
    wstar = fed.optimum()
    w0 = wstar + 2.0
    S = mom.ps[0].sum()
    gamma = max(4 * E ** 2 * theta / S, 32 * E * (1 + theta) * L / (mu * S))
    # --- simulate EFL (lambda = 0, no compression): w <- w + sum_k p_t^k Delta_k
    W = np.broadcast_to(w0, (M, d)).copy()
    sq = [np.sum((W - wstar) ** 2, axis=1)]
    G2 = 0.0
    cdf = np.cumsum(probs, axis=1)
    for t in range(T):
        eta = 16 * E / (mu * ((t + 1) * E + gamma) * S)
        s = (rng.random((M, N, 1)) > cdf[None]).sum(axis=2)          # (M, N) steps in 0..E
        if weighting == "plain":
            pt = np.where(s > 0, p[None], 0.0)
        else:
            pt = np.where(s > 0, E * p[None] / np.maximum(s, 1), 0.0)
        Y = np.broadcast_to(W[:, None, :], (M, N, d)).copy()
        for k in range(E):
            grad = np.einsum("nij,mnj->mni", fed.H, Y) - fed.e[None]
            G2 = max(G2, float(np.max(np.mean(np.sum(grad ** 2, axis=2), axis=0) + sigma2)))
            noise = np.sqrt(sigma2 / d)[None, :, None] * rng.standard_normal((M, N, d))
            Y -= (k < s)[:, :, None] * eta * (grad + noise)
        W = W + np.einsum("mn,mnd->md", pt, Y - W[:, None, :])
        sq.append(np.sum((W - wstar) ** 2, axis=1))
    sq = np.array(sq)
    mean, se = sq.mean(axis=1), sq.std(axis=1, ddof=1) / np.sqrt(M)
    D = efl_heterogeneity(fed)
    for tau in range(1, T + 1):
        res = efl_theorem1(tau, E=E, theta=theta, mu=mu, L=L, sigma2=sigma2, D=D, G2=G2,
                           weights=p, init_dist2=float(np.sum((w0 - wstar) ** 2)),
                           moments=mom, variant="corrected")
        assert res.valid, str(res)
        np.testing.assert_allclose(res.terms["gamma"], gamma)
        assert mean[tau] - Z * se[tau] <= res.value, (
            f"round {tau}: MC mean {mean[tau]!r} > bound {res.value!r}\n{res}")
