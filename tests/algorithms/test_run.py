"""run(): reproducibility, callbacks, divergence reporting, empty rounds, records."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedcurv import FedCurv
from fltheory.algorithms.fedopt import FedOpt
from fltheory.algorithms.fedprox import FedProx
from fltheory.algorithms.run import run
from fltheory.errors import DivergenceError, InvalidHyperparameterError, InvalidProblemError
from fltheory.participation import Bernoulli, IncompleteSteps, UniformSampling, UniformSteps
from fltheory.problems.generators import random_quadratic


def fed_noisy(seed=0):
    return random_quadratic(6, 4, L=4.0, mu=0.5, heterogeneity=1.0, seed=seed).with_gradient_noise(0.5)


ALGS = [
    FedAvg(lr=0.1, local_steps=3),
    FedProx(lr=0.1, local_steps=3, mu=0.3),
    FedCurv(lr=0.1, local_steps=3, alpha=0.2),
    FedOpt(client_optimizer=optim.adam(0.05), server_optimizer=optim.adam(0.1), local_steps=3,
           correction="joint", client_state="persist"),
]


@pytest.mark.parametrize("alg", ALGS, ids=lambda a: a.name)
def test_same_seed_same_bits_and_seeds_matter(alg):
    fed = fed_noisy()
    part = IncompleteSteps(UniformSampling(3), UniformSteps())
    a = run(alg, fed, 6, participation=part, seed=42)
    b = run(alg, fed, 6, participation=part, seed=42)
    c = run(alg, fed, 6, participation=part, seed=43)
    assert a.x.tobytes() == b.x.tobytes()
    assert not np.allclose(a.x[1:], c.x[1:])
    for ca, cb in zip(a.clients, b.clients):
        np.testing.assert_array_equal(ca, cb)


def test_history_columns_are_the_problem_quantities():
    fed = fed_noisy(1)
    h = run(FedAvg(lr=0.1, local_steps=2), fed, 4, seed=0)
    x_star = fed.optimum()
    for t in range(5):
        assert h.loss[t] == pytest.approx(fed.loss(h.x[t]), rel=1e-14)
        assert h.dist2[t] == pytest.approx(np.sum((h.x[t] - x_star) ** 2), rel=1e-13)
        assert h.loss_gap[t] == pytest.approx(fed.loss(h.x[t]) - fed.loss(x_star), rel=1e-10, abs=1e-14)
        assert h.grad_norm2[t] == pytest.approx(np.sum(fed.grad(h.x[t]) ** 2), rel=1e-13)
    assert h.rounds == 4 and h.record["algorithm"] == "FedAvg" and h.record["seed"] == 0


def test_callback_stops_the_run():
    seen = []

    def cb(t, state, info):
        seen.append(t)
        return t == 3

    h = run(FedAvg(lr=0.1, local_steps=2), fed_noisy(), 10, seed=0, callback=cb)
    assert seen == [1, 2, 3] and h.rounds == 3 and h.x.shape[0] == 4


@pytest.mark.parametrize("alg", [FedAvg(lr=3.0, local_steps=5), FedProx(lr=3.0, local_steps=5, mu=0.1),
                                 FedOpt(client_optimizer=optim.sgd(3.0), server_optimizer=optim.sgd(1.0),
                                        local_steps=5, correction="local")],
                         ids=lambda a: a.name)
def test_divergence_names_the_round_and_algorithm(alg):
    """lr = 3 > 2 / L: the local iterates grow like |1 - 3 L|^k and overflow within a few rounds."""
    fed = random_quadratic(3, 2, L=4.0, mu=0.5, heterogeneity=1.0, seed=0)
    completed = []
    with pytest.raises(DivergenceError, match=rf"{alg.name} diverged in round \d+") as err:
        run(alg, fed, 200, seed=0, x0=np.ones(2), callback=lambda t, s, i: completed.append(t))
    assert f"round {len(completed) + 1}:" in str(err.value)
    assert 1 <= len(completed) < 200


@pytest.mark.parametrize("alg", [FedAvg(lr=0.1, local_steps=2, server_lr=1e308),
                                 FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.sgd(1e308),
                                        local_steps=2)],
                         ids=lambda a: a.name)
def test_a_round_called_directly_refuses_an_overflowing_server_step(alg):
    """Finite local changes, a server step that overflows: round() itself raises
    DivergenceError (it returned x = [-inf, inf, -inf]; only run() caught it)."""
    fed = random_quadratic(4, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    rng = np.random.default_rng(0)
    state = alg.init(fed, np.array([100.0, -50.0, 30.0]), rng)
    with np.errstate(over="ignore"), pytest.raises(DivergenceError, match=rf"{alg.name}: round 1 produced a "
                                                   r"non-finite server model x \(3 of 3 entries\)"):
        alg.round(state, fed, None, rng)


def test_empty_rounds_are_recorded():
    fed = fed_noisy(2)
    h = run(FedProx(lr=0.1, local_steps=2, mu=0.1), fed, 40, participation=Bernoulli(0.03), seed=5)
    empties = [t for t, c in enumerate(h.clients) if c.size == 0]
    assert empties
    for t in empties:
        np.testing.assert_array_equal(h.x[t + 1], h.x[t])
        assert h.steps[t].size == 0


def test_zero_rounds_and_bad_arguments():
    fed = fed_noisy()
    h = run(FedAvg(), fed, 0, x0=np.ones(fed.dim))
    assert h.x.shape == (1, fed.dim) and h.rounds == 0
    with pytest.raises(InvalidHyperparameterError, match="rounds"):
        run(FedAvg(), fed, -1)
    with pytest.raises(InvalidHyperparameterError, match="rounds"):
        run(FedAvg(), fed, 2.5)
    with pytest.raises(InvalidProblemError, match="x0"):
        run(FedAvg(), fed, 1, x0=np.ones(fed.dim + 1))
    with pytest.raises(InvalidProblemError, match="x0"):
        run(FedAvg(), fed, 1, x0=np.full(fed.dim, np.nan))
    with pytest.raises(InvalidHyperparameterError, match="Algorithm"):
        run("fedavg", fed, 1)
    with pytest.raises(InvalidProblemError, match="Federation"):
        run(FedAvg(), "problem", 1)
