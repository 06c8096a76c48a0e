"""Matrix-free exact theory agrees with the dense route on every affine algorithm."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import (
    EFL,
    FedAvg,
    FedCurv,
    FedDyn,
    FedElasticNet,
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
from fltheory.theory.matrix_free import MatrixFreeAffineMap, matrix_free_affine_map

N, D = 5, 12

MAKERS = {
    "fedavg": lambda: FedAvg(lr=0.1, local_steps=3, server_lr=0.7),
    "fedprox gd": lambda: FedProx(lr=0.1, local_steps=3, mu=0.4),
    "fedprox exact": lambda: FedProx(mu=0.4, solver="exact"),
    "fedcurv": lambda: FedCurv(lr=0.1, local_steps=3, alpha=0.2),
    "scaffold II": lambda: Scaffold(lr=0.1, local_steps=4),
    "scaffold I": lambda: Scaffold(lr=0.1, local_steps=4, option="I"),
    "feddyn exact": lambda: FedDyn(alpha=1.0),
    "feddyn gd": lambda: FedDyn(alpha=1.0, solver="gd", lr=0.1, local_steps=3),
    "efl": lambda: EFL(lr=0.1, local_steps=3, lam=0.1, compression=None),
    "efl no ef": lambda: EFL(lr=0.1, local_steps=3, lam=0.1, compression=None, error_feedback=False),
    "fedavgm": lambda: FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.fedavgm(1.0, 0.5),
                              local_steps=3),
    "client momentum persist": lambda: FedOpt(client_optimizer=optim.momentum(0.05, 0.5),
                                              server_optimizer=optim.sgd(1.0), local_steps=3,
                                              client_state="persist"),
    "preconditioned joint": lambda: FedOpt(client_optimizer=optim.preconditioned(0.1, np.linspace(0.5, 2, D)),
                                           server_optimizer=optim.sgd(0.8), local_steps=3,
                                           correction="joint"),
    "elasticnet scaffold": lambda: FedElasticNet(base="scaffold", lambda1=0.0, lambda2=0.3, lr=0.1,
                                                 local_steps=3),
    "elasticnet feddyn": lambda: FedElasticNet(base="feddyn", lambda1=0.0, lambda2=0.5),
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
