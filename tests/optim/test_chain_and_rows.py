"""chain composition and row gather/scatter/mean of optimizer states."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.errors import InvalidHyperparameterError

FACTORIES = {
    "sgd": lambda: optim.sgd(0.1),
    "momentum": lambda: optim.momentum(0.1, 0.8),
    "adagrad": lambda: optim.adagrad(0.1, initial_accumulator=0.1),
    "adam": lambda: optim.adam(0.1),
    "yogi": lambda: optim.yogi(0.1),
    "precond": lambda: optim.preconditioned(0.1, np.arange(1.0, 13.0).reshape(4, 3)),
    "chain": lambda: optim.chain(optim.preconditioned(1.0, np.array([1.0, 2.0, 3.0])),
                                 optim.momentum(0.1, 0.5)),
}


def test_chain_of_sgds_is_sgd_with_product_rate():
    g = np.array([[1.0, -2.0]])
    c = optim.chain(optim.sgd(0.5), optim.sgd(0.2))
    u, s = c.update(g, c.init(np.zeros((1, 2))), None)
    np.testing.assert_allclose(u, -0.1 * g, rtol=1e-15)
    np.testing.assert_allclose(c.precond(s), np.ones((1, 2)), rtol=0)
    assert s.count.tolist() == [1]


def test_chain_momentum_on_preconditioned_gradient():
    rng = np.random.default_rng(0)
    P = np.array([0.5, 2.0, 1.0])
    c = optim.chain(optim.preconditioned(1.0, P), optim.momentum(0.1, 0.7))
    ref = optim.momentum(0.1, 0.7)
    s, r = c.init(np.zeros((2, 3))), ref.init(np.zeros((2, 3)))
    for _ in range(4):
        g = rng.normal(size=(2, 3))
        u, s = c.update(g, s, None)
        v, r = ref.update(P * g, r, None)
        np.testing.assert_allclose(u, v, rtol=1e-14)
    # product rule: momentum weight c_k times P
    np.testing.assert_allclose(c.precond(s), ref.precond(r) * P, rtol=1e-15)


def test_chain_precond_full_matrix_product_order():
    A = np.array([[2.0, 1.0], [1.0, 2.0]])
    B = np.array([[1.0, 0.0], [0.0, 3.0]])
    c = optim.chain(optim.preconditioned(1.0, A, per_client=False),
                    optim.preconditioned(1.0, B, per_client=False))
    g = np.array([[1.0, 1.0]])
    u, s = c.update(g, c.init(np.zeros((1, 2))), None)
    np.testing.assert_allclose(u[0], -(B @ A @ g[0]), rtol=1e-15)       # applied A then B
    np.testing.assert_allclose(c.precond(s)[0], B @ A, rtol=1e-15)
    mixed = optim.chain(optim.preconditioned(1.0, A, per_client=False),
                        optim.preconditioned(1.0, np.array([1.0, 3.0])))
    _, s2 = mixed.update(g, mixed.init(np.zeros((1, 2))), None)
    np.testing.assert_allclose(mixed.precond(s2)[0], B @ A, rtol=1e-15)


def test_chain_rejects_non_optimizers():
    with pytest.raises(InvalidHyperparameterError):
        optim.chain()
    with pytest.raises(InvalidHyperparameterError):
        optim.chain(optim.sgd(0.1), lambda g: g)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_rows_are_independent_and_gather_scatter(name):
    """Updating all rows then taking rows equals taking rows then updating;
    put_rows writes back exactly those rows."""
    opt = FACTORIES[name]()
    rng = np.random.default_rng(1)
    full = opt.init(np.zeros((4, 3)), clients=np.arange(4))
    for _ in range(2):
        _, full = opt.update(rng.normal(size=(4, 3)), full, None)
    rows = np.array([3, 1])
    g = rng.normal(size=(2, 3))
    part = optim.take_rows(full, rows)
    u_part, part_new = opt.update(g, part, None)
    G = np.zeros((4, 3))
    G[rows] = g
    u_full, full_new = opt.update(G, full, None)
    np.testing.assert_allclose(u_part, u_full[rows], rtol=1e-15)
    merged = optim.put_rows(full, rows, part_new)
    for f_m, f_full, f_old in zip(merged, full_new, full):
        np.testing.assert_allclose(np.asarray(f_m)[rows], np.asarray(f_full)[rows], rtol=1e-15)
        others = np.setdiff1d(np.arange(4), rows)
        np.testing.assert_allclose(np.asarray(f_m)[others], np.asarray(f_old)[others], rtol=0)
    assert type(merged) is type(full)


def test_mean_rows_synchronises_moments_keeps_counters():
    opt = optim.adam(0.1)
    s = opt.init(np.zeros((3, 2)))
    _, s = opt.update(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]]), s, None)
    w = np.array([1.0, 1.0, 2.0])
    avg = optim.mean_rows(s, w)
    np.testing.assert_allclose(avg.mu, np.broadcast_to((w[:, None] * s.mu).sum(0) / 4, (3, 2)), rtol=1e-15)
    np.testing.assert_allclose(avg.nu, np.broadcast_to((w[:, None] * s.nu).sum(0) / 4, (3, 2)),
                               rtol=1e-15)
    assert avg.count.tolist() == [1, 1, 1]
    c = FACTORIES["precond"]()
    sc = c.init(np.zeros((2, 3)), clients=np.array([2, 0]))
    assert optim.mean_rows(sc).clients.tolist() == [2, 0]        # client identity is never averaged
