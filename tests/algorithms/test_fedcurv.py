"""FedCurv / FedCL and their TE variants (seed 002 eq. 2, Alg. 2): vectorized ==
reference loop, closed-form rounds on quadratics, reductions, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedcurv import FedCL, FedCurv, FedCurvTE
from fltheory.algorithms.fedprox import FedProx
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.run import run
from fltheory.algorithms.targets import TemporalEnsemble
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError

from ._problems import generated_quadratic, sampled_incomplete, sized_logistic

SampledIncomplete = sampled_incomplete
quadratic = generated_quadratic
logistic = sized_logistic


def fixed_fisher(d):
    v = np.linspace(0.5, 1.5, d)
    return lambda x: v + 0.1 * np.tanh(x)       # depends on the server model


CASES = [
    ("quad", lambda: quadratic(1), None),
    ("quad-noise-sampled", lambda: quadratic(2).with_gradient_noise(0.3), SampledIncomplete(3)),
    ("logistic-sampled", lambda: logistic(3), SampledIncomplete(3)),
    ("logistic-minibatch", lambda: logistic(4).with_minibatch(3), SampledIncomplete(2)),
]
VARIANTS = {
    "client": dict(),
    "client-exact": dict(solver="exact"),
    "client-te-global": dict(target=TemporalEnsemble(beta=0.5)),
    "client-te-local": dict(target=TemporalEnsemble(beta=0.5, of="local")),
    "proxy-fed": dict(fisher="proxy"),
    "proxy-callable-te": dict(fisher="proxy", target=TemporalEnsemble(beta=0.3)),
    "proxy-exact": dict(fisher="proxy", solver="exact"),
}


@pytest.mark.parametrize("name,make,part", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_vectorized_equals_reference(name, make, part, variant):
    fed = make()
    kw = dict(VARIANTS[variant])
    if kw.get("fisher") == "proxy":
        kw["proxy"] = fixed_fisher(fed.dim) if "callable" in variant else fed.exact()
    alg = FedCurv(lr=np.linspace(0.05, 0.1, fed.n_clients), local_steps=np.arange(fed.n_clients) % 3 + 2,
                  alpha=0.3, server_lr=0.9, **kw)
    x0 = np.linspace(-0.3, 0.4, fed.dim)
    hist = run(alg, fed, 6, participation=part, seed=5, x0=x0)
    ref = reference_run(alg, fed, 6, participation=part, seed=5, x0=x0)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)
    assert np.linalg.norm(hist.x[-1] - hist.x[0]) > 1e-3


def test_round_two_closed_form_on_quadratics():
    """Exact local solves, full participation.  Round 1 has no penalty, so w_j = x_j*
    and I_j = diag(H_j); round 2 solves (H_s + 2a sum_{j!=s} diag I_j) y =
    e_s + 2a sum_{j!=s} I_j * x_j* (seed 002 eq. 2)."""
    fed = quadratic(3)
    a = 0.4
    hist = run(FedCurv(alpha=a, solver="exact"), fed, 2, seed=0)
    xs = fed.client_optima()
    p = fed.weights
    np.testing.assert_allclose(hist.x[1], p @ xs, rtol=0, atol=1e-12)
    I = np.einsum("nii->ni", fed.H)
    ys = []
    for s in range(fed.n_clients):
        others = [j for j in range(fed.n_clients) if j != s]
        D = 2 * a * I[others].sum(axis=0)
        b = 2 * a * (I[others] * xs[others]).sum(axis=0)
        ys.append(np.linalg.solve(fed.H[s] + np.diag(D), fed.e[s] + b))
    np.testing.assert_allclose(hist.x[2], p @ np.array(ys), rtol=0, atol=1e-12)
    np.testing.assert_allclose(hist.state.I, I, rtol=0, atol=1e-14)


def test_first_round_has_no_penalty_and_alpha_zero_is_fedavg():
    fed = quadratic(4).with_gradient_noise(0.1)
    part = SampledIncomplete(3)
    curv = run(FedCurv(lr=0.1, local_steps=3, alpha=0.7), fed, 1, participation=part, seed=1)
    avg = run(FedAvg(lr=0.1, local_steps=3), fed, 1, participation=part, seed=1)
    np.testing.assert_array_equal(curv.x, avg.x)
    zero = run(FedCurv(lr=0.1, local_steps=3, alpha=0.0), fed, 5, participation=part, seed=1)
    avg5 = run(FedAvg(lr=0.1, local_steps=3), fed, 5, participation=part, seed=1)
    np.testing.assert_allclose(zero.x, avg5.x, rtol=0, atol=1e-15)


def test_te_beta_zero_reproduces_base():
    fed = logistic(5)
    part = SampledIncomplete(3)
    kw = dict(lr=0.2, local_steps=3, alpha=0.5)
    base = run(FedCurv(**kw), fed, 5, participation=part, seed=4)
    te = run(FedCurvTE(beta=0.0, of="local", **kw), fed, 5, participation=part, seed=4)
    np.testing.assert_array_equal(base.x, te.x)
    default = run(FedCurvTE(beta=0.0, **kw), fed, 5, participation=part, seed=4)
    np.testing.assert_array_equal(base.x, default.x)   # the default reading reduces exactly
    proxy = fixed_fisher(fed.dim)
    cl = run(FedCL(proxy=proxy, **kw), fed, 5, participation=part, seed=4)
    cl_te = run(FedCurvTE(beta=0.0, fisher="proxy", proxy=proxy, **kw), fed, 5, participation=part, seed=4)
    np.testing.assert_array_equal(cl.x, cl_te.x)


def test_te_global_beta_zero_centres_every_penalty_at_the_received_model():
    """Alg. 2 as printed with beta = 0: all w_j become x_t, so with identical client
    Fisher diagonals the penalty is alpha (|S|-1) (y - x)^T diag(I) (y - x) = FedProx
    with mu = 2 alpha (|S|-1) I (a scalar when I is a constant vector)."""
    d = 3
    H = np.stack([np.diag(np.full(d, 2.0)) for _ in range(4)])   # fisher_diag = 2 everywhere
    rng = np.random.default_rng(0)
    from fltheory.problems.quadratic import QuadraticFederation
    fed = QuadraticFederation(H, rng.standard_normal((4, d)))
    a = 0.25
    te = run(FedCurvTE(beta=0.0, of="global", lr=0.1, local_steps=4, alpha=a), fed, 4, seed=0)
    # round 1 has no penalty (no previous local models); from round 2 on both are FedProx-like
    first = run(FedAvg(lr=0.1, local_steps=4), fed, 1, seed=0)
    np.testing.assert_allclose(te.x[1], first.x[1], rtol=0, atol=1e-15)
    rest = run(FedProx(lr=0.1, local_steps=4, mu=2 * a * 3 * 2.0), fed, 3, seed=0, x0=te.x[1])
    np.testing.assert_allclose(te.x[1:], rest.x, rtol=0, atol=1e-13)


def test_fedcl_with_constant_fisher_is_fedprox():
    """Proxy Fisher c * 1: penalty alpha c ||y - x||^2 = FedProx with mu = 2 alpha c."""
    fed = quadratic(6)
    c = 2.0
    cl = run(FedCL(proxy=lambda x: np.full(fed.dim, c), lr=0.1, local_steps=3, alpha=0.25), fed, 5, seed=0)
    prox = run(FedProx(lr=0.1, local_steps=3, mu=1.0), fed, 5, seed=0)
    np.testing.assert_allclose(cl.x, prox.x, rtol=0, atol=1e-14)


def test_proxy_federation_fisher_is_weighted_pool():
    from fltheory.algorithms.fedcurv import proxy_fisher
    fed = quadratic(7)
    np.testing.assert_allclose(proxy_fisher(fed, np.zeros(fed.dim)),
                               fed.weights @ np.einsum("nii->ni", fed.H), rtol=1e-14)
    lg = logistic(2)
    x = np.array([0.3, -0.2, 0.1])
    pooled = lg.weights @ lg.fisher_diag(np.broadcast_to(x, (lg.n_clients, 3)))
    np.testing.assert_allclose(proxy_fisher(lg, x), pooled, rtol=1e-14)


@pytest.mark.parametrize("kw,match", [
    (dict(alpha=-1.0), "alpha"), (dict(fisher="empirical"), "fisher"),
    (dict(fisher="proxy"), "proxy"), (dict(proxy=lambda x: x), "proxy"),
    (dict(fisher="proxy", proxy=3.0), "proxy"), (dict(lr=-1.0), "lr"), (dict(local_steps=0), "local_steps"),
    (dict(fisher="proxy", proxy=lambda x: x, target=TemporalEnsemble(beta=0.1, of="local")), "of="),
    (dict(target="te"), "TemporalEnsemble"),
])
def test_bad_hyperparameters(kw, match):
    with pytest.raises(InvalidHyperparameterError, match=match):
        FedCurv(**kw)


def test_bad_proxy_output_and_dimension():
    fed = quadratic(0)
    with pytest.raises(InvalidProblemError, match="shape"):
        run(FedCL(proxy=lambda x: np.ones(fed.dim + 1)), fed, 1)
    with pytest.raises(InvalidProblemError, match="non-negative"):
        run(FedCL(proxy=lambda x: -np.ones(fed.dim)), fed, 1)
    with pytest.raises(InvalidProblemError, match="dim"):
        run(FedCL(proxy=quadratic(0, d=2)), fed, 1)


def test_sum_of_others_is_the_leave_one_out_sum_without_cancellation():
    """Row r = sum_{j != r} a_j (seed 002 eq. 2 sums over S \\ s).  With one dominant
    row (1e6) and tiny others (~1e-10) the broadcast-and-subtract form U - a_r loses
    the digits of the dominant row's sum of the others (the ulp of 1e6 is ~1e-10);
    the direct loop and sum_of_others agree."""
    from fltheory.algorithms.fedcurv import sum_of_others
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 1.5, size=(5, 3)) * 1e-10
    a[2] = 1e6
    loop = np.array([sum(a[j] for j in range(5) if j != r) for r in range(5)])
    np.testing.assert_allclose(sum_of_others(a), loop, rtol=1e-14, atol=0)
    subtract = a.sum(axis=0) - a
    assert np.max(np.abs(subtract[2] - loop[2]) / loop[2]) > 0.1     # the dominant row's own sum
    assert sum_of_others(a[:0]).shape == (0, 3)
    np.testing.assert_array_equal(sum_of_others(a[:1]), np.zeros((1, 3)))     # nobody else
    np.testing.assert_array_equal(sum_of_others(a[:2]), a[[1, 0]])            # the other row, exactly


def test_penalty_of_a_dominant_client_keeps_the_others_digits():
    """Client 0's Fisher is 1e6 x larger than the others': its penalty
    D_0 = 2 alpha sum_{j != 0} I_j, b_0 = 2 alpha sum_{j != 0} I_j * w_j (seed 002 eq. 2)
    must match the direct sums to rounding, not to the ulp of client 0's own term."""
    from fltheory.algorithms.fedcurv import FedCurvState
    rng = np.random.default_rng(1)
    N, d, a = 4, 3, 0.3
    I = rng.uniform(0.5, 1.5, size=(N, d)) * 1e-4
    I[0] = 1e3
    W = rng.normal(size=(N, d))
    state = FedCurvState(x=np.zeros(d), t=1, W=W, I=I, seen=np.ones(N, dtype=bool))
    objective, _ = FedCurv(alpha=a)._objective(state, np.arange(N))
    D = np.array([2 * a * sum(I[j] for j in range(N) if j != s) for s in range(N)])
    b = np.array([2 * a * sum(I[j] * W[j] for j in range(N) if j != s) for s in range(N)])
    np.testing.assert_allclose(objective.D, D, rtol=1e-13, atol=0)
    np.testing.assert_allclose(objective.b, b, rtol=1e-12, atol=0)
