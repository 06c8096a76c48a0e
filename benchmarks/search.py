"""Throughput of the counterexample search, in-process and on a Dask cluster.

Run: ``python benchmarks/search.py`` (``--quick`` for a short run).

Measures, for the target ``efl_eq11_join`` (exact objective shift of a random
quadratic federation, N <= 6 clients, d <= 5), with exploration only
(``explore_fraction=1``, so every evaluation is a batch task):

* in-process evaluations per second, and the mean time inside the bound
  evaluation itself (``runtime_s`` of the rows) to separate the engine's
  overhead;
* the same search on a 2-worker ``distributed.LocalCluster`` (started once,
  outside the timing, and reached by its scheduler address), for several
  ``batch_size`` values (candidates per task);
* the per-task overhead of the cluster: round trip of no-op tasks through
  :func:`fltheory.search.run_tasks`.

The load average is printed before and after: on a shared machine the cluster
figures depend on how many cores are actually free.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from fltheory.search import run_tasks, search


def _noop() -> int:
    return 0


def _timed_search(budget: int, **kw: object) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    res = search("efl_eq11_join", budget=budget, seed=0, explore_fraction=1.0, progress=False, **kw)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    inside = sum(r["runtime_s"] for r in res.rows)
    return wall, inside, res.n_evaluated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small budgets")
    args = parser.parse_args()
    budget = 1000 if args.quick else 8000
    n_noop = 50 if args.quick else 400
    print(f"load average before: {os.getloadavg()}")

    _timed_search(64)                                             # imports, caches
    wall, inside, n = _timed_search(budget)
    print("\n| executor | batch | evaluations | wall s | evaluations/s | evaluation time s (sum) |")
    print("|---|---|---|---|---|---|")
    print(f"| in-process | 32 | {n} | {wall:.2f} | {n / wall:.0f} | {inside:.2f} |")

    from distributed import Client, LocalCluster
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    start = time.perf_counter() - t0
    try:
        address = cluster.scheduler_address
        _timed_search(64, scheduler=address)                      # warm the workers' imports
        for batch in (1, 8, 32, 128):
            b = budget // 8 if batch == 1 else budget            # one task per evaluation: slow
            wall, inside, n = _timed_search(b, scheduler=address, batch_size=batch)
            print(f"| LocalCluster(2) | {batch} | {n} | {wall:.2f} | {n / wall:.0f} | {inside:.2f} |")
        client = Client(address, set_as_default=False)
        client.close()
        tasks = [_noop] * n_noop
        run_tasks(tasks[:10], scheduler=address)
        t0 = time.perf_counter()
        run_tasks(tasks, scheduler=address)
        per_task = (time.perf_counter() - t0) / n_noop
    finally:
        cluster.close()
    print(f"\nLocalCluster(2) start-up: {start:.2f} s")
    print(f"per-task overhead (no-op tasks, {n_noop} per call, incl. connecting): {per_task * 1e3:.2f} ms")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
