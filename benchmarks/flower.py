"""FedAvg in fltheory against Flower's simulation, per client-round, on one problem.

Usage::

    pip install "flwr[simulation]"      # once; never a dependency of fltheory
    python benchmarks/flower.py         # N = 100, d = 50, tau = 10
    python benchmarks/flower.py --rounds 6 --trials 3

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

Timing: every round is timed on its own, so Flower's start-up (Ray
initialisation, actor pool) is not counted: a Flower round from the
strategy's ``configure_fit`` to the end of its ``aggregate_fit``; an fltheory
round of ``run(FedAvg, ...)`` (default per-round metrics, and ``metrics=()``)
between consecutive callbacks.  The first round of every run is left out;
the figure is the median round over all trials divided by N (per
client-round).  Trials are interleaved (one Flower simulation, then the
fltheory runs, then the next trial) in one process.
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


def flower_fedavg(fed: QuadraticFederation, rounds: int, lr: float, tau: int) -> tuple[np.ndarray, list[float]]:
    """(final server model, seconds of every round) of Flower's FedAvg.  A round is
    timed from the strategy's ``configure_fit`` (the server starts it) to the end of
    its ``aggregate_fit`` (the new model exists): dispatch to the clients, their
    fits and the aggregation, without the simulation's start-up."""
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
    started: dict[int, float] = {}
    seconds: list[float] = []

    class Timed(FlowerFedAvg):
        def configure_fit(self, server_round: int, parameters: Any, client_manager: Any) -> Any:
            started[server_round] = time.perf_counter()
            return super().configure_fit(server_round, parameters, client_manager)

        def aggregate_fit(self, server_round: int, results: Any, failures: Any) -> Any:
            params, metrics = super().aggregate_fit(server_round, results, failures)
            if params is not None:
                final[:] = [parameters_to_ndarrays(params)[0]]
            seconds.append(time.perf_counter() - started[server_round])
            return params, metrics

    strategy = Timed(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=N, min_evaluate_clients=0,
                     min_available_clients=N, initial_parameters=ndarrays_to_parameters([np.zeros(d)]))
    start_simulation(client_fn=client_fn, num_clients=N, config=ServerConfig(num_rounds=rounds),
                     strategy=strategy, client_resources={"num_cpus": 1, "num_gpus": 0.0},
                     ray_init_args={"include_dashboard": False, "num_cpus": 2, "log_to_driver": False,
                                    "ignore_reinit_error": True},
                     keep_initialised=True)
    return final[0], seconds


def fltheory_fedavg(fed: QuadraticFederation, rounds: int, lr: float, tau: int,
                    metrics: tuple[str, ...] | None) -> list[float]:
    """Seconds of every round of ``run(FedAvg, ...)`` (round and its metrics), from
    the callback after round t - 1 to the callback after round t."""
    stamps = [time.perf_counter()]

    def stamp(t: int, state: Any, info: Any) -> None:
        stamps.append(time.perf_counter())

    run(FedAvg(lr=lr, local_steps=tau), fed, rounds, metrics=metrics, callback=stamp)
    return list(np.diff(stamps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--tau", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=6, help="rounds per Flower simulation")
    parser.add_argument("--our-rounds", type=int, default=60, help="rounds per fltheory run")
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
    fed = problem(N, d)

    x_flower, _ = flower_fedavg(fed, 3, lr, tau)                  # warm-up: Ray and its actors start here
    x_ours = run(FedAvg(lr=lr, local_steps=tau), fed, 3, metrics=()).x[-1]
    agree = float(np.abs(x_flower - x_ours).max())

    rounds: dict[str, list[float]] = {"Flower": [], "run() default": [], "run() metrics=()": []}
    before = " ".join(f"{v:.2f}" for v in os.getloadavg())
    try:
        for _ in range(args.trials):                         # the first round of every run is left out
            rounds["Flower"] += flower_fedavg(fed, args.rounds, lr, tau)[1][1:]
            rounds["run() default"] += fltheory_fedavg(fed, args.our_rounds, lr, tau, None)[1:]
            rounds["run() metrics=()"] += fltheory_fedavg(fed, args.our_rounds, lr, tau, ())[1:]
    finally:
        ray.shutdown()
    after = " ".join(f"{v:.2f}" for v in os.getloadavg())
    per = {k: float(np.median(v)) / N for k, v in rounds.items()}
    print(f"FedAvg, N = {N}, d = {d}, tau = {tau}, lr = {lr}; {args.trials} interleaved trials of "
          f"{args.rounds} Flower rounds and {args.our_rounds} fltheory rounds (median round, first round of "
          f"each run left out); load average before {before}, after {after}")
    print(f"max |x_Flower - x_fltheory| after 3 rounds = {agree:.1e} "
          f"({'agree' if agree <= 1e-12 else 'DISAGREE'} to 1e-12)")
    print(f"  {'candidate':<18} {'us per client-round':>20} {'Flower / candidate':>19}   "
          f"quartiles of the round (ms)")
    for k, v in per.items():
        q1, q3 = np.percentile(rounds[k], [25, 75])
        print(f"  {k:<18} {1e6 * v:>20.2f} {per['Flower'] / v:>19.0f}   {1e3 * q1:.3f} - {1e3 * q3:.3f}")


if __name__ == "__main__":
    main()
