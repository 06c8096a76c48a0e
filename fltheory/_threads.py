"""BLAS threads inside the library's hot paths.

The local loops parallelise over blocks of clients with their own thread pool
(``fltheory.algorithms.local.set_num_threads``); the BLAS calls inside them are
small (d x d), where a multi-threaded BLAS only adds hand-offs, and under load
its spinning threads fight the block threads.  ``blas_threads(n)`` limits every
loaded BLAS to ``n`` threads for the duration of a ``with`` block through
threadpoolctl (a no-op when threadpoolctl is not installed), and restores the
previous limits afterwards.  ``set_blas_threads(None)`` leaves BLAS untouched
(e.g. a user who wants a threaded BLAS for a large-d run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .errors import InvalidHyperparameterError

__all__ = ["blas_threads", "set_blas_threads"]

_LIMIT: list[int | None] = [1]
_CONTROLLER: list[Any] = []


def set_blas_threads(n: int | None) -> None:
    """BLAS threads used inside ``run`` (default 1); None leaves BLAS as configured."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise InvalidHyperparameterError(f"BLAS threads must be an integer >= 1 or None, got {n!r}")
    _LIMIT[0] = None if n is None else int(n)


def _controller() -> Any:
    """threadpoolctl's controller, inspected once per process (None when not installed)."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:                    # optional: without it BLAS keeps its threads
            _CONTROLLER.append(None)
        else:
            _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0]


@contextlib.contextmanager
def blas_threads(n: int | None = None) -> Iterator[None]:
    """Limit BLAS to ``n`` threads (default: the ``set_blas_threads`` value) inside the block."""
    limit = _LIMIT[0] if n is None else n
    ctl = _controller() if limit is not None else None
    if ctl is None:
        yield
        return
    with ctl.limit(limits=limit, user_api="blas"):
        yield
