"""Exact moments: scale, and time to an exact answer against Monte Carlo.

    python benchmarks/moments.py [--budget 10] [--rounds 100]

1. Largest (N, d) for which ``rounds`` rounds of exact moments take under ``budget`` seconds,
   for FedAvg (``fedavg_sampling_moments``: closed form in the inclusion probabilities,
   per-client d x d blocks batched, O(N d^3) per round; S = N/2) and for SCAFFOLD (option II,
   ``scaffold_sampling_moments``: closed form in pi_1, pi_2 on the blocks E[x x^T], E[x c_j^T],
   E[c_i c_j^T], O(N^2 d^3) per round; S = N/2), isotropic gradient noise.  For each d of a list,
   N doubles while the time stays under budget (the frontier is printed).  Beside it, at N = 8
   (the largest size the dense path handles), the block path against the dense ``moment_operator``
   (the C(N, S) conditional maps read off the real round, recursion on the (N + 2) d state), same
   instance, same process: the ratio of their times.
2. Time to the exact E||x_R - x*||^2 against the time Monte Carlo (``run`` with the real
   stochastic oracle) needs to reach a relative standard error of 1e-3 on the same instance:
   runs needed = (std / mean / 1e-3)^2, estimated from a pilot of ``--pilot`` runs; the ratio
   MC time / exact time is printed.  The load average is printed with every measurement.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import cast

import numpy as np

from fltheory.algorithms import FedAvg, History, Scaffold, run
from fltheory.participation import UniformSampling
from fltheory.problems import QuadraticFederation, random_quadratic
from fltheory.theory.moments import (
    ExactMoments,
    fedavg_sampling_moments,
    moment_operator,
    scaffold_sampling_moments,
)


def load() -> str:
    a, b, c = os.getloadavg()
    return f"load {a:.2f} {b:.2f} {c:.2f}"


def instance(N: int, d: int, seed: int = 0) -> QuadraticFederation:
    noisy = random_quadratic(N, d, L=1.0, mu=0.1, heterogeneity=1.0, seed=seed).with_gradient_noise(0.5)
    # with_gradient_noise is annotated -> Federation but returns a copy of its own class
    return cast(QuadraticFederation, noisy)


def time_fedavg(N: int, d: int, rounds: int) -> float:
    fed = instance(N, d)
    alg = FedAvg(lr=0.2, local_steps=5, aggregation="uniform")
    t0 = time.perf_counter()
    fedavg_sampling_moments(alg, fed, rounds, participation=UniformSampling(max(1, N // 2)), x0=np.ones(d))
    return time.perf_counter() - t0


def time_scaffold(N: int, d: int, rounds: int) -> float:
    """SCAFFOLD option II, K = 2, S = N/2 of N: the block-structured closed form."""
    fed = instance(N, d)
    alg = Scaffold(lr=0.2, local_steps=2)
    t0 = time.perf_counter()
    scaffold_sampling_moments(alg, fed, rounds, participation=UniformSampling(max(1, N // 2)), x0=np.ones(d))
    return time.perf_counter() - t0


def scaffold_block_vs_dense(N: int, d: int, S: int, rounds: int) -> None:
    """Same instance, same process: the dense moment operator against the block path (and their gap)."""
    fed = instance(N, d)
    alg = Scaffold(lr=0.2, local_steps=2)
    part = UniformSampling(S)
    t0 = time.perf_counter()
    gaps, _ = moment_operator(alg, fed, participation=part, x0=np.ones(d)).iterate(rounds)
    t_dense = time.perf_counter() - t0
    t0 = time.perf_counter()
    ex = scaffold_sampling_moments(alg, fed, rounds, participation=part, x0=np.ones(d))
    t_block = time.perf_counter() - t0
    print(f"SCAFFOLD N={N} d={d} S={S} R={rounds}: dense moment_operator {t_dense:.3f} s, block path "
          f"{t_block:.4f} s, ratio {t_dense / t_block:.3g}; max |gap difference| "
          f"{np.abs(gaps - ex.loss_gap).max():.2e} ({load()})", flush=True)


def frontier(timer: Callable[[int, int, int], float], name: str, dims: list[int], start_N: int, rounds: int,
             budget: float) -> list[tuple[int, int, float]]:
    """For each d: the largest N (doubling from ``start_N``) whose ``rounds`` rounds take < budget s."""
    out: list[tuple[int, int, float]] = []
    for d in dims:
        best: tuple[int, int, float] | None = None
        N = start_N
        while True:
            t = timer(N, d, rounds)
            print(f"{name}: N={N} d={d}: {t:.2f} s  ({load()})", flush=True)
            if t >= budget:
                break
            best = (N, d, t)
            N *= 2
        if best is None:
            break
        out.append(best)
    return out


def final_dist2(history: History) -> float:
    """||x_R - x*||^2 of a run (the quadratic federations here have a known optimum)."""
    if history.dist2 is None:
        raise ValueError("history.dist2 is None: the federation has no known optimum")
    return float(history.dist2[-1])


def mc_ratio(alg: FedAvg | Scaffold, N: int, d: int, rounds: int, pilot: int,
             exact_fn: Callable[..., ExactMoments]) -> None:
    fed = instance(N, d)
    part = UniformSampling(max(1, N // 2))
    t0 = time.perf_counter()
    ex = exact_fn(alg, fed, rounds, participation=part, x0=np.ones(d))
    t_exact = time.perf_counter() - t0
    vals = np.empty(pilot)
    t0 = time.perf_counter()
    for r in range(pilot):
        vals[r] = final_dist2(run(alg, fed, rounds, participation=part, seed=r, x0=np.ones(d)))
    per_run = (time.perf_counter() - t0) / pilot
    cv = vals.std(ddof=1) / vals.mean()
    need = (cv / 1e-3) ** 2
    se = vals.std(ddof=1) / np.sqrt(pilot)
    print(f"{alg.name} N={N} d={d} R={rounds}: exact {t_exact:.3f} s; MC {per_run * 1e3:.2f} ms/run, "
          f"CV {cv:.3f} -> {need:.3g} runs for 1e-3 relative SE = {need * per_run:.3g} s; "
          f"ratio MC/exact = {need * per_run / t_exact:.3g}; pilot mean {vals.mean():.5g} +- {se:.2g} vs exact "
          f"{ex.dist2[-1]:.5g} ({load()})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--pilot", type=int, default=200)
    args = ap.parse_args()
    print(f"start ({load()})")
    for name, timer, dims, start in (("FedAvg", time_fedavg, [2, 8, 32, 100], 64),
                                     ("SCAFFOLD", time_scaffold, [2, 4, 8, 16], 16)):
        for N, d, t in frontier(timer, name, dims, start, args.rounds, args.budget):
            print(f"{name} largest N under {args.budget:g} s for {args.rounds} rounds at d = {d}: N = {N} ({t:.2f} s)")
    mc_ratio(FedAvg(lr=0.2, local_steps=5, aggregation="uniform"), 20, 5, 20, args.pilot, fedavg_sampling_moments)
    scaffold_block_vs_dense(8, 2, 4, args.rounds)
    mc_ratio(Scaffold(lr=0.2, local_steps=2), 20, 5, 20, args.pilot, scaffold_sampling_moments)


if __name__ == "__main__":
    main()
