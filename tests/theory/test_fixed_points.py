"""One FixedPoint result for every fixed-point routine (issue 9 item 5)."""

import dataclasses

import numpy as np

from fltheory import optim
from fltheory.algorithms import FedAvg, FedOpt
from fltheory.problems.generators import random_quadratic
from fltheory.theory import (
    AffineFixedPoint,
    FixedPoint,
    OperatorFixedPoint,
    QuadraticFixedPoint,
    affine_round_map,
    fedopt_operator,
    fedopt_quadratic_fixed_point,
    fixed_point,
    operator_fixed_point,
)

COMMON = ("x", "residual", "spectral_rate", "contraction_factor", "success", "message", "method")


def test_old_names_are_the_one_type():
    assert AffineFixedPoint is FixedPoint and QuadraticFixedPoint is FixedPoint
    assert OperatorFixedPoint is FixedPoint
    names = [f.name for f in dataclasses.fields(FixedPoint)]
    assert names[:len(COMMON)] == list(COMMON)


def test_three_routines_agree_field_by_field():
    """FedAvg = FedOpt(sgd, sgd(1)) on quadratic clients: the affine map on x, the closed
    form of seed 001 Theorem 2 and the root-solved operator are the same map x -> A x + b,
    so every common field must agree."""
    fed = random_quadratic(4, 3, L=2.0, mu=0.3, heterogeneity=1.0, seed=5, constants="clients")
    lr, tau = 0.1, 3
    affine = fixed_point(affine_round_map(FedAvg(lr=lr, local_steps=tau), fed))
    closed = fedopt_quadratic_fixed_point(fed, lr, tau)
    alg = FedOpt(client_optimizer=optim.sgd(lr), server_optimizer=optim.sgd(1.0), local_steps=tau)
    root = operator_fixed_point(fedopt_operator(alg, fed), np.zeros(3))
    for fp in (affine, closed, root):
        assert isinstance(fp, FixedPoint)
        assert fp.success and isinstance(fp.message, str) and fp.message
        assert fp.residual <= 1e-12
    np.testing.assert_allclose(affine.x, closed.x, rtol=0, atol=1e-13)
    np.testing.assert_allclose(root.x, closed.x, rtol=0, atol=1e-11)
    for name in ("spectral_rate", "contraction_factor"):
        assert abs(getattr(affine, name) - getattr(closed, name)) <= 1e-13
        assert abs(getattr(root, name) - getattr(closed, name)) <= 1e-6      # finite-difference Jacobian
    assert closed.spectral_radius == closed.spectral_rate and root.spectral_norm == root.contraction_factor
    assert closed.contraction_norm == closed.contraction_factor
    assert affine.method == "dense affine" and closed.method == "closed form" and root.method == "hybr"
    assert affine.condition is not None and closed.condition is not None
    assert root.jacobian is not None and closed.operator is not None and affine.S is not None
