"""Non-linear operator fixed points at scale: FedOpt with restarted AdaGrad clients, in one run.

    python benchmarks/operator_fixed_points.py [--dims 100,200,300,400,500] [--budget 60]

Instance: ``random_quadratic(100, d, L=4, mu=0.5, heterogeneity=1, seed=0)``,
FedOpt with client AdaGrad (lr 0.05, eps 1e-8) restarted every round, local
steps alternating 2 and 10, server SGD(1); T is one averaging round
(``fedopt_operator``).  Two client settings:

* smooth: initial accumulator 0.1 (T is smooth);
* kinked: initial accumulator 0 (the first AdaGrad step is lr g / (|g| + eps),
  so T is steep wherever a client's gradient coordinate is near 0).

Methods: ``operator_fixed_point`` (MINPACK hybrid, forward-difference
Jacobian: d + 1 evaluations of T per Jacobian, no cross-check; smooth setting
only) and ``newton_krylov_fixed_point`` (Jacobian-free; smooth setting) or
``diagnosed_fixed_point`` (the same solver, its failure explained by the
discontinuity layers next to the last iterate; kinked setting).  The Newton
solves get an evaluation budget of ``--budget`` seconds' worth of evaluations
of T (estimated from one evaluation); the hybrid solver is skipped at sizes
where its first Jacobian alone exceeds the budget.  Reported: seconds,
evaluations of T, the residual ||T(x) - x||_inf (recomputed here), and the
local rate rho(J_T(x~)) with its error estimate; for a kinked failure the
residual, the number of layers the last iterate sits inside and the nearest
layer (client, coordinate, distance, width, jump of T across it).  The load
average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from fltheory import optim
from fltheory.algorithms import FedOpt
from fltheory.errors import DivergenceError
from fltheory.problems.base import Federation
from fltheory.problems.generators import random_quadratic
from fltheory.theory.fixed_points import FixedPoint
from fltheory.theory.operator_newton import DiscontinuityLayerError, diagnosed_fixed_point, newton_krylov_fixed_point
from fltheory.theory.operators import FedOptOperator, fedopt_operator, operator_fixed_point

N = 100


def _operator(fed: Federation, v0: float) -> FedOptOperator:
    steps = np.where(np.arange(N) % 2 == 0, 2, 10)
    alg = FedOpt(client_optimizer=optim.adagrad(0.05, initial_accumulator=v0), server_optimizer=optim.sgd(1.0),
                 local_steps=steps)
    return fedopt_operator(alg, fed)


def _report(label: str, d: int, seconds: float, T: Callable[[np.ndarray], np.ndarray], fp: FixedPoint) -> None:
    x = fp.x
    res = float(np.abs(T(x) - x).max())
    err = "" if fp.spectral_rate_error is None else f" +- {fp.spectral_rate_error:.0e}"
    print(f"{label:34s} {d:5d} {seconds:8.1f} {fp.evaluations:7d} {res:10.1e}  rho(J) {fp.spectral_rate:.6g}{err}",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="100,200,300,400,500")
    ap.add_argument("--budget", type=float, default=60.0)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    print(f"{'method':34s} {'d':>5s} {'seconds':>8s} {'T evals':>7s} {'residual':>10s}")
    for d in (int(v) for v in args.dims.split(",")):
        fed = random_quadratic(N, d, L=4.0, mu=0.5, heterogeneity=1.0, seed=0)
        for setting, v0 in (("smooth", 0.1), ("kinked", 0.0)):
            T = _operator(fed, v0)
            t0 = time.perf_counter()
            T(fed.optimum())
            per_eval = time.perf_counter() - t0
            if setting == "smooth" and (d + 1) * per_eval < args.budget:
                t0 = time.perf_counter()
                try:
                    fp = operator_fixed_point(T, fed.optimum(), cross_check=False)
                    _report(f"hybr, {setting}", d, time.perf_counter() - t0, T, fp)
                except DivergenceError as exc:
                    print(f"{'hybr, ' + setting:34s} {d:5d} {time.perf_counter() - t0:8.1f}  FAILED: "
                          f"{' '.join(str(exc).split())[:160]}", flush=True)
            elif setting == "smooth":
                print(f"{'hybr, ' + setting:34s} {d:5d}  skipped: one Jacobian ~ {(d + 1) * per_eval:.0f} s",
                      flush=True)
            budget = max(10, int(args.budget / per_eval))
            t0 = time.perf_counter()
            try:
                if setting == "smooth":
                    fp = newton_krylov_fixed_point(T, fed.optimum(), dense_jacobian_max=0, max_evaluations=budget)
                    label = "Newton-Krylov, smooth"
                else:
                    fp = diagnosed_fixed_point(T, fed.optimum(), dense_jacobian_max=0, max_evaluations=budget)
                    label = "Newton-Krylov (diagnosed), kinked"
                _report(label, d, time.perf_counter() - t0, _operator(fed, v0), fp)
            except DiscontinuityLayerError as exc:
                inside = [c for c in exc.layers if c.distance <= 100.0 * c.width]
                c = exc.layers[0]
                print(f"{'Newton-Krylov (diagnosed), ' + setting:34s} {d:5d} {time.perf_counter() - t0:8.1f}  "
                      f"FAILED: residual {exc.residual:.2e}; inside {len(inside)} layer(s); nearest: client "
                      f"{c.client} coordinate {c.coordinate}, distance {c.distance:.1e}, width {c.width:.1e}, "
                      f"jump of T {c.jump:.2e}; jumps of the {len(exc.layers)} layers within "
                      f"{max(x.distance for x in exc.layers):.1e}: "
                      f"{', '.join(f'{x.jump:.1e}' for x in exc.layers)}", flush=True)
            except DivergenceError as exc:
                print(f"{'Newton-Krylov/continuation, ' + setting:34s} {d:5d} {time.perf_counter() - t0:8.1f}  "
                      f"FAILED: {' '.join(str(exc).split())[:200]}", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
