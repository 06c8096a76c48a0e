"""Where the search's tasks run: in this process, on a local Dask cluster of
worker processes, or on an existing Dask cluster given by its scheduler address.

A task is ``(task_id, function, args)``; an executor yields ``(task_id,
result)`` as tasks complete, in any order.  The search never depends on that
order: each task's rows are filed under its id.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._validate import integer, positive
from ..errors import FLTheoryError, InvalidHyperparameterError

__all__ = ["ClusterUnavailableError", "DaskExecutor", "Executor", "InProcessExecutor", "open_executor",
           "task_runner",
           "run_tasks"]

Task = tuple[str, Callable[..., Any], tuple[Any, ...]]


class ClusterUnavailableError(FLTheoryError, ConnectionError):
    """The Dask scheduler could not be reached (address and timeout in the message)."""


class Executor(abc.ABC):
    """Runs tasks; yields (task_id, result) in completion order (each executor
    below implements :meth:`run`)."""

    workers: int = 1

    @abc.abstractmethod
    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[str, Any]]:
        """Run ``tasks``; yield (task_id, result) as each completes."""


class InProcessExecutor(Executor):
    """Runs every task here, in the given order."""

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[str, Any]]:
        for task_id, fn, args in tasks:
            yield task_id, fn(*args)


class DaskExecutor(Executor):
    """Submits tasks to a ``distributed.Client``; results as they complete."""

    def __init__(self, client: Any) -> None:
        self.client = client
        info = client.scheduler_info()
        self.workers = max(1, len(info.get("workers", {})))

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[str, Any]]:
        from distributed import as_completed
        if not tasks:
            return
        futures: dict[str, str] = {}
        submitted = []
        for n, (task_id, fn, args) in enumerate(tasks):
            fut = self.client.submit(fn, *args, pure=False,
                                     key=f"fltheory-search-{task_id}-{os.getpid()}-{id(self)}-{n}")
            futures[fut.key] = task_id
            submitted.append(fut)
        for fut in as_completed(submitted, loop=self.client.loop):
            yield futures[fut.key], fut.result()
            fut.release()


def _require_distributed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError as exc:       # pragma: no cover - exercised only without the extra
        raise InvalidHyperparameterError(
            "processes=/scheduler= need Dask distributed: pip install 'fltheory[search]'") from exc


@contextlib.contextmanager
def open_executor(*, processes: int | None = None, scheduler: str | None = None,
                  timeout: float = 10.0) -> Iterator[Executor]:
    """The executor for the given options, closed on exit.

    Parameters
    ----------
    processes : int, optional
        Start a ``distributed.LocalCluster`` of this many single-threaded worker
        processes (BLAS limited to one thread in each).
    scheduler : str, optional
        Address of a running Dask scheduler (``"tcp://host:8786"``).  An address
        that does not answer within ``timeout`` seconds raises
        ``ClusterUnavailableError``.
    timeout : float
        Seconds to wait for the scheduler at ``scheduler`` (default 10).

    Yields
    ------
    Executor
        A Dask executor for ``processes`` or ``scheduler``; with neither given,
        in-process execution (no Dask needed).
    """
    if processes is not None and scheduler is not None:
        raise InvalidHyperparameterError(
            f"give processes= or scheduler=, not both (got processes={processes!r}, scheduler={scheduler!r})")
    if processes is None and scheduler is None:
        yield InProcessExecutor()
        return
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int)
                                  or processes < 1):
        raise InvalidHyperparameterError(f"processes must be an integer >= 1, got {processes!r}")
    if not (timeout > 0):
        raise InvalidHyperparameterError(f"timeout must be > 0 seconds, got {timeout!r}")
    _require_distributed()
    from distributed import Client, LocalCluster
    if scheduler is not None:
        if not isinstance(scheduler, str) or not scheduler:
            raise InvalidHyperparameterError(f"scheduler must be an address string, got {scheduler!r}")
        try:
            client = Client(scheduler, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailableError(
                f"could not reach the Dask scheduler at {scheduler!r} within {timeout} s: {exc}") from exc
        try:
            yield DaskExecutor(client)
        finally:
            client.close()
        return
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")          # inherited by the worker processes
    cluster = LocalCluster(n_workers=processes, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.WARNING)
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield DaskExecutor(client)
        finally:
            client.close()
    finally:
        cluster.close()


def run_tasks(tasks: Sequence[Callable[[], Any]], *, processes: int | None = None,
              scheduler: str | None = None, timeout: float = 10.0,
              on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
    """Run zero-argument callables (e.g. ``functools.partial(run_experiment, job)``)
    in this process, on a local Dask cluster or on the scheduler at ``scheduler``;
    return their results in the given order.

    ``on_result(i, result)`` is called as each task completes (in completion
    order), for progress display and incremental saving.  A task's exception is
    re-raised here.  The callables and their results must be picklable for Dask.
    This is what ``fltheory reproduce --scheduler ADDR`` uses to run experiments
    on the same cluster as a search.

    ``tasks`` is a list or tuple of callables, ``processes`` None or an integer in [1, 1024],
    ``scheduler`` None or an address string, ``timeout`` a finite number > 0 and ``on_result``
    None or a callable (InvalidHyperparameterError otherwise, before anything is started).
    """
    if not isinstance(tasks, (list, tuple)) or not all(callable(fn) for fn in tasks):
        raise InvalidHyperparameterError(
            f"run_tasks: tasks must be a list of zero-argument callables, got {tasks!r:.60} ({type(tasks).__name__})")
    if processes is not None:
        integer("run_tasks: processes", processes, minimum=1, maximum=1024)
    if scheduler is not None and not isinstance(scheduler, str):
        raise InvalidHyperparameterError(
            f"run_tasks: scheduler must be None or an address string, got {scheduler!r:.60}")
    positive("run_tasks: timeout", timeout)
    if on_result is not None and not callable(on_result):
        raise InvalidHyperparameterError(f"run_tasks: on_result must be None or a callable, got {on_result!r:.60}")
    tasks = list(tasks)
    results: dict[int, Any] = {}
    with open_executor(processes=processes, scheduler=scheduler, timeout=timeout) as executor:
        for task_id, value in executor.run([(str(i), _call, (fn,)) for i, fn in enumerate(tasks)]):
            i = int(task_id)
            results[i] = value
            if on_result is not None:
                on_result(i, value)
    return [results[i] for i in range(len(tasks))]


def task_runner(scheduler: str | None = None, *, processes: int | None = None,
                timeout: float = 10.0) -> Callable[[Sequence[Callable[[], Any]], Callable[[Any], Any]], None]:
    """A ``run_remote(tasks, report)`` for ``fltheory.reproduce.reproduce``: runs the
    tasks with :func:`run_tasks` on the Dask scheduler at ``scheduler`` (or a local
    cluster of ``processes`` workers) and calls ``report`` on each result as it
    completes.  Nothing is contacted until it is called."""
    def run_remote(tasks: Sequence[Callable[[], Any]], report: Callable[[Any], Any]) -> None:
        run_tasks(tasks, processes=processes, scheduler=scheduler, timeout=timeout,
                  on_result=lambda index, result: report(result))
    return run_remote


def _call(fn: Callable[[], Any]) -> Any:
    return fn()
