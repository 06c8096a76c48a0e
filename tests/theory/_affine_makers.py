"""Affine algorithm configurations shared by the exact-theory tests (test_invariants, test_matrix_free).

Each entry makes a fresh algorithm whose round is affine on quadratic federations; every test file adds the
configurations only it needs (``{**AFFINE_MAKERS, ...}``).
"""

from __future__ import annotations

from collections.abc import Callable

from fltheory import optim
from fltheory.algorithms import EFL, Algorithm, FedAvg, FedCurv, FedDyn, FedElasticNet, FedOpt, FedProx, Scaffold

AFFINE_MAKERS: dict[str, Callable[[], Algorithm]] = {
    "fedavg": lambda: FedAvg(lr=0.1, local_steps=3, server_lr=0.7),
    "fedprox exact": lambda: FedProx(mu=0.4, solver="exact"),
    "fedcurv": lambda: FedCurv(lr=0.1, local_steps=3, alpha=0.2),
    "scaffold II": lambda: Scaffold(lr=0.1, local_steps=4),
    "scaffold I": lambda: Scaffold(lr=0.1, local_steps=4, option="I"),
    "feddyn exact": lambda: FedDyn(alpha=1.0),
    "feddyn gd": lambda: FedDyn(alpha=1.0, solver="gd", lr=0.1, local_steps=3),
    "efl": lambda: EFL(lr=0.1, local_steps=3, lam=0.1, compression=None),
    "efl no ef": lambda: EFL(lr=0.1, local_steps=3, lam=0.1, compression=None, error_feedback=False),
    "client momentum persist": lambda: FedOpt(client_optimizer=optim.momentum(0.05, 0.5),
                                              server_optimizer=optim.sgd(1.0), local_steps=3,
                                              client_state="persist"),
    "elasticnet scaffold": lambda: FedElasticNet(base="scaffold", lambda1=0.0, lambda2=0.3, lr=0.1,
                                                 local_steps=3),
    "elasticnet feddyn": lambda: FedElasticNet(base="feddyn", lambda1=0.0, lambda2=0.5),
}
