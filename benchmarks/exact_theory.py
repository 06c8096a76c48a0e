"""Exact theory of affine round maps: matrix-free (ARPACK + GMRES) vs dense, in one run.

    python benchmarks/exact_theory.py [--quick]

For each configuration: seconds for the spectral rate plus the fixed point on
the matrix-free route (``matrix_free_affine_map``: block Krylov, symmetric
where the algorithm declares it, block rounds of the lifted federation where
d >= 50), the rounds it evaluated, the Krylov dimension and the rate's error
estimate, and, where the dense route fits
(``--dense-max`` state numbers), the dense seconds, their ratio and the
largest difference of rate and fixed state.  Targets (issue 17 item 3):
SCAFFOLD at N = 10,000, d = 20 (state 200,040 numbers) and FedAvg at
N = 100, d = 1000 under 10 s each.  The load average is printed before and
after: on the shared 2-core machine timings move by several times with it.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from fltheory.algorithms import FedAvg, Scaffold
from fltheory.algorithms.base import Algorithm
from fltheory.problems.base import Federation
from fltheory.problems.generators import random_quadratic
from fltheory.theory.affine import affine_round_map, fixed_point, spectral_rate
from fltheory.theory.matrix_free import matrix_free_affine_map, rate_estimate


def _solve(alg: Algorithm, fed: Federation, matrix_free: bool, block_size: int | None = None
           ) -> tuple[float, float, np.ndarray, str]:
    t0 = time.perf_counter()
    if matrix_free:
        amap = matrix_free_affine_map(alg, fed, block_size=block_size)
    else:
        amap = affine_round_map(alg, fed, matrix_free=False, max_dim=10**6)
    rate = spectral_rate(amap)
    fp = fixed_point(amap)
    seconds = time.perf_counter() - t0
    assert fp.S is not None
    if not matrix_free:
        return seconds, rate, fp.S, f"{amap.round_map.evaluations} rounds"
    est = rate_estimate(amap)
    how = (f"{amap.rounds} rounds x {amap.block_size} vec, Krylov {est.dimension}, "
           f"{'sym' if amap.symmetric else 'gen'}, rate +- {est.error:.0e}, residual {fp.residual:.0e}")
    return seconds, rate, fp.S, how


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (smoke run)")
    ap.add_argument("--dense-max", type=int, default=2100, help="largest state also solved densely")
    ap.add_argument("--only", default=None, help="run one configuration, e.g. 'FedAvg,100,1000'")
    ap.add_argument("--block-size", type=int, default=None,
                    help="vectors per block round (default: the library's automatic choice)")
    args = ap.parse_args()
    configs = [
        ("SCAFFOLD", 100, 10, lambda: Scaffold(lr=0.2, local_steps=5)),
        ("SCAFFOLD", 100, 20, lambda: Scaffold(lr=0.2, local_steps=5)),
        ("FedAvg", 100, 200, lambda: FedAvg(lr=0.2, local_steps=5)),
    ]
    if not args.quick:
        configs += [("SCAFFOLD", 10_000, 20, lambda: Scaffold(lr=0.2, local_steps=5)),
                    ("FedAvg", 100, 500, lambda: FedAvg(lr=0.2, local_steps=5)),
                    ("FedAvg", 100, 1000, lambda: FedAvg(lr=0.2, local_steps=5))]
    if args.only:
        alg_name, n_clients, dim = args.only.split(",")
        configs = [c for c in configs if (c[0], c[1], c[2]) == (alg_name, int(n_clients), int(dim))] or [
            (alg_name, int(n_clients), int(dim),
             {"FedAvg": lambda: FedAvg(lr=0.2, local_steps=5),
              "SCAFFOLD": lambda: Scaffold(lr=0.2, local_steps=5)}[alg_name])]
    print(f"load average before: {os.getloadavg()}")
    print(f"{'algorithm':9s} {'N':>6s} {'d':>5s} {'state':>8s} {'free s':>8s} "
          f"{'dense s':>8s} {'dense/free':>10s} {'|rate diff|':>11s} {'|S diff|':>9s}  rate  (matrix-free route)")
    for name, N, d, make in configs:
        fed = random_quadratic(N, d, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
        t_free, r_free, S_free, how = _solve(make(), fed, True, args.block_size)
        n = S_free.shape[0]
        dense = "-"
        ratio = rdiff = sdiff = "-"
        if n <= args.dense_max:
            t_dense, r_dense, S_dense, _ = _solve(make(), fed, False)
            dense, ratio = f"{t_dense:8.2f}", f"{t_dense / t_free:10.1f}"
            rdiff, sdiff = f"{abs(r_dense - r_free):11.1e}", f"{np.abs(S_dense - S_free).max():9.1e}"
        print(f"{name:9s} {N:6d} {d:5d} {n:8d} {t_free:8.2f} {dense:>8s} {ratio:>10s} "
              f"{rdiff:>11s} {sdiff:>9s}  {r_free:.12f}  ({how})", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
