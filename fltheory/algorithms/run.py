"""``run``: drive an algorithm for R rounds and record what a theorem needs.

``run(algorithm, problem, rounds, *, participation=None, seed=0, x0=None,
callback=None)`` returns a :class:`History` with per-round arrays: server
models x_t (x_0 first), F(x_t), F(x_t) - F*, ||x_t - x*||^2, ||grad F(x_t)||^2,
participants, completed steps and communication.  Same seed, same bits: all
randomness comes from ``numpy.random.default_rng(seed)``, used in the order
documented in ``algorithms.base``.  Non-finite values stop the run with
:class:`~fltheory.errors.DivergenceError` naming the round and the algorithm.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .._threads import pinned_blas
from ..errors import DivergenceError, FLTheoryError, InvalidHyperparameterError, InvalidProblemError
from ..participation import Participation
from ..problems.base import Federation
from .base import Algorithm, RoundInfo

__all__ = ["run", "History"]


@dataclass(frozen=True)
class History:
    """Per-round record of a run (index 0 is the initial model).

    x : (R+1, d) server models.
    loss : (R+1,) F(x_t).
    loss_gap : (R+1,) F(x_t) - F*, or None when F* is unknown (non-convex problems).
    dist2 : (R+1,) ||x_t - x*||^2, or None when x* is unknown.
    grad_norm2 : (R+1,) ||grad F(x_t)||^2.
    clients, steps : per-round participant indices and completed steps (length R lists).
    communication : per-round ``Communication`` (length R list).
    extra : per-round algorithm diagnostics (length R list of mappings).
    state : the final algorithm state.
    record : provenance (algorithm, hyperparameters, seed, rounds, problem, timing).
    """

    x: np.ndarray
    loss: np.ndarray
    loss_gap: np.ndarray | None
    dist2: np.ndarray | None
    grad_norm2: np.ndarray
    clients: list[np.ndarray]
    steps: list[np.ndarray]
    communication: list[Any]
    extra: list[Any]
    state: Any
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        """Number of completed rounds."""
        return self.x.shape[0] - 1

    def total_communication(self) -> Any:
        """Sum of the per-round communication records."""
        from ..compression import Communication
        total = Communication.zero()
        for c in self.communication:
            total = total + c
        return total


def _optimum(problem: Federation) -> tuple[np.ndarray | None, float | None]:
    try:
        x_star = problem.optimum()
    except (FLTheoryError, NotImplementedError):
        return None, None
    return x_star, problem.loss(x_star)


@pinned_blas
def run(algorithm: Algorithm, problem: Federation, rounds: int, *,
        participation: Participation | None = None, seed: int | np.random.SeedSequence = 0,
        x0: Any = None, callback: Callable[[int, Any, RoundInfo], bool | None] | None = None,
        rng: np.random.Generator | None = None, method: str = "simulate") -> History:
    """Run ``algorithm`` on ``problem`` for ``rounds`` rounds.

    ``method="affine"`` computes a deterministic run on a quadratic problem
    through its exactly recovered affine round map S -> M S + c, one
    dim(S) x dim(S) matvec per round (``algorithms.affine_run.run_affine``;
    NotAffineError when the map is not affine).  It equals the simulated run
    to ~1e-10 and takes no callback or generator.

    Parameters
    ----------
    algorithm : Algorithm
    problem : Federation
    rounds : int >= 0
    participation : Participation, optional
        Full participation with all local steps when omitted.
    seed : int or SeedSequence
        Seeds ``numpy.random.default_rng``; ignored when ``rng`` is given.
    x0 : array (d,), optional
        Initial server model (zeros by default).
    callback : callable(t, state, info) -> bool, optional
        Called after every round t = 1..R; returning True stops the run.
    rng : Generator, optional
        Use this generator instead of one seeded from ``seed``.
    method : {"simulate", "affine"}
        Simulate every round, or iterate the recovered affine round map.
    """
    if method == "affine":
        if callback is not None or rng is not None:
            raise InvalidHyperparameterError(
                "run(method='affine') takes no callback and no rng: the run is deterministic "
                "and computed through the affine round map")
        from .affine_run import run_affine
        return run_affine(algorithm, problem, rounds, x0=x0, participation=participation,
                          seed=seed if isinstance(seed, (int, np.integer)) else 0)
    if method != "simulate":
        raise InvalidHyperparameterError(f"method must be 'simulate' or 'affine', got {method!r}")
    if not isinstance(algorithm, Algorithm):
        raise InvalidHyperparameterError(f"algorithm must be an fltheory Algorithm, got {type(algorithm).__name__}")
    if not isinstance(problem, Federation):
        raise InvalidProblemError(f"problem must be a Federation, got {type(problem).__name__}")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 0:
        raise InvalidHyperparameterError(f"rounds must be an integer >= 0, got {rounds!r}")
    x0 = np.zeros(problem.dim) if x0 is None else np.array(x0, dtype=np.float64)
    if x0.shape != (problem.dim,) or not np.all(np.isfinite(x0)):
        raise InvalidProblemError(f"x0 must be a finite vector of shape ({problem.dim},), got {x0.shape}")
    gen = rng if rng is not None else np.random.default_rng(seed)
    x_star, f_star = _optimum(problem)
    start = time.perf_counter()
    state = algorithm.init(problem, x0, gen)

    xs = [x0.copy()]
    losses = [problem.loss(x0)]
    grads = [float(np.sum(problem.grad(x0) ** 2))]
    clients, steps, comms, extras = [], [], [], []
    for t in range(1, int(rounds) + 1):
        try:
            state, info = algorithm.round(state, problem, participation, gen)
        except DivergenceError as exc:
            raise DivergenceError(f"{algorithm.name} diverged in round {t}: {exc}") from exc
        except FloatingPointError as exc:     # under np.errstate(all="raise")
            raise DivergenceError(f"{algorithm.name} diverged in round {t}: {exc}") from exc
        x = np.asarray(state.x)
        if not np.all(np.isfinite(x)):
            raise DivergenceError(
                f"{algorithm.name} diverged in round {t}: the server model has non-finite entries")
        with np.errstate(over="ignore", invalid="ignore"):   # non-finite is reported below
            loss = problem.loss(x)
            g2 = float(np.sum(problem.grad(x) ** 2))
        if not (np.isfinite(loss) and np.isfinite(g2)):
            raise DivergenceError(
                f"{algorithm.name} diverged in round {t}: F(x) = {loss!r}, ||grad F||^2 = {g2!r}")
        xs.append(x.copy())
        losses.append(loss)
        grads.append(g2)
        clients.append(info.clients)
        steps.append(info.steps)
        comms.append(info.communication)
        extras.append(info.extra)
        if callback is not None and callback(t, state, info):
            break
    X = np.array(xs)
    L = np.array(losses)
    record = {
        "algorithm": algorithm.name,
        "hyperparameters": algorithm.hyperparameters(),
        "problem": repr(problem),
        "rounds": int(rounds),
        "completed_rounds": X.shape[0] - 1,
        "seed": None if rng is not None else (int(seed) if isinstance(seed, (int, np.integer)) else repr(seed)),
        "participation": repr(participation) if participation is not None else "full",
        "seconds": time.perf_counter() - start,
    }
    return History(
        x=X, loss=L,
        loss_gap=None if f_star is None else L - f_star,
        dist2=None if x_star is None else np.sum((X - x_star) ** 2, axis=1),
        grad_norm2=np.array(grads), clients=clients, steps=steps,
        communication=comms, extra=extras, state=state, record=record,
    )
