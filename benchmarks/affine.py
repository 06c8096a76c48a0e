"""Affine fast path vs ordinary rounds: FedAvg on N = 1000 quadratic clients, d = 50, tau = 10.

    python benchmarks/affine.py [--clients 1000] [--dim 50] [--steps 10] [--rounds 40]

Prints seconds per round of ``run`` (vectorized rounds) and of ``run_affine``
(one 50 x 50 matvec per round after a one-off recovery of M and c from
dim(S) + 7 ordinary rounds), the speed-up per round excluding and including
the recovery, the break-even number of rounds, and the largest difference of
the server models of the two paths.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.run import run
from fltheory.problems.generators import random_quadratic
from fltheory.theory import run_affine
from fltheory.theory.affine import affine_round_map


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=40, help="rounds timed with run()")
    ap.add_argument("--affine-rounds", type=int, default=20000, help="rounds timed with run_affine")
    args = ap.parse_args()

    fed = random_quadratic(args.clients, args.dim, L=1.0, mu=0.05, heterogeneity=1.0, seed=0,
                           constants="clients")
    rng = np.random.default_rng(1)
    alg = FedAvg(lr=rng.uniform(0.05, 0.5, args.clients), local_steps=args.steps)
    x0 = np.ones(args.dim)

    t0 = time.perf_counter()
    slow = run(alg, fed, args.rounds, x0=x0)
    t_run = (time.perf_counter() - t0) / args.rounds

    t0 = time.perf_counter()
    amap = affine_round_map(alg, fed, x0=x0)
    t_recover = time.perf_counter() - t0

    t0 = time.perf_counter()
    fast = run_affine(alg, fed, args.affine_rounds, x0=x0, amap=amap)
    t_affine = (time.perf_counter() - t0) / args.affine_rounds
    gap = float(np.abs(fast.x[: args.rounds + 1] - slow.x).max())

    t0 = time.perf_counter()
    honest = run_affine(alg, fed, args.rounds, x0=x0, amap=amap, communication="recompute")
    t_honest = (time.perf_counter() - t0) / args.rounds
    ent_gap = max(abs(a.entropy_up - b.entropy_up) for a, b in zip(honest.communication, slow.communication))

    R = args.affine_rounds
    print(f"FedAvg, N={args.clients}, d={args.dim}, tau={args.steps}, state dim {amap.dim}")
    print(f"run():          {t_run * 1e3:9.3f} ms/round  ({args.rounds} rounds)")
    print(f"recovery:       {t_recover:9.3f} s  ({amap.dim + 7} ordinary rounds,"
          f" max affinity residual {amap.residual:.1e})")
    print(f"run_affine():   {t_affine * 1e6:9.3f} us/round  ({R} rounds, recovery excluded)")
    print(f"speed-up per round, recovery excluded: {t_run / t_affine:10.1f}x")
    incl = (t_recover + R * t_affine) / R
    print(f"speed-up per round over {R} rounds, recovery included: {t_run / incl:10.1f}x")
    print(f"break-even: {t_recover / max(t_run - t_affine, 1e-300):.1f} rounds")
    print(f"max |x_affine - x_run| over the first {args.rounds} rounds: {gap:.2e}")
    print(f"run_affine(communication='recompute'): {t_honest * 1e3:9.3f} ms/round  ({args.rounds} rounds;"
          f" max |entropy - run's| {ent_gap:.1e})")


if __name__ == "__main__":
    main()
