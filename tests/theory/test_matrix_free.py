"""Matrix-free exact theory agrees with the dense route on every affine algorithm."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import (
    FedAvg,
    FedOpt,
    FedProx,
    Scaffold,
)
from fltheory.errors import (
    InvalidProblemError,
    NotAffineError,
    UnclassifiedDirectionError,
)
from fltheory.problems.generators import random_quadratic
from fltheory.theory.affine import (
    AffineRoundMap,
    affine_round_map,
    contraction_factor,
    fixed_point,
    orbit_rate,
    spectral_rate,
)
from fltheory.theory.krylov import block_krylov
from fltheory.theory.matrix_free import MatrixFreeAffineMap, matrix_free_affine_map, rate_estimate

from ._affine_makers import AFFINE_MAKERS

N, D = 5, 12

MAKERS = {
    **AFFINE_MAKERS,
    "fedprox gd": lambda: FedProx(lr=0.1, local_steps=3, mu=0.4),
    "fedavgm": lambda: FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.fedavgm(1.0, 0.5),
                              local_steps=3),
    "preconditioned joint": lambda: FedOpt(client_optimizer=optim.preconditioned(0.1, np.linspace(0.5, 2, D)),
                                           server_optimizer=optim.sgd(0.8), local_steps=3,
                                           correction="joint"),
}


@pytest.fixture(scope="module")
def fed():
    return random_quadratic(N, D, L=2.0, mu=0.3, heterogeneity=2.0, seed=4, constants="clients",
                            weights=np.arange(1.0, N + 1))


@pytest.mark.parametrize("name", list(MAKERS))
def test_matrix_free_equals_dense(fed, name):
    x0 = np.linspace(-1, 1, D)
    dense = affine_round_map(MAKERS[name](), fed, x0=x0, matrix_free=False)
    free = affine_round_map(MAKERS[name](), fed, x0=x0, matrix_free=True)
    assert isinstance(dense, AffineRoundMap) and isinstance(free, MatrixFreeAffineMap)
    S = np.random.default_rng(0).standard_normal(dense.dim) * ~dense.frozen + dense.base * dense.frozen
    np.testing.assert_allclose(free(S), dense(S), rtol=0, atol=1e-12)
    assert spectral_rate(free) == pytest.approx(spectral_rate(dense), abs=1e-10)
    fd, ff = fixed_point(dense), fixed_point(free)
    assert ff.method == "matrix-free affine" and ff.success
    np.testing.assert_allclose(ff.S, fd.S, rtol=0, atol=1e-10)
    assert ff.residual <= 1e-11
    assert ff.spectral_rate == pytest.approx(fd.spectral_rate, abs=1e-10)
    assert orbit_rate(free) == pytest.approx(orbit_rate(dense), abs=1e-9)


def test_orbit_rate_of_a_start_avoiding_the_slowest_mode(fed):
    """A start whose error lies in the fast eigenspace decays at the fast rate (dense check
    of the same instance)."""
    alg = FedAvg(lr=0.1, local_steps=3)
    dense = affine_round_map(alg, fed, matrix_free=False)
    free = affine_round_map(alg, fed, matrix_free=True)
    fp = fixed_point(dense)
    lam, V = np.linalg.eig(dense.M)
    fast = np.argsort(np.abs(lam))[: D // 2]
    start = fp.S + np.real(V[:, fast] @ np.ones(fast.size))
    want = orbit_rate(dense, initial=start)
    assert want < spectral_rate(dense) - 1e-3
    assert orbit_rate(free, initial=start) == pytest.approx(want, abs=1e-9)


def test_automatic_choice_and_limits(fed):
    alg = Scaffold(lr=0.1, local_steps=2)
    assert isinstance(affine_round_map(alg, fed), AffineRoundMap)             # n = 84 <= dense_max
    auto = affine_round_map(alg, fed, dense_max=50)
    assert isinstance(auto, MatrixFreeAffineMap)
    with pytest.raises(InvalidProblemError, match="M\\^T"):
        contraction_factor(auto)
    tiny = random_quadratic(2, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=0)
    with pytest.raises(InvalidProblemError, match="dense route"):
        spectral_rate(matrix_free_affine_map(FedAvg(lr=0.1, local_steps=2), tiny))


def test_matrix_free_refuses_non_affine_and_undeclared(fed):
    with pytest.raises(NotAffineError):
        matrix_free_affine_map(FedOpt(client_optimizer=optim.adagrad(0.1), server_optimizer=optim.sgd(1.0),
                                      local_steps=3), fed)

    class Forgetful(Scaffold):
        def linear_invariants(self, problem):
            return ()

    with pytest.raises(UnclassifiedDirectionError):
        spectral_rate(matrix_free_affine_map(Forgetful(lr=0.1, local_steps=2), fed))


# ------------------------------------------------ block rounds and symmetric linear parts
@pytest.mark.parametrize("name", ["fedavg", "fedprox gd", "fedprox exact", "scaffold II", "feddyn exact",
                                  "fedcurv", "preconditioned joint"])
def test_block_rounds_equal_dense(fed, name):
    """Block size 8 forced on a small model: where the lifted federation runs the algorithm
    (checked against single rounds) the answers equal the dense ones; where it cannot
    (a per-coordinate preconditioner of length d) single rounds are used and say so."""
    dense = affine_round_map(MAKERS[name](), fed, matrix_free=False)
    free = matrix_free_affine_map(MAKERS[name](), fed, block_size=8)
    if name == "preconditioned joint":
        assert free.block is None and "lifted federation failed" in free.block_note
    else:
        assert free.block is not None and free.block_size == 8
        V = np.random.default_rng(5).standard_normal((dense.dim, 11)) * ~dense.frozen[:, None]
        np.testing.assert_allclose(free.apply_linear(V), dense.M @ V, rtol=0, atol=1e-12)
    assert spectral_rate(free) == pytest.approx(spectral_rate(dense), abs=1e-10)
    np.testing.assert_allclose(fixed_point(free).S, fixed_point(dense).S, rtol=0, atol=1e-10)


def test_symmetric_declaration_gives_the_contraction_factor(fed):
    for name, symmetric in (("fedavg", True), ("fedprox exact", True), ("scaffold II", False)):
        free = matrix_free_affine_map(MAKERS[name](), fed)
        assert free.symmetric is symmetric
    for name in ("fedavg", "fedprox gd"):
        dense = affine_round_map(MAKERS[name](), fed, matrix_free=False)
        free = matrix_free_affine_map(MAKERS[name](), fed)
        assert contraction_factor(free) == pytest.approx(contraction_factor(dense), abs=1e-10)
        assert fixed_point(free).contraction_factor == pytest.approx(contraction_factor(dense), abs=1e-10)


def test_false_symmetry_declaration_is_refused(fed):
    class Lying(Scaffold):
        def linear_part_is_symmetric(self, problem):
            return True

    with pytest.raises(InvalidProblemError, match="symmetric"):
        matrix_free_affine_map(Lying(lr=0.1, local_steps=2), fed)


def test_rate_error_estimate_covers_the_dense_rate():
    """FedAvg's symmetric map in d = 120: Krylov spaces cut at 16, 32 and 48 vectors give
    rates within their reported error of the dense rate; the full estimate meets its
    tolerance and agrees with dense to 1e-10."""
    fed = random_quadratic(6, 120, L=1.0, mu=0.01, heterogeneity=1.0, seed=3)
    alg = FedAvg(lr=0.2, local_steps=3)
    dense = affine_round_map(alg, fed, matrix_free=False)
    want = spectral_rate(dense)
    free = matrix_free_affine_map(alg, fed)
    start = np.random.default_rng(0).standard_normal((free.dim, 2))
    for cap in (16, 32, 48):
        res = block_krylov(free.apply_linear, free.projector, start, symmetric=True, max_vectors=cap)
        assert res.dimension == cap
        assert abs(res.eig.rate - want) <= res.eig.error + 1e-15
    est = rate_estimate(free)
    assert est.symmetric and est.error <= 1e-12
    assert est.rate == pytest.approx(want, abs=1e-10)
    fp = fixed_point(free)
    assert fp.spectral_rate_error == est.error
    np.testing.assert_allclose(fp.S, fixed_point(dense).S, rtol=0, atol=1e-10)
