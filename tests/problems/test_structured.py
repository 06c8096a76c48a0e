"""StructuredQuadraticFederation against the same problem stored dense
(QuadraticFederation via ``to_dense``), finite differences and closed forms;
random_structured_quadratic's exact constants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory import optim
from fltheory.algorithms import (
    EFL,
    FedAvg,
    FedCurv,
    FedCurvTE,
    FedDyn,
    FedElasticNet,
    FedOpt,
    FedProx,
    FedProxTE,
    Scaffold,
    run,
)
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from fltheory.participation import UniformSampling
from fltheory.problems import StructuredQuadraticFederation, random_structured_quadratic
from fltheory.problems import structured as structured_module
from fltheory.testing import check_federation
from fltheory.theory import affine_round_map, fixed_point, matrix_free_affine_map, spectral_rate
from fltheory.theory.moments import exact_moments

from .problem_refs import fd_grad, fd_jac


def _fed(N: int = 5, d: int = 6, r: int = 2, seed: int = 0, **kw: object) -> StructuredQuadraticFederation:
    return random_structured_quadratic(N, d, rank=r, L=8.0, mu=0.5, heterogeneity=0.8, seed=seed, **kw)


@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(2, 6), st.integers(0, 3), st.booleans())
def test_oracles_equal_dense_and_finite_differences(seed, N, d, r, weighted):
    r = min(r, d)
    w = np.random.default_rng(seed).uniform(0.1, 1.0, N) if weighted else None
    fed = random_structured_quadratic(N, d, rank=r, L=5.0, mu=0.5, heterogeneity=0.0 if N == 1 else 1.0,
                                      seed=seed, weights=w)
    dense = fed.to_dense()
    rng = np.random.default_rng(seed + 1)
    clients = rng.integers(0, N, 6)
    X = rng.standard_normal((6, d))
    for name in ("client_loss", "client_grad", "client_hess", "fisher_diag"):
        np.testing.assert_allclose(getattr(fed, name)(X, clients), getattr(dense, name)(X, clients),
                                   rtol=1e-12, atol=1e-12, err_msg=name)
    V = rng.standard_normal((6, d))
    np.testing.assert_allclose(fed.client_hvp(X, V, clients), np.einsum("mij,mj->mi", dense.H[clients], V),
                               rtol=1e-12, atol=1e-12)
    i = int(clients[0])
    np.testing.assert_allclose(fed.client_grad(X[:1], [i])[0],
                               fd_grad(lambda z: fed.client_loss(z, [i])[0], X[0]), atol=1e-6)
    np.testing.assert_allclose(fed.client_hess(X[:1], [i])[0],
                               fd_jac(lambda z: fed.client_grad(z, [i])[0], X[0]), atol=1e-6)
    np.testing.assert_allclose(fed.hess(), dense.hess(), rtol=1e-13, atol=1e-13)
    loss, g2 = fed.loss_and_grad_norm2(X)
    loss_d, g2_d = dense.loss_and_grad_norm2(X)
    np.testing.assert_allclose(loss, loss_d, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g2, g2_d, rtol=1e-12, atol=1e-12)


@given(st.integers(0, 2**31 - 1), st.integers(0, 3))
def test_solutions_and_curvature_equal_dense(seed, r):
    fed = _fed(4, 7, r, seed)
    dense = fed.to_dense()
    np.testing.assert_allclose(fed.optimum(), dense.optimum(), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(fed.client_optima(), dense.client_optima(), rtol=1e-12, atol=1e-12)
    lam = np.linalg.eigvalsh(dense.H)
    scale = lam[:, -1].max()
    np.testing.assert_allclose(fed.client_L, lam[:, -1], rtol=0, atol=8e-15 * scale)
    np.testing.assert_allclose(fed.client_mu, lam[:, 0], rtol=0, atol=8e-15 * scale)
    assert fed.L == pytest.approx(dense.L, rel=1e-14) and fed.mu == pytest.approx(dense.mu, rel=1e-13)
    rng = np.random.default_rng(seed)
    clients = np.array([0, 2, 3])
    D, b = rng.uniform(0, 2, (3, 7)), rng.standard_normal((3, 7))
    Y0 = np.zeros((3, 7))
    np.testing.assert_allclose(fed.shifted_solve(clients, D, b, Y0), dense.shifted_solve(clients, D, b, Y0),
                               rtol=1e-12, atol=1e-12)
    W = rng.standard_normal((3, 7))
    np.testing.assert_allclose(fed.client_gaps(W, clients), dense.client_gaps(W, clients), rtol=1e-12)


@pytest.mark.parametrize("r", [0, 1, 3])
def test_generator_hits_L_mu_and_heterogeneity_exactly(r):
    w = np.random.default_rng(4).uniform(0.2, 1.0, 6)
    fed = random_structured_quadratic(6, 9, rank=r, L=40.0, mu=0.25, heterogeneity=1.3, seed=r, weights=w)
    lam = np.linalg.eigvalsh(fed.to_dense().hess())
    assert lam[-1] == pytest.approx(40.0, rel=1e-14) and lam[0] == pytest.approx(0.25, rel=1e-13)
    assert fed.L == pytest.approx(40.0, rel=1e-14) and fed.mu == pytest.approx(0.25, rel=1e-13)
    x_star = fed.optimum()
    U = fed.client_optima() - x_star
    assert np.sqrt(fed.weights @ np.einsum("ij,ij->i", U, U)) == pytest.approx(1.3, rel=1e-13)
    np.testing.assert_allclose(fed.grad(x_star), 0.0, atol=1e-13)
    np.testing.assert_allclose(fed.client_loss(fed.client_optima()), 0.0, atol=1e-13)   # min f_i = 0
    assert fed.rank == r and fed.factors.shape == (6, 9, r)


def test_constants_equal_dense_and_are_exact():
    fed = _fed(4, 5, 2, 7)
    c, cd = fed.constants(radius=1.0), fed.to_dense().constants(radius=1.0)
    for name in ("L", "mu", "zeta2", "D", "delta", "F_star", "G2", "G2_max", "scaffold_B2", "scaffold_G2"):
        assert getattr(c, name) == pytest.approx(getattr(cd, name), rel=1e-11, abs=1e-13), name
    assert c.exact["L"] and c.exact["G2"]


def _algorithms() -> list[object]:
    return [
        FedAvg(lr=0.05, local_steps=3, server_lr=0.8),
        FedProx(lr=0.05, local_steps=3, mu=0.3),
        FedProx(mu=0.3, solver="exact"),
        FedCurv(lr=0.05, local_steps=3, alpha=0.2),
        FedCurv(alpha=0.2, solver="exact"),
        Scaffold(lr=0.05, local_steps=3, server_lr=0.9),
        FedDyn(alpha=0.4),
        FedDyn(alpha=0.4, solver="gd", lr=0.05, local_steps=3),
        FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.adam(0.1), local_steps=3),
        EFL(lr=0.05, local_steps=3, lam=0.2, q=0.5),
        FedElasticNet(lambda1=0.01, lambda2=0.2, solver="exact"),
        FedElasticNet(lambda1=0.01, lambda2=0.2, solver="gd", lr=0.05, local_steps=3),
        FedElasticNet(base="scaffold", lambda1=0.01, lambda2=0.2, solver="gd", lr=0.05, local_steps=3),
        FedProxTE(beta=0.3, mu=0.3, lr=0.05, local_steps=3),
        FedCurvTE(beta=0.3, alpha=0.2, lr=0.05, local_steps=3),
    ]


@pytest.mark.parametrize("alg", _algorithms(),
                         ids=lambda a: f"{a.name}-{getattr(a, 'solver', '')}-{getattr(a, 'base', '')}")
def test_every_algorithm_has_the_dense_iterates(alg):
    fed = _fed(5, 6, 2, 3)
    dense = fed.to_dense()
    part = UniformSampling(3)
    a = run(alg, fed, 6, seed=11, participation=part)
    b = run(alg, dense, 6, seed=11, participation=part)
    scale = max(1.0, float(np.abs(b.x).max()))
    np.testing.assert_allclose(a.x, b.x, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(a.dist2, b.dist2, rtol=1e-10, atol=1e-13)


def test_noisy_oracle_draws_the_dense_numbers():
    fed = _fed(4, 5, 1, 2).with_gradient_noise(0.3)
    dense = fed.to_dense()
    assert dense.noise_sigma2 is not None
    a = run(FedAvg(lr=0.05, local_steps=3), fed, 4, seed=5)
    b = run(FedAvg(lr=0.05, local_steps=3), dense, 4, seed=5)
    np.testing.assert_allclose(a.x, b.x, rtol=0, atol=1e-12)


@pytest.mark.parametrize("alg", [FedAvg(lr=0.05, local_steps=4), Scaffold(lr=0.05, local_steps=3)],
                         ids=lambda a: a.name)
def test_theory_routines_equal_dense(alg):
    fed = _fed(4, 12, 2, 9)
    dense = fed.to_dense()
    amap, amap_d = affine_round_map(alg, fed), affine_round_map(alg, dense)
    np.testing.assert_allclose(amap.M, amap_d.M, rtol=0, atol=1e-12)
    assert spectral_rate(amap) == pytest.approx(spectral_rate(amap_d), abs=1e-12)
    np.testing.assert_allclose(fixed_point(amap).x, fixed_point(amap_d).x, rtol=0, atol=1e-11)
    mf, mf_d = matrix_free_affine_map(alg, fed), matrix_free_affine_map(alg, dense)
    assert spectral_rate(mf) == pytest.approx(spectral_rate(mf_d), abs=1e-10)
    np.testing.assert_allclose(fixed_point(mf).x, fixed_point(mf_d).x, rtol=0, atol=1e-10)


def test_fedavg_rate_matches_the_closed_form_through_the_structure():
    # FedAvg with full participation, server rate 1 and K local steps maps x -> M x + c with
    # M = sum_i p_i (I - eta H_i)^K; its spectral radius is the exact rate.
    fed = _fed(3, 5, 2, 4)
    eta, K = 0.05, 4
    H = fed.client_hess(np.zeros(5))
    M = np.einsum("i,ijk->jk", fed.weights, np.linalg.matrix_power(np.eye(5) - eta * H, K))
    rho = float(np.max(np.abs(np.linalg.eigvals(M))))
    assert spectral_rate(affine_round_map(FedAvg(lr=eta, local_steps=K), fed)) == pytest.approx(rho, abs=1e-12)


def test_client_block_views_share_data_and_give_the_same_gradients():
    fed = _fed(6, 4, 2, 1)
    view = fed.client_block(2, 5)
    assert view is not None and view.n_clients == 3 and np.shares_memory(view.diag, fed.diag)
    X = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_array_equal(view.client_grad(X), fed.client_grad(X, [2, 3, 4]))
    assert fed.with_gradient_noise(0.1).client_block(0, 2) is None
    assert fed.client_data_bytes() == 8 * 4 * 4


def test_shifting_clients_matches_dense():
    fed = random_structured_quadratic(4, 5, rank=2, L=6.0, mu=1.0, heterogeneity=0.5, seed=3,
                                      n_samples=[3, 4, 5, 6])
    other = random_structured_quadratic(2, 5, rank=1, L=3.0, mu=1.0, heterogeneity=0.5, seed=4, n_samples=[2, 2])
    merged = fed.with_client(other)
    assert merged.rank == 2 and merged.n_clients == 6
    np.testing.assert_allclose(merged.to_dense().H, fed.to_dense().with_client(other.to_dense()).H, atol=1e-15)
    np.testing.assert_allclose(merged.weights, np.array([3, 4, 5, 6, 2, 2]) / 22)
    smaller = fed.without_client(1)
    np.testing.assert_allclose(smaller.optimum(), fed.to_dense().without_client(1).optimum(), atol=1e-13)
    with pytest.raises(InvalidProblemError, match="other"):
        fed.with_client(fed.to_dense())


def test_cvxpy_loss_equals_the_oracle():
    cp = pytest.importorskip("cvxpy")
    fed = _fed(2, 4, 2, 5)
    y = cp.Variable(4)
    point = np.random.default_rng(1).standard_normal(4)
    y.value = point
    expr = fed.cvxpy_client_loss(1, y)
    assert float(expr.value) + fed.offsets[1] == pytest.approx(float(fed.client_loss(point, [1])[0]), rel=1e-12)


@pytest.mark.parametrize("route", ["exact", "tight bounds", "outer bounds"])
def test_large_total_rank_routes_agree_with_dense(monkeypatch, route):
    # Above the Woodbury budget the global optimum comes from conjugate gradients; above the
    # exact-count budget L and mu come from Lanczos, made exact by certified brackets ("exact");
    # above that budget too, certified bounds: Ritz values -/+ 2 residuals checked by one count
    # each ("tight bounds") or, above the last budget, min Dbar and Weyl's bound ("outer bounds").
    monkeypatch.setattr(structured_module, "WOODBURY_MAX_RANK", 4)
    monkeypatch.setattr(structured_module, "EXACT_EIG_BUDGET", 10)
    if route != "exact":
        monkeypatch.setattr(structured_module, "CERTIFY_EIG_BUDGET", 10)
    if route == "outer bounds":
        monkeypatch.setattr(structured_module, "BOUND_EIG_BUDGET", 10)
    fed = _fed(6, 30, 2, 8)
    dense = fed.to_dense()
    np.testing.assert_allclose(fed.optimum(), dense.optimum(), rtol=0, atol=1e-12)
    bounds = fed.curvature_bounds()
    assert "Lanczos" in bounds.note and "certified" in bounds.note
    if route == "exact":
        assert bounds.exact
        assert bounds.L == pytest.approx(dense.L, rel=1e-14) and bounds.mu == pytest.approx(dense.mu, rel=1e-13)
        return
    assert not bounds.exact
    slack = 1e-14 * dense.L                                                # rounding of the dense eigvalsh
    assert bounds.L >= dense.L - slack and bounds.mu <= dense.mu + slack   # certified, whatever the route
    assert fed.L == bounds.L and fed.strong_convexity() == bounds.mu
    if route == "tight bounds":
        assert bounds.L == pytest.approx(dense.L, rel=1e-9) and bounds.mu == pytest.approx(dense.mu, rel=1e-9)
    else:
        Dbar = fed.weights @ fed.diag
        gram = np.einsum("ndr,nds->nrs", fed.factors, fed.factors)
        assert bounds.mu == pytest.approx(Dbar.min(), rel=1e-15)
        assert bounds.L == pytest.approx(Dbar.max() + fed.weights @ np.linalg.eigvalsh(gram)[:, -1], rel=1e-14)


def test_certified_brackets_survive_a_wrong_estimate():
    # A poor estimate (far from the extremes) still yields the exact extremes: the brackets are
    # widened until the eigenvalue count certifies them.
    from fltheory.problems._structured_linalg import bracketed_extremes, extreme_eigenvalues
    rng = np.random.default_rng(3)
    a, V = rng.uniform(0.5, 2.0, 20), rng.standard_normal((3, 20))
    exact = extreme_eigenvalues(a[None], V[None])
    out = bracketed_extremes(a, V, 1.3, 2.5, 1e-6)
    assert out is not None
    assert out[0] == pytest.approx(float(exact[0][0]), rel=1e-14)
    assert out[1] == pytest.approx(float(exact[1][0]), rel=1e-14)


def test_constants_refuse_dense_hessians_beyond_budget(monkeypatch):
    monkeypatch.setattr(structured_module, "DENSE_CONSTANTS_BUDGET", 10)
    with pytest.raises(OutOfRangeError, match="dense client Hessians"):
        _fed(3, 4, 1, 0).constants()


def test_bad_input_gives_typed_errors():
    ones = np.ones((2, 3))
    with pytest.raises(InvalidProblemError, match="diag"):
        StructuredQuadraticFederation(-ones, ones)
    with pytest.raises(InvalidProblemError, match="factors"):
        StructuredQuadraticFederation(ones, ones, np.ones((2, 4, 1)))
    with pytest.raises(InvalidProblemError, match="e must"):
        StructuredQuadraticFederation(ones, np.ones((3, 3)))
    with pytest.raises(InvalidProblemError, match="non-finite"):
        StructuredQuadraticFederation(ones, ones, np.full((2, 3, 1), np.nan))
    with pytest.raises(InvalidHyperparameterError, match="rank"):
        random_structured_quadratic(2, 3, rank=1, L=1.0, mu=1.0, heterogeneity=0.0, seed=0)
    with pytest.raises(InvalidHyperparameterError, match="rank"):
        random_structured_quadratic(2, 3, rank=4, L=2.0, mu=1.0, heterogeneity=0.0, seed=0)
    with pytest.raises(InvalidHyperparameterError, match="L >= mu"):
        random_structured_quadratic(2, 3, rank=1, L=1.0, mu=2.0, heterogeneity=0.0, seed=0)


def test_rounds_and_theory_routines_never_form_a_dense_hessian(monkeypatch):
    # Every hook, round and matrix-free theory routine runs with the dense oracles disabled.
    fed = _fed(5, 40, 3, 6)
    dense = fed.to_dense()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dense Hessian was formed")

    monkeypatch.setattr(StructuredQuadraticFederation, "client_hess", refuse)
    monkeypatch.setattr(StructuredQuadraticFederation, "hess", refuse)
    for alg in _algorithms():
        a = run(alg, fed, 2, seed=1)
        np.testing.assert_allclose(a.x, run(alg, dense, 2, seed=1).x, rtol=0,
                                   atol=1e-12 * max(1.0, float(np.abs(a.x).max())))
    alg = Scaffold(lr=0.05, local_steps=2)
    mf, mf_d = matrix_free_affine_map(alg, fed), matrix_free_affine_map(alg, dense)
    assert spectral_rate(mf) == pytest.approx(spectral_rate(mf_d), abs=1e-10)
    np.testing.assert_allclose(fixed_point(mf).x, fixed_point(mf_d).x, rtol=0, atol=1e-10)
    assert fed.curvature_bounds().L == pytest.approx(dense.L, rel=1e-14)


@pytest.mark.parametrize("alg", [FedAvg(lr=0.05, local_steps=3), Scaffold(lr=0.05, local_steps=2)],
                         ids=lambda a: a.name)
def test_exact_moments_equal_dense(alg):
    fed = _fed(4, 5, 2, 2).with_gradient_noise(0.2)
    part = UniformSampling(2)
    a = exact_moments(alg, fed, 4, participation=part)
    b = exact_moments(alg, fed.to_dense(), 4, participation=part)
    np.testing.assert_allclose(a.mean, b.mean, rtol=0, atol=1e-13)
    np.testing.assert_allclose(a.second, b.second, rtol=0, atol=1e-13)
    np.testing.assert_allclose(a.loss_gap, b.loss_gap, rtol=1e-12, atol=1e-14)


def test_federation_contract_checker_passes():
    report = check_federation(_fed(3, 4, 2, 1))
    assert all(status == "passed" for _, status, _ in report.checks)


@pytest.mark.parametrize("layout", ["d-major", "r-major view"])
def test_federation_keeps_a_private_copy_of_the_factors(layout):
    rng = np.random.default_rng(0)
    V = rng.standard_normal((2, 3, 5))                    # (N, r, d)
    U = V.transpose(0, 2, 1) if layout == "r-major view" else np.ascontiguousarray(V.transpose(0, 2, 1))
    fed = StructuredQuadraticFederation(np.ones((2, 5)), np.zeros((2, 5)), U)
    before, kept = fed.client_grad(np.ones(5)), V.copy()
    U[...] = 0.0
    np.testing.assert_array_equal(fed.client_grad(np.ones(5)), before)
    np.testing.assert_array_equal(fed.factors, kept.transpose(0, 2, 1))


@given(st.integers(0, 2**31 - 1), st.integers(1, 12), st.integers(0, 6), st.sampled_from(["repeated", "spread"]),
       st.booleans())
def test_extreme_eigenvalues_on_degenerate_structures(seed, d, r, diag_kind, zero_rows):
    # Repeated diagonal entries, rank above d, factors vanishing on some coordinates: the
    # inertia bisection still matches LAPACK to a few ulp of the spectral scale.
    from fltheory.problems._structured_linalg import extreme_eigenvalues
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 4, (3, d)).astype(float) if diag_kind == "repeated" else rng.uniform(1e-3, 10.0, (3, d))
    V = rng.standard_normal((3, r, d))
    if zero_rows:
        V[:, :, rng.permutation(d)[: max(1, d // 2)]] = 0.0
    H = np.matmul(np.swapaxes(V, 1, 2), V) + a[:, :, None] * np.eye(d)
    lam = np.linalg.eigvalsh(H)
    lo, hi = extreme_eigenvalues(a, V)
    scale = lam[:, -1]
    np.testing.assert_array_less(np.abs(lo - lam[:, 0]), 32 * np.finfo(float).eps * scale)
    np.testing.assert_array_less(np.abs(hi - lam[:, -1]), 32 * np.finfo(float).eps * scale)


@pytest.mark.parametrize("kind", ["depart", "join"])
def test_objective_shift_equals_dense(kind):
    from fltheory.theory import objective_shift
    fed = random_structured_quadratic(4, 6, rank=2, L=6.0, mu=1.0, heterogeneity=0.7, seed=5, n_samples=[3, 4, 5, 6])
    other = random_structured_quadratic(1, 6, rank=1, L=4.0, mu=1.0, heterogeneity=0.0, seed=6, n_samples=[4])
    if kind == "depart":
        a, b = objective_shift(fed, 2, "depart"), objective_shift(fed.to_dense(), 2, "depart")
    else:
        a = objective_shift(fed, None, "join", other)
        b = objective_shift(fed.to_dense(), None, "join", other.to_dense())
    assert a.measured == pytest.approx(b.measured, rel=1e-11)
    assert a.value == pytest.approx(b.value, rel=1e-11)


def test_chunked_linear_algebra_equals_one_chunk(monkeypatch):
    from fltheory.problems import _structured_linalg as linalg
    rng = np.random.default_rng(2)
    a, V, B = rng.uniform(0.5, 2.0, (7, 9)), rng.standard_normal((7, 3, 9)), rng.standard_normal((7, 9))
    whole = linalg.woodbury_solve(a, V, B), linalg.extreme_eigenvalues(a, V)
    monkeypatch.setattr(linalg, "CHUNK_BYTES", 8 * 3 * 9 * 2)       # chunks of two rows
    assert len(linalg._row_chunks(V)) == 4
    np.testing.assert_array_equal(linalg.woodbury_solve(a, V, B), whole[0])     # rows refined one by one
    np.testing.assert_array_equal(linalg.extreme_eigenvalues(a, V)[0], whole[1][0])
    np.testing.assert_array_equal(linalg.extreme_eigenvalues(a, V)[1], whole[1][1])


@pytest.mark.parametrize("r", [0, 2])
def test_generator_clients_mode_hits_every_client_exactly(r):
    fed = random_structured_quadratic(5, 8, rank=r, L=20.0, mu=0.5, heterogeneity=0.9, seed=r + 1, constants="clients")
    lam = np.linalg.eigvalsh(fed.to_dense().H)
    np.testing.assert_allclose(lam[:, -1], 20.0, rtol=1e-14)
    np.testing.assert_allclose(lam[:, 0], 0.5, rtol=1e-13)
    np.testing.assert_allclose(fed.client_L, 20.0, rtol=1e-14)
    np.testing.assert_allclose(fed.client_mu, 0.5, rtol=1e-13)
    assert 0.5 * (1 - 1e-13) <= fed.mu <= fed.L <= 20.0 * (1 + 1e-14)
    U = fed.client_optima() - fed.optimum()
    assert np.sqrt(fed.weights @ np.einsum("ij,ij->i", U, U)) == pytest.approx(0.9, rel=1e-13)


def test_overflowing_structures_are_refused_not_nan():
    with pytest.raises(InvalidProblemError, match="overflows"):
        StructuredQuadraticFederation(np.ones((2, 3)), np.zeros((2, 3)), np.full((2, 3, 1), 1e200))
    # representable Hessians whose solutions overflow: a typed error instead of inf or NaN
    fed = StructuredQuadraticFederation(np.full((1, 2), 1e-300), np.full((1, 2), 1e300))
    with pytest.raises(OutOfRangeError, match="optim"):
        fed.client_optima()
    with pytest.raises(OutOfRangeError, match="optim"):
        fed.optimum()


@pytest.mark.parametrize("route", ["woodbury", "cg"])
def test_optimum_is_accurate_at_high_condition_numbers(monkeypatch, route):
    # Against 60-digit arithmetic on the same (exactly representable) data: the mixed-precision
    # refinement keeps x* at float64 rounding at L/mu = 1e12.
    mp = pytest.importorskip("mpmath").mp
    mp.dps = 60
    if route == "cg":
        monkeypatch.setattr(structured_module, "WOODBURY_MAX_RANK", 0)
    fed = random_structured_quadratic(3, 6, rank=2, L=1e12, mu=1.0, heterogeneity=1.0, seed=2)
    D, U, p, e = fed.diag, fed.factors, fed.weights, fed.e
    H, b = mp.matrix(6, 6), mp.matrix(6, 1)
    for i in range(3):
        pi = mp.mpf(float(p[i]))
        for j in range(6):
            b[j] += pi * mp.mpf(float(e[i, j]))
            H[j, j] += pi * mp.mpf(float(D[i, j]))
            for k in range(6):
                H[j, k] += pi * mp.fsum(mp.mpf(float(U[i, j, s])) * mp.mpf(float(U[i, k, s])) for s in range(2))
    ref = np.array([float(v) for v in mp.lu_solve(H, b)])
    assert np.linalg.norm(fed.optimum() - ref) <= 1e-14 * np.linalg.norm(ref)
    client = np.array([float(v) for v in mp.lu_solve(
        mp.matrix([[mp.mpf(float(D[0, j])) * (j == k) + mp.fsum(mp.mpf(float(U[0, j, s])) * mp.mpf(float(U[0, k, s]))
                                                             for s in range(2)) for k in range(6)] for j in range(6)]),
        mp.matrix([mp.mpf(float(v)) for v in e[0]]))])
    assert np.linalg.norm(fed.client_optima()[0] - client) <= 1e-14 * np.linalg.norm(client)


@given(st.integers(0, 2**31 - 1), st.integers(2, 5), st.integers(1, 7), st.booleans())
def test_diagonal_constants_equal_the_dense_generic_formulas(seed, N, d, noisy):
    fed = random_structured_quadratic(N, d, rank=0, L=5.0 if d > 1 else 1.0, mu=1.0,
                                      heterogeneity=0.6, seed=seed)
    if noisy:
        fed = fed.with_gradient_noise(np.linspace(0.1, 0.3, N))
    dense = fed.to_dense()
    center = np.random.default_rng(seed).standard_normal(d)
    for kw in ({}, {"radius": 0.7, "center": center}, {"scaffold_B2": 10.0}):
        c, cd = fed.constants(**kw), dense.constants(**kw)
        for name in ("L", "mu", "mu_local", "zeta2", "D", "delta", "F_star", "sigma2", "G2", "G2_max",
                     "scaffold_B2", "scaffold_G2"):
            a, b = getattr(c, name), getattr(cd, name)
            assert (a is None) == (b is None), name
            if a is not None:
                assert a == pytest.approx(b, rel=1e-11, abs=1e-13), name
        np.testing.assert_allclose(c.D_k, cd.D_k, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(c.client_L, cd.client_L, rtol=1e-14)
        assert dict(c.exact) == dict(cd.exact)


def test_diagonal_constants_need_no_dense_hessian(monkeypatch):
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dense Hessian was formed")

    fed = random_structured_quadratic(50, 3000, rank=0, L=4.0, mu=0.5, heterogeneity=1.0, seed=1)
    monkeypatch.setattr(StructuredQuadraticFederation, "client_hess", refuse)
    monkeypatch.setattr(StructuredQuadraticFederation, "hess", refuse)
    c = fed.constants(radius=1.0)
    assert c.L == pytest.approx(4.0, rel=1e-14) and c.mu == pytest.approx(0.5, rel=1e-14)
    assert c.G2 is not None and c.G2_max is not None and c.G2 <= c.G2_max
    with pytest.raises(InvalidHyperparameterError, match="scaffold_B2"):
        fed.constants(scaffold_B2=1e-6)
    with pytest.raises(InvalidHyperparameterError, match="unexpected"):
        fed.constants(radiuss=1.0)


def test_ball_maximum_when_the_gradient_lies_in_the_top_eigenspace():
    # Regression (found by the test above): with d = 1 the secular function is exactly zero at
    # its upper bracket, and rounding made it +0, which raised a raw ValueError from brentq.
    # max over |s| <= r of lam s^2 + 2 g s + q0 = lam r^2 + 2 |g| r + q0.
    from fltheory.problems._trust_region import max_convex_quadratic_on_ball
    lam, g, q0, r = 1.0, 1.7337094689543283, 0.4, 0.7
    for scale in (1.0, 3.0, 1e-3):
        value = max_convex_quadratic_on_ball(np.array([[lam * scale]]), np.array([g]), q0, r)
        assert value == pytest.approx(lam * scale * r * r + 2 * g * r + q0, rel=1e-14)
    fed = random_structured_quadratic(2, 1, rank=0, L=1.0, mu=1.0, heterogeneity=0.6, seed=86448649)
    center = np.random.default_rng(86448649).standard_normal(1)
    c, cd = fed.constants(radius=0.7, center=center), fed.to_dense().constants(radius=0.7, center=center)
    assert c.G2 == pytest.approx(cd.G2, rel=1e-13) and c.G2_max == pytest.approx(cd.G2_max, rel=1e-13)
