"""Cost of the per-round diagnostics of run(), each against the route it replaced.

Usage::

    python benchmarks/diagnostics.py [--trials 9]

For each (N, d) of issue 17, measured in one process with interleaved trials
(medians), load average printed:

* entropy of the N d uplink values: counts of the quantised bins by
  ``np.bincount`` (``fltheory.compression.entropy``) against ``np.unique``
  (a sort; the previous definition), with the two results compared bit for bit;
* F(x) and ||grad F(x)||^2: the federation hook ``loss_and_grad_norm2`` (for
  quadratic clients the averaged quadratic, formed once) against
  ``problem.loss(x)`` and ``problem.grad(x)`` (a pass over all N Hessians each),
  with the largest relative difference.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from fltheory.compression import entropy
from fltheory.problems.quadratic import QuadraticFederation

SIZES = [(100, 50), (1000, 100), (10000, 20)]


def quadratic_problem(N: int, d: int, seed: int = 0) -> QuadraticFederation:
    """H_i = B_i B_i^T / d + 0.5 I (B_i standard Gaussian), e_i standard Gaussian."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, d, d))
    H = np.matmul(B, np.swapaxes(B, 1, 2)) / d + 0.5 * np.eye(d)
    return QuadraticFederation(H, rng.standard_normal((N, d)))


def entropy_by_sort(values: np.ndarray, w: float = 0.01) -> float:
    _, counts = np.unique(np.rint(values.ravel() / w), return_counts=True)
    p = counts / values.size
    return float(max(-(p * np.log2(p)).sum(), 0.0))


def medians(runs: dict[str, Callable[[], Any]], trials: int, repeat: int) -> dict[str, float]:
    for fn in runs.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(trials):
        for name, fn in runs.items():
            t = time.perf_counter()
            for _ in range(repeat):
                fn()
            times[name].append((time.perf_counter() - t) / repeat)
    return {k: float(np.median(v)) for k, v in times.items()}


def measure_size(N: int, d: int, trials: int) -> None:
    fed = quadratic_problem(N, d)
    rng = np.random.default_rng(1)
    delta = 0.05 * rng.standard_normal((N, d))
    x = rng.standard_normal(d)
    fed.loss_and_grad_norm2(x[None, :])                    # the averaged quadratic, once
    e = medians({"unique": lambda: entropy_by_sort(delta), "bincount": lambda: entropy(delta)},
                trials, 5)
    o = medians({"pointwise": lambda: (fed.loss(x), float(np.sum(fed.grad(x) ** 2))),
                 "hook": lambda: fed.loss_and_grad_norm2(x[None, :])}, trials, 5)
    same = entropy(delta) == entropy_by_sort(delta)
    lo, g2 = fed.loss_and_grad_norm2(x[None, :])
    ref_l, ref_g = fed.loss(x), float(np.sum(fed.grad(x) ** 2))
    rel = max(abs(lo[0] - ref_l) / abs(ref_l), abs(g2[0] - ref_g) / abs(ref_g))
    print(f"{(N, d)!s:<12} {1e3 * e['unique']:>13.3f}ms {1e3 * e['bincount']:>15.3f}ms "
          f"{e['unique'] / e['bincount']:>8.1f}x {same!s:>10} | {1e3 * o['pointwise']:>16.3f}ms "
          f"{1e3 * o['hook']:>8.3f}ms {o['pointwise'] / o['hook']:>8.0f}x {rel:>13.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=9)
    args = parser.parse_args()
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'(N, d)':<12} {'entropy unique':>15} {'entropy bincount':>17} {'speed-up':>9} {'same bits':>10} | "
          f"{'F, grad pointwise':>18} {'hook':>10} {'speed-up':>9} {'max rel diff':>13}")
    for N, d in SIZES:
        measure_size(N, d, args.trials)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
