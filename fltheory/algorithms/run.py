"""``run``: drive an algorithm for R rounds and record what a theorem needs.

``run(algorithm, problem, rounds, *, participation=None, seed=0, x0=None,
callback=None)`` returns a :class:`History` with per-round arrays: server
models x_t (x_0 first), F(x_t), F(x_t) - F*, ||x_t - x*||^2, ||grad F(x_t)||^2,
participants, completed steps and communication.  Same seed, same bits: all
randomness comes from ``numpy.random.default_rng(seed)``, used in the order
documented in ``algorithms.base``.  Non-finite values stop the run with
:class:`~fltheory.errors.DivergenceError` naming the round and the algorithm.

Other ways of computing a run register themselves under a ``method`` name
with :func:`register_run_method` (``fltheory.theory`` registers ``"affine"``,
its ``run_affine``, when imported), so that this layer never imports a layer
above it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..errors import (
    DivergenceError,
    InvalidHyperparameterError,
    NonFinitePointError,
    OutOfRangeError,
)
from ..participation import Participation
from ..problems.base import Federation
from .base import Algorithm, RoundInfo
from .history import (
    History,
    check_run_arguments,
    check_run_options,
    known_optimum,
    run_record,
)

__all__ = ["History", "register_run_method", "run"]


class RunMethod(Protocol):
    """A runner registered under a ``method`` name: deterministic, no callback or rng."""

    def __call__(self, algorithm: Algorithm, problem: Federation, rounds: int, *, x0: Any,
                 participation: Participation | None, seed: int) -> History: ...


_METHODS: dict[str, tuple[RunMethod, str]] = {}


def register_run_method(name: str, runner: RunMethod, provider: str) -> None:
    """Make ``run(..., method=name)`` call ``runner(algorithm, problem, rounds, x0=,
    participation=, seed=)``; ``provider`` names it in messages (e.g.
    ``"fltheory.theory.run_affine"``).  "simulate" cannot be replaced."""
    if not isinstance(name, str) or name == "simulate":
        raise InvalidHyperparameterError(f"method name must be a str other than 'simulate', got {name!r}")
    _METHODS[name] = (runner, provider)


def run(algorithm: Algorithm, problem: Federation, rounds: int, *,
        participation: Participation | None = None, seed: int | np.random.SeedSequence = 0,
        x0: Any = None, callback: Callable[[int, Any, RoundInfo], bool | None] | None = None,
        rng: np.random.Generator | None = None, method: str = "simulate") -> History:
    """Run ``algorithm`` on ``problem`` for ``rounds`` rounds.

    ``method="affine"`` (registered by ``fltheory.theory``) computes a
    deterministic run on a quadratic problem through its exactly recovered
    affine round map S -> M S + c, one dim(S) x dim(S) matvec per round
    (``fltheory.theory.run_affine``; NotAffineError when the map is not
    affine).  It equals the simulated run to ~1e-10 and takes no callback or
    generator.

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
    method : {"simulate", "affine", any registered name}
        Simulate every round, or a registered runner (``register_run_method``).
    """
    check_run_options(participation, seed, callback, rng)
    if not isinstance(method, str):
        raise InvalidHyperparameterError(f"method must be a string ('simulate' or a registered name), "
                                         f"got {method!r}")
    if method != "simulate":
        return _run_registered(method, algorithm, problem, rounds, participation=participation,
                               seed=seed, x0=x0, callback=callback, rng=rng)
    x0 = check_run_arguments(algorithm, problem, rounds, x0)
    gen = rng if rng is not None else np.random.default_rng(seed)
    x_star, f_star = known_optimum(problem)
    start = time.perf_counter()
    state = algorithm.init(problem, x0, gen)

    xs = [x0.copy()]
    losses = [problem.loss(x0)]
    grads = [float(np.sum(problem.grad(x0) ** 2))]
    clients: list[np.ndarray] = []
    steps: list[np.ndarray] = []
    comms: list[Any] = []
    extras: list[Any] = []
    for t in range(1, int(rounds) + 1):
        try:
            state, info = algorithm.round(state, problem, participation, gen)
        except DivergenceError as exc:
            raise DivergenceError(f"{algorithm.name} diverged in round {t}: {exc}") from exc
        except FloatingPointError as exc:     # under np.errstate(all="raise")
            raise DivergenceError(f"{algorithm.name} diverged in round {t}: {exc}") from exc
        except (NonFinitePointError, OutOfRangeError) as exc:   # local iterates overflowed
            raise DivergenceError(f"{algorithm.name} diverged in round {t}: {exc}") from exc
        x = np.asarray(state.x)
        if not np.all(np.isfinite(x)):
            raise DivergenceError(
                f"{algorithm.name} diverged in round {t}: the server model has non-finite entries")
        with np.errstate(over="ignore", invalid="ignore"):   # non-finite is reported below
            try:
                loss = problem.loss(x)
                g2 = float(np.sum(problem.grad(x) ** 2))
            except OutOfRangeError:                           # the oracles overflowed at x
                loss = g2 = float("inf")
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
    record = run_record(algorithm, problem, rounds=int(rounds), completed_rounds=X.shape[0] - 1,
                        seed=None if rng is not None else seed, participation=participation,
                        seconds=time.perf_counter() - start)
    return History(
        x=X, loss=L,
        loss_gap=None if f_star is None else L - f_star,
        dist2=None if x_star is None else np.sum((X - x_star) ** 2, axis=1),
        grad_norm2=np.array(grads), clients=clients, steps=steps,
        communication=comms, extra=extras, state=state, record=record,
    )


def _run_registered(method: str, algorithm: Algorithm, problem: Federation, rounds: int, *,
                    participation: Participation | None, seed: Any, x0: Any,
                    callback: Any, rng: Any) -> History:
    if not isinstance(method, str) or method not in _METHODS:
        hint = (" ('affine' is registered by importing fltheory.theory; or call "
                "fltheory.theory.run_affine)" if method == "affine" else "")
        raise InvalidHyperparameterError(
            f"method must be 'simulate' or one of {sorted(_METHODS)}, got {method!r}{hint}")
    runner, provider = _METHODS[method]
    if callback is not None or rng is not None:
        raise InvalidHyperparameterError(
            f"run(method={method!r}) takes no callback and no rng: the run is deterministic "
            f"and computed by {provider}")
    return runner(algorithm, problem, rounds, x0=x0, participation=participation,
                  seed=int(seed) if isinstance(seed, (int, np.integer)) else 0)
