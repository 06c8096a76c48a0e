"""experiments/local_adaptivity_fig4.py: ratios against readable loops and GD contraction bounds, verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import local_adaptivity_fig4 as exp
from fltheory.errors import InvalidHyperparameterError
from fltheory.theory.bounds.gd_contraction import gd_contraction_factor


@pytest.fixture(scope="module")
def small_fed():
    """4x4-pixel MNIST, 2 clients x 30 images, strong ridge so that mu = reg bites."""
    return exp.mnist_logistic_federation(7, 2, 30, 0.5, np.random.default_rng(5))


def _pairs(seed, n_pairs, radius, d):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_pairs):                         # the draw order of lipschitz_ratios
        x = radius * rng.standard_normal(d)
        y = radius * rng.standard_normal(d)
        out.append((x, y))
    return out


def _loop_sgd(fed, x, lr, tau):
    z = np.broadcast_to(x, (fed.n_clients, fed.dim)).copy()
    for _ in range(tau):
        z = z - lr * fed.client_grad(z)
    return z


def _loop_adam(fed, x, lr, tau, b1=0.9, b2=0.999, eps=1e-8):
    z = np.broadcast_to(x, (fed.n_clients, fed.dim)).copy()
    m, v = np.zeros_like(z), np.zeros_like(z)
    for k in range(1, tau + 1):
        g = fed.client_grad(z)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        z = z - lr * (m / (1 - b1 ** k)) / (np.sqrt(v / (1 - b2 ** k)) + eps)
    return z


@pytest.mark.parametrize(("kind", "loop"), [("sgd", _loop_sgd), ("adam", _loop_adam)])
def test_measured_ratios_equal_readable_local_loops(small_fed, kind, loop):
    lr, tau, seed = 0.05, 3, 11
    r = exp.measure(small_fed, kind, lr, tau, 3, 0.2, seed)
    for k, (x, y) in enumerate(_pairs(seed, 3, 0.2, small_fed.dim)):
        want = np.linalg.norm(loop(small_fed, x, lr, tau) - loop(small_fed, y, lr, tau), axis=1)
        np.testing.assert_allclose(r[k], want / np.linalg.norm(x - y), rtol=1e-10)


@pytest.mark.parametrize("tau", [1, 4, 12])
def test_sgd_ratio_between_gd_contraction_constants(small_fed, tau):
    """Each GD step's mean Jacobian I - eta H_bar has eigenvalues in [1 - eta L_i, 1 - eta mu_i]
    (eta L_i <= 1), so (1 - eta L_i)^tau <= ratio <= max(|1 - eta mu_i|, |1 - eta L_i|)^tau."""
    L, mu = small_fed.client_L, small_fed.client_mu
    lr = 1.0 / float(L.max())
    r = exp.measure(small_fed, "sgd", lr, tau, 6, 1.0, 3)
    upper = gd_contraction_factor(lr, tau, mu, L)
    lower = (1.0 - lr * L) ** tau
    assert np.all(upper < 1) and np.all(r <= upper[None, :] * (1 + 1e-12))
    assert np.all(r >= lower[None, :] * (1 - 1e-12))
    assert upper.max() < 0.8 ** tau                 # reg = 0.5: the bound is far from vacuous


def test_bad_arguments_are_typed():
    with pytest.raises(InvalidHyperparameterError, match="samples_per_client"):
        exp.mnist_logistic_federation(7, 10, 1000, 0.1, np.random.default_rng(0))
    with pytest.raises(InvalidHyperparameterError, match="kind"):
        exp.client_optimizer("rmsprop", 0.1)


def _results(sgd, adam, bound):
    return {"taus": [1, 5], "lrs": [0.01], "reg": 1e-3, "dim": 10, "n_clients": 2, "n_pairs": 3, "radius": 0.1,
            "client_L": [1.0, 2.0], "client_mu": [1e-3, 1e-3],
            "max": {"sgd": [sgd], "adam": [adam], "adagrad": [[0.5, 0.5]]}, "sgd_bound": [bound]}


def test_verdicts():
    c = {k.theorem: k for k in exp.checks(_results([0.99, 0.98], [0.9, 0.95], [0.999, 0.995]))}
    assert c["adam-below-sgd"].status == "holds" and c["adam-below-sgd"].ratio == pytest.approx(0.95 / 0.98)
    assert c["a1-adam"].status == "holds" and c["a1-adam"].ratio == pytest.approx(0.95)
    assert c["a1-sgd-tight"].status == "holds"
    c = {k.theorem: k for k in exp.checks(_results([0.99, 0.98], [0.9, 1.02], [0.98, 0.995]))}
    assert c["adam-below-sgd"].status == "violated" and "not below at tau [5]" in c["adam-below-sgd"].detail
    assert c["a1-adam"].status == "violated" and c["a1-sgd-tight"].status == "violated"
    # "Adam can have a smaller rho": one rate below SGD at every tau suffices; the other is named
    two = _results([0.99, 0.98], [0.9, 0.95], [0.999, 0.995])
    two["lrs"] = [0.01, 0.5]
    for k in ("sgd", "adam", "adagrad"):
        two["max"][k] = two["max"][k] + [[0.99, 0.98] if k == "sgd" else [1.5, 0.97] if k == "adam" else [0.5, 0.5]]
    two["sgd_bound"] = two["sgd_bound"] * 2
    c = {k.theorem: k for k in exp.checks(two)}
    assert c["adam-below-sgd"].status == "holds" and c["adam-below-sgd"].ratio == pytest.approx(0.95 / 0.98)
    assert "lr 0.5: Adam/SGD max 1.5152, not below at tau [1]" in c["adam-below-sgd"].detail


@pytest.fixture(scope="module")
def quick_mid_rate():
    cfg = {**exp.QUICK, "lrs": [0.05], "taus": [10, 20]}
    return {c.theorem: c for c in exp.checks(exp.run(cfg, np.random.default_rng(0)))}


def test_small_rate_agrees_with_figure_4():
    cfg = {**exp.QUICK, "lrs": [0.005], "taus": [5, 20]}
    c = {k.theorem: k for k in exp.checks(exp.run(cfg, np.random.default_rng(0)))}
    assert c["adam-below-sgd"].status == "holds" and c["a1-adam"].status == "holds"
    assert c["a1-sgd-tight"].status == "holds"


@pytest.mark.xfail(strict=True, reason="FINDING: at lr 0.05 (quick instance, seed 0: MNIST 7x7 + bias, 4 clients x "
                   "250, reg 1e-3, 12 pairs radius 0.1) restarted Adam's largest ratio exceeds SGD's at tau 10, 20")
def test_finding_adam_not_below_sgd_at_rate_0_05(quick_mid_rate):
    assert quick_mid_rate["adam-below-sgd"].status == "holds"


@pytest.mark.xfail(strict=True, reason="FINDING: at lr 0.05 (same instance) restarted Adam's largest ratio is "
                   "> 1 at tau 10 or 20: A1 fails empirically for Adam")
def test_finding_a1_fails_for_adam_at_rate_0_05(quick_mid_rate):
    assert quick_mid_rate["a1-adam"].status == "holds"
