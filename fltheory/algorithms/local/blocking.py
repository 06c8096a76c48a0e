"""Blocking and threading of exact-oracle local steps.

With the exact oracle no random number is drawn and rows are independent, so
large batches are cut into cache-sized blocks of rows (views of the client
data through the federation hook ``Federation.client_block``); each block
runs all its steps while its data stay in cache, and the blocks are spread
over a thread pool (numpy releases the GIL).  Every row computes exactly the
same operations as in one block.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import DivergenceError, InvalidProblemError
from ...optim.base import Optimizer, take_rows
from ...problems.base import Federation, first_of_run
from .objective import LocalObjective
from .steps import descend

__all__ = ["BlockFinish", "BlockPrepare", "blockable", "descend_blocks", "num_threads", "row_blocks",
           "set_num_threads"]

#: ``finish(rows, Y_rows)``: per-row work a caller adds after the local steps of the rows ``rows``
#: (a slice of the batch) whose final iterates are the view ``Y_rows`` (writable, e.g. turned into
#: y - x in place); see :func:`descend_blocks`.
BlockFinish = Callable[[slice, np.ndarray], None]
#: ``prepare(rows)``: per-row work a caller adds before the local steps of the rows ``rows``
#: (e.g. filling its rows of an array the local objective reads); see :func:`descend_blocks`.
BlockPrepare = Callable[[slice], None]

# Client data per block.  Measured on the 2-core CI machine kind (2 MB L2 per
# core, a large shared L3: 480 MB reported), tau = 10 with 2 threads: 2 MB blocks
# lose to thread hand-offs (4.5 GFLOP/s at N=1000, d=100; 8 MB blocks: 8.3).
# Session 11, median of 15 interleaved trials against 8 MB blocks (wall / CPU):
# 16 MB blocks take 0.97-0.98 / 0.98 of the time at (1000, 100) (6 blocks instead of
# 10) and 0.91-0.94 / 0.91-0.94 at (10000, 20) (2 blocks instead of 4), for FedAvg,
# SCAFFOLD and FedOpt-AdaGrad; with a busy process on the other core 1.00-1.01 / 0.94-0.96
# at (10000, 20).  Blocks of 40 MB were 0.90-0.96 quiet but 1.07 with a busy core
# at (1000, 100) (fewer blocks leave less to rebalance), and one 32 MB block is one thread.
_BLOCK_BYTES = 2 ** 24
# Client data from which a batch that fits one block is still split over the threads.  Same
# machine kind, FedAvg tau = 10, two blocks on two threads over one block in one thread
# (median of 15 interleaved trials, two runs): 1.8-2.3 MB of data (N, d = 100, 50; 120, 50;
# 600, 20; 30, 100) 1.04-1.43 (one core's 2 MB L2 holds the block; the threads' hand-offs of
# the GIL cost more than they give), 2.4-3.3 MB 0.68-0.94, 3.8-15 MB 0.60-0.77 (FedOpt-AdaGrad
# 0.62-0.93).
_SPLIT_BYTES = 5 * 2 ** 19
_THREADS: list[int] = [min(2, os.cpu_count() or 1)]
_POOL: list[ThreadPoolExecutor | None] = [None]
_POOL_LOCK = threading.Lock()


def set_num_threads(n: int) -> None:
    """Threads used by ``local_descent`` for exact-oracle batches (default
    min(2, cpu count)); 1 runs the blocks one after another in the caller's thread."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidProblemError(f"number of threads must be an integer >= 1, got {n!r}")
    with _POOL_LOCK:
        _THREADS[0] = int(n)
        if _POOL[0] is not None:
            _POOL[0].shutdown(wait=True)
            _POOL[0] = None


def num_threads() -> int:
    """Threads used by ``local_descent`` for exact-oracle batches (:func:`set_num_threads`)."""
    return _THREADS[0]


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        pool = _POOL[0]
        if pool is None:
            pool = _POOL[0] = ThreadPoolExecutor(max_workers=_THREADS[0], thread_name_prefix="fltheory-local")
        return pool


def blockable(problem: Federation, clients: np.ndarray) -> bool:
    """Blocks pay off only when a block's oracle reads a view of the client data:
    a contiguous ascending run of clients of a federation whose hook
    ``client_block`` provides such views (exact oracle)."""
    if problem.is_stochastic or first_of_run(np.asarray(clients)) is None:
        return False
    a = int(clients[0])
    return problem.client_block(a, a) is not None


def _block_view(problem: Federation, clients: np.ndarray) -> tuple[Federation, np.ndarray]:
    """(federation, local indices) for the exact gradient of ``clients``.

    For a contiguous ascending run of clients a..b-1, the federation hook
    ``client_block(a, b)`` (e.g. quadratic clients: a shallow copy whose H and e
    are the views H[a:b], e[a:b], so the gradient rows H_i y - e_i are computed
    from the same numbers without copying the block's Hessians every step) with
    clients 0..b-a-1.  Anything else is returned unchanged."""
    m = clients.shape[0]
    if m == 0 or problem.is_stochastic or first_of_run(np.asarray(clients)) is None:
        return problem, clients
    a = int(clients[0])
    view = problem.client_block(a, a + m)
    if view is None:
        return problem, clients
    return view, np.arange(m)


def row_blocks(problem: Federation, m: int, d: int) -> list[slice]:
    """Contiguous row blocks of at most about _BLOCK_BYTES of client data, balanced over
    the threads; one block for batches of less than _SPLIT_BYTES of data, and with one
    thread for batches of at most _BLOCK_BYTES.

    When more than one block is needed (more data than one block holds, or at least
    _SPLIT_BYTES with several threads), their number is rounded up to a multiple of the
    thread count and the rows are split into blocks of equal size (sizes differing by at
    most one row), so that each thread gets the same work: e.g. (10000, 20) and
    (1000, 100) make 2 and 6 blocks, N = 400, d = 50 (7.6 MB) 2 blocks, (100, 50) (1.9 MB)
    one.  Every row computes the same operations in any partition."""
    if m == 0:
        return [slice(0, 0)]
    client_bytes = max(problem.client_data_bytes(), 1)
    per = max(1, _BLOCK_BYTES // client_bytes)
    threads = _THREADS[0]
    needed = -(-m // per)                                   # ceil(m / per) blocks at least
    if needed == 1 and threads > 1 and m > 1 and m * client_bytes >= _SPLIT_BYTES:
        needed = threads
    if needed == 1:
        return [slice(0, m)]
    n = min(m, -(-needed // threads) * threads)             # up to a multiple of the threads
    size, longer = divmod(m, n)
    starts = [j * size + min(j, longer) for j in range(n + 1)]
    return [slice(starts[j], starts[j + 1]) for j in range(n)]


def descend_blocks(problem: Federation, Y: np.ndarray, clients: np.ndarray, steps: np.ndarray,
                   lr: np.ndarray, objective: LocalObjective, optimizer: Optimizer | None, state: Any,
                   record: bool, blocks: list[slice], keep_state: bool = True,
                   source: np.ndarray | None = None, finish: BlockFinish | None = None,
                   prepare: BlockPrepare | None = None) -> tuple[Any, np.ndarray | None]:
    """Every block runs all its steps independently (exact oracle: no RNG involved).

    In the worker thread of a block, in this order: its rows of ``source`` (the (m, d)
    starting points, when given) are copied into its rows of ``Y``; ``prepare(block)`` runs
    (when given; e.g. it fills the block's rows of an array the objective reads); all its steps run;
    its final rows are checked finite; then, when they are, ``finish(block, Y[block])``
    runs (per-row work of the caller, e.g. y - x, done while the block is in cache and
    spread over the threads like the steps).  Per-row operations give the same bits in
    any block partition, so ``finish`` over the blocks equals ``finish`` over all rows.
    After every block: a :class:`~fltheory.errors.DivergenceError` if any row is not
    finite (the rows of finite blocks are then finished, the others are not).
    ``keep_state=False``: the blocks' final optimizer states are not joined (None is returned)."""
    results: list[Any] = [None] * len(blocks)
    finite = [True] * len(blocks)

    def work(j: int) -> None:
        b = blocks[j]
        sub = None if state is None else take_rows(state, b)
        Yb = Y[b]                                     # a view: updated in place
        if source is not None:
            Yb[...] = source[b]
        if prepare is not None:
            prepare(b)
        fed, local_idx = _block_view(problem, clients[b])
        results[j] = descend(fed, Yb, local_idx, steps[b], lr[b], None, objective.take(b),
                             optimizer, sub, record)
        finite[j] = bool(np.isfinite(Yb).all())
        if finish is not None and finite[j]:
            finish(b, Yb)

    if _THREADS[0] == 1:
        for j in range(len(blocks)):
            work(j)
    else:
        for f in [_pool().submit(work, j) for j in range(len(blocks))]:
            f.result()
    if not all(finite):
        raise DivergenceError("local steps produced non-finite values")
    psum = None
    if record and any(r[1] is not None for r in results):
        shape = next(r[1] for r in results if r[1] is not None).shape[1:]
        psum = np.zeros((Y.shape[0], *shape))
        for b, (_, ps) in zip(blocks, results, strict=True):
            if ps is not None:
                psum[b] = ps
    if state is not None and not keep_state:           # the caller discards it: no join
        return None, psum
    if state is not None:                              # blocks are contiguous and in order
        state = type(state)(*(np.concatenate([np.asarray(r[0][i]) for r in results])
                              for i in range(len(state))))
    return state, psum
