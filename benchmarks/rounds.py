"""Seconds per round and GFLOP/s of FedAvg, SCAFFOLD and FedOpt-AdaGrad.

Usage::

    python benchmarks/rounds.py            # the three quadratic sizes + Synthetic(1,1)
    python benchmarks/rounds.py --quick    # small sizes, for a smoke run
    python benchmarks/rounds.py --threads 1
    python benchmarks/rounds.py --trials 9 --rounds 5 --no-reference
    python benchmarks/rounds.py --no-reference --processes   # also every algorithm with 2 processes

What is measured (full participation, exact gradients, so every round does
the same work), the round as the library runs it: ``algorithm.round`` called
``--rounds`` times in a row on the state it returns (as ``run`` does, without
its diagnostics), with BLAS pinned to one thread (``single_threaded_blas``,
what ``run`` and the import of fltheory do; the pinned thread count is
printed) and the library's own thread pool for the local steps
(``--threads``):

* ``s/round``: the median over ``--trials`` trials of the seconds per round of
  a trial of consecutive rounds (after one warm-up trial).  The trials of every
  algorithm and of every roofline kernel are interleaved (trial 1 of each,
  then trial 2, ..., in a seeded random order within each trial;
  ``benchmarks/_timing.py``) so that load from other
  processes hits all alike; the load average is printed before and after.
* ``GFLOP/s``: model flops / time.  Quadratic clients: one gradient is a
  matvec H_i y (2 d^2 flops), so a round costs tau * N * 2 d^2 (the O(N d)
  vector updates are not counted).  Logistic (multinomial) clients: a
  gradient costs A_i W (2 n_i f C) plus A_i^T R (2 n_i f C), so a round costs
  tau * 4 f C sum_i n_i.
* ``roofline``: the throughput of the bare kernel on the same data, each
  kernel its own candidate in the same interleaved trials, a trial being as
  many consecutive kernel calls as the rounds of a trial have local steps
  (tau per round): for quadratics the batched matvec over all N clients,
  the best (by median) of the kernels H @ y and y^T @ H, each as one call
  and split over two threads; for logistic clients the two batched products
  A W and A^T R.  ``% roof`` = GFLOP/s / roofline.  Values above 100% are
  possible: the rounds run all tau steps of a cache-sized block of clients
  while its Hessians stay in cache, the roofline streams every Hessian once
  per call.
* ``ref s/round`` and ``speedup``: the per-client reference loop
  (``fltheory.algorithms.reference``) for one round, and its time over the
  vectorized round's.
* ``cpu`` columns: the same medians in CPU seconds of this process
  (``time.process_time``, summed over threads).  On a shared machine other
  jobs stretch wall-clock times at random; CPU time counts only the work
  done, so "% roof cpu" compares the work per flop of a round with that of
  the bare kernel (it does not credit the second thread).

Earlier versions timed single rounds, each right after a two-thread roofline
call, and kept the best of 7: a round then starts with half of the Hessians in
the other core's cache and its own buffers evicted (FedAvg at (100, 50, 10):
best single round 0.51-0.54 ms after a roofline call against 0.46 ms back to
back, medians 0.58-0.63 against 0.49 ms, load 2.8), and one timing of the rounds a minute apart from another harness's
mixes in the machine's load of that minute.

Quadratic problems: H_i = B_i B_i^T / d + 0.5 I with B_i standard Gaussian,
e_i standard Gaussian (built directly, vectorized: the family generator is
not what is measured here).  Synthetic(1,1): ``synthetic_fedprox(1, 1)``,
30 devices, 60 features + intercept, 10 classes (d = 610).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import interleaved, load, rounds_of

from fltheory import optim
from fltheory._threads import blas_threads, single_threaded_blas
from fltheory.algorithms import local as local_mod
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedopt import FedOpt
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.scaffold import Scaffold
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.problems.synthetic import synthetic_fedprox

QUADRATIC_SIZES = [(100, 50, 10), (1000, 100, 10), (10000, 20, 10)]
QUICK_SIZES = [(50, 10, 5), (200, 20, 5)]
TRIAL_SECONDS = 0.05      # default length of a trial of FedAvg rounds


def quadratic_problem(N: int, d: int, seed: int = 0) -> QuadraticFederation:
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, d, d))
    H = np.matmul(B, np.swapaxes(B, 1, 2)) / d + 0.5 * np.eye(d)
    return QuadraticFederation(H, rng.standard_normal((N, d)))


def algorithms(tau: int, lr: float) -> dict[str, Any]:
    algs: dict[str, Any] = {"FedAvg": FedAvg(lr=lr, local_steps=tau)}
    algs["SCAFFOLD"] = Scaffold(lr=lr, local_steps=tau, server_lr=1.0, option="II")
    algs["FedOpt-AdaGrad"] = FedOpt(client_optimizer=optim.adagrad(lr), server_optimizer=optim.sgd(1.0),
                                    local_steps=tau)
    return algs


def timed(fn: Callable[[], Any]) -> np.ndarray:
    """(wall-clock seconds, CPU seconds of this process summed over its threads)."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return np.array([time.perf_counter() - w, time.process_time() - c])


def calls_of(kernel: Callable[[], Any], calls: int) -> Callable[[], None]:
    """A function making ``calls`` consecutive calls of ``kernel``."""
    def go() -> None:
        for _ in range(calls):
            kernel()
    return go


def matvec_kernels(fed: QuadraticFederation, pool: ThreadPoolExecutor) -> dict[str, Callable[[], Any]]:
    """The batched matvec over all clients, four ways: the two numpy kernels (H_i y_i as
    (d, d) @ (d, 1) and as (1, d) @ (d, d), equal for symmetric H_i), each as one call and
    split over two threads."""
    N, d = fed.n_clients, fed.dim
    col, out_col = np.ones((N, d, 1)), np.empty((N, d, 1))
    row, out_row = np.ones((N, 1, d)), np.empty((N, 1, d))
    half = N // 2

    def split(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        f1 = pool.submit(np.matmul, a[:half], b[:half], out[:half])
        f2 = pool.submit(np.matmul, a[half:], b[half:], out[half:])
        f1.result()
        f2.result()

    return {"H @ y": lambda: np.matmul(fed.H, col, out_col),
            "y^T @ H": lambda: np.matmul(row, fed.H, out_row),
            "H @ y, 2 threads": lambda: split(fed.H, col, out_col),
            "y^T @ H, 2 threads": lambda: split(row, fed.H, out_row)}


def logistic_kernels(fed: Any) -> dict[str, Callable[[], Any]]:
    A = fed._A                                     # (N, n_max, f) padded feature rows
    C = fed.n_classes
    W = np.ones((A.shape[0], A.shape[2], C))
    return {"A^T (A W)": lambda: np.matmul(np.swapaxes(A, 1, 2), np.matmul(A, W))}


def auto_rounds(alg: Any, fed: Any, target: float = TRIAL_SECONDS) -> int:
    """Rounds per trial so that a trial of ``alg`` takes about ``target`` CPU seconds."""
    once = rounds_of(alg, fed, np.zeros(fed.dim), 1)
    once()
    cost = timed(once)[1]
    return max(1, int(np.ceil(target / max(cost, 1e-6))))


def measure(fed: Any, algs: dict[str, Any], flops: float, kernels: dict[str, Callable[[], Any]],
            roof_flops: float, calls: int, trials: int, rounds: int | None,
            reference: bool, processes: bool = False) -> tuple[list[dict[str, Any]], str]:
    """Median (wall, CPU) seconds per round of every algorithm and per kernel call of every
    roofline kernel, all in one set of interleaved trials; the reference loop once.
    ``processes``: also every algorithm on ``fed.with_processes(2)`` (local steps shared
    with a worker process; its CPU is not in the cpu columns)."""
    if rounds is None:
        rounds = auto_rounds(algs["FedAvg"], fed)
    x0 = np.zeros(fed.dim)
    problems = {name: fed for name in algs}
    if processes:
        shared = fed.with_processes(2)
        for name in ("FedAvg", "SCAFFOLD", "FedOpt-AdaGrad"):
            algs = {**algs, name + " 2 proc.": algs[name]}
            problems[name + " 2 proc."] = shared
            rounds_of(algs[name], shared, x0, 1)()          # the worker started, its share registered
    runs = {name: rounds_of(alg, problems[name], x0, rounds) for name, alg in algs.items()}
    runs.update({f"roofline: {k}": calls_of(kernel, calls * rounds) for k, kernel in kernels.items()})
    before = load()
    med, cpu = interleaved(runs, trials, rounds)
    note = (f"{trials} interleaved trials of {rounds} rounds; load average before {before}, after {load()}; "
            f"BLAS threads {blas_threads()}")
    per_call = {k: np.array([med[f"roofline: {k}"], cpu[f"roofline: {k}"]]) / calls for k in kernels}
    best = min(per_call, key=lambda k: per_call[k][0])
    roof = roof_flops / per_call[best] / 1e9
    rows: list[dict[str, Any]] = []
    for name, alg in algs.items():
        seconds = np.array([med[name], cpu[name]])
        own = reference and problems[name] is fed
        ref = timed(functools.partial(reference_run, alg, fed, 1)) if own else np.full(2, np.nan)
        gflops = flops / seconds / 1e9
        rows.append({"algorithm": name, "seconds": seconds, "reference": ref, "gflops": gflops,
                     "roofline": roof, "fraction": gflops / roof, "speedup": ref / seconds})
    return rows, f"{note}; roofline kernel {best!r}"


def show(title: str, rows: list[dict[str, Any]], note: str) -> None:
    """Wall-clock columns, then the same ratios in CPU time (robust to other jobs)."""
    print(f"\n{title}\n  {note}")
    print(f"  {'algorithm':<17} {'s/round':>9} {'GFLOP/s':>8} {'roofline':>9} {'% roof':>7} "
          f"{'ref s/round':>12} {'speedup':>8} | {'cpu s/round':>11} {'% roof cpu':>10} {'speedup cpu':>11}")
    for r in rows:
        s, g, rf, f, ref, sp = (r[k] for k in ("seconds", "gflops", "roofline", "fraction",
                                                "reference", "speedup"))
        print(f"  {r['algorithm']:<17} {s[0]:>9.5f} {g[0]:>8.2f} {rf[0]:>9.2f} {100 * f[0]:>6.0f}% "
              f"{ref[0]:>12.4f} {sp[0]:>7.0f}x | {s[1]:>11.5f} {100 * f[1]:>9.0f}% {sp[1]:>10.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--trials", type=int, default=7, help="interleaved trials (median kept)")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"consecutive rounds per trial (default: about {TRIAL_SECONDS * 1e3:g} ms of FedAvg)")
    parser.add_argument("--threads", type=int, default=2, help="threads of the local loop")
    parser.add_argument("--no-reference", action="store_true", help="skip the per-client reference loops")
    parser.add_argument("--no-logistic", action="store_true", help="skip Synthetic(1,1)")
    parser.add_argument("--processes", action="store_true",
                        help="also every algorithm with_processes(2) (a worker process for half the clients)")
    args = parser.parse_args()
    local_mod.set_num_threads(args.threads)
    sizes = QUICK_SIZES if args.quick else QUADRATIC_SIZES
    with single_threaded_blas(), ThreadPoolExecutor(2) as pool:
        for N, d, tau in sizes:
            fed = quadratic_problem(N, d)
            flops = tau * N * 2.0 * d * d
            rows, note = measure(fed, algorithms(tau, 0.05), flops, matvec_kernels(fed, pool), N * 2.0 * d * d,
                                 tau, args.trials, args.rounds, not args.no_reference, args.processes)
            show(f"quadratic N={N} d={d} tau={tau}  ({flops / 1e9:.3f} GFLOP per round, "
                 f"threads={args.threads})", rows, note)
        if args.no_logistic:
            return
        syn = synthetic_fedprox(1.0, 1.0, seed=0, reg=1e-3).train
        tau = 10
        work = 4.0 * syn._A.shape[2] * syn.n_classes * float(np.asarray(syn.n_samples).sum())
        padded = 4.0 * syn._A.shape[2] * syn.n_classes * syn._A.shape[0] * syn._A.shape[1]
        rows, note = measure(syn, algorithms(tau, 0.05), tau * work, logistic_kernels(syn), padded, tau,
                             args.trials, args.rounds, not args.no_reference, args.processes)
        show(f"Synthetic(1,1) logistic: N={syn.n_clients} d={syn.dim} tau={tau} "
             f"({tau * work / 1e9:.3f} GFLOP per round)", rows, note)


if __name__ == "__main__":
    main()
