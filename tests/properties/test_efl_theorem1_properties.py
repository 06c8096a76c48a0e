"""EFL Theorem 1 (seed 000 eq. 7, corrected reading) against the exact mean squared error
of EFL with lambda = 0 (so F~_k = F_k and D_k = F_k(w*) - F_k*), no compression, random
incomplete and inactive clients with plain or adaptive weights and the theorem's step
size eta_tau, on quadratic clients with Gaussian gradient noise N(0, sigma_k^2/d I).

Exact, not Monte Carlo: given the step counts s = (s_k) of a round, the error
e = w - w* maps affinely, e' = A(s) e + c(s) + noise(s), with
A(s) = I - sum_k p^k(s_k) B_k(s_k), B_k(s) = I - (I - eta H_k)^s,
c(s) = sum_k p^k(s_k) B_k(s_k) (x_k* - w*) and noise covariance
sum_k p^k(s_k)^2 eta^2 sigma_k^2/d sum_{i<s_k} (I - eta H_k)^{2i}; s is independent of e,
so the mean and second moment of e propagate exactly by summing over every step pattern
s in {0..E}^N with its probability (rare patterns included - a Monte Carlo estimate
misses them: probability 0.004 of any activity left 300 replicates all inactive and
a zero standard error).  :func:`exact_errors` is held against a readable per-replicate
simulation in test_exact_errors_match_a_simulation.

Hypothesis space drawn: 1-4 clients in dimension 1-3, E = 1..4 (E = 1 makes the E(E-1)
term vanish), per-client step distributions of four kinds - arbitrary (zeros allowed),
always inactive, always complete, always incomplete (0 < s < E) - with the only
restriction of the theorem, E[sum p s] > 0; plain or adaptive weights; theta from the
smallest value Assumption 5 allows up to 3 times it; ||w_0 - w*|| from 0 (start at the
optimum) to 5; sigma_k^2 from 0 to 4; T = 60 rounds so that tau E is comparable to gamma
on well-conditioned instances (the bound is then not just ||w_0 - w*||^2).

Constants: mu = min_k mu_k, L = max_k L_k (Assumptions 1-2), sigma_k^2 exact, G^2 = the
largest E||g||^2 = E||grad f_k(y)||^2 + sigma_k^2 over every local step y of the run that
has positive probability (exact; the full-expectation reading of Assumption 4 - the
pointwise reading needs a larger G^2, a looser bound, so this check is the stricter).

Known failure modes (findings, exact counterexamples as strict xfails in
tests/theory/test_bounds_efl.py):
* excluded: instances (E >= 2) whose drift factor sum p s + theta (sum p - 2) + sum p s
  is negative in some round (low participation): it lowers E[B_t] - below zero in
  test_theorem1_counterexample_low_participation, and a random draw (one client inactive
  or one step of E = 2 w.p. 1/2, w_0 = w*, sigma^2 = 1) failed with E[B_t] > 0;
* tolerated only in its exact form: C_tau is a max, so while gamma^2 ||w_0 - w*||^2 is the
  larger branch the bound is below ||w_0 - w*||^2 and first-round noise can exceed it
  when a client is often inactive - test_theorem1_counterexample_noise_in_the_first_round
  (the thorough profile drew one such instance, about 1 in 2000 draws).  A violation is
  accepted only when C_tau is that branch and some client has P(s = 0) > 0; any other
  violation fails the test (hypothesis.event counts the accepted ones)."""

import itertools

import numpy as np
from hypothesis import assume, event, given
from hypothesis import strategies as st

from fltheory.testing import build_quadratic, quadratic_federations
from fltheory.theory.bounds import efl_heterogeneity, efl_step_moments, efl_theorem1

T = 60


@st.composite
def step_distribution(draw, E):
    """P(s = 0..E) of one client: arbitrary, always inactive, always complete or
    always incomplete."""
    kind = draw(st.sampled_from(["any", "inactive", "complete", "incomplete"]))
    q = np.zeros(E + 1)
    if kind == "inactive":
        q[0] = 1.0
    elif kind == "complete":
        q[E] = 1.0
    else:
        lo = 1 if kind == "incomplete" else 0
        hi = E - 1 if kind == "incomplete" else E
        if hi < lo:                           # E = 1 has no incomplete step count
            q[E] = 1.0
        else:
            # no subnormal weights: 1e-323 makes E[sum p s] underflow and gamma overflow
            raw = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]) | st.floats(1e-6, 1.0),
                                min_size=hi - lo + 1, max_size=hi - lo + 1))
            raw = np.array(raw)
            if raw.sum() == 0:
                raw[-1] = 1.0
            q[lo:hi + 1] = raw / raw.sum()
    return q


@st.composite
def instances(draw):
    fed = draw(quadratic_federations(n_clients=st.integers(1, 4), dim=st.integers(1, 3),
                                     L=st.floats(1.0, 10.0), mu=st.floats(0.1, 1.0),
                                     heterogeneity=st.floats(0.0, 5.0)))
    N = fed.n_clients
    E = draw(st.integers(1, 4))
    probs = np.stack([draw(step_distribution(E)) for _ in range(N)])
    weighting = draw(st.sampled_from(["plain", "adaptive"]))
    sigma2 = np.array(draw(st.lists(st.floats(0.0, 4.0), min_size=N, max_size=N)))
    theta_factor = draw(st.just(1.0) | st.floats(1.0, 3.0))
    radius = draw(st.just(0.0) | st.floats(0.0, 5.0))
    return fed, E, probs, weighting, sigma2, theta_factor, radius, draw(st.integers(0, 2 ** 32 - 1))


def _aggregation_weights(p, s, E, weighting):
    """p_t^k for step counts s (..., N)."""
    if weighting == "plain":
        return np.where(s > 0, p, 0.0)
    return np.where(s > 0, E * p / np.maximum(s, 1), 0.0)


def exact_errors(fed, probs, E, weighting, sigma2, w0, etas):
    """(E||w_t - w*||^2 for t = 0..len(etas), G^2) by exact moment propagation."""
    N, d, p = fed.n_clients, fed.dim, fed.weights
    wstar, xs, H, I = fed.optimum(), fed.client_optima(), fed.H, np.eye(d)
    pats = np.array(list(itertools.product(range(E + 1), repeat=N)))           # (Q, N)
    prob = np.prod(probs[np.arange(N), pats], axis=1)
    pats, prob = pats[prob > 0], prob[prob > 0]
    pt = _aggregation_weights(p, pats, E, weighting)                              # (Q, N)
    reach = np.cumsum(probs[:, ::-1], axis=1)[:, ::-1]                            # P(s_k >= j)
    delta = wstar - xs                                                            # (N, d)
    m = w0 - wstar
    P = np.outer(m, m)
    out, G2 = [float(np.trace(P))], 0.0
    for eta in etas:
        Mk = I - eta * H                                                          # (N, d, d)
        pw = [np.broadcast_to(I, (N, d, d))]
        for _ in range(2 * E):
            pw.append(pw[-1] @ Mk)
        pw = np.stack(pw)                                                         # (2E+1, N, d, d)
        noise_sum = np.concatenate([np.zeros((1, N, d, d)), np.cumsum(pw[0:2 * E:2], axis=0)])
        scale = eta ** 2 * sigma2 / d                                             # (N,)
        for k in range(N):                                # G^2: every local step of positive probability
            Pk = P + np.outer(m, delta[k]) + np.outer(delta[k], m) + np.outer(delta[k], delta[k])
            for j in range(E):
                if reach[k, j + 1] <= 0:
                    break
                Mj = pw[j, k] @ Pk @ pw[j, k] + scale[k] * noise_sum[j, k]
                G2 = max(G2, float(np.trace(H[k] @ Mj @ H[k])) + float(sigma2[k]))
        Bq = I - pw[pats, np.arange(N)]                                           # (Q, N, d, d)
        A = I - np.einsum("qn,qnij->qij", pt, Bq)
        c = np.einsum("qn,qnij,nj->qi", pt, Bq, -delta)
        C = np.einsum("qn,n,qnij->qij", pt ** 2, scale, noise_sum[pats, np.arange(N)])
        Am = A @ m
        m_new = prob @ (Am + c)
        P = np.einsum("q,qij->ij", prob, A @ P @ np.swapaxes(A, 1, 2) + C
                      + np.einsum("qi,qj->qij", Am, c) + np.einsum("qi,qj->qij", c, Am)
                      + np.einsum("qi,qj->qij", c, c))
        m = m_new
        out.append(float(np.trace(P)))
    return np.array(out), G2


def test_exact_errors_match_a_simulation():
    """exact_errors against a readable per-replicate, per-client loop (M = 4000, 3 rounds,
    |difference| within 5 standard errors) on an instance with inactive, incomplete and
    complete clients, noise, heterogeneity and adaptive weights."""
    fed = build_quadratic(3, 2, L=3.0, mu=0.5, heterogeneity=2.0, n_samples=[1, 2, 3], seed=3)
    E, sigma2 = 3, np.array([1.0, 0.0, 2.0])
    probs = np.array([[0.3, 0.2, 0.0, 0.5], [0.0, 0.0, 0.0, 1.0], [0.1, 0.0, 0.6, 0.3]])
    w0, etas = fed.optimum() + np.array([1.0, -2.0]), [0.3, 0.2, 0.1]
    exact, _ = exact_errors(fed, probs, E, "adaptive", sigma2, w0, etas)
    rng = np.random.default_rng(0)
    M, p, xs = 4000, fed.weights, fed.client_optima()
    err = np.empty((M, len(etas) + 1))
    for r in range(M):
        w = w0.copy()
        err[r, 0] = np.sum((w - fed.optimum()) ** 2)
        for t, eta in enumerate(etas):
            new = w.copy()
            for k in range(3):
                s = rng.choice(E + 1, p=probs[k])
                y = w.copy()
                for _ in range(s):
                    g = fed.H[k] @ (y - xs[k]) + np.sqrt(sigma2[k] / 2) * rng.standard_normal(2)
                    y = y - eta * g
                if s > 0:
                    new += E * p[k] / s * (y - w)
            w = new
            err[r, t + 1] = np.sum((w - fed.optimum()) ** 2)
    se = err.std(axis=0, ddof=1) / np.sqrt(M)
    assert np.all(np.abs(err.mean(axis=0) - exact) <= 5 * se + 1e-12), (err.mean(axis=0), exact, se)


@given(instances())
def test_efl_theorem1_bounds_the_exact_error(case):
    fed, E, probs, weighting, sigma2, theta_factor, radius, seed = case
    rng = np.random.default_rng(seed)
    d, p = fed.dim, fed.weights
    mu, L = float(fed.client_mu.min()), float(fed.client_L.max())
    mom = efl_step_moments(p, probs, E, weighting=weighting)
    assume(mom.ps[0].sum() > 0)                # the theorem's only requirement on s
    theta = theta_factor * max(mom.max_ratio, 1.0)
    wstar = fed.optimum()
    direction = rng.standard_normal(d)
    w0 = wstar + radius * direction / np.linalg.norm(direction)
    D = efl_heterogeneity(fed)
    kw = dict(E=E, theta=theta, mu=mu, L=L, sigma2=sigma2, D=D, weights=p,
              init_dist2=float(np.sum((w0 - wstar) ** 2)), moments=mom, variant="corrected")
    etas = efl_theorem1(T, G2=0.0, **kw).terms["eta"]      # eta_t does not depend on G^2
    errors, G2 = exact_errors(fed, probs, E, weighting, sigma2, w0, etas)
    final = efl_theorem1(T, G2=G2, **kw)
    # the finding's region (module docstring); the factor multiplies E(E-1): void for E = 1
    assume(E == 1 or not np.any(final.terms["drift_factor"] < 0))
    for tau in range(1, T + 1):
        res = efl_theorem1(tau, G2=G2, **kw)
        assert res.valid, str(res)
        np.testing.assert_allclose(res.terms["eta"], etas[:tau], rtol=1e-12)
        if errors[tau] <= res.value * (1 + 1e-9):
            continue
        noise_branch = (16 * E / mu) ** 2 * np.sum(res.terms["B"] / res.terms["S"] ** 2)
        max_branch = res.terms["gamma"] ** 2 * kw["init_dist2"] >= noise_branch
        if max_branch and np.any(probs[:, 0] > 0):
            event("violation of the known kind: max branch of C_tau, inactive clients")
            continue
        raise AssertionError(
            f"round {tau}: exact E||w - w*||^2 = {errors[tau]!r} > bound {res.value!r}\n{res}")
