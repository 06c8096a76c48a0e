"""Plain per-client reference loops, written for reading; test oracles only.

Every function here follows its algorithm's update rule literally, one client
at a time, with no vectorization.  Random numbers are drawn in the order the
fast path uses (``algorithms.base``): participation first, then for each local
step k, each active client in ascending index order calls the oracle for its
own row.  ``reference_run(algorithm, problem, rounds, ...)`` dispatches on the
algorithm's type through ``REFERENCES``; modules add their loops with
:func:`register`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..participation import FullParticipation, Participation
from ..problems.base import Federation

__all__ = ["reference_run", "register", "REFERENCES", "per_client_value", "draw_participants"]

REFERENCES: dict[type, Callable[..., np.ndarray]] = {}


def register(cls: type) -> Callable[[Callable[..., np.ndarray]], Callable[..., np.ndarray]]:
    """Decorator: the reference loop of algorithm class ``cls``.

    The loop has signature ``(alg, problem, rounds, participation, rng, x0) ->
    (rounds+1, d) array of server models``."""
    def deco(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        REFERENCES[cls] = fn
        return fn
    return deco


def per_client_value(value: Any, i: int) -> Any:
    """Client i's value of a scalar-or-per-client hyperparameter."""
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr[i].item()


def draw_participants(alg: Any, problem: Federation, participation: Participation | None,
                      rng: np.random.Generator, t: int) -> list[tuple[int, int]]:
    """[(client, completed steps), ...] of round t, drawn exactly as the fast path does."""
    part = participation if participation is not None else FullParticipation()
    E = np.array([per_client_value(getattr(alg, "local_steps", 1), i)
                  for i in range(problem.n_clients)], dtype=np.int64)
    drawn = part.draw(rng, t, E)
    return [(int(c), int(s)) for c, s in zip(drawn.clients, drawn.steps)]


def client_gradient(problem: Federation, i: int, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One oracle call for client i at y (the configured oracle, one row)."""
    return problem.stochastic_grad(y[None, :], np.array([i]), rng)[0]


def reference_run(alg: Any, problem: Federation, rounds: int, *,
                  participation: Participation | None = None, seed: int = 0,
                  x0: Any = None) -> np.ndarray:
    """Server models x_0..x_R of ``alg`` computed by its plain reference loop."""
    from . import reference_drift  # noqa: F401  (registers its loops)

    x0 = np.zeros(problem.dim) if x0 is None else np.array(x0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    for cls in type(alg).__mro__:
        if cls in REFERENCES:
            return REFERENCES[cls](alg, problem, rounds, participation, rng, x0)
    raise KeyError(f"no reference loop registered for {type(alg).__name__}")


# --------------------------------------------------------------------- FedAvg
def _fedavg_reference(alg, problem, rounds, participation, rng, x0):
    from .fedavg import FedAvg  # noqa: F401

    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = draw_participants(alg, problem, participation, rng, t)
        if not members:
            xs.append(x.copy())
            continue
        ys = {i: x.copy() for i, _ in members}
        longest = max(s for _, s in members)
        for k in range(longest):                 # step-major order: the RNG convention
            for i, s in members:
                if s > k:
                    g = client_gradient(problem, i, ys[i], rng)
                    ys[i] = ys[i] - per_client_value(alg.lr, i) * g
        if alg.aggregation == "uniform":
            w = {i: 1.0 for i, _ in members}
        elif alg.aggregation == "samples":
            w = {i: float(problem.n_samples[i]) for i, _ in members}
        else:
            w = {i: float(problem.weights[i]) for i, _ in members}
        total = sum(w.values())
        step = np.zeros_like(x)
        for i, _ in members:
            step += (w[i] / total) * (ys[i] - x)
        x = x + alg.server_lr * step
        xs.append(x.copy())
    return np.array(xs)


def _register_builtin() -> None:
    from .fedavg import FedAvg
    register(FedAvg)(_fedavg_reference)


_register_builtin()
