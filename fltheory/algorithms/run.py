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
above it.  Built-in methods whose provider has not been imported yet are
loaded on first use by module name (``_PROVIDERS``), as plug-ins are: the
dependency stays one-way (nothing here names a symbol of ``theory``), and
``run(..., method="affine")`` works in a script that imported only
``fltheory.algorithms``.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from .._threads import pinned_blas
from ..errors import (
    DivergenceError,
    FLTheoryError,
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
    run_record,
)

__all__ = ["METRICS", "History", "register_run_method", "run"]


class RunMethod(Protocol):
    """A runner registered under a ``method`` name: deterministic, no callback or rng."""

    def __call__(self, algorithm: Algorithm, problem: Federation, rounds: int, *, x0: Any,
                 participation: Participation | None, seed: int) -> History: ...


_METHODS: dict[str, tuple[RunMethod, str]] = {}
# Built-in run methods and the module that registers each when imported.
_PROVIDERS: dict[str, str] = {"affine": "fltheory.theory"}


def register_run_method(name: str, runner: RunMethod, provider: str) -> None:
    """Make ``run(..., method=name)`` call ``runner(algorithm, problem, rounds, x0=,
    participation=, seed=)``; ``provider`` names it in messages (e.g.
    ``"fltheory.theory.run_affine"``).  "simulate" cannot be replaced."""
    if not isinstance(name, str) or name == "simulate":
        raise InvalidHyperparameterError(f"method name must be a str other than 'simulate', got {name!r}")
    _METHODS[name] = (runner, provider)


@pinned_blas
def run(algorithm: Algorithm, problem: Federation, rounds: int, *,
        participation: Participation | None = None, seed: int | np.random.SeedSequence = 0,
        x0: ArrayLike | None = None, callback: Callable[[int, Any, RoundInfo], bool | None] | None = None,
        rng: np.random.Generator | None = None, method: str = "simulate",
        metrics: Collection[str] | None = None) -> History:
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
    metrics : collection of {"loss", "loss_gap", "dist2", "grad_norm2"}, optional
        Per-round quantities to compute (default: all four, today's History).
        F(x_t) and ||grad F(x_t)||^2 come from the federation hook
        ``loss_and_grad_norm2`` (quadratic clients: the averaged quadratic
        sum_i p_i H_i, formed once per federation, d^2 work per round instead
        of N d^2).  Fields not asked for are None; ``metrics=()`` runs the bare
        rounds.  Metrics never feed back into the iterates: the models x_t are
        the same bits whatever is asked.  A finite model with a non-finite F or
        gradient raises DivergenceError only when they are computed.
    """
    check_run_options(participation, seed, callback, rng)
    if not isinstance(method, str):
        raise InvalidHyperparameterError(f"method must be a string ('simulate' or a registered name), "
                                         f"got {method!r}")
    if method != "simulate":
        if metrics is not None:
            raise InvalidHyperparameterError(
                f"run(method={method!r}) computes every metric; metrics= is for method='simulate'")
        return _run_registered(method, algorithm, problem, rounds, participation=participation,
                               seed=seed, x0=x0, callback=callback, rng=rng)
    wanted = check_metrics(metrics)
    x0 = check_run_arguments(algorithm, problem, rounds, x0)
    gen = rng if rng is not None else np.random.default_rng(seed)
    need_optimum = bool(wanted & {"loss_gap", "dist2"})
    x_star, f_star = _optimum(problem) if need_optimum else (None, None)
    track = bool(wanted & {"loss", "loss_gap", "grad_norm2"})
    start = time.perf_counter()
    state = algorithm.init(problem, x0, gen)
    xs = [x0.copy()]
    losses: list[float] = []
    grads: list[float] = []
    if track:
        _record_objective(problem, x0, losses, grads)
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
        if track:
            with np.errstate(over="ignore", invalid="ignore"):   # non-finite is reported below
                try:
                    _record_objective(problem, x, losses, grads)
                except OutOfRangeError:                       # the oracles overflowed at x
                    losses.append(float("inf"))
                    grads.append(float("inf"))
            if not (np.isfinite(losses[-1]) and np.isfinite(grads[-1])):
                raise DivergenceError(
                    f"{algorithm.name} diverged in round {t}: F(x) = {losses[-1]!r}, "
                    f"||grad F||^2 = {grads[-1]!r}")
        xs.append(x.copy())
        clients.append(info.clients)
        steps.append(info.steps)
        comms.append(info.communication)
        extras.append(info.extra)
        if callback is not None and callback(t, state, info):
            break
    X = np.array(xs)
    L = np.array(losses) if track else None
    record = run_record(algorithm, problem, rounds=int(rounds), completed_rounds=X.shape[0] - 1,
                        seed=None if rng is not None else seed, participation=participation,
                        seconds=time.perf_counter() - start)
    return History(
        x=X, loss=L if "loss" in wanted else None,
        loss_gap=None if f_star is None or L is None or "loss_gap" not in wanted else L - f_star,
        dist2=None if x_star is None or "dist2" not in wanted else np.sum((X - x_star) ** 2, axis=1),
        grad_norm2=np.array(grads) if "grad_norm2" in wanted else None, clients=clients, steps=steps,
        communication=comms, extra=extras, state=state, record=record,
    )


METRICS = ("loss", "loss_gap", "dist2", "grad_norm2")


def check_metrics(metrics: Collection[str] | None) -> frozenset[str]:
    """The set of per-round metrics asked for (all of ``METRICS`` when None)."""
    if metrics is None:
        return frozenset(METRICS)
    if isinstance(metrics, str) or not isinstance(metrics, Collection):
        raise InvalidHyperparameterError(
            f"metrics must be a collection of names from {METRICS} (e.g. ('loss',)), got {metrics!r}")
    unknown = [m for m in metrics if not isinstance(m, str) or m not in METRICS]
    if unknown:
        raise InvalidHyperparameterError(f"metrics: unknown name(s) {unknown!r}; expected names from {METRICS}")
    return frozenset(metrics)


def _optimum(problem: Federation) -> tuple[np.ndarray | None, float | None]:
    """(x*, F*) with F* through the same hook as the per-round F(x_t), so that the
    gap F(x_t) - F* is computed by one formula (exactly 0 at x_t = x*); (None, None)
    when the federation cannot compute x*."""
    try:
        x_star = problem.optimum()
    except (FLTheoryError, NotImplementedError):
        return None, None
    loss, _ = problem.loss_and_grad_norm2(np.asarray(x_star, dtype=np.float64)[None, :])
    return x_star, float(loss[0])


def _record_objective(problem: Federation, x: np.ndarray, losses: list[float], grads: list[float]) -> None:
    """Append F(x) and ||grad F(x)||^2 from the hook ``loss_and_grad_norm2`` (one row)."""
    loss, g2 = problem.loss_and_grad_norm2(x[None, :])
    losses.append(float(loss[0]))
    grads.append(float(g2[0]))


def _run_registered(method: str, algorithm: Algorithm, problem: Federation, rounds: int, *,
                    participation: Participation | None, seed: Any, x0: Any,
                    callback: Any, rng: Any) -> History:
    if isinstance(method, str) and method not in _METHODS and method in _PROVIDERS:
        importlib.import_module(_PROVIDERS[method])
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
