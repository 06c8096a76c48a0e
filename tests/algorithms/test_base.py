"""algorithms.base: aggregation weights, per-client hyperparameters and every
algorithm's own averaging version (its server step replaced by plain averaging)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

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
)
from fltheory.algorithms.base import aggregation_weights, resolve_per_client
from fltheory.errors import InvalidHyperparameterError
from fltheory.problems import QuadraticFederation


def _fed() -> QuadraticFederation:
    H = np.stack([np.eye(2) * (i + 1) for i in range(3)])
    return QuadraticFederation(H, np.ones((3, 2)), n_samples=[1, 2, 5])


def test_aggregation_weights_follow_their_definitions():
    fed = _fed()
    S = np.array([0, 2])
    np.testing.assert_allclose(aggregation_weights(fed, S, "weights"), np.array([1, 5]) / 6)
    np.testing.assert_allclose(aggregation_weights(fed, S, "samples"), np.array([1, 5]) / 6)
    np.testing.assert_allclose(aggregation_weights(fed, S, "uniform"), [0.5, 0.5])
    assert aggregation_weights(fed, np.array([], dtype=np.int64), "uniform").shape == (0,)
    with pytest.raises(InvalidHyperparameterError, match="aggregation"):
        aggregation_weights(fed, S, "median")


def test_resolve_per_client_broadcasts_and_validates():
    np.testing.assert_array_equal(resolve_per_client("lr", 0.5, 3), [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(resolve_per_client("local_steps", [1, 2, 3], 3, integer=True), [1, 2, 3])
    with pytest.raises(ValueError, match="lr"):
        resolve_per_client("lr", [0.1, 0.2], 3)


@pytest.mark.parametrize("alg", [FedAvg(server_lr=0.3), FedProx(mu=0.1, server_lr=0.3),
                                 FedCurv(alpha=0.1, server_lr=0.3), Scaffold(server_lr=0.3),
                                 FedElasticNet(lambda1=0.01, lambda2=0.1, server_lr=0.3)],
                         ids=lambda a: a.name)
def test_server_rate_algorithms_average_at_rate_one(alg):
    avg = alg.averaging_version()
    assert avg.server_lr == 1.0 and type(avg) is type(alg)
    same = {f.name for f in dataclasses.fields(alg)} - {"server_lr"}
    assert all(getattr(avg, n) is getattr(alg, n) for n in same)


def test_fedopt_averages_with_server_sgd_of_rate_one():
    alg = FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.adam(0.3), local_steps=2)
    avg = alg.averaging_version()
    g = np.array([[0.5, -2.0]])
    u, _ = avg.server_optimizer.update(g, avg.server_optimizer.init(np.zeros((1, 2))), np.zeros((1, 2)))
    np.testing.assert_array_equal(u, -g)                   # x + u = x - pseudo-gradient = plain average
    with pytest.raises(InvalidHyperparameterError, match="client_state='restart'"):
        dataclasses.replace(alg, client_state="persist").averaging_version()


@pytest.mark.parametrize("alg", [FedProxTE(beta=0.3, mu=0.1), FedCurvTE(beta=0.3, alpha=0.1)],
                         ids=lambda a: a.name)
def test_temporal_ensembles_have_no_operator(alg):
    with pytest.raises(InvalidHyperparameterError, match="temporal-ensembling"):
        alg.averaging_version()


def test_algorithms_without_a_server_rate_are_their_own_averaging_version():
    for alg in (FedDyn(alpha=0.5), EFL()):
        assert alg.averaging_version() is alg
