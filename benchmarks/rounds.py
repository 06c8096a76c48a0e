"""Seconds per round and GFLOP/s of FedAvg, SCAFFOLD and FedOpt-AdaGrad.

Usage::

    python benchmarks/rounds.py            # the three quadratic sizes + Synthetic(1,1)
    python benchmarks/rounds.py --quick    # small sizes, for a smoke run
    python benchmarks/rounds.py --threads 1

What is measured (full participation, exact gradients, so every round does
the same work):

* ``s/round``: the best of ``--repeats`` timed calls of ``algorithm.round``
  (the fast, vectorized path), after one warm-up round.
* ``GFLOP/s``: model flops / time.  Quadratic clients: one gradient is a
  matvec H_i y (2 d^2 flops), so a round costs tau * N * 2 d^2 (the O(N d)
  vector updates are not counted).  Logistic (multinomial) clients: a
  gradient costs A_i W (2 n_i f C) plus A_i^T R (2 n_i f C), so a round costs
  tau * 4 f C sum_i n_i.
* ``roofline``: the throughput of the bare kernel on the same data measured
  in the same run, interleaved with the rounds and timed over tau
  consecutive calls (the same exposure to machine load as a round): for
  quadratics the batched
  matvec over all N clients, best of the kernels H @ y and y^T @ H, each as
  one call and split over two threads; for logistic clients the two
  batched products A W and A^T R.  ``% roof`` = GFLOP/s / roofline.  Values
  above 100% are possible: the rounds run all tau steps of a cache-sized
  block of clients while its Hessians stay in cache, the roofline streams
  every Hessian once per call.
* ``ref s/round`` and ``speedup``: the per-client reference loop
  (``fltheory.algorithms.reference``) for one round, and its time over the
  vectorized round's.
* ``cpu`` columns: the same measurements in CPU seconds of this process
  (``time.process_time``, summed over threads).  On a shared machine other
  jobs stretch wall-clock times at random; CPU time counts only the work
  done, so "% roof cpu" compares the work per flop of a round with that of
  the bare kernel (it does not credit the second thread).

Quadratic problems: H_i = B_i B_i^T / d + 0.5 I with B_i standard Gaussian,
e_i standard Gaussian (built directly, vectorized: the family generator is
not what is measured here).  Synthetic(1,1): ``synthetic_fedprox(1, 1)``,
30 devices, 60 features + intercept, 10 classes (d = 610).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from fltheory import optim
from fltheory.algorithms import local as local_mod
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedopt import FedOpt
from fltheory.algorithms.reference import reference_run
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.problems.synthetic import synthetic_fedprox

from fltheory.algorithms.scaffold import Scaffold

QUADRATIC_SIZES = [(100, 50, 10), (1000, 100, 10), (10000, 20, 10)]
QUICK_SIZES = [(50, 10, 5), (200, 20, 5)]


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


def matvec_roofline(fed: QuadraticFederation, pool: ThreadPoolExecutor, calls: int) -> Callable[[], np.ndarray]:
    """A function returning the time of one batched matvec over all clients: the best
    of the two numpy kernels (H_i y_i as (d, d) @ (d, 1) and as (1, d) @ (d, d), equal
    for symmetric H_i), each as one call and split over two threads."""
    N, d = fed.n_clients, fed.dim
    col, out_col = np.ones((N, d, 1)), np.empty((N, d, 1))
    row, out_row = np.ones((N, 1, d)), np.empty((N, 1, d))
    half = N // 2

    def split(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        f1 = pool.submit(np.matmul, a[:half], b[:half], out[:half])
        f2 = pool.submit(np.matmul, a[half:], b[half:], out[half:])
        f1.result()
        f2.result()

    def repeat(fn: Callable[[], Any]) -> np.ndarray:
        return timed(lambda: [fn() for _ in range(calls)]) / calls

    def once() -> np.ndarray:
        return np.minimum.reduce([repeat(lambda: np.matmul(fed.H, col, out_col)),
                                  repeat(lambda: np.matmul(row, fed.H, out_row)),
                                  repeat(lambda: split(fed.H, col, out_col)),
                                  repeat(lambda: split(row, fed.H, out_row))])

    return once


def logistic_roofline(fed: Any, calls: int) -> Callable[[], np.ndarray]:
    A = fed._A                                     # (N, n_max, f) padded feature rows
    C = fed.n_classes
    W = np.ones((A.shape[0], A.shape[2], C))

    def once() -> np.ndarray:
        return timed(lambda: [np.matmul(np.swapaxes(A, 1, 2), np.matmul(A, W))
                              for _ in range(calls)]) / calls

    return once


def measure(fed: Any, algs: dict[str, Any], flops: float, roofline: Callable[[], np.ndarray],
            roof_flops: float, repeats: int, reference: bool) -> list[dict[str, Any]]:
    """Best (wall, CPU) times of rounds, roofline kernel and reference loop."""
    rows: list[dict[str, Any]] = []
    roof = np.full(2, np.inf)
    for name, alg in algs.items():
        rng = np.random.default_rng(0)
        state = alg.init(fed, np.zeros(fed.dim), rng)
        state, _ = alg.round(state, fed, None, rng)          # warm-up
        best = np.full(2, np.inf)
        for _ in range(repeats):
            roof = np.minimum(roof, roofline())
            w, c = time.perf_counter(), time.process_time()
            state, _ = alg.round(state, fed, None, rng)
            best = np.minimum(best, [time.perf_counter() - w, time.process_time() - c])
        ref = timed(lambda: reference_run(alg, fed, 1)) if reference else np.full(2, np.nan)
        rows.append({"algorithm": name, "seconds": best, "reference": ref})
    for r in rows:
        r["gflops"] = flops / r["seconds"] / 1e9
        r["roofline"] = roof_flops / roof / 1e9
        r["fraction"] = r["gflops"] / r["roofline"]
        r["speedup"] = r["reference"] / r["seconds"]
    return rows


def show(title: str, rows: list[dict[str, Any]]) -> None:
    """Wall-clock columns, then the same ratios in CPU time (robust to other jobs)."""
    print(f"\n{title}")
    print(f"  {'algorithm':<15} {'s/round':>9} {'GFLOP/s':>8} {'roofline':>9} {'% roof':>7} "
          f"{'ref s/round':>12} {'speedup':>8} | {'cpu s/round':>11} {'% roof cpu':>10} {'speedup cpu':>11}")
    for r in rows:
        s, g, rf, f, ref, sp = (r[k] for k in ("seconds", "gflops", "roofline", "fraction",
                                                "reference", "speedup"))
        print(f"  {r['algorithm']:<15} {s[0]:>9.5f} {g[0]:>8.2f} {rf[0]:>9.2f} {100 * f[0]:>6.0f}% "
              f"{ref[0]:>12.4f} {sp[0]:>7.0f}x | {s[1]:>11.5f} {100 * f[1]:>9.0f}% {sp[1]:>10.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per algorithm (best kept)")
    parser.add_argument("--threads", type=int, default=2, help="threads of the local loop")
    parser.add_argument("--no-reference", action="store_true", help="skip the per-client reference loops")
    args = parser.parse_args()
    local_mod.set_num_threads(args.threads)
    pool = ThreadPoolExecutor(2)
    sizes = QUICK_SIZES if args.quick else QUADRATIC_SIZES
    for N, d, tau in sizes:
        fed = quadratic_problem(N, d)
        flops = tau * N * 2.0 * d * d
        rows = measure(fed, algorithms(tau, 0.05), flops, matvec_roofline(fed, pool, tau), N * 2.0 * d * d,
                       args.repeats, not args.no_reference)
        show(f"quadratic N={N} d={d} tau={tau}  ({flops / 1e9:.3f} GFLOP per round, "
             f"threads={args.threads})", rows)
    syn = synthetic_fedprox(1.0, 1.0, seed=0, reg=1e-3).train
    tau = 10
    work = 4.0 * syn._A.shape[2] * syn.n_classes * float(np.asarray(syn.n_samples).sum())
    padded = 4.0 * syn._A.shape[2] * syn.n_classes * syn._A.shape[0] * syn._A.shape[1]
    rows = measure(syn, algorithms(tau, 0.05), tau * work, logistic_roofline(syn, tau), padded,
                   args.repeats, not args.no_reference)
    show(f"Synthetic(1,1) logistic: N={syn.n_clients} d={syn.dim} tau={tau} "
         f"({tau * work / 1e9:.3f} GFLOP per round)", rows)
    pool.shutdown()


if __name__ == "__main__":
    main()
