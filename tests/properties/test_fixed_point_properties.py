"""Closed-form FedOpt fixed points (seed 001 Theorem 2 as in THEORY.md section 3, and the
derived local/joint-correction fixed point) against iteration of the round map, computed
client by client with fixed diagonal preconditioners, per-client rates and steps."""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from fltheory.testing import quadratic_federations
from fltheory.theory import fedopt_quadratic_fixed_point

from ..theory._loops import fedopt_round


@st.composite
def instances(draw):
    fed = draw(quadratic_federations(n_clients=st.integers(1, 4), dim=st.integers(1, 3),
                                     L=st.floats(1.0, 1e2), mu=st.floats(1e-2, 1.0),
                                     heterogeneity=st.floats(0.0, 10.0)))
    N, d = fed.n_clients, fed.dim
    Pd = np.array(draw(st.lists(st.floats(0.1, 10.0), min_size=N * d, max_size=N * d))).reshape(N, d)
    # rates inside the contraction region of each client: eta_i P_max L_i <= c_i < 2
    c = np.array(draw(st.lists(st.floats(0.01, 1.9), min_size=N, max_size=N)))
    lr = c / (Pd.max(axis=1) * fed.client_L)
    tau = np.array(draw(st.lists(st.integers(1, 6), min_size=N, max_size=N)))
    correction = draw(st.sampled_from(["none", "local", "joint"]))
    eta_s = draw(st.floats(0.1, 1.0))
    return fed, Pd, lr, tau, correction, eta_s


@given(instances())
def test_iterates_follow_the_closed_form_affine_map(case):
    """x_R - x~ = A^R (x_0 - x~) round by round: fixed point and linear part both exact."""
    fed, Pd, lr, tau, correction, eta_s = case
    fp = fedopt_quadratic_fixed_point(fed, lr, tau, Pd, correction=correction)
    P = np.einsum("ni,ij->nij", Pd, np.eye(fed.dim))
    M = np.eye(fed.dim) - eta_s * (np.eye(fed.dim) - fp.operator)   # Mann iteration matrix
    x = fp.x + 1.0 + np.arange(fed.dim)
    err = x - fp.x
    scale = 1.0 + np.linalg.norm(fp.x)
    for _ in range(30):
        x = fedopt_round(fed, x, lr, tau, P, server_lr=eta_s, correction=correction)
        err = M @ err
        assert np.linalg.norm((x - fp.x) - err) <= 1e-9 * (scale + np.linalg.norm(err))


@given(instances())
def test_long_iteration_reaches_the_fixed_point_when_contractive(case):
    fed, Pd, lr, tau, correction, eta_s = case
    fp = fedopt_quadratic_fixed_point(fed, lr, tau, Pd, correction=correction)
    P = np.einsum("ni,ij->nij", Pd, np.eye(fed.dim))
    M = np.eye(fed.dim) - eta_s * (np.eye(fed.dim) - fp.operator)
    rate = float(np.abs(np.linalg.eigvals(M)).max())
    assert fp.contractive == (fp.spectral_radius < 1)
    # client contraction does not imply a contracting round (e.g. local correction
    # removes the preconditioner from the server step): only iterate contracting maps
    assume(rate < 0.999)
    # R rounds of the readable loop with rate^R <= 1e-12 (at most 3000 rounds; the
    # tolerance follows rate^R when the cap binds)
    R = int(min(3000, np.ceil(np.log(1e-12) / np.log(max(rate, 1e-300)))))
    x = fp.x + 1.0
    for _ in range(R):
        x = fedopt_round(fed, x, lr, tau, P, server_lr=eta_s, correction=correction)
    tol = max(1e-9, 2 * rate ** R * np.sqrt(fed.dim)) * (1 + np.linalg.norm(fp.x))
    assert np.linalg.norm(x - fp.x) <= tol
