"""Rounds against plain blocked numpy implementations of the same algorithms, and run()
against its bare rounds.

Usage::

    python benchmarks/blocked.py                  # the three sizes of issue 17
    python benchmarks/blocked.py --quick          # small sizes, smoke run
    python benchmarks/blocked.py --trials 9
    python benchmarks/blocked.py --sizes 100,50,10 --trials 41 --rounds 10 --no-fixed --no-logistic
    python benchmarks/blocked.py --processes      # also the plain-step algorithms with 2 processes
    python benchmarks/blocked.py --reference-block-mb 16   # references in the library's block size

The references are each algorithm written directly in numpy, outside the library,
in one cache-block scheme: clients in blocks of about 8 MB of Hessians
(``--reference-block-mb``; the library's own blocks hold 16 MB since session 11), each block
running all tau local steps while its Hessians stay in cache, the blocks spread
over two threads, then the server step.

* ``blocked FedAvg``: y <- y - lr (H_i y - e_i); x <- x + sum_i p_i (y_i - x);
* ``blocked SCAFFOLD`` (option II, server rate 1): y <- y - lr (H_i y - e_i + c - c_i),
  then the control and model updates of SCAFFOLD-v1 Alg. 1 (formed inside the block);
* ``blocked FedProx`` (gradient steps): y <- y - lr (H_i y - e_i + mu (y - x));
* ``blocked AdaGrad`` (FedOpt with AdaGrad clients restarted every round, plain
  server averaging): v <- v + g * g, y <- y - lr g / (sqrt(v) + eps).

Each fltheory candidate is checked against its own reference: the largest
difference of any state array after 3 rounds (x; for SCAFFOLD also c and the client
controls), max |a - b| / max(1, max |b|) per array, is printed and flagged when above
1e-15.

Every figure is a ratio of medians measured in this one process with the
trials interleaved (trial 1 of every candidate, then trial 2, ..., in a seeded
random order within each trial: ``_timing.interleaved_samples``), so that
load from other processes hits every candidate alike; the load average is
printed before and after.  Candidates, each timed as ``--rounds`` consecutive
rounds per trial:

* the four references above;
* ``FedAvg``, ``SCAFFOLD`` (option II), ``FedProx`` (gradient steps,
  ``solver="gd"``), ``FedOpt-AdaGrad`` (AdaGrad clients, plain server
  averaging): ``algorithm.round`` called directly (no diagnostics);
* ``run() default``: ``run(FedAvg, fed, rounds)`` with the default metrics
  (loss, loss gap, distance, gradient norm, communication) per round;
* ``run() metrics=()``: the same without per-round metrics.

Then (unless ``--no-fixed``) the fixed cost of one round at (N, d, tau) = (4, 3, 1) of every
fltheory candidate and its reference: what a round costs besides its arithmetic.

Columns: ``to blocked FedAvg`` = median seconds per round over those of the
blocked FedAvg (wall / CPU; the comparison of earlier runs); ``to own reference``
= the same over the candidate's own blocked reference (the issue 17 target is
1.1); ``run() default / bare`` = the default run over the bare ``FedAvg.round``
loop (target <= 1.15).
"""

from __future__ import annotations

import argparse
import functools
import math
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import interleaved, load, rounds_of

from fltheory import optim
from fltheory._threads import single_threaded_blas
from fltheory.algorithms import FedAvg, FedOpt, FedProx, run
from fltheory.algorithms.scaffold import Scaffold, ScaffoldState
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


def client_blocks(N: int, d: int) -> range:
    """Starts of the client blocks: about BLOCK_BYTES of Hessians each."""
    return range(0, N, max(1, BLOCK_BYTES // (8 * d * d)))


def on_blocks(block: Callable[[int, int], None], N: int, d: int, pool: ThreadPoolExecutor) -> None:
    """Run ``block(a, b)`` on every client block, the blocks spread over the pool
    (one block: in this thread, no hand-off)."""
    starts = client_blocks(N, d)
    step = starts.step
    if len(starts) == 1:
        block(0, N)
    else:
        list(pool.map(lambda a: block(a, min(a + step, N)), starts))


def blocked_fedavg_round(H: np.ndarray, e: np.ndarray, p: np.ndarray, x: np.ndarray, lr: float,
                         tau: int, pool: ThreadPoolExecutor) -> np.ndarray:
    """One FedAvg round in plain numpy: cache-sized client blocks, all tau steps
    y <- y - lr (H_i y - e_i) per block, blocks on two threads; returns
    x + sum_i p_i (y_i - x)."""
    N, d = e.shape
    Y = np.empty((N, d))

    def block(a: int, b: int) -> None:
        Hb, eb = H[a:b], e[a:b]
        Yb = np.repeat(x[None, :], b - a, axis=0)
        G = np.empty((b - a, 1, d))
        g = G[:, 0, :]
        for _ in range(tau):
            np.matmul(Yb[:, None, :], Hb, out=G)
            g -= eb
            g *= lr
            Yb -= g
        Y[a:b] = Yb

    on_blocks(block, N, d, pool)
    return x + p @ (Y - x)


def blocked_scaffold_round(H: np.ndarray, e: np.ndarray, x: np.ndarray, c: np.ndarray, C: np.ndarray,
                           lr: float, tau: int, server_lr: float, pool: ThreadPoolExecutor
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One SCAFFOLD round (option II, every client, K = tau steps) in plain numpy, in the
    blocks of :func:`blocked_fedavg_round`; returns (x, c, C) with C the (N, d) client
    controls (Karimireddy et al., SCAFFOLD-v1, Alg. 1):

        y <- y - lr (H_i y - e_i + c - c_i)     (tau times, from y = x),
        c_i^+ = c_i - c + (x - y_i) / (tau lr),
        x^+ = x + (server_lr / N) sum_i (y_i - x),   c^+ = c + (1/N) sum_i (c_i^+ - c_i).

    Each block also forms its model changes and control changes while its rows are in
    cache; the server sums are two matrix-vector products with a vector of ones."""
    N, d = e.shape
    delta = np.empty((N, d))
    C_new = np.empty((N, d))
    dC = np.empty((N, d))

    def block(a: int, b: int) -> None:
        Hb, eb = H[a:b], e[a:b]
        shift = C[a:b] - c                                  # c_i - c, subtracted every step
        Yb = np.repeat(x[None, :], b - a, axis=0)
        G = np.empty((b - a, 1, d))
        g = G[:, 0, :]
        for _ in range(tau):
            np.matmul(Yb[:, None, :], Hb, out=G)
            g -= eb
            g -= shift
            g *= lr
            Yb -= g
        Yb -= x                                             # y_i - x
        delta[a:b] = Yb
        Cb = C_new[a:b]
        np.divide(Yb, tau * lr, out=Cb)
        np.subtract(shift, Cb, out=Cb)                      # c_i - c - (y_i - x) / (tau lr)
        np.subtract(Cb, C[a:b], out=dC[a:b])

    on_blocks(block, N, d, pool)
    ones = np.ones(N)
    return x + (server_lr / N) * (ones @ delta), c + (ones @ dC) / N, C_new


def blocked_fedprox_round(H: np.ndarray, e: np.ndarray, p: np.ndarray, x: np.ndarray, lr: float, mu: float,
                          tau: int, pool: ThreadPoolExecutor) -> np.ndarray:
    """One FedProx round with gradient steps in plain numpy (Li et al., local objective
    f_i(y) + (mu/2) ||y - x||^2), in the blocks of :func:`blocked_fedavg_round`:
    y <- y - lr (H_i y - e_i + mu (y - x)) tau times from y = x; returns
    x + sum_i p_i (y_i - x).  The centre x is held as a block of rows (a same-shape
    subtraction, not a row broadcast)."""
    N, d = e.shape
    Y = np.empty((N, d))

    def block(a: int, b: int) -> None:
        Hb, eb = H[a:b], e[a:b]
        Xb = np.repeat(x[None, :], b - a, axis=0)
        Yb = Xb.copy()
        G = np.empty((b - a, 1, d))
        g = G[:, 0, :]
        T = np.empty((b - a, d))
        for _ in range(tau):
            np.matmul(Yb[:, None, :], Hb, out=G)
            g -= eb
            np.subtract(Yb, Xb, out=T)
            T *= mu
            g += T
            g *= lr
            Yb -= g
        Y[a:b] = Yb

    on_blocks(block, N, d, pool)
    return x + p @ (Y - x)


def blocked_adagrad_round(H: np.ndarray, e: np.ndarray, p: np.ndarray, x: np.ndarray, lr: float, eps: float,
                          tau: int, pool: ThreadPoolExecutor) -> np.ndarray:
    """One FedOpt round with AdaGrad clients restarted every round and plain server
    averaging, in plain numpy (Wang et al., LocalAdaptivity section 3), in the blocks of
    :func:`blocked_fedavg_round`: v = 0, then tau times

        g = H_i y - e_i,   v <- v + g * g,   y <- y - lr g / (sqrt(v) + eps)

    (the convention of ``fltheory.optim.adagrad``: eps added to sqrt(v), accumulator
    started at 0); returns x + sum_i p_i (y_i - x)."""
    N, d = e.shape
    Y = np.empty((N, d))

    def block(a: int, b: int) -> None:
        Hb, eb = H[a:b], e[a:b]
        Yb = np.repeat(x[None, :], b - a, axis=0)
        G = np.empty((b - a, 1, d))
        g = G[:, 0, :]
        V = np.zeros((b - a, d))
        T = np.empty((b - a, d))
        for _ in range(tau):
            np.matmul(Yb[:, None, :], Hb, out=G)
            g -= eb
            np.multiply(g, g, out=T)
            V += T
            np.sqrt(V, out=T)
            T += eps
            np.divide(g, T, out=T)
            T *= lr
            Yb -= T
        Y[a:b] = Yb

    on_blocks(block, N, d, pool)
    return x + p @ (Y - x)


MU = 0.1          # FedProx proximal coefficient
EPS = 1e-8        # AdaGrad eps (fltheory.optim.adagrad's default)
#: fltheory candidate -> the label of its own plain blocked reference
OWN_REFERENCE = {"FedAvg": "blocked FedAvg", "SCAFFOLD": "blocked SCAFFOLD", "FedProx (gd)": "blocked FedProx",
                 "FedOpt-AdaGrad": "blocked AdaGrad"}
#: Algorithms timed also with ``with_processes(2)`` (local steps shared with a worker process).
SHARED = ("FedAvg", "SCAFFOLD", "FedProx (gd)", "FedOpt-AdaGrad")
PROCESSES_SUFFIX = " 2 proc."
OWN_REFERENCE.update({name + PROCESSES_SUFFIX: OWN_REFERENCE[name] for name in SHARED})


def algorithms(lr: float, tau: int) -> dict[str, Any]:
    """The fltheory algorithms measured, by candidate name."""
    return {
        "FedAvg": FedAvg(lr=lr, local_steps=tau),
        "SCAFFOLD": Scaffold(lr=lr, local_steps=tau, server_lr=1.0, option="II"),
        "FedProx (gd)": FedProx(lr=lr, local_steps=tau, mu=MU, solver="gd"),
        "FedOpt-AdaGrad": FedOpt(client_optimizer=optim.adagrad(lr, eps=EPS), server_optimizer=optim.sgd(1.0),
                                 local_steps=tau),
    }


def references(fed: QuadraticFederation, tau: int, lr: float, pool: ThreadPoolExecutor
               ) -> dict[str, tuple[Callable[[Any], Any], Any]]:
    """reference label -> (one round: state -> state, initial state at x = 0)."""
    H, e, p = fed.H, fed.e, fed.weights
    N, d = e.shape
    x0 = np.zeros(d)
    return {
        "blocked FedAvg": (lambda x: blocked_fedavg_round(H, e, p, x, lr, tau, pool), x0),
        "blocked SCAFFOLD": (lambda s: blocked_scaffold_round(H, e, s[0], s[1], s[2], lr, tau, 1.0, pool),
                             (x0, np.zeros(d), np.zeros((N, d)))),
        "blocked FedProx": (lambda x: blocked_fedprox_round(H, e, p, x, lr, MU, tau, pool), x0),
        "blocked AdaGrad": (lambda x: blocked_adagrad_round(H, e, p, x, lr, EPS, tau, pool), x0),
    }


def repeated(step: Callable[[Any], Any], start: Any, rounds: int) -> Callable[[], None]:
    """A function running the next ``rounds`` rounds of ``step`` (state kept between calls)."""
    box = [start]

    def go() -> None:
        state = box[0]
        for _ in range(rounds):
            state = step(state)
        box[0] = state
    return go


def candidates(fed: QuadraticFederation, tau: int, lr: float, rounds: int,
               pool: ThreadPoolExecutor, processes: bool = False) -> dict[str, Callable[[], Any]]:
    """name -> a function running ``rounds`` rounds of that candidate (with ``processes``,
    also every algorithm on ``fed.with_processes(2)``, workers started first)."""
    x0 = np.zeros(fed.dim)
    runs: dict[str, Callable[[], Any]] = {name: repeated(step, start, rounds)
                                          for name, (step, start) in references(fed, tau, lr, pool).items()}
    algs = algorithms(lr, tau)
    runs.update({name: rounds_of(alg, fed, x0, rounds) for name, alg in algs.items()})
    if processes:
        shared = fed.with_processes(2)
        for name in SHARED:
            runs[name + PROCESSES_SUFFIX] = rounds_of(algs[name], shared, x0, rounds)
            runs[name + PROCESSES_SUFFIX]()                  # workers started, shares registered
    fedavg = algs["FedAvg"]
    runs["run() default"] = lambda: run(fedavg, fed, rounds)
    runs["run() metrics=()"] = lambda: run(fedavg, fed, rounds, metrics=())
    return runs


def state_arrays(state: Any) -> list[np.ndarray]:
    """The arrays of an fltheory state or a reference state, in the order (x, c, C)."""
    if isinstance(state, np.ndarray):
        return [state]
    if isinstance(state, tuple):
        return list(state)
    if isinstance(state, ScaffoldState):
        return [state.x, state.c, state.c_clients]
    return [state.x]


def agreement(fed: QuadraticFederation, tau: int, lr: float, pool: ThreadPoolExecutor,
              rounds: int = 3, processes: bool = False) -> dict[str, float]:
    """fltheory candidate -> largest difference of any state array (x; for SCAFFOLD also c
    and the client controls) from its own blocked reference after ``rounds`` rounds, as
    max |a - b| / max(1, max |b|) per array (absolute for entries up to 1, relative to the
    largest entry above: the controls of SCAFFOLD are gradients of size up to ~10)."""
    refs = references(fed, tau, lr, pool)
    out = {}
    algs = [(name, alg, fed) for name, alg in algorithms(lr, tau).items()]
    if processes:
        algs += [(name + PROCESSES_SUFFIX, algorithms(lr, tau)[name], fed.with_processes(2)) for name in SHARED]
    for name, alg, problem in algs:
        step, ref_state = refs[OWN_REFERENCE[name]]
        rng = np.random.default_rng(0)
        state = alg.init(problem, np.zeros(fed.dim), rng)
        for _ in range(rounds):
            ref_state = step(ref_state)
            state, _ = alg.round(state, problem, None, rng)
        out[name] = max(float(np.abs(a - b).max()) / max(1.0, float(np.abs(b).max()))
                        for a, b in zip(state_arrays(state), state_arrays(ref_state), strict=True))
    return out


def measure(N: int, d: int, tau: int, trials: int, rounds: int, pool: ThreadPoolExecutor,
            processes: bool = False) -> None:
    fed = quadratic_problem(N, d)
    lr = 0.05
    before = load()
    med, cpu = interleaved(candidates(fed, tau, lr, rounds, pool, processes), trials, rounds)
    base, base_cpu = med["blocked FedAvg"], cpu["blocked FedAvg"]
    agree = agreement(fed, tau, lr, pool, processes=processes)
    print(f"\n(N, d, tau) = ({N}, {d}, {tau}); {trials} interleaved trials of {rounds} rounds; "
          f"load average before {before}, after {load()}")
    print(f"  {'candidate':<18} {'median s/round':>15} {'CPU s/round':>12} {'to blocked FedAvg':>18} "
          f"{'to own reference':>17} {'own reference':>17} {'difference (3 rounds)':>22}")
    print(f"  {'':<18} {'':>15} {'':>12} {'wall / CPU':>18} {'wall / CPU':>17}")
    for k, v in med.items():
        to_base = f"{v / base:.2f} / {cpu[k] / base_cpu:.2f}"
        own = OWN_REFERENCE.get(k)
        if own is not None:
            to_own = f"{v / med[own]:.2f} / {cpu[k] / cpu[own]:.2f}"
            diff = agree[k]
            verdict = f"{diff:.1e} {'<= 1e-15' if diff <= 1e-15 else '> 1e-15 (!)'}"
        else:
            own, to_own, verdict = "", "", ""
        print(f"  {k:<18} {v:>15.6f} {cpu[k]:>12.6f} {to_base:>18} {to_own:>17} {own:>17} {verdict:>22}")
    if processes:
        print("  (CPU of the '2 proc.' candidates: this process only; their worker uses the other core)")
    print(f"  run() default / bare FedAvg rounds = {med['run() default'] / med['FedAvg']:.3f} "
          f"(CPU {cpu['run() default'] / cpu['FedAvg']:.3f}); run() metrics=() / bare = "
          f"{med['run() metrics=()'] / med['FedAvg']:.3f} (CPU {cpu['run() metrics=()'] / cpu['FedAvg']:.3f})")


def fixed_costs(pool: ThreadPoolExecutor, calls: int = 2000, repeats: int = 9) -> None:
    """CPU seconds of one round at (N, d, tau) = (4, 3, 1), where the arithmetic is a few
    hundred flops: what a round costs besides its local steps (argument checks, participants,
    set-up of the local loop, bookkeeping), for every candidate and its reference (minimum
    over ``repeats`` timings of ``calls`` consecutive calls, ``time.process_time``)."""
    fed = quadratic_problem(4, 3, seed=1)
    lr, tau = 0.05, 1
    refs = references(fed, tau, lr, pool)
    rng = np.random.default_rng(0)
    timer = time.process_time

    def cost(fn: Callable[[], Any]) -> float:
        fn()
        return min(timeit.repeat(fn, number=calls, repeat=repeats, timer=timer)) / calls

    print(f"\nFixed cost of a round, (N, d, tau) = (4, 3, 1); min of {repeats} x {calls} calls, CPU time; "
          f"load average {load()}")
    for name, alg in algorithms(lr, tau).items():
        step, start = refs[OWN_REFERENCE[name]]
        state = alg.init(fed, np.zeros(fed.dim), rng)
        ours = cost(functools.partial(alg.round, state, fed, None, rng))
        theirs = cost(functools.partial(step, start))
        print(f"  {name:<16} {ours * 1e6:7.1f} us   {OWN_REFERENCE[name]:<17} {theirs * 1e6:7.1f} us   "
              f"difference {(ours - theirs) * 1e6:6.1f} us")


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


def measure_logistic(trials: int, rounds: int, processes: bool = False) -> None:
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
    if processes:
        shared = fed.with_processes(2)
        runs["FedAvg.round 2 proc."] = rounds_of(alg, shared, x0, rounds)
        runs["FedAvg.round 2 proc."]()                        # the worker started, its share registered
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


def size_triple(text: str) -> tuple[int, int, int]:
    """``"N,d,tau"`` -> (N, d, tau), three positive integers (argparse reports anything else)."""
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected N,d,tau (three positive integers), got {text!r}")
    N, d, tau = (int(p) for p in parts)
    return N, d, tau


def main() -> None:
    global BLOCK_BYTES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--trials", type=int, default=7, help="interleaved trials (median kept)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per trial")
    parser.add_argument("--busy", action="store_true",
                        help="run a busy loop in a second process for the whole measurement")
    parser.add_argument("--no-logistic", action="store_true", help="skip the logistic comparison")
    parser.add_argument("--processes", action="store_true",
                        help="also time every algorithm on fed.with_processes(2)")
    parser.add_argument("--no-fixed", action="store_true", help="skip the fixed per-round costs at (4, 3, 1)")
    parser.add_argument("--sizes", nargs="+", default=None, metavar="N,d,tau", type=size_triple,
                        help="sizes to measure instead of the three of issue 17, e.g. 100,50,10")
    parser.add_argument("--reference-block-mb", type=float, default=BLOCK_BYTES / 2 ** 20, metavar="MB",
                        help=f"Hessian bytes per client block of the references (default {BLOCK_BYTES >> 20}; "
                             "the library's local loop uses 16)")
    args = parser.parse_args()
    if not (args.reference_block_mb > 0 and math.isfinite(args.reference_block_mb)):
        parser.error(f"--reference-block-mb must be > 0, got {args.reference_block_mb}")
    BLOCK_BYTES = int(args.reference_block_mb * 2 ** 20)
    print(f"references: client blocks of {BLOCK_BYTES / 2 ** 20:g} MB of Hessians")
    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes is not None:
        sizes = args.sizes
    spinner = busy_core() if args.busy else None
    try:
        if spinner is not None:
            print(f"busy loop running in process {spinner.pid}")
        with single_threaded_blas(), ThreadPoolExecutor(2, thread_name_prefix="blocked-reference") as pool:
            for N, d, tau in sizes:
                measure(N, d, tau, args.trials, args.rounds, pool, args.processes)
            if not args.no_fixed:
                fixed_costs(pool, calls=200 if args.quick else 2000)
            if not args.no_logistic:
                measure_logistic(args.trials, args.rounds, args.processes)
    finally:
        if spinner is not None:
            spinner.terminate()
            spinner.wait()


if __name__ == "__main__":
    main()
