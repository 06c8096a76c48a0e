"""Gradients of convolutional networks over the sample axis in threads.

With one BLAS thread (the library default, :mod:`fltheory._threads`) a
gradient is computed in the caller's thread and its bits do not depend on the
machine's core count.  When the user has raised the BLAS thread count to T > 1
(``FLTHEORY_BLAS_THREADS=keep`` or ``threadpoolctl.threadpool_limits``), the
BLAS calls alone would use the extra cores, but a convolutional network also
spends about half its time in im2col/col2im copies, pooling and activations,
which numpy runs on one core.  :func:`split_value_and_grad` then cuts the n
samples into T contiguous chunks, runs the forward and backward pass of each
chunk in a pool thread (numpy releases the GIL in its copies, ufuncs and
matmuls) with BLAS pinned to one thread per chunk, and adds the chunks' losses
and gradients:

    L = sum_c sum_{j in chunk c} w_j l_j,    grad L = sum_c grad L_c,

which is the same sum grouped by chunk, so it agrees with the one-thread
result to rounding (the order of the additions over samples changes, as it
does when a threaded BLAS splits a product).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._threads import blas_threads, single_threaded_blas

__all__ = ["MIN_CHUNK", "chunk_count", "split_value_and_grad"]

#: Smallest number of samples per chunk: below it a chunk costs more in thread
#: hand-off than it saves.
MIN_CHUNK = 8

_POOL: list[ThreadPoolExecutor | None] = [None]
_POOL_SIZE = [0]
_LOCK = threading.Lock()

ChunkFn = Callable[[slice], tuple[np.ndarray, np.ndarray]]


def chunk_count(n: int) -> int:
    """Chunks for n samples: the current BLAS thread count, at most n // MIN_CHUNK, at least 1."""
    threads = blas_threads()
    return max(1, min(threads, n // MIN_CHUNK)) if threads > 1 else 1


def _pool(size: int) -> ThreadPoolExecutor:
    with _LOCK:
        pool = _POOL[0]
        if pool is None or _POOL_SIZE[0] != size:
            if pool is not None:
                pool.shutdown(wait=True)
            pool = _POOL[0] = ThreadPoolExecutor(max_workers=size, thread_name_prefix="fltheory-nn")
            _POOL_SIZE[0] = size
        return pool


def split_value_and_grad(n: int, chunks: int, chunk_fn: ChunkFn) -> tuple[np.ndarray, np.ndarray]:
    """Sum of ``chunk_fn(slice)`` -> (values (m,), gradient (m, d)) over ``chunks``
    contiguous slices of range(n), evaluated in a thread pool with one BLAS
    thread each; chunk results are added in slice order."""
    bounds = np.linspace(0, n, chunks + 1).round().astype(int)
    slices = [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds.tolist())]
    pool = _pool(chunks)
    with single_threaded_blas():
        results = [f.result() for f in [pool.submit(chunk_fn, s) for s in slices]]
    value, grad = results[0]
    for v, g in results[1:]:
        value = value + v
        grad += g
    return value, grad
