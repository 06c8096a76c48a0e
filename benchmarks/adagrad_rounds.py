"""FedOpt rounds with AdaGrad clients against a plain blocked numpy AdaGrad loop.

Usage::

    python benchmarks/adagrad_rounds.py                # the three sizes of issue 17
    python benchmarks/adagrad_rounds.py --quick        # small sizes, smoke run
    python benchmarks/adagrad_rounds.py --trials 9 --rounds 3   # fixed rounds per trial

Candidates, each timed as ``--rounds`` consecutive rounds per trial (by
default as many as make a trial of the reference about 50 ms), trials
interleaved (trial 1 of every candidate, then trial 2, ...) in this one
process so that load from other processes hits all alike; medians of wall
and CPU seconds (``time.process_time``, all threads) per round are printed
as ratios to the blocked AdaGrad reference, with the load average before
and after:

* ``blocked AdaGrad``: the reference, ``blocked.blocked_adagrad_round``, plain numpy outside
  the library: clients in blocks of about 8 MB of Hessians, each block
  running all tau AdaGrad steps (restarted accumulator nu = 0)
      g = H_i y - e_i,  nu <- nu + g*g,  y <- y - lr g / (sqrt(nu) + eps)
  with preallocated buffers while its Hessians stay in cache, blocks on two
  threads, then x <- x + sum_i p_i (y_i - x);
* ``blocked FedAvg``: the same loop with y <- y - lr g (the reference of
  benchmarks/blocked.py), for the cost of the AdaGrad arithmetic itself;
* ``FedOpt-AdaGrad``: ``FedOpt(client_optimizer=optim.adagrad(lr),
  server_optimizer=optim.sgd(1.0))``, ``round`` called directly (the local
  loop takes the optimizer's fused in-place steps, ``Optimizer.fused``);
* ``FedOpt-AdaGrad pure``: the same with ``fused=None``, so that every local
  step goes through the pure ``update`` (the code path before the fused
  steps existed: the "before" of the same process);
* ``FedAvg``: the library's FedAvg round.

The library's iterates are checked against the reference (max |difference|
after 3 rounds, printed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import interleaved, load, rounds_of
from blocked import blocked_adagrad_round, blocked_fedavg_round, quadratic_problem

from fltheory import optim
from fltheory._threads import single_threaded_blas
from fltheory.algorithms import FedAvg, FedOpt
from fltheory.problems.quadratic import QuadraticFederation

SIZES = [(100, 50, 10), (1000, 100, 10), (10000, 20, 10)]
QUICK_SIZES = [(50, 10, 5), (400, 20, 5)]
EPS = 1e-8


def blocked_round(H: np.ndarray, e: np.ndarray, p: np.ndarray, x: np.ndarray, lr: float, tau: int,
                  pool: ThreadPoolExecutor, adagrad: bool) -> np.ndarray:
    """One round of blocked.py's plain references: AdaGrad clients (eps = EPS) or plain gradient clients."""
    if adagrad:
        return blocked_adagrad_round(H, e, p, x, lr, EPS, tau, pool)
    return blocked_fedavg_round(H, e, p, x, lr, tau, pool)


def reference_of(fed: QuadraticFederation, lr: float, tau: int, rounds: int, pool: ThreadPoolExecutor,
                 adagrad: bool) -> Callable[[], None]:
    box = [np.zeros(fed.dim)]

    def go() -> None:
        x = box[0]
        for _ in range(rounds):
            x = blocked_round(fed.H, fed.e, fed.weights, x, lr, tau, pool, adagrad)
        box[0] = x
    return go


def fedopt_adagrad(lr: float, tau: int, fused: bool = True) -> FedOpt:
    client = optim.adagrad(lr, eps=EPS)
    if not fused:
        client = client._replace(fused=None)
    return FedOpt(client_optimizer=client, server_optimizer=optim.sgd(1.0), local_steps=tau)


def agreement(fed: QuadraticFederation, tau: int, lr: float, pool: ThreadPoolExecutor) -> float:
    """max |x_reference - x_FedOpt| after 3 rounds of AdaGrad clients."""
    x = np.zeros(fed.dim)
    for _ in range(3):
        x = blocked_round(fed.H, fed.e, fed.weights, x, lr, tau, pool, True)
    alg = fedopt_adagrad(lr, tau)
    rng = np.random.default_rng(0)
    state = alg.init(fed, np.zeros(fed.dim), rng)
    for _ in range(3):
        state, _ = alg.round(state, fed, None, rng)
    return float(np.abs(state.x - x).max())


def auto_rounds(fed: QuadraticFederation, lr: float, tau: int, pool: ThreadPoolExecutor,
                target: float = 0.05) -> int:
    """Rounds per trial so that a trial of the reference takes about ``target`` CPU seconds
    (a 3-round trial at N = 100 lasts 2 ms, which load from other processes swamps)."""
    once = reference_of(fed, lr, tau, 1, pool, True)
    once()
    c = time.process_time()
    once()
    return max(1, int(np.ceil(target / max(time.process_time() - c, 1e-6))))


def measure(N: int, d: int, tau: int, trials: int, rounds: int | None, pool: ThreadPoolExecutor) -> None:
    fed = quadratic_problem(N, d)
    lr = 0.05
    x0 = np.zeros(d)
    if rounds is None:
        rounds = auto_rounds(fed, lr, tau, pool)
    runs = {
        "blocked AdaGrad": reference_of(fed, lr, tau, rounds, pool, True),
        "blocked FedAvg": reference_of(fed, lr, tau, rounds, pool, False),
        "FedOpt-AdaGrad": rounds_of(fedopt_adagrad(lr, tau), fed, x0, rounds),
        "FedOpt-AdaGrad pure": rounds_of(fedopt_adagrad(lr, tau, fused=False), fed, x0, rounds),
        "FedAvg": rounds_of(FedAvg(lr=lr, local_steps=tau), fed, x0, rounds),
    }
    before = load()
    med, cpu = interleaved(runs, trials, rounds)
    ref, ref_cpu = med["blocked AdaGrad"], cpu["blocked AdaGrad"]
    print(f"\n(N, d, tau) = ({N}, {d}, {tau}); {trials} interleaved trials of {rounds} rounds; "
          f"load average before {before}, after {load()}; "
          f"max |x_blocked - x_FedOpt| after 3 rounds = {agreement(fed, tau, lr, pool):.1e}")
    print(f"  {'candidate':<20} {'median s/round':>15} {'ratio':>7} {'CPU s/round':>12} {'CPU ratio':>10}")
    for k, v in med.items():
        print(f"  {k:<20} {v:>15.6f} {v / ref:>7.2f} {cpu[k]:>12.6f} {cpu[k] / ref_cpu:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per trial (default: about 50 ms of the reference per trial)")
    args = parser.parse_args()
    with single_threaded_blas(), ThreadPoolExecutor(max_workers=2) as pool:
        for N, d, tau in QUICK_SIZES if args.quick else SIZES:
            measure(N, d, tau, args.trials, args.rounds, pool)


if __name__ == "__main__":
    main()
