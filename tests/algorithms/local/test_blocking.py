"""Blocked, threaded local steps (algorithms.local.blocking) equal the step-major loop bit for bit."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms.local import local_descent
from fltheory.problems.generators import random_quadratic

from .builders import composed
from .._blocked import one_batch_and_blocked, three_rounds


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


class _Bytes:
    """Stand-in federation for ``row_blocks``: only the client data size matters."""

    def __init__(self, n: int) -> None:
        self.n = n

    def client_data_bytes(self) -> int:
        return self.n


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("m, per_client", [(10000, 3360), (1000, 80800), (23, 800), (7, 2 ** 23), (5, 2 ** 22),
                                           (400, 20000), (100, 20000), (2, 2 ** 21), (1, 2 ** 23)])
def test_row_blocks_are_balanced_over_the_threads(threads, m, per_client):
    """Blocks cover the rows in order, hold at most _BLOCK_BYTES of client data each, differ
    by at most one row and, when there are several, come in a multiple of the thread count;
    a batch that fits one block is split over several threads from _SPLIT_BYTES of data on."""
    from fltheory.algorithms.local import blocking

    blocking.set_num_threads(threads)
    try:
        blocks = blocking.row_blocks(_Bytes(per_client), m, 4)
    finally:
        blocking.set_num_threads(2)
    per = max(1, blocking._BLOCK_BYTES // per_client)
    sizes = [b.stop - b.start for b in blocks]
    assert blocks[0].start == 0 and blocks[-1].stop == m
    assert all(a.stop == b.start for a, b in itertools.pairwise(blocks))
    assert max(sizes) <= per and max(sizes) - min(sizes) <= 1
    needed = math.ceil(m / per)
    if needed == 1 and threads > 1 and m > 1 and m * per_client >= blocking._SPLIT_BYTES:
        needed = threads
    expected = 1 if needed == 1 else min(m, math.ceil(needed / threads) * threads)
    assert (len(blocks) > 1) == (m > per or (threads > 1 and m > 1 and m * per_client >= 5 * 2 ** 19))
    assert len(blocks) == expected
    if len(blocks) > 1:
        assert len(blocks) % threads == 0 or len(blocks) == m


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("blocked", [False, True])
def test_finish_runs_once_on_every_row_after_its_steps(monkeypatch, threads, blocked):
    """``finish(rows, Y[rows])`` sees each row once, after all its steps (the rows of the
    plain one-batch loop), in the blocks' worker threads when blocked on two threads, and
    what it writes is what local_descent returns: here 2 (y - x), elementwise."""
    import threading

    from fltheory.algorithms.local import blocking

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=8)
    m, d = fed.n_clients, fed.dim
    x = np.random.default_rng(9).standard_normal(d)
    args = (fed, np.broadcast_to(x, (m, d)), np.arange(m), 1 + np.arange(m) % 3, np.linspace(0.05, 0.1, m), None,
            composed(m, d, seed=10))
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 62)
    plain, _ = local_descent(*args)
    seen: list[tuple[int, int, bytes, str]] = []

    def finish(rows: slice, Y: np.ndarray) -> None:
        seen.append((rows.start, rows.stop, Y.tobytes(), threading.current_thread().name))
        np.subtract(Y, x, out=Y)
        Y *= 2.0

    if blocked:
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * d * d * 4)
    blocking.set_num_threads(threads)
    try:
        out, _ = local_descent(*args, finish=finish)
    finally:
        blocking.set_num_threads(2)
    assert out.tobytes() == (2.0 * (plain - x)).tobytes()
    seen.sort()
    assert [(a, b) for a, b, _, _ in seen] == [(b.start, b.stop) for b in blocking.row_blocks(fed, m, d)] \
        if blocked else [(0, m)]
    assert all(rows == plain[a:b].tobytes() for a, b, rows, _ in seen)
    if blocked and threads == 2:
        assert all(name.startswith("fltheory-local") for *_, name in seen)
    else:
        assert all(name == threading.current_thread().name for *_, name in seen)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("blocked", [False, True])
def test_a_non_finite_row_raises_and_its_block_is_not_finished(monkeypatch, threads, blocked):
    """One client diverging to inf/nan: DivergenceError, and ``finish`` never sees its row
    (blocked: the other blocks are finished; one batch: nothing is)."""
    from fltheory.algorithms.local import blocking
    from fltheory.errors import DivergenceError

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=11)
    m, d = fed.n_clients, fed.dim
    lr = np.full(m, 0.05)
    lr[17] = 1e150                                         # row 17 overflows within 60 steps
    seen: list[tuple[int, int]] = []
    if blocked:
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * d * d * 4)
    else:
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 62)
    blocking.set_num_threads(threads)
    try:
        with pytest.raises(DivergenceError, match="non-finite"):
            local_descent(fed, np.ones((m, d)), np.arange(m), np.full(m, 60), lr, None,
                          finish=lambda rows, Y: seen.append((rows.start, rows.stop)))
    finally:
        blocking.set_num_threads(2)
    assert all(not (a <= 17 < b) for a, b in seen)
    assert len(seen) == (len(blocking.row_blocks(fed, m, d)) - 1 if blocked else 0)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("blocked", [False, True])
def test_prepare_fills_the_objective_rows_before_their_steps(monkeypatch, threads, blocked):
    """A linear term whose rows ``prepare(rows)`` writes just before the steps of those rows
    (as SCAFFOLD's c_i - c) gives the bits of the same term filled beforehand; each row is
    prepared once."""
    from fltheory.algorithms.local import LocalObjective, blocking

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=16)
    m, d = fed.n_clients, fed.dim
    rng = np.random.default_rng(17)
    shift = rng.standard_normal((m, d))
    x = rng.standard_normal(d)
    args = (fed, np.broadcast_to(x, (m, d)), np.arange(m), 1 + np.arange(m) % 3, np.full(m, 0.06), None)
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 62)
    eager, _ = local_descent(*args, LocalObjective.linear(shift))
    lazy = np.full((m, d), np.nan)                     # unprepared rows would poison the steps
    prepared: list[tuple[int, int]] = []

    def prepare(rows: slice) -> None:
        prepared.append((rows.start, rows.stop))
        lazy[rows] = shift[rows]

    if blocked:
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * d * d * 4)
    blocking.set_num_threads(threads)
    try:
        out, _ = local_descent(*args, LocalObjective.linear(lazy), prepare=prepare)
    finally:
        blocking.set_num_threads(2)
    assert out.tobytes() == eager.tobytes()
    assert sorted(prepared) == ([(b.start, b.stop) for b in blocking.row_blocks(fed, m, d)] if blocked else [(0, m)])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("te", [False, True])
def test_blocked_fedprox_rounds_equal_one_batch_rounds_bit_for_bit(monkeypatch, threads, te):
    """FedProx with gradient steps (full participation) forms y - x in the blocks of the local
    loop (the finishing hook): models, ensemble target and communication must be the bits of
    the one-batch round (23 clients, blocks of about 4 rows), with and without the temporal
    ensemble target."""
    from fltheory.algorithms.fedprox import FedProx, FedProxTE

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=18)
    kw = {"lr": np.linspace(0.03, 0.08, 23), "local_steps": 1 + np.arange(23) % 4, "mu": 0.3, "solver": "gd"}
    alg = FedProxTE(beta=0.5, **kw) if te else FedProx(**kw)

    def rounds():
        return three_rounds(alg, fed, None, 19,
                            lambda state, info: (state.x.tobytes(), pickle.dumps(state.target),
                                                 info.communication))

    one, many = one_batch_and_blocked(monkeypatch, fed, threads, rounds)
    assert one == many


@pytest.mark.parametrize("blocked", [False, True])
def test_local_descent_takes_a_list_of_clients_like_an_array(monkeypatch, blocked):
    """Clients given as a Python list give the array's results, blocked or not (the blocks
    index and slice the client list)."""
    from fltheory.algorithms.local import blocking, local_descent

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=8)
    m, d = fed.n_clients, fed.dim
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * d * d * 4 if blocked else 2 ** 62)
    args = (np.zeros((m, d)), np.full(m, 3), np.full(m, 0.1), None)
    Y_list, _ = local_descent(fed, args[0], list(range(m)), *args[1:])
    Y_array, _ = local_descent(fed, args[0], np.arange(m), *args[1:])
    np.testing.assert_array_equal(Y_list, Y_array)
