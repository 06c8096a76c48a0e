"""theory.run_affine through run(method="affine"): equal to the simulated run; the method registry."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import FedAvg, FedOpt, run
from fltheory.errors import InvalidHyperparameterError
from fltheory.problems.generators import random_quadratic
from fltheory.theory import run_affine  # importing fltheory.theory registers method="affine"


def test_method_affine_equals_the_simulated_run_and_rejects_bad_use():
    """run(method="affine") goes through the recovered round map S -> M S + c and
    must reproduce the simulated iterates (THEORY.md section 3, general rule)."""
    from fltheory.algorithms import Scaffold
    from fltheory.errors import NotAffineError
    from fltheory.problems import QuadraticFederation

    rng = np.random.default_rng(3)
    N, d = 5, 3
    Q = rng.standard_normal((N, d, d))
    H = np.einsum("nij,nkj->nik", Q, Q) + np.eye(d)
    fed = QuadraticFederation(H, 5 * rng.standard_normal((N, d)))
    for alg in (FedAvg(lr=0.05, local_steps=4), Scaffold(lr=0.05, local_steps=4)):
        sim = run(alg, fed, 40, x0=np.ones(d))
        aff = run(alg, fed, 40, x0=np.ones(d), method="affine")
        np.testing.assert_allclose(aff.x, sim.x, rtol=0, atol=1e-10)
        np.testing.assert_allclose(aff.dist2, sim.dist2, rtol=0, atol=1e-9)
    with pytest.raises(InvalidHyperparameterError, match="method"):
        run(FedAvg(), fed, 2, method="closed")
    with pytest.raises(InvalidHyperparameterError, match="callback"):
        run(FedAvg(), fed, 2, method="affine", callback=lambda *a: False)
    with pytest.raises(NotAffineError):
        run(FedOpt(client_optimizer=optim.adagrad(0.1), server_optimizer=optim.sgd(1.0),
                   local_steps=3), fed, 2, method="affine")


def test_unregistered_method_names_the_registered_ones_and_the_provider():
    """The simulating layer never imports theory: "affine" is registered by fltheory.theory."""
    from fltheory.algorithms.run import _METHODS
    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    assert _METHODS["affine"] == (run_affine, "fltheory.theory.run_affine")
    with pytest.raises(InvalidHyperparameterError, match=r"'affine'.*method must be|one of \['affine'\]"):
        run(FedAvg(), fed, 1, method="exact")
    with pytest.raises(InvalidHyperparameterError, match="simulate"):
        from fltheory.algorithms import register_run_method
        register_run_method("simulate", lambda *a, **k: None, "nowhere")


def test_affine_before_fltheory_theory_is_imported_says_what_to_do(monkeypatch):
    from fltheory.algorithms.run import _METHODS
    monkeypatch.delitem(_METHODS, "affine")
    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    with pytest.raises(InvalidHyperparameterError, match=r"importing fltheory.theory"):
        run(FedAvg(), fed, 1, method="affine")
