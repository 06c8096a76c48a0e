"""Keywords forwarded through ``**kwargs`` are checked against the callee: an
unknown one is a typed error naming it and the accepted ones (issue 16: a bare
Python TypeError from inside the library is a raw error)."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import nn
from fltheory.algorithms import FedCL, FedCurvTE, FedProxTE
from fltheory.errors import InvalidHyperparameterError
from fltheory.participation import FullParticipation
from fltheory.problems import random_quadratic


@pytest.mark.parametrize("make, where", [
    (lambda: FedProxTE(beta=0.5, bogus=1), "FedProxTE"),
    (lambda: FedCurvTE(beta=0.5, bogus=1), "FedCurvTE"),
    (lambda: FedCL(proxy=None, bogus=1), "FedCL"),
    (lambda: random_quadratic(3, 2, L=1, mu=0.5, heterogeneity=0.1, seed=0).constants(bogus=1), "constants"),
    (lambda: nn.synthetic_fedprox_federation(nn.mlp(60, 10, hidden=(4,)), 0.5, 0.5, seed=0, n_clients=3),
     "synthetic_fedprox_federation"),
])
def test_unknown_forwarded_keyword_is_typed(make: object, where: str) -> None:
    pattern = rf"{where}: unknown keyword argument\(s\) \['(bogus|n_clients)'\]; accepted: \["
    with pytest.raises(InvalidHyperparameterError, match=pattern):
        make()  # type: ignore[operator]


def test_forwarded_keywords_still_reach_the_callee() -> None:
    alg = FedProxTE(beta=0.5, mu=0.1, lr=0.1, local_steps=2)
    assert (alg.mu, alg.lr, alg.local_steps) == (0.1, 0.1, 2)
    fed = random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.1, seed=0)
    assert fed.constants(radius=1.0).L == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(InvalidHyperparameterError, match="FedProxTE sets target itself"):
        FedProxTE(beta=0.5, target=None)


@pytest.mark.parametrize("steps", [[-3, -3, -3], [1.5, 1, 1], [[1, 2, 3]]])
def test_full_participation_refuses_bad_step_counts(steps: list[object]) -> None:
    """Every other participation scheme already refused these; FullParticipation copied them through."""
    with pytest.raises(InvalidHyperparameterError, match="local_steps must be a 1-D array of integers >= 0"):
        FullParticipation().draw(np.random.default_rng(0), 0, np.array(steps))
    with pytest.raises(InvalidHyperparameterError, match="local_steps must be a 1-D array of integers >= 0"):
        FullParticipation().draw_among(np.random.default_rng(0), 0, np.array(steps), np.array([0]))
    part = FullParticipation().draw(np.random.default_rng(0), 0, np.array([2, 0, 5]))
    assert part.clients.tolist() == [0, 1, 2] and part.steps.tolist() == [2, 0, 5]
