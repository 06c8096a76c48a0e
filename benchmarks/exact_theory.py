"""Exact theory of affine round maps: the automatic route against the round-based ones, in one run.

    python benchmarks/exact_theory.py [--quick] [--only ALG,N,d] [--probe-max n] [--no-reference] [--mu MU]

For each configuration: seconds for the spectral rate plus the fixed point on
the automatic route (``affine_round_map`` with its defaults, then
``spectral_rate`` and ``fixed_point``: a closed-form M for FedAvg, closed-form
block products with a Krylov space of M^4 for SCAFFOLD, see
``fltheory.theory.closed_form_maps`` and ``fltheory.theory.powered_krylov``)
and the route it took; then the same on the round-based matrix-free route
(``matrix_free=True, closed_form=False``: block Krylov on products by rounds,
the previous route) and, for states of at most ``--probe-max`` numbers, the
dense route that probes M by one round per coordinate
(``matrix_free=False, closed_form=False``); their seconds as a ratio over the
automatic route, and the largest differences of rate and fixed state.
Targets (issue 17 item 3): SCAFFOLD at N = 10,000, d = 20 (state 200,040
numbers) and FedAvg at N = 100, d = 1000 under 10 s each.  ``--mu`` sets the
smallest eigenvalue of the global Hessian (default 0.1; e.g. 1e-11 for an
ill-conditioned map with rate about 1 - 1e-11): a route that refuses prints its
typed error, and a fallback of the automatic route to the dense one is shown.  The load average is
printed before and after every configuration: on the shared 2-core machine
wall-clock timings move by several times with it; the CPU seconds of the
process (all threads, ``time.process_time``) are printed with each route as the
steadier reading.  Building the federation is not timed.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from fltheory.algorithms import FedAvg, Scaffold
from fltheory.algorithms.base import Algorithm
from fltheory.errors import FLTheoryError
from fltheory.problems.base import Federation
from fltheory.problems.generators import random_quadratic
from fltheory.theory.affine import AffineRoundMap, affine_round_map, fixed_point, spectral_rate
from fltheory.theory.matrix_free import MatrixFreeAffineMap
from fltheory.theory.powered_krylov import powered_rate, uses_powered_krylov

ROUTES = {
    "auto": {},
    "matrix-free by rounds": {"matrix_free": True, "closed_form": False},
    "dense probed": {"matrix_free": False, "closed_form": False, "max_dim": 10**6},
}


def _describe(amap: object) -> str:
    fallback = getattr(amap, "cache", {}).get("fallback")
    if fallback is not None:
        return f"{fallback[:160]}..."
    if isinstance(amap, AffineRoundMap):
        return f"dense, M {amap.route}; {amap.round_map.evaluations} rounds"
    assert isinstance(amap, MatrixFreeAffineMap)
    if uses_powered_krylov(amap):
        est = powered_rate(amap)
        return (f"matrix-free, {amap.block_note}; Krylov on M^{est.power}: {est.dimension} vectors, "
                f"{est.products} block products of M^{est.power}; {amap.rounds} rounds; rate +- {est.error:.0e}")
    from fltheory.theory.matrix_free import rate_estimate
    est2 = rate_estimate(amap)
    return (f"matrix-free, {amap.block_note or 'single rounds'}; Krylov {est2.dimension} vectors; "
            f"{amap.rounds} rounds (x {amap.block_size} vectors); rate +- {est2.error:.0e}")


def _solve(alg: Algorithm, fed: Federation, route: str) -> tuple[float, float, np.ndarray, str]:
    t0, c0 = time.perf_counter(), time.process_time()
    amap = affine_round_map(alg, fed, **ROUTES[route])  # type: ignore[arg-type]
    rate = spectral_rate(amap)
    fp = fixed_point(amap)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert fp.S is not None
    return seconds, rate, fp.S, f"CPU {cpu:.2f} s; {_describe(amap)}; residual {fp.residual:.0e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (smoke run)")
    ap.add_argument("--probe-max", type=int, default=300,
                    help="largest state also solved on the dense probed route (one round per coordinate)")
    ap.add_argument("--no-reference", action="store_true", help="time the automatic route only")
    ap.add_argument("--only", default=None, help="run one configuration, e.g. 'FedAvg,100,1000'")
    ap.add_argument("--mu", type=float, default=0.1, help="smallest eigenvalue of the global Hessian (L = 1)")
    args = ap.parse_args()
    makers: dict[str, Callable[[], Algorithm]] = {
        "FedAvg": lambda: FedAvg(lr=0.2, local_steps=5),
        "SCAFFOLD": lambda: Scaffold(lr=0.2, local_steps=5),
    }
    configs = [("SCAFFOLD", 100, 10), ("SCAFFOLD", 100, 20), ("FedAvg", 100, 200)]
    if not args.quick:
        configs += [("SCAFFOLD", 10_000, 20), ("FedAvg", 100, 500), ("FedAvg", 100, 1000)]
    if args.only:
        alg_name, n_clients, dim = args.only.split(",")
        configs = [(alg_name, int(n_clients), int(dim))]
    print(f"{'algorithm':9s} {'N':>6s} {'d':>5s} {'state':>8s} {'route':22s} {'seconds':>8s} "
          f"{'x auto':>7s} {'|rate diff|':>11s} {'|S diff|':>9s}  rate  (how)")
    for name, N, d in configs:
        fed = random_quadratic(N, d, L=1.0, mu=args.mu, heterogeneity=1.0, seed=0)
        print(f"# {name} N={N} d={d} mu={args.mu:g}: load average before {os.getloadavg()}", flush=True)
        try:
            t_auto, r_auto, S_auto, how = _solve(makers[name](), fed, "auto")
        except FLTheoryError as exc:
            print(f"{name:9s} {N:6d} {d:5d} {'':8s} {'auto':22s} refused: {type(exc).__name__}: {exc}", flush=True)
            continue
        n = S_auto.shape[0]
        print(f"{name:9s} {N:6d} {d:5d} {n:8d} {'auto':22s} {t_auto:8.2f} {1.0:7.2f} {'-':>11s} {'-':>9s}  "
              f"{r_auto:.15f}  ({how})", flush=True)
        refs = [] if args.no_reference else ["matrix-free by rounds"]
        refs += ["dense probed"] if n <= args.probe_max and not args.no_reference else []
        for route in refs:
            t, r, S, how = _solve(makers[name](), fed, route)
            print(f"{name:9s} {N:6d} {d:5d} {n:8d} {route:22s} {t:8.2f} {t / t_auto:7.2f} "
                  f"{abs(r - r_auto):11.1e} {np.abs(S - S_auto).max():9.1e}  {r:.15f}  ({how})", flush=True)
        print(f"# load average after {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
