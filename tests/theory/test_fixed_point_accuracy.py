"""Accuracy readings of matrix-free fixed points (``theory._fixed_point_accuracy``, the
``condition`` / ``error_estimate`` fields of matrix-free and powered-Krylov FixedPoints) and
the honesty of the Krylov rate error (``theory.krylov``), held to closed forms and to the
dense route.

The instance (FedAvg, diagonal client Hessians) has a closed-form fixed point: with
g_i = 1 - (1 - lr h_i)^K per coordinate, one round is x -> x - mean_i g_i (x - x_i*), so
x~ = sum_i g_i x_i* / sum_i g_i and the rate is max |1 - mean_i g_i|.  Its conditioning is
set by the spread of the Hessian spectrum (cond = 1e2 ... 1e14).

Documented factor: the returned fixed state's true relative error ||x - x~||_2 / ||x~||_2
lies within ``ESTIMATE_FACTOR`` times the reported ``error_estimate``.
"""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, Scaffold
from fltheory.errors import FLTheoryError, InvalidHyperparameterError
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic
from fltheory.theory import affine_round_map, fixed_point
from fltheory.theory.krylov import block_krylov, projected_singular_values
from fltheory.theory.matrix_free import rate_estimate
from fltheory.theory.powered_krylov import powered_applies

ESTIMATE_FACTOR = 2.0
CONDITIONS = [1e2, 1e4, 1e6, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14]
N, D, LR, K = 3, 40, 0.5, 5


def _diagonal_fedavg(cond: float) -> tuple[QuadraticFederation, np.ndarray, float]:
    """The federation, its closed-form fixed point and rate at Hessian spread ``cond``."""
    rng = np.random.default_rng(int(np.log10(cond)))
    h = np.geomspace(1.0, 1.0 / cond, D) * rng.uniform(0.5, 1.0, (N, D))
    xs = rng.standard_normal((N, D))
    fed = QuadraticFederation(np.einsum("ij,jk->ijk", h, np.eye(D)), xs * h)
    g = -np.expm1(K * np.log1p(-LR * h))
    return fed, (g * xs).sum(0) / g.sum(0), float(np.abs(1.0 - g.mean(0)).max())


@pytest.mark.parametrize("cond", CONDITIONS)
def test_matrix_free_fixed_point_error_lies_within_its_estimate_or_is_refused(cond):
    fed, x_true, rate_true = _diagonal_fedavg(cond)
    algorithm = FedAvg(lr=LR, local_steps=K)
    amap = affine_round_map(algorithm, fed, matrix_free=True)
    try:
        fp = fixed_point(amap)
    except FLTheoryError as exc:
        assert cond > 1e10, f"refused a well-conditioned instance: {exc}"
        return
    err = float(np.linalg.norm(fp.x - x_true) / np.linalg.norm(x_true))
    assert fp.error_estimate is not None and fp.error_estimate > 0.0
    assert err <= ESTIMATE_FACTOR * fp.error_estimate, (err, fp.error_estimate)
    assert fp.relative_accuracy == fp.error_estimate
    # the rate carries a positive error bound that covers the closed-form rate
    assert fp.spectral_rate_error is not None and fp.spectral_rate_error > 0.0
    assert abs(fp.spectral_rate - rate_true) <= fp.spectral_rate_error
    # dense route on the same instance: the same condition number (matrix-free: a lower bound)
    dense = fixed_point(affine_round_map(algorithm, fed, matrix_free=False))
    assert fp.condition_kind == "lower bound" and dense.condition_kind == ""
    assert fp.condition is not None and dense.condition is not None
    # a lower bound in exact arithmetic; both sides carry rounding of about eps * cond relative
    slack = 1e-6 + 100 * np.finfo(float).eps * dense.condition
    assert fp.condition <= dense.condition * (1.0 + slack)
    assert fp.condition == pytest.approx(dense.condition, rel=1e-3)
    dense_err = float(np.linalg.norm(dense.x - x_true) / np.linalg.norm(x_true))
    assert dense.relative_accuracy is not None and dense_err <= dense.relative_accuracy
    assert "estimated relative error" in fp.message and "lower bound" in repr(fp)


@pytest.mark.parametrize("cond", CONDITIONS)
def test_matrix_free_rate_error_covers_the_closed_form_rate_or_the_rate_is_refused(cond):
    """Beyond cond 1e10 the Krylov space of this instance stops by dropping a block below the
    rank tolerance; the Ritz values can then miss eigenvalues, and the error must say so."""
    fed, _, rate_true = _diagonal_fedavg(cond)
    amap = affine_round_map(FedAvg(lr=LR, local_steps=K), fed, matrix_free=True)
    try:
        est = rate_estimate(amap)
    except FLTheoryError:
        assert cond > 1e10
        return
    assert 0.0 < est.error and abs(est.rate - rate_true) <= est.error


def test_every_instance_up_to_1e10_returns_and_the_well_conditioned_ones_are_accurate():
    for cond in (1e2, 1e6, 1e10):
        fed, x_true, _ = _diagonal_fedavg(cond)
        fp = fixed_point(affine_round_map(FedAvg(lr=LR, local_steps=K), fed, matrix_free=True))
        assert fp.error_estimate is not None and fp.condition is not None
        # the estimate tracks the conditioning: about cond(I - M_V) * eps, not a blanket number
        assert fp.condition * 1e-16 <= fp.error_estimate <= fp.condition * 1e-14
        if cond == 1e2:
            assert np.abs(fp.x - x_true).max() <= 1e-13 * np.abs(x_true).max()


def test_max_condition_refuses_on_both_routes_with_the_same_error_type():
    fed, _, _ = _diagonal_fedavg(1e6)
    algorithm = FedAvg(lr=LR, local_steps=K)
    for matrix_free in (False, True):
        amap = affine_round_map(algorithm, fed, matrix_free=matrix_free)
        with pytest.raises(InvalidHyperparameterError, match=r"max_condition=1\.0e\+03"):
            fixed_point(amap, max_condition=1e3)
        assert fixed_point(amap, max_condition=1e7).condition < 1e7


@pytest.fixture(scope="module")
def scaffold_fed():
    return random_quadratic(40, 6, L=1.0, mu=0.1, heterogeneity=1.0, seed=5)


@pytest.mark.parametrize("closed_form", [True, False])
def test_scaffold_fixed_points_carry_estimates_that_cover_the_dense_solution(scaffold_fed, closed_form):
    """Non-symmetric linear part: the powered Krylov space (closed-form products) reports an
    ESTIMATE of the condition number, the space of M by rounds a LOWER bound."""
    algorithm = Scaffold(lr=0.2, local_steps=5)
    dense = fixed_point(affine_round_map(algorithm, scaffold_fed, matrix_free=False, closed_form=False))
    amap = affine_round_map(algorithm, scaffold_fed, matrix_free=True, closed_form=closed_form)
    assert powered_applies(amap) is closed_form
    fp = fixed_point(amap)
    assert fp.condition_kind == ("estimate" if closed_form else "lower bound")
    assert fp.error_estimate is not None and fp.error_estimate_kind == "estimate"
    assert dense.condition is not None and fp.condition is not None and fp.S is not None and dense.S is not None
    gap = float(np.linalg.norm(fp.S - dense.S) / np.linalg.norm(dense.S))
    assert gap <= ESTIMATE_FACTOR * (fp.error_estimate + dense.condition * np.finfo(float).eps)
    if closed_form:
        # an estimate: within an order of magnitude of the computed value here
        assert dense.condition / 10 <= fp.condition <= dense.condition * 10
    else:
        assert fp.condition <= dense.condition * (1.0 + 1e-6)
        assert fp.condition >= dense.condition / 10
    with pytest.raises(InvalidHyperparameterError, match="max_condition"):
        fixed_point(amap, max_condition=1.0001)


@pytest.mark.parametrize("symmetric", [True, False])
def test_projected_singular_values_lie_inside_those_of_i_minus_m(symmetric):
    rng = np.random.default_rng(7)
    n = 60
    A = rng.standard_normal((n, n)) / np.sqrt(n)
    M = 0.45 * ((A + A.T) / 2 if symmetric else A)
    sv = np.linalg.svd(np.eye(n) - M, compute_uv=False)
    for vectors in (6, 20, 60):
        res = block_krylov(lambda V: M @ V, lambda v: v, rng.standard_normal((n, 2)), symmetric=symmetric,
                           rhs=rng.standard_normal(n), max_vectors=vectors, solve_tol=1e-300, eig_tol=1e-300)
        smax, smin = projected_singular_values(res)
        assert sv[-1] * (1 - 1e-12) <= smin <= smax <= sv[0] * (1 + 1e-12)
        if vectors == n:
            assert smin == pytest.approx(sv[-1], rel=1e-10) and smax == pytest.approx(sv[0], rel=1e-10)


def test_projected_singular_values_refuse_anything_but_a_krylov_result():
    with pytest.raises(InvalidHyperparameterError, match="result must be a KrylovResult"):
        projected_singular_values(np.eye(3))  # type: ignore[arg-type]


def test_an_invariant_space_reports_a_rounding_level_error_not_zero():
    """A diagonal M found exactly (the space becomes invariant): the rate error is not 0.0
    but the rounding level of the projected problem, and it covers the true error."""
    lam = np.linspace(-0.3, 0.9, 12)
    res = block_krylov(lambda V: lam[:, None] * V, lambda v: v, np.ones((12, 1)), symmetric=True,
                       eig_tol=1e-300, max_vectors=12)
    assert res.eig is not None
    assert 0.0 < res.eig.error <= 1e-13
    assert abs(res.eig.rate - 0.9) <= res.eig.error
