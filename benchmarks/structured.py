"""A FedAvg round on structured quadratic clients H_i = diag(D_i) + U_i U_i^T.

Usage::

    python benchmarks/structured.py              # N = 1000, d = 10,000, rank 8, tau = 10
    python benchmarks/structured.py --quick      # N = 100, d = 2,000, rank 4 (smoke run)

Candidates, each a full-participation FedAvg round (exact gradients, tau local
steps of rate eta, server rate 1) from the same model, timed in this one
process with the trials interleaved (median of ``--trials``):

* ``round, 1 thr`` / ``round, 2 thr``: ``FedAvg.round`` on
  :class:`StructuredQuadraticFederation` (the vectorized path: cache-sized
  blocks of clients through the ``client_block`` hook) with the library's
  local-step threads set to 1 or 2;
* ``fltheory run()``: ``run(FedAvg, fed, 1)`` (adds the diagnostics of one
  round; the global optimum x*, conjugate gradients at this total rank, is
  computed in the warm-up and cached by the federation);
* ``fltheory oracle``: the structured oracle alone, ``client_grad`` on the
  cache-sized client blocks a round uses (``client_block`` views), tau steps
  per block, one thread: the round without the algorithm framework (optimizer
  state, communication accounting, argument checks of ``stochastic_grad``);
* ``numpy loop``: a plain per-client loop, y <- y - eta (D_i * y + U_i (U_i^T y) - e_i),
  tau steps per client, then the weighted average (what one would write by hand);
* ``numpy batched``: the same steps on all clients at once (stacked matmul
  over the client axis, no blocking).

All agree to float64 rounding (printed).  Memory: the factors take
8 N d r bytes; the same Hessians stored dense (QuadraticFederation) would take
8 N d^2 bytes.  Clients: D_i ~ U[1/2, 3/2], U_i with N(0, 1/d) entries, e_i ~ N(0, I)
(built directly; the exact-constant generator is not what is measured).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from fltheory.algorithms import FedAvg, run
from fltheory.algorithms.local.blocking import _THREADS, row_blocks, set_num_threads
from fltheory.problems import StructuredQuadraticFederation


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def build(N: int, d: int, r: int, seed: int = 0) -> StructuredQuadraticFederation:
    rng = np.random.default_rng(seed)
    D = rng.uniform(0.5, 1.5, (N, d))
    U = rng.standard_normal((N, d, r)) / np.sqrt(d)
    e = rng.standard_normal((N, d))
    return StructuredQuadraticFederation(D, e, U)


def numpy_loop(D: np.ndarray, V: np.ndarray, e: np.ndarray, p: np.ndarray, x: np.ndarray, lr: float,
               tau: int) -> np.ndarray:
    """Per-client loop; V[i] = U_i^T (r, d)."""
    out = np.zeros(x.shape)
    for i in range(D.shape[0]):
        y = x.copy()
        Di, Vi, ei = D[i], V[i], e[i]
        for _ in range(tau):
            y -= lr * (Di * y + Vi.T @ (Vi @ y) - ei)
        out += p[i] * y
    return out


def numpy_batched(D: np.ndarray, V: np.ndarray, e: np.ndarray, p: np.ndarray, x: np.ndarray, lr: float,
                  tau: int) -> np.ndarray:
    """All clients at once, no blocking (stacked matmul: faster than einsum here)."""
    Y = np.broadcast_to(x, D.shape).copy()
    for _ in range(tau):
        c = np.matmul(V, Y[:, :, None])                              # (N, r, 1)
        Y -= lr * (D * Y + np.matmul(np.swapaxes(c, 1, 2), V)[:, 0, :] - e)
    return p @ Y


def oracle_steps(fed: StructuredQuadraticFederation, x: np.ndarray, lr: float, tau: int) -> np.ndarray:
    """The library's structured oracle alone: tau steps y <- y - lr client_grad(y) per
    cache-sized block of clients (the blocks and views a round uses, one thread, no
    optimizer, no communication accounting)."""
    N, d = fed.n_clients, fed.dim
    Y = np.broadcast_to(x, (N, d)).copy()
    for b in row_blocks(fed, N, d):
        view = fed.client_block(b.start, b.stop)
        assert view is not None
        Yb = Y[b]
        for _ in range(tau):
            Yb -= lr * view.client_grad(Yb)
    return fed.weights @ Y


def measure(N: int, d: int, r: int, tau: int, trials: int, lr: float = 0.1) -> None:
    print(f"\n(N, d, r, tau) = ({N}, {d}, {r}, {tau}); load before: {_load()}")
    t0 = time.perf_counter()
    fed = build(N, d, r)
    print(f"  built in {time.perf_counter() - t0:.1f} s; factors {8 * N * d * r / 1e9:.2f} GB "
          f"(dense Hessians would need {8 * N * d * d / 1e9:.0f} GB)")
    alg = FedAvg(lr=lr, local_steps=tau)
    x0 = np.zeros(d)
    D, V, e, p = fed.diag, np.swapaxes(fed.factors, 1, 2), fed.e, fed.weights
    state = alg.init(fed, x0, np.random.default_rng(0))
    default_threads = _THREADS[0]
    results: dict[str, np.ndarray] = {}

    def fl_round(threads: int) -> None:
        set_num_threads(threads)
        results[f"round, {threads} thr"] = alg.round(state, fed, None, np.random.default_rng(0))[0].x
        set_num_threads(default_threads)

    def fl_run() -> None:
        results["fltheory run()"] = run(alg, fed, 1, x0=x0).x[-1]

    def oracle() -> None:
        results["fltheory oracle"] = oracle_steps(fed, x0, lr, tau)

    def loop() -> None:
        results["numpy loop"] = numpy_loop(D, V, e, p, x0, lr, tau)

    def batched() -> None:
        results["numpy batched"] = numpy_batched(D, V, e, p, x0, lr, tau)

    candidates: dict[str, Callable[[], None]] = {"round, 1 thr": lambda: fl_round(1),
                                                 "round, 2 thr": lambda: fl_round(2), "fltheory run()": fl_run,
                                                 "fltheory oracle": oracle, "numpy loop": loop,
                                                 "numpy batched": batched}
    times: dict[str, list[float]] = {k: [] for k in candidates}
    for fn in candidates.values():       # warm-up; x* is computed here once and cached by the federation
        fn()
    for _ in range(trials):
        for name, fn in candidates.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    ref = results["numpy loop"]
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"  load after: {_load()}")
    print(f"  {'candidate':<16} {'median s/round':>15} {'ratio to loop':>14} {'max |x - x_loop|':>17}")
    for name in candidates:
        diff = float(np.abs(results[name] - ref).max())
        print(f"  {name:<16} {med[name]:>15.3f} {med[name] / med['numpy loop']:>14.2f} {diff:>17.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 100, d = 2000, rank 4")
    parser.add_argument("--trials", type=int, default=5, help="interleaved trials (median kept)")
    parser.add_argument("--tau", type=int, default=10, help="local steps")
    args = parser.parse_args()
    if args.quick:
        measure(100, 2000, 4, args.tau, args.trials)
    else:
        measure(1000, 10_000, 8, args.tau, args.trials)


if __name__ == "__main__":
    main()
