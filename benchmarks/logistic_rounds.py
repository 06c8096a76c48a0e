"""FedAvg rounds on softmax-regression clients against a plain per-client numpy loop.

Usage::

    python benchmarks/logistic_rounds.py               # Synthetic(1,1): N = 30, d = 610, tau = 10
    python benchmarks/logistic_rounds.py --trials 15 --rounds 3

Problem: FedProx's Synthetic(1,1) softmax data (30 devices, 60 features plus
bias, 10 classes, lognormal device sizes), ridge 1e-3, FedAvg with tau = 10
gradient steps of rate 0.05 (the configuration of issue 17).

Candidates, each timed as ``--rounds`` consecutive rounds per trial, trials
interleaved (trial 1 of every candidate, then trial 2, ...) in this one process
so that load from other processes hits all alike; medians of wall and CPU time
(``time.process_time``: all threads of the process) per round:

* ``per-client numpy loop``: ``per_client_logistic_round`` of
  ``benchmarks/blocked.py`` (the reference of issue 17: for every client, tau
  steps W <- W - lr (A_i^T (softmax(A_i W) - onehot) / n_i + reg W) on its own
  rows, which stay in cache for its tau steps);
* ``FedAvg.round, 1 thread`` / ``FedAvg.round, 2 threads``: ``alg.round`` on
  ``fed.with_threads(t)`` (1 is the default);
* ``run() default``: ``run(FedAvg, fed, rounds)`` with the default per-round metrics
  (one thread).

Besides the speed-ups the script prints the arithmetic: useful flops per round
(4 f C sum_i n_i per step: two products), the flops the batched path actually
does (its size groups are padded), the feature bytes read per step, and the
achieved GFLOP/s of each candidate against the rate of the two products
alone (the same per-client matmuls in a loop, no softmax): the ceiling of
one core for these shapes, and twice it the ceiling of two.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from blocked import per_client_logistic_round

from fltheory._threads import single_threaded_blas
from fltheory.algorithms import FedAvg, run
from fltheory.problems.synthetic import synthetic_fedprox


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def interleaved(runs: dict[str, Callable[[], Any]], trials: int, rounds: int
                ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(median wall, minimum wall, median CPU) seconds per round of every candidate."""
    for fn in runs.values():
        fn()                                              # warm-up: caches, pools, bound gradients
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(trials):
        for name, fn in runs.items():
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[name].append((time.perf_counter() - t) / rounds)
            cpu[name].append((time.process_time() - c) / rounds)
    return ({k: float(np.median(v)) for k, v in wall.items()}, {k: float(np.min(v)) for k, v in wall.items()},
            {k: float(np.median(v)) for k, v in cpu.items()})


def products_only(A: np.ndarray, rows: np.ndarray, C: int, x: np.ndarray, tau: int) -> None:
    """The two products of every local step of every client, nothing else (the BLAS floor)."""
    f = A.shape[2]
    W = x.reshape(f, C)
    for i in range(A.shape[0]):
        Ai = A[i, : rows[i]]
        for _ in range(tau):
            Ai.T @ (Ai @ W)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=9, help="interleaved trials (median kept)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per trial")
    args = parser.parse_args()
    fed = synthetic_fedprox(1.0, 1.0, seed=0, reg=1e-3).train
    tau, lr, R = 10, 0.05, args.rounds
    A, y, rows = fed._A, fed._y, fed._rows
    C = fed.n_classes
    assert C is not None                                   # softmax clients
    f = fed.n_features
    x0 = np.zeros(fed.dim)
    alg = FedAvg(lr=lr, local_steps=tau)

    def loop() -> None:
        x = x0
        for _ in range(R):
            x = per_client_logistic_round(A, y, rows, fed.weights, fed.reg, C, x, lr, tau)

    def rounds_of(threads: int) -> Callable[[], None]:
        f_t = fed.with_threads(threads)
        rng = np.random.default_rng(0)
        box = [alg.init(f_t, x0, rng)]

        def go() -> None:
            state = box[0]
            for _ in range(R):
                state, _ = alg.round(state, f_t, None, rng)
            box[0] = state
        return go

    def products() -> None:
        for _ in range(R):
            products_only(A, rows, C, x0, tau)

    runs: dict[str, Callable[[], Any]] = {
        "per-client numpy loop": loop,
        "FedAvg.round, 1 thread": rounds_of(1),
        "FedAvg.round, 2 threads": rounds_of(2),
        "run() default": lambda: run(alg, fed, R),
        "products only, 1 thread": products,
    }
    with single_threaded_blas():
        before = load()
        med, best, cpu = interleaved(runs, args.trials, R)
        after = load()
        x_loop = per_client_logistic_round(A, y, rows, fed.weights, fed.reg, C, x0, lr, tau)
        xs = {t: run(alg, fed.with_threads(t), 1, metrics=()).x[-1] for t in (1, 2)}
    plan = fed._plan(np.arange(fed.n_clients))
    padded = sum(b.A.shape[0] * b.A.shape[1] for b in plan) if plan else A.shape[0] * A.shape[1]
    useful = 4.0 * f * C * float(rows.sum()) * tau
    done = 4.0 * f * C * padded * tau
    print(f"Synthetic(1,1) softmax clients: N = {fed.n_clients}, d = {fed.dim} (f = {f}, C = {C}), tau = {tau}, "
          f"sum n_i = {int(rows.sum())} rows (padded in size groups: {padded}); {args.trials} interleaved trials "
          f"of {R} rounds; load average before {before}, after {after}")
    print(f"max |x_loop - x_FedAvg| after 1 round = {np.abs(x_loop - xs[1]).max():.1e} "
          f"(|x| max {np.abs(x_loop).max():.1e}); 1 vs 2 threads identical: {np.array_equal(xs[1], xs[2])}")
    print(f"flops per round: useful {useful / 1e6:.1f} M, done by the batched path {done / 1e6:.1f} M; "
          f"feature bytes read per step {8 * f * padded / 1e6:.2f} MB (twice: two products)")
    ref, ref_cpu, ref_best = med["per-client numpy loop"], cpu["per-client numpy loop"], best["per-client numpy loop"]
    print(f"  {'candidate':<25} {'median ms/round':>15} {'speed-up':>9} {'min ms':>8} {'speed-up':>9} "
          f"{'CPU ms':>8} {'CPU speed-up':>13} {'GFLOP/s (min)':>14}")
    for k in runs:
        print(f"  {k:<25} {1e3 * med[k]:>15.3f} {ref / med[k]:>9.2f} {1e3 * best[k]:>8.3f} "
              f"{ref_best / best[k]:>9.2f} {1e3 * cpu[k]:>8.3f} {ref_cpu / cpu[k]:>13.2f} "
              f"{useful / best[k] / 1e9:>14.1f}")


if __name__ == "__main__":
    main()
