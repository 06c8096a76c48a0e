"""``run``: drive an algorithm for R rounds and record what a theorem needs.

``run(algorithm, problem, rounds, *, participation=None, seed=0, x0=None,
callback=None, metrics=None)`` returns a :class:`History` with per-round arrays:
server models x_t (x_0 first), F(x_t), F(x_t) - F*, ||x_t - x*||^2,
||grad F(x_t)||^2 (each on demand: ``metrics``), participants, completed steps
and communication (measured when read).  Same seed, same bits: all
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

import functools
import importlib
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from .._threads import pinned_blas
from .._validate import finite_array, real_array
from ..errors import (
    DivergenceError,
    FLTheoryError,
    InvalidHyperparameterError,
    InvalidProblemError,
    NonFinitePointError,
    OutOfRangeError,
)
from ..participation import Participation
from ..problems.base import Federation
from .base import Algorithm, RoundInfo
from .history import (
    History,
    RoundCommunication,
    check_run_arguments,
    check_run_options,
    checked_run_record,
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
        of N d^2), called on up to 64 models at once (fewer when N d is large:
        ``_batch_rows``; one per round when a callback is given, so that the
        callback is never called for a round after a divergence), so that short
        rounds do not pay one call each.  A batched F(x_t) and a single-row one
        may differ in the last bit (a matrix product's rounding depends on the
        shape of the call), so a run with a callback can report F, and the gap
        F(x_t) - F* where it is small, differently by rounding of F.  F* is a lead row of the first call (a
        call of its own at one row per call), and the gap F(x_t) - F* is
        exactly 0 where x_t equals x* bit for bit.  Fields not
        asked for are None; ``metrics=()`` runs the bare rounds.  Metrics never
        feed back into the iterates: the models x_t are the same bits whatever
        is asked.  A finite model with a non-finite F or gradient raises
        DivergenceError naming the first such round (checked when its batch is
        evaluated, and before any other error of a later round is raised) only
        when they are computed.  The rounds run after that round and before its
        batch is evaluated (at most 63; a server model that overflows is caught in
        its own round) have drawn from the generator: a generator passed as
        ``rng`` and shared with later runs is then further advanced than by the
        rounds the error names (the runs stay reproducible: the same arguments
        give the same draws).

    Returns
    -------
    History
        ``communication`` is a :class:`~fltheory.algorithms.history.RoundCommunication`:
        each round's ``Communication`` is measured when first read (unmeasured rounds
        hold at most 32 MiB of uplink arrays, counted in bytes whatever the algorithm
        sends), so a run whose communication is not read does not pay for it.
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
    x_star = _known_x_star(problem) if wanted & {"loss_gap", "dist2"} else None
    gap_at = x_star if x_star is not None and "loss_gap" in wanted else None
    objective = (_ObjectiveLog(algorithm.name, problem, 1 if callback is not None else _batch_rows(problem),
                               gap_at) if wanted & {"loss", "loss_gap", "grad_norm2"} else None)
    start = time.perf_counter()
    state = _unchecked(algorithm, "init")(problem, x0, gen)    # its arguments were checked above
    xs = [x0.copy()]
    if objective is not None:
        objective.add(xs[0])
    clients: list[np.ndarray] = []
    steps: list[np.ndarray] = []
    comms = RoundCommunication()
    extras: list[Any] = []
    try:
        for t in range(1, int(rounds) + 1):
            try:
                state, info = algorithm.round(state, problem, participation, gen)
            except (DivergenceError, FloatingPointError, NonFinitePointError, OutOfRangeError) as exc:
                # FloatingPointError: under np.errstate(all="raise"); NonFinitePointError and
                # OutOfRangeError: the local iterates overflowed
                raise DivergenceError(f"{algorithm.name} diverged in round {t}: {exc}") from exc
            x = np.array(state.x)                  # a copy: the state may be updated in place
            if not np.isfinite(x).all():
                raise DivergenceError(
                    f"{algorithm.name} diverged in round {t}: the server model has non-finite entries")
            xs.append(x)
            if objective is not None:
                objective.add(x)
            clients.append(info.clients)
            steps.append(info.steps)
            comms.append(info)                        # measured when first read
            extras.append(info.extra)
            if callback is not None and callback(t, state, info):
                break
    except Exception:
        if objective is not None:    # a non-finite F in an earlier round is the first divergence
            objective.flush()
        raise
    X = np.array(xs)
    L, G2, f_star = objective.values() if objective is not None else (None, None, None)
    record = checked_run_record(algorithm, problem, rounds=int(rounds), completed_rounds=X.shape[0] - 1,
                                seed=None if rng is not None else seed, participation=participation,
                                seconds=time.perf_counter() - start)
    gap, dist2 = _distances(X, L, x_star, f_star, "dist2" in wanted)
    return History(
        x=X, loss=L if "loss" in wanted else None, loss_gap=gap, dist2=dist2,
        grad_norm2=G2 if "grad_norm2" in wanted else None, clients=clients, steps=steps,
        communication=comms, extra=extras, state=state, record=record,
    )


METRICS = ("loss", "loss_gap", "dist2", "grad_norm2")


_ALL_METRICS = frozenset(METRICS)


def check_metrics(metrics: Collection[str] | None) -> frozenset[str]:
    """The set of per-round metrics asked for (all of ``METRICS`` when None)."""
    if metrics is None:
        return _ALL_METRICS
    if isinstance(metrics, str) or not isinstance(metrics, Collection) \
            or (isinstance(metrics, np.ndarray) and metrics.ndim != 1):     # a 0-d array has no length
        raise InvalidHyperparameterError(
            f"metrics must be a collection of names from {METRICS} (e.g. ('loss',)), got {metrics!r}")
    unknown = [m for m in metrics if not isinstance(m, str) or m not in METRICS]
    if unknown:
        raise InvalidHyperparameterError(f"metrics: unknown name(s) {unknown!r}; expected names from {METRICS}")
    return frozenset(metrics)


#: Rows of models per call of the hook ``loss_and_grad_norm2``: at most ``_BATCH_ROWS``, and fewer
#: when N d is large (``_batch_rows``), so that a hook that works on all rows at once (the neural
#: federation's pooled pass) needs no more memory than a few single-row calls.
_BATCH_ROWS = 64
_BATCH_ELEMENTS = 2 ** 18


def _batch_rows(problem: Federation) -> int:
    """Rows per hook call: min(64, 2^18 / (N d)), at least 1.  Rounds of small federations take
    well under a millisecond, where one call per round would be a large share of the run."""
    return max(1, min(_BATCH_ROWS, _BATCH_ELEMENTS // max(1, problem.n_clients * problem.dim)))


class _ObjectiveLog:
    """F(x_t) and ||grad F(x_t)||^2 of the recorded models through the federation hook
    ``loss_and_grad_norm2``, evaluated ``batch`` rows per call (row t is model x_t), and
    F* = F(x*) when ``x_star`` is given.

    With ``batch`` > 1 the first call leads with one extra row: x* when given, else zeros
    (ignored), so that every model's row sits at the same place in the same shape of call
    whatever metrics are asked (a matrix product's rounding can depend on both): the values
    are then the same bits for every ``metrics``.  With ``batch`` = 1 (large N d, where a
    wasted row would cost as much as a round's metrics, or a callback) F* is a call of its
    own and every model one call.  A non-finite value at a model x_t, t >= 1, raises
    DivergenceError naming round t (the first such round); the initial model is recorded
    as it is; an overflow of the oracles at x* or x_0 is raised as it is.
    """

    def __init__(self, name: str, problem: Federation, batch: int, x_star: np.ndarray | None) -> None:
        self.name, self.problem, self.batch = name, problem, batch
        self.x_star = x_star
        self.f_star: float | None = None
        self.pending: list[np.ndarray] = []
        self.done = 0                          # models evaluated so far
        self.losses: list[np.ndarray] = []
        self.grads: list[np.ndarray] = []
        self.lead = batch > 1
        self.evaluate = _unchecked_hook(problem)
        if not self.lead and x_star is not None:
            loss, _ = self.evaluate(x_star[None, :])
            self.f_star = float(loss[0])

    def add(self, x: np.ndarray) -> None:
        self.pending.append(x)
        if len(self.pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        first, lead = self.done, int(self.done == 0 and self.lead)
        if lead:
            lead_row = self.x_star if self.x_star is not None else np.zeros(self.problem.dim)
            rows = np.array([lead_row, *self.pending])
        else:
            rows = np.array(self.pending)
        self.pending = []
        with np.errstate(over="ignore", invalid="ignore"):    # non-finite is reported below
            try:
                loss, g2 = self.evaluate(rows)
            except OutOfRangeError:                           # the oracles overflowed at some row
                loss, g2 = self._row_by_row(rows, first - lead)
        loss, g2 = np.asarray(loss, dtype=np.float64), np.asarray(g2, dtype=np.float64)
        if lead:
            if self.x_star is not None:
                self.f_star = float(loss[0])
            loss, g2 = loss[1:], g2[1:]
        self.losses.append(loss)
        self.grads.append(g2)
        self.done += loss.shape[0]
        if np.isfinite(loss).all() and np.isfinite(g2).all():
            return
        bad = ~(np.isfinite(loss) & np.isfinite(g2))
        bad[: max(0, 1 - first)] = False                      # x_0 is not a round
        if bad.any():
            k = int(np.argmax(bad))
            raise DivergenceError(f"{self.name} diverged in round {first + k}: F(x) = {float(loss[k])!r}, "
                                  f"||grad F||^2 = {float(g2[k])!r}")

    def _row_by_row(self, rows: np.ndarray, first: int) -> tuple[np.ndarray, np.ndarray]:
        """One row per call (row k is model x_{first + k}; first = -1: the lead row); +inf
        where the oracles overflow at a model x_t, t >= 1, or at the zeros lead row."""
        loss, g2 = np.empty(rows.shape[0]), np.empty(rows.shape[0])
        for k in range(rows.shape[0]):
            t = first + k
            try:
                one_loss, one_g2 = self.evaluate(rows[k:k + 1])
            except OutOfRangeError:
                if t == 0 or (t == -1 and self.x_star is not None):   # x_0 or x*: the caller's error
                    raise
                one_loss, one_g2 = np.array([np.inf]), np.array([np.inf])
            loss[k], g2[k] = float(one_loss[0]), float(one_g2[0])
        return loss, g2

    def values(self) -> tuple[np.ndarray, np.ndarray, float | None]:
        """(F(x_t), ||grad F(x_t)||^2) for every recorded model, after evaluating the pending
        rows, and F* (None without x*)."""
        self.flush()
        if len(self.losses) == 1:                             # copies: the History owns its arrays
            return self.losses[0].copy(), self.grads[0].copy(), self.f_star
        return np.concatenate(self.losses), np.concatenate(self.grads), self.f_star


def _unchecked(algorithm: Algorithm, name: str) -> Callable[..., Any]:
    """``algorithm.<name>`` without the argument check ``Algorithm`` wraps it in (``_method_checks``):
    ``run`` has checked the same arguments itself (a Federation, x0 a finite float64 (d,) array, a
    Generator), with the same typed errors, before it calls.  A method set on the instance, or one
    without the checking wrapper, is returned as it is."""
    method = getattr(type(algorithm), name, None)
    raw = getattr(method, "__wrapped__", None) if getattr(method, "__arguments_checked__", False) else None
    if raw is None or name in getattr(algorithm, "__dict__", {}):
        return getattr(algorithm, name)
    return functools.partial(raw, algorithm)


def _unchecked_hook(problem: Federation) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The federation's ``loss_and_grad_norm2`` without its argument check.

    Federations check the hook's argument on every call (``problems._hook_checks``: a finite
    float64 (T, d) array, returned as the same object); the rows ``run`` passes are such arrays
    by construction (the models passed the finiteness check of their round, x* is float64 and
    the lead row zeros), so the check would only repeat, on every batch, a cost comparable to
    the d^2 evaluation itself at small d.  The implementation is reached through the
    ``__wrapped__`` attribute the checking wrapper carries (``functools.wraps``); a hook set on
    the instance, or a wrapper without it, is called as it is."""
    bound = problem.loss_and_grad_norm2
    method = getattr(type(problem), "loss_and_grad_norm2", None)
    raw = getattr(method, "__wrapped__", None) if getattr(method, "__arguments_checked__", False) else None
    if raw is None or "loss_and_grad_norm2" in getattr(problem, "__dict__", {}):
        return bound
    return functools.partial(raw, problem)


def _known_x_star(problem: Federation) -> np.ndarray | None:
    """x* as float64, or None when the federation cannot compute it.  Checked once per run
    (real, shape (d,), finite: the ``_validate`` helpers name the value and what is expected;
    a non-finite x* is a NonFinitePointError): the batched objective takes it unchecked."""
    try:
        x_star = problem.optimum()
    except (FLTheoryError, NotImplementedError):
        return None
    if type(x_star) is np.ndarray and x_star.dtype == np.float64 and x_star.shape == (problem.dim,) \
            and np.isfinite(x_star).all():    # the common case, without the general checks' passes
        return x_star
    name = f"{type(problem).__name__}.optimum()"
    values = real_array(name, x_star, InvalidProblemError)
    if values.shape != (problem.dim,):
        raise InvalidProblemError(f"{name} must return an array of shape ({problem.dim},), got shape {values.shape}")
    out = values if values.dtype == np.float64 else values.astype(np.float64)
    if not np.isfinite(out).all():           # finite_array names the first non-finite entry
        finite_array(name, out, error=NonFinitePointError)
    return out


def _distances(X: np.ndarray, loss: np.ndarray | None, x_star: np.ndarray | None, f_star: float | None,
               want_dist2: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(F(x_t) - F*, ||x_t - x*||^2), each None when not computable or not asked for.

    The gap is exactly 0 where x_t is x* bit for bit (the hook evaluates rows in batches, whose
    rounding may depend on a row's position in its batch: F* is the batch's lead row).  One
    difference D = X - x* serves both: for finite floats x - y == 0 exactly when x == y (gradual
    underflow), so the rows where D is all zero are the rows equal to x*, and sum_j D_tj^2 is the
    same expression, hence the same bits, as np.sum((X - x*) ** 2, axis=1)."""
    if x_star is None:
        return None, None
    if (f_star is None or loss is None) and not want_dist2:
        return None, None
    D = X - x_star
    gap = None
    if f_star is not None and loss is not None:
        gap = loss - f_star
        gap[~np.logical_or.reduce(D, axis=1)] = 0.0           # D.any(axis=1)
    # np.add.reduce(D * D, axis=1) is np.sum(D ** 2, axis=1) without the wrappers (the same bits)
    return gap, np.add.reduce(np.multiply(D, D), axis=1) if want_dist2 else None


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
