"""Orbit rate of an affine round map, matrix-free: read from the fixed point's block Krylov
space (current) vs Arnoldi from the initial error one round per step (before), in one run.

    python benchmarks/orbit_rate.py [--quick] [--trials 3]

For each configuration, trials interleaved, medians: seconds of ``orbit_rate`` on a fresh
``matrix_free_affine_map`` (rate, fixed point and orbit rate; the map's construction not
counted) by the current route and by the earlier one (the fixed point, then Arnoldi on M_V
started at e0 = P (S_init - S~), one single-vector round per step), for the default start
and for a random start; the route the current code took, the rounds each evaluated and the
largest difference of the two rates (and of the dense rate where the state fits).  Block
products apply for d >= 50 (``BLOCK_MIN_DIM``).  The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from fltheory.algorithms import FedAvg, Scaffold
from fltheory.algorithms.base import Algorithm
from fltheory.problems.base import Federation
from fltheory.problems.generators import random_quadratic
from fltheory.theory import matrix_free as mf
from fltheory.theory.affine import affine_round_map
from fltheory.theory.affine import orbit_rate as dense_orbit_rate


def _current(alg: Algorithm, fed: Federation, initial: np.ndarray | None) -> tuple[float, float, int, str]:
    amap = mf.matrix_free_affine_map(alg, fed)
    r0 = amap.rounds
    t0 = time.perf_counter()
    rate = mf.orbit_rate(amap, initial=initial)
    return time.perf_counter() - t0, rate, amap.rounds - r0, str(amap.cache.get("orbit_method"))


def _before(alg: Algorithm, fed: Federation, initial: np.ndarray | None) -> tuple[float, float, int, str]:
    amap = mf.matrix_free_affine_map(alg, fed)
    r0 = amap.rounds
    t0 = time.perf_counter()
    fp = mf.fixed_point(amap, initial=initial)
    assert fp.S is not None and fp.initial is not None
    rate = mf._arnoldi_orbit_rate(amap, amap.projector(fp.initial - fp.S), 1e-9, 80, 1e-8)
    return time.perf_counter() - t0, rate, amap.rounds - r0, "arnoldi"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (smoke run)")
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    configs = [("FedAvg", 100, 200), ("Scaffold", 100, 60), ("Scaffold", 1000, 20)]
    if args.quick:
        configs = [("FedAvg", 20, 60), ("Scaffold", 20, 20)]
    print(f"load average before: {os.getloadavg()}")
    print("| algorithm | N | d | start | current s | before s | ratio | current route, rounds | before rounds "
          "| |rate diff| | |dense diff| |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, N, d in configs:
        fed = random_quadratic(N, d, L=1.0, mu=0.05, heterogeneity=1.0, seed=0)
        alg = FedAvg(lr=0.5, local_steps=5) if name == "FedAvg" else Scaffold(lr=0.3, local_steps=5)
        n = mf.matrix_free_affine_map(alg, fed).dim
        for start in ("default", "random"):
            initial = None if start == "default" else np.random.default_rng(1).standard_normal(n)
            cur, bef = [], []
            for _ in range(args.trials):
                cur.append(_current(alg, fed, initial))
                bef.append(_before(alg, fed, initial))
            tc = statistics.median(c[0] for c in cur)
            tb = statistics.median(b[0] for b in bef)
            diff = abs(cur[0][1] - bef[0][1])
            dense = "-"
            if n <= 2100:
                dmap = affine_round_map(alg, fed, matrix_free=False, max_dim=10**6)
                dense = f"{abs(cur[0][1] - dense_orbit_rate(dmap, initial=initial)):.1e}"
            print(f"| {name} | {N} | {d} | {start} | {tc:.3f} | {tb:.3f} | {tb / tc:.2f}x | "
                  f"{cur[0][3]}, {cur[0][2]} | {bef[0][2]} | {diff:.1e} | {dense} |")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
