"""Throughput of the batched client gradients against a memory roofline.

Run: ``python benchmarks/oracles.py`` (``--quick`` for a short run).

For each case the script times, in the same process and interleaved:

* ``batched``: ``fed.client_grad(X)`` for all N clients (the library path);
* references that stream the same bytes as the batched call (for
  quadratics the (N d, d) stack of H_i; for logistic clients the padded
  (N n, f) feature stack, twice, since the gradient reads it once for the
  margins and once for A^T r): ``gemv``, one large matrix-vector product
  (OpenBLAS), and ``stream sum``, a numpy sum-reduction of the same array.
  Their "GFLOP/s" is the gradient's flop count divided by their time, and
  the batched call is reported as a percentage of each.  For softmax clients
  (C flops per byte) the reference is ``gemm``: the two pooled products
  (N n, f) @ (f, C) and (f, N n) @ (N n, C) with the same flops and bytes;
* ``batched 2 threads`` (quadratics): ``fed.with_threads(2).client_grad(X)``,
  reported with its percentage of the (2-thread OpenBLAS) gemv reference;
* ``numpy loop``: a Python loop over clients doing the same arithmetic with
  plain numpy per client (the fair loop baseline);
* ``oracle loop``: a loop calling ``fed.client_grad(X[i], [i])`` per client.

Each timing is the minimum over ``--trials`` trials of the mean of a
``--min-time`` second run (the minimum filters out interference from other
jobs on a shared machine).  GFLOP/s counts 2 N d^2 flops for a quadratic
gradient and 4 N n f for a binary logistic gradient (2 n f C * 2 multinomial).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from fltheory.problems import LogisticFederation, QuadraticFederation


def _time(fn: Callable[[], object], min_time: float) -> float:
    fn()
    t0, n = time.perf_counter(), 0
    while True:
        fn()
        n += 1
        t = time.perf_counter() - t0
        if t >= min_time:
            return t / n


def _best(fns: dict[str, Callable[[], object]], trials: int, min_time: float) -> dict[str, float]:
    best = {k: np.inf for k in fns}
    for _ in range(trials):                  # interleave so interference hits all alike
        for k, fn in fns.items():
            best[k] = min(best[k], _time(fn, min_time))
    return best


def quadratic_case(N: int, d: int, trials: int, min_time: float) -> dict[str, float]:
    rng = np.random.default_rng(0)
    B = rng.standard_normal((N, d, d)) / np.sqrt(d)
    H = np.matmul(B, np.swapaxes(B, 1, 2)) + np.eye(d)
    fed = QuadraticFederation(H, rng.standard_normal((N, d)))
    X = rng.standard_normal((N, d))
    fed2 = fed.with_threads(2)
    M = fed.H.reshape(N * d, d)
    x = X[0].copy()
    fns = {
        "batched": lambda: fed.client_grad(X),
        "batched 2 threads": lambda: fed2.client_grad(X),
        "gemv": lambda: M @ x,
        "stream sum": lambda: M.sum(),
        "numpy loop": lambda: [fed.H[i] @ X[i] - fed.e[i] for i in range(N)],
        "oracle loop": lambda: [fed.client_grad(X[i], [i]) for i in range(N)],
    }
    out = _best(fns, trials, min_time)
    out["roofline"] = min(out["gemv"], out["stream sum"])
    out["flops"] = 2.0 * N * d * d
    out["bytes"] = fed.H.nbytes
    return out


def logistic_case(N: int, n: int, f: int, n_classes: int | None, trials: int, min_time: float
                  ) -> dict[str, float]:
    rng = np.random.default_rng(1)
    feats = [rng.standard_normal((n, f)) for _ in range(N)]
    if n_classes is None:
        labels = [np.where(rng.random(n) < 0.5, -1.0, 1.0) for _ in range(N)]
    else:
        labels = [rng.integers(0, n_classes, n) for _ in range(N)]
    fed = LogisticFederation(feats, labels, reg=0.1, n_classes=n_classes)
    X = rng.standard_normal((N, fed.dim)) * 0.1
    A = fed._A.reshape(N * n, f)
    C = 1 if n_classes is None else n_classes
    v = rng.standard_normal(f)
    V = rng.standard_normal((f, C))
    R = rng.standard_normal((N * n, C))
    Ys = [np.asarray(y) for y in labels]

    def loop_binary() -> list:
        out = []
        for i in range(N):
            a, y, x = feats[i], Ys[i], X[i]
            z = y * (a @ x)
            out.append(a.T @ (-y / (1.0 + np.exp(z))) / n + 0.1 * x)
        return out

    def loop_multi() -> list:
        out = []
        for i in range(N):
            a, y = feats[i], Ys[i]
            Z = a @ X[i].reshape(f, C)
            P = np.exp(Z - Z.max(1, keepdims=True))
            P /= P.sum(1, keepdims=True)
            P[np.arange(n), y] -= 1.0
            out.append((a.T @ P).ravel() / n + 0.1 * X[i])
        return out

    fns = {
        "batched": lambda: fed.client_grad(X),
        **({"gemv": lambda: (A @ v, A @ v), "stream sum": lambda: (A.sum(), A.sum())}
           if n_classes is None else {"gemm": lambda: (A @ V, A.T @ R)}),
        "numpy loop": loop_binary if n_classes is None else loop_multi,
        "oracle loop": lambda: [fed.client_grad(X[i], [i]) for i in range(N)],
    }
    out = _best(fns, trials, min_time)
    out["roofline"] = out["gemm"] if n_classes else min(out["gemv"], out["stream sum"])
    out["flops"] = 4.0 * N * n * f * C
    out["bytes"] = 2 * A.nbytes
    return out


def report(name: str, r: dict[str, float]) -> str:
    g = lambda t: r["flops"] / t / 1e9
    ref = lambda k: f"{g(r[k]):.2f} ({r[k] / r['batched']:.0%})" if k in r else "-"
    thr = (f"{r['batched 2 threads'] * 1e3:.3f} ({r['gemv'] / r['batched 2 threads']:.0%})"
           if "batched 2 threads" in r else "-")
    return (f"| {name} | {r['batched'] * 1e3:.3f} | {g(r['batched']):.2f} | {ref('gemv')} | "
            f"{ref('stream sum')} | {ref('gemm')} | {thr} | {r['numpy loop'] / r['batched']:.1f}x | "
            f"{r['oracle loop'] / r['batched']:.1f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short timings")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.4)
    args = ap.parse_args()
    trials, mt = (2, 0.1) if args.quick else (args.trials, args.min_time)
    print("| case | batched ms | batched GFLOP/s | gemv roofline GFLOP/s (batched as % of it) "
          "| stream-sum roofline | pooled-GEMM reference | 2-thread batched ms (% of gemv) "
          "| vs numpy loop | vs oracle loop |")
    print("|---|---|---|---|---|---|---|---|---|")
    for N, d in [(1000, 100), (10000, 20)]:
        print(report(f"quadratic N={N} d={d}", quadratic_case(N, d, trials, mt)), flush=True)
    print(report("logistic binary N=100 n=200 f=60", logistic_case(100, 200, 60, None, trials, mt)), flush=True)
    print(report("logistic softmax N=30 n=200 f=61 C=10", logistic_case(30, 200, 61, 10, trials, mt)), flush=True)


if __name__ == "__main__":
    main()
