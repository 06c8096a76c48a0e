"""What run() adds to the bare rounds of FedAvg (issue 17: at most 1.15x with the default metrics).

Usage::

    python benchmarks/run_overhead.py [--trials 9] [--rounds 3 10 50] [--sizes 100,50 1000,100 10000,20]

For each (N, d) at tau = 10 (quadratic clients H_i = B_i B_i^T / d + 0.5 I, as
``benchmarks/blocked.py``, lr = 0.05 as there) and each number R of rounds per call,
these candidates each run R rounds per call, measured in this one process with
interleaved trials (one warm-up call each, then trial 1 of every candidate, trial 2,
...; medians, or minima with ``--statistic min``):

* ``bare rounds``: ``FedAvg.round`` called in a loop, state kept between calls,
  nothing read from the RoundInfo (no ``init``, no generator, no record);
* ``run() default``: ``run(FedAvg, fed, R)`` -- a fresh generator, ``init``,
  F(x_t), F(x_t) - F*, ||x_t - x*||^2, ||grad F(x_t)||^2, the History and its record;
* ``run() metrics=()``: the same without the per-round metrics;
* ``run() + comm. read``: the default run, then ``History.total_communication()``
  (every round's communication measured: counts and entropy of the N d uplink values);
* ``fresh bare rounds``: what any run has to do besides bookkeeping -- a fresh
  generator, ``init`` and the rounds (the floor for ``run()``; ``init`` and the
  generator belong to the algorithm and numpy, not to ``run``).

Printed per size and R: median wall and CPU seconds per round, each candidate's ratio
to the bare rounds (wall and CPU; CPU time counts the work done, not the waiting for a
core, so it is the figure to read on a loaded machine), and the load average before
and after; then per size the per-call cost of ``run()`` (the intercept of seconds per
call against R over the R measured, CPU) and its per-round cost over the bare rounds
(the slope's excess).  R = 3 is the setting of ``benchmarks/blocked.py``: the per-call
costs (generator, init, F*, record) are then shared by only three rounds, where a run
of a theorem check has tens to thousands; both figures are printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import interleaved_samples, load, rounds_of

from fltheory.algorithms import FedAvg, run
from fltheory.problems.quadratic import QuadraticFederation


def quadratic_problem(N: int, d: int, seed: int = 0) -> QuadraticFederation:
    """H_i = B_i B_i^T / d + 0.5 I (B_i standard Gaussian), e_i standard Gaussian."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, d, d))
    H = np.matmul(B, np.swapaxes(B, 1, 2)) / d + 0.5 * np.eye(d)
    return QuadraticFederation(H, rng.standard_normal((N, d)))


def fresh_rounds(alg: FedAvg, fed: QuadraticFederation, rounds: int) -> Callable[[], None]:
    """A new generator, ``init`` at zeros and ``rounds`` rounds, nothing recorded."""
    def go() -> None:
        rng = np.random.default_rng(0)
        state = alg.init(fed, np.zeros(fed.dim), rng)
        for _ in range(rounds):
            state, _ = alg.round(state, fed, None, rng)
    return go


def measure(N: int, d: int, tau: int, trials: int, rounds: int, statistic: str = "median") -> dict[str, float]:
    """Print the table for one size and R = ``rounds``; return the CPU seconds per call (median over
    the trials, or minimum with ``statistic="min"``: the reading least disturbed by other processes)."""
    fed = quadratic_problem(N, d)
    alg = FedAvg(lr=0.05, local_steps=tau)
    before = load()
    wall_samples, cpu_samples = interleaved_samples({
        "bare rounds": rounds_of(alg, fed, np.zeros(fed.dim), rounds),
        "run() default": lambda: run(alg, fed, rounds),
        "run() metrics=()": lambda: run(alg, fed, rounds, metrics=()),
        "run() + comm. read": lambda: run(alg, fed, rounds).total_communication(),
        "fresh bare rounds": fresh_rounds(alg, fed, rounds),
    }, trials, rounds)
    reduce = np.median if statistic == "median" else np.min
    wall = {k: float(reduce(v)) for k, v in wall_samples.items()}
    cpu = {k: float(reduce(v)) for k, v in cpu_samples.items()}
    print(f"(N, d, tau) = ({N}, {d}, {tau}), {rounds} rounds per call, {trials} trials, {statistic}s; "
          f"load {before} -> {load()}")
    print(f"  {'candidate':<19} {'wall s/round':>13} {'/ bare':>7} {'CPU s/round':>12} {'/ bare':>7}")
    for name in wall:
        print(f"  {name:<19} {wall[name]:>13.6f} {wall[name] / wall['bare rounds']:>7.3f} "
              f"{cpu[name]:>12.6f} {cpu[name] / cpu['bare rounds']:>7.3f}")
    return {name: value * rounds for name, value in cpu.items()}


def per_call_costs(per_call: dict[int, dict[str, float]]) -> None:
    """Least-squares line of CPU seconds per call against R for each candidate: the intercept is
    what a call costs once (generator, init, F*, record), the slope what each round costs."""
    Rs = sorted(per_call)
    if len(Rs) < 2:
        return
    print(f"  per call, CPU (fit over R = {Rs}): candidate: once per call / per round "
          f"(per round over the bare rounds')")
    lines = {name: np.polyfit(Rs, [per_call[R][name] for R in Rs], 1) for name in per_call[Rs[0]]}
    bare_slope = lines["bare rounds"][0]
    for name, (slope, intercept) in lines.items():
        print(f"    {name:<19} {intercept * 1e6:9.1f} us / {slope * 1e6:9.1f} us ({slope / bare_slope:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--rounds", type=int, nargs="+", default=[3, 10, 50],
                        help="rounds per call (one table each; 3 is blocked.py's setting)")
    parser.add_argument("--tau", type=int, default=10)
    parser.add_argument("--sizes", nargs="+", default=["100,50", "1000,100", "10000,20"],
                        help="N,d pairs")
    parser.add_argument("--statistic", choices=("median", "min"), default="median",
                        help="per candidate over the trials (min: least disturbed by load)")
    args = parser.parse_args()
    for size in args.sizes:
        N, d = (int(v) for v in size.split(","))
        per_call = {R: measure(N, d, args.tau, args.trials, R, args.statistic) for R in args.rounds}
        per_call_costs(per_call)


if __name__ == "__main__":
    main()
