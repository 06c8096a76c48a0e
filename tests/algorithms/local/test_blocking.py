"""Blocked, threaded local steps (algorithms.local.blocking) equal the step-major loop bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms.local import local_descent
from fltheory.problems.generators import random_quadratic

from .builders import composed


@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_threaded_path_equals_step_major(monkeypatch, threads):
    """Exact quadratic batches run in cache-sized row blocks on a thread pool; every row
    must get exactly the numbers of the one-batch step-major loop (plain and optimizer
    steps, per-row step counts, preconditioner sums)."""
    from fltheory.algorithms.local import blocking

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=3)
    m = fed.n_clients
    clients = np.arange(m)
    steps = np.arange(m) % 4
    lr = np.linspace(0.05, 0.1, m)
    obj = composed(m, fed.dim, seed=4)
    Y0 = np.random.default_rng(5).standard_normal((m, fed.dim))

    def both(**kw):
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 62)
        one = local_descent(fed, Y0, clients, steps, lr, None, obj, **kw)
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * fed.dim * fed.dim * 4)   # blocks of 4 rows
        blocking.set_num_threads(threads)
        try:
            assert len(blocking.row_blocks(fed, m, fed.dim)) == 6
            many = local_descent(fed, Y0, clients, steps, lr, None, obj, **kw)
        finally:
            blocking.set_num_threads(2)
        return one, many

    (Y1, _), (Y2, _) = both()
    np.testing.assert_array_equal(Y1, Y2)
    (Y1, i1), (Y2, i2) = both(optimizer=optim.adagrad(0.1), record_precond=True)
    np.testing.assert_array_equal(Y1, Y2)
    np.testing.assert_array_equal(i1["precond_sum"], i2["precond_sum"])
    for f1, f2 in zip(i1["opt_state"], i2["opt_state"], strict=True):
        np.testing.assert_array_equal(f1, f2)


def test_bad_thread_count():
    from fltheory.algorithms.local import set_num_threads
    from fltheory.errors import InvalidProblemError
    with pytest.raises(InvalidProblemError, match="threads"):
        set_num_threads(0)


@pytest.mark.parametrize("kind", ["proximal, one mu, shared centre", "linear", "none"])
def test_blocks_of_broadcast_and_linear_terms_equal_one_batch(monkeypatch, kind):
    """FedProx's proximal term stored as broadcast views and SCAFFOLD's linear term,
    cut into row blocks on two threads: the same bits as one batch, with one rate
    for all rows (the scalar-rate path) and equal steps (the bound-oracle path only)."""
    from fltheory.algorithms.local import LocalObjective, blocking

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=6)
    m, d = fed.n_clients, fed.dim
    rng = np.random.default_rng(7)
    x = rng.standard_normal(d)
    obj = {"proximal, one mu, shared centre": LocalObjective.proximal(0.3, np.broadcast_to(x, (m, d))),
           "linear": LocalObjective.linear(rng.standard_normal((m, d))),
           "none": LocalObjective.zero()}[kind]
    args = (fed, np.broadcast_to(x, (m, d)), np.arange(m), np.full(m, 5), np.full(m, 0.07), None, obj)
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 62)
    one, _ = local_descent(*args)
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * d * d * 4)
    assert len(blocking.row_blocks(fed, m, d)) == 6
    many, _ = local_descent(*args)
    np.testing.assert_array_equal(one, many)
