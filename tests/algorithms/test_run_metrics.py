"""run(metrics=...): diagnostics on demand, computed through the federation hook,
never changing the iterates; BLAS threads limited inside run()."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import FedAvg, FedOpt, FedProx, run
from fltheory.algorithms.scaffold import Scaffold
from fltheory.errors import DivergenceError, InvalidHyperparameterError
from fltheory.participation import IncompleteSteps, UniformSampling, UniformSteps
from fltheory.problems.generators import random_quadratic

from ._problems import shifted_logistic

ALGS = [
    FedAvg(lr=0.1, local_steps=3),
    FedProx(lr=0.1, local_steps=3, mu=0.3),
    Scaffold(lr=0.1, local_steps=3),
    FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.adam(0.1), local_steps=3),
]


def fed(seed=0, noisy=True):
    f = random_quadratic(6, 4, L=4.0, mu=0.5, heterogeneity=1.0, seed=seed)
    return f.with_gradient_noise(0.5) if noisy else f


@pytest.mark.parametrize("alg", ALGS, ids=lambda a: a.name)
@pytest.mark.parametrize("metrics", [(), ("loss",), ("dist2",), ("grad_norm2", "loss_gap")])
def test_metrics_off_gives_the_same_iterates_bit_for_bit(alg, metrics):
    """Metrics never feed back: sampled clients, incomplete steps and a noisy oracle,
    the server models, participants, steps and communication are the same bits."""
    part = IncompleteSteps(UniformSampling(3), UniformSteps())
    full = run(alg, fed(), 7, participation=part, seed=5)
    some = run(alg, fed(), 7, participation=part, seed=5, metrics=metrics)
    assert full.x.tobytes() == some.x.tobytes()
    assert all(np.array_equal(a, b) for a, b in zip(full.clients, some.clients, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(full.steps, some.steps, strict=True))
    assert full.communication == some.communication
    for name in ("loss", "loss_gap", "dist2", "grad_norm2"):
        value = getattr(some, name)
        if name in metrics:
            assert np.array_equal(value, getattr(full, name))
        else:
            assert value is None


def test_default_metrics_match_the_pointwise_definitions():
    """F(x_t) and ||grad F(x_t)||^2 from the averaged quadratic equal the sums over
    clients sum_i p_i f_i(x_t), ||sum_i p_i grad f_i(x_t)||^2 to rounding."""
    f = fed(3, noisy=False)
    h = run(FedAvg(lr=0.2, local_steps=4), f, 12, seed=0)
    ref_loss = np.array([f.weights @ f.client_loss(x) for x in h.x])
    ref_g2 = np.array([np.sum((f.weights @ f.client_grad(x)) ** 2) for x in h.x])
    np.testing.assert_allclose(h.loss, ref_loss, rtol=1e-13)
    np.testing.assert_allclose(h.grad_norm2, ref_g2, rtol=1e-11, atol=1e-28)
    x_star = f.optimum()
    np.testing.assert_allclose(h.loss_gap, ref_loss - f.loss(x_star), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(h.dist2, np.sum((h.x - x_star) ** 2, axis=1), rtol=1e-14)


def test_logistic_metrics_are_the_pointwise_loss_and_gradient_exactly():
    """The default hook is F and grad F point by point: the same bits as before."""
    f = shifted_logistic(1)
    h = run(FedAvg(lr=0.3, local_steps=2), f, 5, seed=0)
    assert h.loss.tolist() == [f.loss(x) for x in h.x]
    assert h.grad_norm2.tolist() == [float(np.sum(f.grad(x) ** 2)) for x in h.x]


def test_averaged_quadratic_is_formed_once_and_recomputed_for_new_arrays():
    f = fed(0, noisy=False)
    a = f._global_quadratic()
    assert f._global_quadratic()[0] is a[0]          # cached
    np.testing.assert_array_equal(f.hess(), a[0])
    g = copy.copy(f)                                 # a shallow copy carries the cache ...
    g.H = 2.0 * f.H                                  # ... which must not survive new client data
    np.testing.assert_array_equal(g._global_quadratic()[0], 2.0 * a[0])
    assert f._global_quadratic()[0] is a[0]


@pytest.mark.parametrize("bad", ["loss", ["loss", "regret"], 3])
def test_bad_metrics_name_the_argument(bad):
    with pytest.raises(InvalidHyperparameterError, match="metrics"):
        run(FedAvg(), fed(), 1, metrics=bad)


def test_metrics_with_another_method_is_an_error():
    with pytest.raises(InvalidHyperparameterError, match="metrics"):
        run(FedAvg(), fed(noisy=False), 1, method="affine", metrics=("loss",))


def test_divergence_is_reported_with_or_without_metrics():
    f = fed(0, noisy=False)
    alg = FedAvg(lr=5.0, local_steps=5)
    for metrics in (None, ()):
        with pytest.raises(DivergenceError, match="diverged in round"):
            run(alg, f, 400, metrics=metrics)


def test_blas_is_limited_inside_run_and_restored_after():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads_now():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    if not blas_threads_now():
        pytest.skip("no BLAS library visible to threadpoolctl")
    seen = []
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        outside = blas_threads_now()
        run(FedAvg(), fed(), 2, callback=lambda t, s, i: seen.append(blas_threads_now()))
        assert blas_threads_now() == outside
    assert seen and all(all(n == 1 for n in s) for s in seen)


def test_loss_gap_is_exactly_zero_at_the_optimum():
    """F* comes through the same hook as F(x_t): the gap at x_0 = x* is 0.0, not rounding."""
    f = fed(2, noisy=False)
    h = run(FedAvg(lr=0.1, local_steps=2), f, 2, x0=f.optimum())
    assert h.loss_gap[0] == 0.0 and h.dist2[0] == 0.0
