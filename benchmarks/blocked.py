"""Rounds against a plain blocked numpy FedAvg, and run() against its bare rounds.

Usage::

    python benchmarks/blocked.py                  # the three sizes of issue 17
    python benchmarks/blocked.py --quick          # small sizes, smoke run
    python benchmarks/blocked.py --trials 9

The reference (``blocked_fedavg_round``) is FedAvg written directly in numpy,
outside the library: clients in blocks of about 8 MB of Hessians, each block
running all tau steps y <- y - lr (H_i y - e_i) while its Hessians stay in
cache, the blocks spread over two threads, then x <- x + sum_i p_i (y_i - x).
It is checked against ``FedAvg`` (max |difference| printed).

Every figure is a ratio of medians measured in this one process with the
trials interleaved (trial 1 of every candidate, then trial 2, ...), so that
load from other processes hits every candidate alike; the load average is
printed before and after.  Candidates, each timed as ``--rounds`` consecutive
rounds per trial:

* ``FedAvg``, ``SCAFFOLD`` (option II), ``FedProx`` (gradient steps,
  ``solver="gd"``), ``FedOpt-AdaGrad`` (AdaGrad clients, plain server
  averaging): ``algorithm.round`` called directly (no diagnostics);
* ``run() default``: ``run(FedAvg, fed, rounds)`` with the default metrics
  (loss, loss gap, distance, gradient norm, communication) per round;
* ``run() metrics=()``: the same without per-round metrics.

``ratio`` = median seconds per round / median seconds per round of the
blocked reference; ``run() default / bare`` = the default run over the bare
``FedAvg.round`` loop (the target of issue 17 is <= 1.15).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from fltheory import optim
from fltheory._threads import single_threaded_blas
from fltheory.algorithms import FedAvg, FedOpt, FedProx, run
from fltheory.algorithms.scaffold import Scaffold
from fltheory.problems.quadratic import QuadraticFederation

SIZES = [(100, 50, 10), (1000, 100, 10), (10000, 20, 10)]
QUICK_SIZES = [(50, 10, 5), (400, 20, 5)]
BLOCK_BYTES = 1 << 23


def quadratic_problem(N: int, d: int, seed: int = 0) -> QuadraticFederation:
    """H_i = B_i B_i^T / d + 0.5 I (B_i standard Gaussian), e_i standard Gaussian."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, d, d))
    H = np.matmul(B, np.swapaxes(B, 1, 2)) / d + 0.5 * np.eye(d)
    return QuadraticFederation(H, rng.standard_normal((N, d)))


def blocked_fedavg_round(H: np.ndarray, e: np.ndarray, p: np.ndarray, x: np.ndarray, lr: float,
                         tau: int, pool: ThreadPoolExecutor) -> np.ndarray:
    """One FedAvg round in plain numpy: cache-sized client blocks, all tau steps per
    block, blocks on two threads; returns x + sum_i p_i (y_i - x)."""
    N, d = e.shape
    per = max(1, BLOCK_BYTES // (8 * d * d))
    Y = np.empty((N, d))

    def block(a: int) -> None:
        b = min(a + per, N)
        Hb, eb = H[a:b], e[a:b]
        Yb = np.repeat(x[None, :], b - a, axis=0)
        G = np.empty((b - a, 1, d))
        for _ in range(tau):
            np.matmul(Yb[:, None, :], Hb, out=G)
            g = G[:, 0, :]
            g -= eb
            g *= lr
            Yb -= g
        Y[a:b] = Yb

    starts = range(0, N, per)
    if len(starts) == 1:
        block(0)                                  # one block: no thread hand-off
    else:
        list(pool.map(block, starts))
    return x + p @ (Y - x)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def interleaved(runs: dict[str, Callable[[], Any]], trials: int, rounds: int
                ) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU seconds per round of every candidate: each call of a
    candidate runs ``rounds`` rounds; trial 1 of every candidate, then trial 2,
    ... (after one warm-up call each), so that load from other processes hits
    all alike.  CPU time (``time.process_time``, all threads of the process)
    counts only the work done, not the time spent waiting for a core."""
    for fn in runs.values():                                  # warm-up (pools, caches, imports)
        fn()
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(trials):
        for name, fn in runs.items():
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[name].append((time.perf_counter() - t) / rounds)
            cpu[name].append((time.process_time() - c) / rounds)
    return ({k: float(np.median(v)) for k, v in wall.items()},
            {k: float(np.median(v)) for k, v in cpu.items()})


def rounds_of(alg: Any, fed: Any, x0: np.ndarray, rounds: int) -> Callable[[], None]:
    """A function running the next ``rounds`` bare rounds of ``alg`` (state kept
    between calls; ``init`` is not timed)."""
    rng = np.random.default_rng(0)
    box = [alg.init(fed, x0, rng)]

    def go() -> None:
        state = box[0]
        for _ in range(rounds):
            state, _ = alg.round(state, fed, None, rng)
        box[0] = state
    return go


def candidates(fed: QuadraticFederation, tau: int, lr: float, rounds: int,
               pool: ThreadPoolExecutor) -> dict[str, Callable[[], Any]]:
    """name -> a function running ``rounds`` rounds of that candidate."""
    x0 = np.zeros(fed.dim)
    box = [x0]

    def reference() -> None:
        x = box[0]
        for _ in range(rounds):
            x = blocked_fedavg_round(fed.H, fed.e, fed.weights, x, lr, tau, pool)
        box[0] = x

    fedavg = FedAvg(lr=lr, local_steps=tau)
    return {
        "blocked numpy": reference,
        "FedAvg": rounds_of(fedavg, fed, x0, rounds),
        "SCAFFOLD": rounds_of(Scaffold(lr=lr, local_steps=tau, server_lr=1.0, option="II"), fed, x0, rounds),
        "FedProx (gd)": rounds_of(FedProx(lr=lr, local_steps=tau, mu=0.1, solver="gd"), fed, x0, rounds),
        "FedOpt-AdaGrad": rounds_of(FedOpt(client_optimizer=optim.adagrad(lr), server_optimizer=optim.sgd(1.0),
                                           local_steps=tau), fed, x0, rounds),
        "run() default": lambda: run(fedavg, fed, rounds),
        "run() metrics=()": lambda: run(fedavg, fed, rounds, metrics=()),
    }


def agreement(fed: QuadraticFederation, tau: int, lr: float, pool: ThreadPoolExecutor) -> float:
    """max |x_reference - x_FedAvg| after 3 rounds."""
    x = np.zeros(fed.dim)
    for _ in range(3):
        x = blocked_fedavg_round(fed.H, fed.e, fed.weights, x, lr, tau, pool)
    h = run(FedAvg(lr=lr, local_steps=tau), fed, 3, metrics=())
    return float(np.abs(h.x[-1] - x).max())


def measure(N: int, d: int, tau: int, trials: int, rounds: int, pool: ThreadPoolExecutor) -> None:
    fed = quadratic_problem(N, d)
    lr = 0.05
    before = load()
    med, cpu = interleaved(candidates(fed, tau, lr, rounds, pool), trials, rounds)
    ref, ref_cpu = med["blocked numpy"], cpu["blocked numpy"]
    print(f"\n(N, d, tau) = ({N}, {d}, {tau}); {trials} interleaved trials of {rounds} rounds; "
          f"load average before {before}, after {load()}; "
          f"max |x_blocked - x_FedAvg| after 3 rounds = {agreement(fed, tau, lr, pool):.1e}")
    print(f"  {'candidate':<18} {'median s/round':>15} {'ratio to blocked':>17} {'CPU s/round':>12} "
          f"{'CPU ratio':>10}")
    for k, v in med.items():
        print(f"  {k:<18} {v:>15.6f} {v / ref:>17.2f} {cpu[k]:>12.6f} {cpu[k] / ref_cpu:>10.2f}")
    print(f"  run() default / bare FedAvg rounds = {med['run() default'] / med['FedAvg']:.3f} "
          f"(CPU {cpu['run() default'] / cpu['FedAvg']:.3f}); run() metrics=() / bare = "
          f"{med['run() metrics=()'] / med['FedAvg']:.3f} (CPU {cpu['run() metrics=()'] / cpu['FedAvg']:.3f})")


def per_client_logistic_round(A: np.ndarray, y: np.ndarray, rows: np.ndarray, p: np.ndarray, reg: float,
                              C: int, x: np.ndarray, lr: float, tau: int) -> np.ndarray:
    """One FedAvg round on multinomial logistic clients, a plain numpy loop over
    clients: y <- y - lr ((1/n_i) A_i^T (softmax(A_i W) - onehot) + reg W), tau times."""
    f = A.shape[2]
    x_new = x.copy()
    for i in range(A.shape[0]):
        Ai, yi, n = A[i, : rows[i]], y[i, : rows[i]], rows[i]
        W = x.reshape(f, C).copy()
        for _ in range(tau):
            Z = Ai @ W
            Z -= Z.max(axis=1, keepdims=True)
            P = np.exp(Z)
            P /= P.sum(axis=1, keepdims=True)
            P[np.arange(n), yi] -= 1.0
            W -= lr * (Ai.T @ P / n + reg * W)
        x_new += p[i] * (W.ravel() - x)
    return x_new


def measure_logistic(trials: int, rounds: int) -> None:
    """Synthetic(1,1) (FedProx's softmax data, 30 devices, d = 610): FedAvg.round
    against the plain per-client loop above."""
    from fltheory.problems.synthetic import synthetic_fedprox
    fed = synthetic_fedprox(1.0, 1.0, seed=0, reg=1e-3).train
    tau, lr = 10, 0.05
    A, y, rows = fed._A, fed._y, fed._rows
    C = fed.n_classes
    assert C is not None                                       # softmax clients
    alg = FedAvg(lr=lr, local_steps=tau)
    x0 = np.zeros(fed.dim)

    box = [x0]

    def loop() -> None:
        x = box[0]
        for _ in range(rounds):
            x = per_client_logistic_round(A, y, rows, fed.weights, fed.reg, C, x, lr, tau)
        box[0] = x

    runs = {"per-client numpy loop": loop, "FedAvg.round": rounds_of(alg, fed, x0, rounds),
            "run() default": lambda: run(alg, fed, rounds)}
    before = load()
    med, cpu = interleaved(runs, trials, rounds)
    x_loop = per_client_logistic_round(A, y, rows, fed.weights, fed.reg, C, x0, lr, tau)
    x_alg = run(alg, fed, 1, metrics=()).x[-1]
    print(f"\nSynthetic(1,1) logistic, N = {fed.n_clients}, d = {fed.dim}, tau = {tau}; {trials} interleaved "
          f"trials of {rounds} rounds; load average before {before}, after {load()}; "
          f"max |x_loop - x_FedAvg| after 1 round = {np.abs(x_loop - x_alg).max():.1e}")
    ref, ref_cpu = med["per-client numpy loop"], cpu["per-client numpy loop"]
    print(f"  {'candidate':<22} {'median s/round':>15} {'speed-up over the loop':>23} {'CPU speed-up':>13}")
    for k, v in med.items():
        print(f"  {k:<22} {v:>15.6f} {ref / v:>23.2f} {ref_cpu / cpu[k]:>13.2f}")


def busy_core() -> subprocess.Popen[bytes]:
    """A second process spinning on one core (the contention case of issue 17)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--trials", type=int, default=7, help="interleaved trials (median kept)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per trial")
    parser.add_argument("--busy", action="store_true",
                        help="run a busy loop in a second process for the whole measurement")
    parser.add_argument("--no-logistic", action="store_true", help="skip the logistic comparison")
    args = parser.parse_args()
    spinner = busy_core() if args.busy else None
    try:
        if spinner is not None:
            print(f"busy loop running in process {spinner.pid}")
        with single_threaded_blas(), ThreadPoolExecutor(2, thread_name_prefix="blocked-reference") as pool:
            for N, d, tau in QUICK_SIZES if args.quick else SIZES:
                measure(N, d, tau, args.trials, args.rounds, pool)
            if not args.no_logistic:
                measure_logistic(args.trials, args.rounds)
    finally:
        if spinner is not None:
            spinner.terminate()
            spinner.wait()


if __name__ == "__main__":
    main()
