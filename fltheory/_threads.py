"""BLAS pinned to one thread inside the library's entry points: same bits for any thread count.

A threaded BLAS splits a dot product or matrix product into per-thread
partial sums whose order depends on the thread count, so the same seeded run
at ``OPENBLAS_NUM_THREADS=1`` and ``=2`` can differ in the last bits.  The
package's products are small (one client's dimension at a time, batched over
clients), where threads cost more than they give, so entry points such as
:func:`fltheory.algorithms.run` and every experiment of ``fltheory reproduce``
run with BLAS pinned to one thread (through ``threadpoolctl``).  Because the
products happen everywhere (generators, gradients, optima), importing
``fltheory`` pins the BLAS of numpy and scipy to one thread for the whole
process (:func:`pin_process_blas`); set ``FLTHEORY_BLAS_THREADS=keep`` before
the import to opt out (then seeded results may differ in the last bits
between thread counts).  :func:`fltheory.algorithms.run` re-pins for its own
duration (about 10 microseconds) in case other code raised the count since.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["KEEP_ENV", "blas_threads", "pin_process_blas", "pinned_blas", "single_threaded_blas"]

#: Set this environment variable to ``keep`` to leave the process's BLAS threads alone on import.
KEEP_ENV = "FLTHEORY_BLAS_THREADS"

F = TypeVar("F", bound=Callable[..., Any])


@functools.lru_cache(maxsize=1)
def _controller() -> Any:
    # numpy and scipy each bundle a BLAS: both must be loaded before the controller looks for them
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController()


def pin_process_blas() -> bool:
    """Pin every BLAS loaded by numpy and scipy to one thread for the rest of
    the process (called when ``fltheory`` is imported), unless the environment
    variable :data:`KEEP_ENV` is ``keep``.  Returns whether it pinned."""
    import os
    if os.environ.get(KEEP_ENV, "").strip().lower() == "keep":
        return False
    _controller().limit(limits=1, user_api="blas")
    return True


def blas_threads() -> int:
    """The largest thread count among the loaded BLAS libraries right now: 1
    while pinned (the default after importing ``fltheory``), more when the
    user raised it (``FLTHEORY_BLAS_THREADS=keep`` or ``threadpoolctl``).
    About 20 microseconds."""
    infos = _controller().select(user_api="blas").info()
    return max((int(i.get("num_threads", 1)) for i in infos), default=1)


@functools.lru_cache(maxsize=1)
def _blas_libraries() -> tuple[Any, ...]:
    """The BLAS library controllers of :func:`_controller` (fixed once it is built)."""
    return tuple(_controller().select(user_api="blas").lib_controllers)


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Context in which every loaded BLAS library uses one thread.

    When every library already uses one thread (the default after importing
    ``fltheory``) nothing is changed: one get-threads call per library (about
    1 microsecond) instead of a limit-and-restore (about 50 microseconds, a
    noticeable share of a short ``run``)."""
    if all(lib.num_threads == 1 for lib in _blas_libraries()):
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        yield


def pinned_blas(func: F) -> F:
    """Decorator: run ``func`` inside :func:`single_threaded_blas`."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # single_threaded_blas() inlined: the usual case (already one thread) costs no context manager
        if all(lib.num_threads == 1 for lib in _blas_libraries()):
            return func(*args, **kwargs)
        with _controller().limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)
    return wrapper  # type: ignore[return-value]
