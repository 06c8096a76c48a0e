"""The shared local loop: every client objective is f_i plus composable terms.

Split by concern:

* ``objective``: :class:`LocalObjective`, the extra terms
  1/2 y^T diag(D) y - b^T y + l1 ||y - z||_1 of every seed algorithm;
* ``steps``: the step-major loop of local steps (plain or optimizer steps);
* ``blocking``: cache-sized row blocks on a thread pool for exact oracles
  (``set_num_threads``);
* ``exact``: exact local solves (``exact_local_solve``, ``accelerated_l1_solve``).

:func:`local_descent` (here) runs the vectorized local steps of all rows
together, choosing between the plain loop and the blocked one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import DivergenceError
from ...optim.base import Optimizer
from ...problems.base import Federation
from . import blocking
from .blocking import BlockFinish, BlockPrepare, set_num_threads
from .exact import accelerated_l1_solve, exact_local_solve, row_smoothness
from .objective import LocalObjective
from .steps import descend

__all__ = [
    "LocalObjective",
    "accelerated_l1_solve",
    "exact_local_solve",
    "local_descent",
    "row_smoothness",
    "set_num_threads",
]


_ZERO = LocalObjective.zero()


def local_descent(problem: Federation, Y0: np.ndarray, clients: np.ndarray, steps: np.ndarray,
                  lr: np.ndarray, rng: np.random.Generator | None,
                  objective: LocalObjective | None = None,
                  optimizer: Optimizer | None = None,
                  opt_state: Any = None,
                  record_precond: bool = False,
                  keep_opt_state: bool = True,
                  bounds: tuple[int, int] | None = None,
                  finish: BlockFinish | None = None,
                  prepare: BlockPrepare | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Run ``steps[r]`` local steps on every row r, all rows together.

    Plain steps (``optimizer is None``), BetterObjects Alg. 1 / docs/theory/index.md#algorithms:
        y <- y - lr_r (g_i(y) + grad of the extra terms),
    with g_i from ``problem.stochastic_grad`` (exact unless the federation has a
    stochastic oracle).  With an ``optimizer`` (FedOpt, LocalAdaptivity eq. 3):
        (u, state) = update(g, state, y);  y <- y + lr_r u,
    where ``lr`` is the per-row rate *scale* (1 for the optimizer's own rate).

    Order of computation.  With a stochastic oracle, step k of all active rows
    is one batched oracle call in row order (the RNG convention of
    ``algorithms.reference``).  With the exact oracle no random number is drawn and
    rows are independent, so large batches are cut into cache-sized blocks of
    rows, each block runs all its steps while its data stay in cache, and the
    blocks are spread over a thread pool (numpy releases the GIL); every row
    computes exactly the same operations either way (see
    :func:`~fltheory.algorithms.local.blocking.set_num_threads`).  A batch that
    the threads run as one block (less than ``blocking._SPLIT_BYTES`` of client
    data with two threads or more; any batch with one thread), of a federation
    with worker processes (``worker_processes > 1``, e.g.
    ``with_processes(2)``), is shared with the workers instead: its bound
    gradient's ``map_rows`` runs all the plain or fused optimizer steps of each
    share of rows at once, in the calling thread and in the workers
    (:func:`~fltheory.algorithms.local.steps.descend`), again with the same
    operations per row.  Larger batches run in blocks on the threads (the
    blocks' views of the client data have no workers).

    Returns (Y, info) with info["opt_state"] (final optimizer state, rows
    updated only while active) and info["precond_sum"] (sum over the row's steps
    of the preconditioner m_k when ``record_precond``, zeros for rows without a
    step; None when no row steps).  ``keep_opt_state=False`` (a caller that
    discards the final state, e.g. FedOpt restarting its clients every round):
    info["opt_state"] may be None, and the blocked loop does not join the blocks'
    states into one (at (N, d) = (10000, 20) that join is two passes over fresh
    (N, d) arrays, about 1.6 ms a round).  ``bounds``: (min, max) of ``steps`` when
    the caller knows them (e.g. ``Participants.bounds``), else computed here.

    ``finish(rows, Y[rows])``: optional per-row work of the caller on the final iterates
    (e.g. turning them into y - x in place), run once on every row after the steps and
    after the finiteness check (a non-finite row raises DivergenceError first).  The
    blocked loop runs it in each block's worker thread right after the block's steps
    (while the block is in cache, over both threads); elsewhere it runs once on all rows.
    It must be elementwise per row (the same bits in any partition of the rows); sums over
    rows stay with the caller.  The returned Y holds what ``finish`` left in it.  The blocked
    loop also copies each block's starting rows from ``Y0`` in its worker thread.
    ``prepare(rows)``: optional per-row work of the caller before the steps (e.g. filling
    the rows of an array that ``objective`` holds, which is read only from the steps on),
    run once on every row: in each block's worker thread before its steps, else once on
    all rows before the steps.  It too must be elementwise per row.
    """
    Y0 = np.asarray(Y0, dtype=np.float64)
    m, d = Y0.shape
    if type(clients) is not np.ndarray:                 # e.g. a list: the blocks index and slice it
        clients = np.asarray(clients)
    if not (type(steps) is np.ndarray and steps.dtype == np.int64):
        steps = np.asarray(steps, dtype=np.int64)
    if not (type(lr) is np.ndarray and lr.shape == (m,) and lr.dtype == np.float64):
        lr = np.broadcast_to(np.asarray(lr, dtype=np.float64), (m,))
    objective = objective or _ZERO
    blocks = blocking.row_blocks(problem, m, d)
    if len(blocks) > 1 and (not blocking.blockable(problem, clients)
                            or (problem.worker_processes > 1 and blocking.num_threads() == 1)):
        blocks = [slice(0, m)]              # one thread and worker processes: the workers take the batch
    state = opt_state
    kmin, kmax = bounds if bounds is not None else (int(steps.min()), int(steps.max())) if m else (0, 0)
    if problem.is_stochastic or len(blocks) == 1 or kmax == 0:
        Y = np.array(Y0, dtype=np.float64, copy=True, order="C")
        if optimizer is not None and state is None:
            state = optimizer.init(Y, clients)
        if prepare is not None:
            prepare(slice(0, m))
        state, psum = descend(problem, Y, clients, steps, lr, rng, objective, optimizer, state,
                              record_precond, bounds=(kmin, kmax), keep_state=keep_opt_state)
        if not np.isfinite(Y).all():
            raise DivergenceError("local steps produced non-finite values")
        if finish is not None:
            finish(slice(0, m), Y)
    else:
        # plain steps: each block copies its starting rows from Y0 in its own thread
        # (optimizer steps keep the one copy: an optimizer's init reads the starting rows)
        source: np.ndarray | None = Y0 if optimizer is None else None
        Y = np.empty((m, d)) if source is not None else np.array(Y0, dtype=np.float64, copy=True, order="C")
        if optimizer is not None and state is None:
            state = optimizer.init(Y, clients)
        state, psum = blocking.descend_blocks(problem, Y, clients, steps, lr, objective, optimizer,
                                              state, record_precond, blocks, keep_state=keep_opt_state,
                                              source=source, finish=finish, prepare=prepare)
    return Y, {"opt_state": state, "precond_sum": psum}
