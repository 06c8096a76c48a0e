"""FedAvg in fltheory against Flower's simulation, per client-round, on one problem.

Usage::

    pip install "flwr[simulation]"      # once; never a dependency of fltheory
    python benchmarks/flower.py         # N = 100, d = 50, tau = 10
    python benchmarks/flower.py --rounds 3 5 --trials 3

Nothing is installed by this script: without ``flwr`` (and ``ray``, its
simulation extra) it says so and exits.

Problem: quadratic clients f_i(x) = 1/2 x^T H_i x - e_i^T x with
H_i = B_i B_i^T / d + 0.5 I, n_i samples per client (weights p_i = n_i / n),
FedAvg with tau local gradient steps y <- y - lr (H_i y - e_i) from the server
model and full participation.  Flower runs it as a legacy Ray simulation
(``flwr.simulation.start_simulation``): one ``NumPyClient`` per client whose
``fit`` runs the same tau steps in numpy and returns (y_i, n_i), and Flower's
``FedAvg`` strategy, which averages the returned models weighted by n_i
(= x + sum_i p_i (y_i - x) up to rounding).  The final models must agree to
1e-12 (checked, printed).

Timing: Flower's start-up (Ray initialisation, actor pool) is excluded by
timing two simulations of R1 < R2 rounds and taking the difference, so the
figure is the marginal cost of a round: (t(R2) - t(R1)) / ((R2 - R1) N) per
client-round.  fltheory is timed the same way (``--our-rounds``, more rounds
because its rounds are cheaper) with ``run(FedAvg, ...)`` (default per-round
metrics) and with ``metrics=()``, in the same process, trials interleaved
(trial k of every candidate before trial k + 1), medians.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from typing import Any

import numpy as np

from fltheory.algorithms import FedAvg, run
from fltheory.problems.quadratic import QuadraticFederation


def problem(N: int, d: int, seed: int = 0) -> QuadraticFederation:
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, d, d))
    H = np.matmul(B, np.swapaxes(B, 1, 2)) / d + 0.5 * np.eye(d)
    n = rng.integers(20, 200, N)
    return QuadraticFederation(H, rng.standard_normal((N, d)), n_samples=n)


def flower_fedavg(fed: QuadraticFederation, rounds: int, lr: float, tau: int) -> tuple[np.ndarray, float]:
    """(final server model, wall seconds of ``start_simulation``) of Flower's FedAvg."""
    import flwr
    from flwr.common import Context, ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.server import ServerConfig
    from flwr.server.strategy import FedAvg as FlowerFedAvg
    from flwr.simulation import start_simulation

    H, e, counts = fed.H, fed.e, fed.n_samples
    assert counts is not None
    n: np.ndarray = counts
    N, d = fed.n_clients, fed.dim

    class QuadraticClient(flwr.client.NumPyClient):
        def __init__(self, i: int) -> None:
            self.i = i

        def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict]:
            y = np.array(parameters[0], dtype=np.float64)
            for _ in range(tau):
                y = y - lr * (H[self.i] @ y - e[self.i])
            return [y], int(n[self.i]), {}

    def client_fn(context: Context) -> Any:
        return QuadraticClient(int(context.node_config["partition-id"])).to_client()

    final: list[np.ndarray] = []

    class Recording(FlowerFedAvg):
        def aggregate_fit(self, server_round: int, results: Any, failures: Any) -> Any:
            params, metrics = super().aggregate_fit(server_round, results, failures)
            if params is not None:
                final[:] = [parameters_to_ndarrays(params)[0]]
            return params, metrics

    strategy = Recording(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=N, min_evaluate_clients=0,
                         min_available_clients=N, initial_parameters=ndarrays_to_parameters([np.zeros(d)]))
    start = time.perf_counter()
    start_simulation(client_fn=client_fn, num_clients=N, config=ServerConfig(num_rounds=rounds),
                     strategy=strategy, client_resources={"num_cpus": 1, "num_gpus": 0.0},
                     ray_init_args={"include_dashboard": False, "num_cpus": 2, "log_to_driver": False,
                                    "ignore_reinit_error": True},
                     keep_initialised=True)
    seconds = time.perf_counter() - start
    return final[0], seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--tau", type=int, default=10)
    parser.add_argument("--rounds", type=int, nargs=2, default=(3, 6), metavar=("R1", "R2"))
    parser.add_argument("--our-rounds", type=int, nargs=2, default=(10, 110), metavar=("R1", "R2"),
                        help="round counts of the fltheory runs (more rounds: a cheaper round needs more to time)")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    try:
        import flwr  # noqa: F401
        import ray
    except ImportError as exc:
        print(f"Flower's simulation is not importable ({exc}); install it with pip install \"flwr[simulation]\"")
        return
    logging.getLogger("flwr").setLevel(logging.WARNING)
    N, d, tau, lr = args.clients, args.dim, args.tau, 0.05
    R1, R2 = args.rounds
    fed = problem(N, d)
    alg = FedAvg(lr=lr, local_steps=tau)

    x_flower, _ = flower_fedavg(fed, R1, lr, tau)                 # warm-up: Ray and its actors start here
    x_ours = run(alg, fed, R1, metrics=()).x[-1]
    agree = float(np.abs(x_flower - x_ours).max())

    times: dict[str, list[float]] = {"Flower": [], "run() default": [], "run() metrics=()": []}
    before = " ".join(f"{v:.2f}" for v in os.getloadavg())
    try:
        for _ in range(args.trials):
            t1, t2 = flower_fedavg(fed, R1, lr, tau)[1], flower_fedavg(fed, R2, lr, tau)[1]
            times["Flower"].append((t2 - t1) / ((R2 - R1) * N))
            Q1, Q2 = args.our_rounds
            metric_sets: tuple[tuple[str, tuple[str, ...] | None], ...] = (
                ("run() default", None), ("run() metrics=()", ()))
            for name, metrics in metric_sets:
                a = time.perf_counter()
                run(alg, fed, Q1, metrics=metrics)
                b = time.perf_counter()
                run(alg, fed, Q2, metrics=metrics)
                c = time.perf_counter()
                times[name].append(((c - b) - (b - a)) / ((Q2 - Q1) * N))
    finally:
        ray.shutdown()
    after = " ".join(f"{v:.2f}" for v in os.getloadavg())
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"FedAvg, N = {N}, d = {d}, tau = {tau}, lr = {lr}; marginal cost of rounds {R1} -> {R2}, "
          f"{args.trials} interleaved trials (medians); load average before {before}, after {after}")
    print(f"max |x_Flower - x_fltheory| after {R1} rounds = {agree:.1e} "
          f"({'agree' if agree <= 1e-12 else 'DISAGREE'} to 1e-12)")
    print(f"  {'candidate':<18} {'us per client-round':>20} {'Flower / candidate':>19}   trials (us)")
    for k, v in med.items():
        trials = ", ".join(f"{1e6 * t:.1f}" for t in times[k])
        print(f"  {k:<18} {1e6 * v:>20.2f} {med['Flower'] / v:>19.0f}   {trials}")


if __name__ == "__main__":
    main()
