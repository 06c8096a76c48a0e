"""What a run returns: :class:`History`, its argument check and its provenance record.

Shared by the simulating ``run`` (``algorithms.run``) and every other runner
(``fltheory.theory.run_affine``): one argument check
(:func:`check_run_arguments`) and one record builder (:func:`run_record`), so
that all runners accept and record the same things.
"""

from __future__ import annotations

import datetime as _dt
import functools
import platform
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, generator, instance, integer, positive, seed_value
from ..display import HistoryDisplay
from ..errors import FLTheoryError, InvalidHyperparameterError, InvalidProblemError
from ..participation import Participation
from ..problems.base import Federation
from ..results import RunRecord, git_commit, package_versions
from .base import Algorithm

__all__ = ["History", "check_run_arguments", "known_optimum", "run_record"]


@dataclass(frozen=True, repr=False)
class History(HistoryDisplay):
    """Per-round record of a run (index 0 is the initial model).

    x : (R+1, d) server models.
    loss : (R+1,) F(x_t), or None when ``run(metrics=...)`` did not ask for it.
    loss_gap : (R+1,) F(x_t) - F*, or None when F* is unknown (non-convex problems).
    dist2 : (R+1,) ||x_t - x*||^2, or None when x* is unknown.
    grad_norm2 : (R+1,) ||grad F(x_t)||^2, or None when not asked for.
    clients, steps : per-round participant indices and completed steps (length R lists).
    communication : per-round ``Communication`` (length R sequence; from ``run`` a
        :class:`RoundCommunication`, measured when first read).
    extra : per-round algorithm diagnostics (length R list of mappings).
    state : the final algorithm state.
    record : :class:`~fltheory.results.RunRecord`; ``record.config`` holds the
        algorithm, hyperparameters, problem, rounds, completed rounds,
        participation and timing (``record["key"]`` reads a config entry or a
        field), ``record.seed`` the integer seed (None when a generator or a
        SeedSequence was given).
    """

    x: np.ndarray
    loss: np.ndarray | None
    loss_gap: np.ndarray | None
    dist2: np.ndarray | None
    grad_norm2: np.ndarray | None
    clients: list[np.ndarray]
    steps: list[np.ndarray]
    communication: Sequence[Any]
    extra: list[Any]
    state: Any
    record: RunRecord

    @property
    def rounds(self) -> int:
        """Number of completed rounds."""
        return int(self.x.shape[0]) - 1

    def total_communication(self) -> Any:
        """Sum of the per-round communication records (``Communication.zero() + c_1 + ...``;
        the same bits summed without an intermediate record per round when every record is
        a ``Communication``)."""
        from ..compression import Communication, _total
        records = list(self.communication)
        if all(isinstance(c, Communication) for c in records):
            return _total(records)
        total = Communication.zero()
        for c in records:
            total = total + c
        return total


class RoundCommunication(Sequence[Any]):
    """The per-round ``Communication`` of a run, each measured when first read.

    A round reports its communication as a :class:`~fltheory.algorithms.base.RoundInfo`
    whose ``communication`` may be deferred (counts and the entropy of the uplink values
    are computed on first read).  ``run`` keeps the RoundInfo of every round here instead
    of reading them, so that a run whose communication nobody reads does not pay for it
    (at N = 100, d = 50 a measurement costs about 6% of a FedAvg round, more when read after the
    run: the held arrays have left the cache).  The values
    are the same: the arrays a deferred measurement holds are never modified by later
    rounds (the contract of ``DeferredCommunication``).

    Memory: deferred rounds hold their uplink arrays (whatever the algorithm sends: one or
    several (m, d) arrays, or matrices), so the pending rounds are measured as soon as the
    arrays they hold reach ``max_bytes`` bytes (``MAX_PENDING_BYTES``, 32 MiB; counted with
    ``RoundInfo.held_bytes``).  Behaves as a read-only list:
    ``len``, indexing, slicing (a list), iteration, ``==`` with any sequence (element by
    element), ``repr``; pickles as a list.
    """

    __slots__ = ("_held", "_items", "_resolved", "max_bytes")

    def __init__(self, max_bytes: int = 0) -> None:
        self._items: list[Any] = []          # RoundInfo (not yet read) or Communication
        self._resolved = 0                    # items[:_resolved] are Communication
        self._held = 0                        # bytes held by items[_resolved:]
        self.max_bytes = int(max_bytes) if max_bytes > 0 else MAX_PENDING_BYTES

    def append(self, info: Any) -> None:
        """Add one round's RoundInfo; measure the pending rounds once they hold ``max_bytes``."""
        self._items.append(info)
        held_bytes = getattr(info, "held_bytes", None)
        if held_bytes is not None:
            self._held += held_bytes()
        if self._held >= self.max_bytes:
            self._resolve()

    def _resolve(self) -> list[Any]:
        items = self._items
        for k in range(self._resolved, len(items)):
            items[k] = items[k].communication
        self._resolved = len(items)
        self._held = 0
        return items

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        items = self._resolve()
        return items[index] if not isinstance(index, slice) else list(items[index])

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._resolve()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self._resolve()) == list(other)

    __hash__ = None  # type: ignore[assignment]   # mutable while the run appends, as a list

    def __repr__(self) -> str:
        return repr(list(self._resolve()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self._resolve()),))


#: Bytes of uplink arrays a run may hold in not yet measured rounds (32 MiB).
MAX_PENDING_BYTES = 2 ** 25



def check_run_arguments(algorithm: Algorithm, problem: Federation, rounds: Any, x0: ArrayLike | None) -> np.ndarray:
    """Validate the arguments every runner shares; return x0 as a float64 copy.

    Raises InvalidHyperparameterError (algorithm, rounds) or InvalidProblemError
    (problem, x0) naming the argument, the value and what is expected.
    """
    if not isinstance(algorithm, Algorithm):
        raise InvalidHyperparameterError(
            f"algorithm must be an fltheory Algorithm, got {type(algorithm).__name__}")
    if not isinstance(problem, Federation):
        raise InvalidProblemError(f"problem must be a Federation, got {type(problem).__name__}")
    integer("rounds", rounds, minimum=0)          # at most MAX_STEPS: larger never finishes
    if x0 is None:
        return np.zeros(problem.dim)
    x = finite_array("x0", x0).copy()
    if x.shape != (problem.dim,) or not np.isfinite(x).all():
        raise InvalidProblemError(f"x0 must be a finite vector of shape ({problem.dim},), got {x.shape}")
    return x


def check_run_options(participation: Any, seed: Any, callback: Any, rng: Any) -> None:
    """Validate the keyword options of :func:`run`: a Participation (or None), a
    non-negative integer seed or SeedSequence, a callable callback (or None) and a
    numpy Generator (or None).  Raises InvalidHyperparameterError naming the
    argument, the value and what is expected."""
    if participation is not None and not isinstance(participation, Participation):
        raise InvalidHyperparameterError(
            f"participation must be an fltheory.participation.Participation or None (full "
            f"participation), got {participation!r}")
    seed_value("seed", seed)
    if callback is not None and not callable(callback):
        raise InvalidHyperparameterError(
            f"callback must be callable(t, state, info) or None, got {callback!r}")
    if rng is not None:
        generator("rng", rng)


def known_optimum(problem: Federation) -> tuple[np.ndarray | None, float | None]:
    """(x*, F*) when the federation can compute them, else (None, None)."""
    if not isinstance(problem, Federation):
        raise InvalidProblemError(f"problem must be a Federation, got {type(problem).__name__}")
    try:
        x_star = problem.optimum()
    except (FLTheoryError, NotImplementedError):
        return None, None
    return x_star, problem.loss(x_star)


@functools.cache
def _environment() -> tuple[dict[str, str], str, bool | None]:
    """Package versions and git state, read once per process (a git call costs ~10 ms)."""
    commit, dirty = git_commit()
    return package_versions(), commit, dirty


def run_record(algorithm: Algorithm, problem: Federation, *, rounds: int, completed_rounds: int,
               seed: Any, participation: Participation | None, seconds: float,
               **extra: Any) -> RunRecord:
    """The provenance of one run as a :class:`~fltheory.results.RunRecord`.

    ``config`` holds algorithm name, hyperparameters, problem, rounds, completed
    rounds, participation ("full" when None), seconds and the ``extra`` entries
    (e.g. the affine runner's method and recovery time).  ``seed`` is the
    integer seed, or None (a generator was passed; a SeedSequence is kept as
    ``config["seed_sequence"]``).  Versions and git state are read at the first
    run of the process.
    """
    instance("algorithm", algorithm, Algorithm, "an fltheory Algorithm (e.g. FedAvg(lr=0.1, local_steps=2))",
             error=InvalidHyperparameterError)
    rounds = integer("rounds", rounds, minimum=0, maximum=None)
    completed_rounds = integer("completed_rounds", completed_rounds, minimum=0, maximum=rounds)
    seconds = positive("seconds", seconds, allow_zero=True)
    return checked_run_record(algorithm, problem, rounds=rounds, completed_rounds=completed_rounds, seed=seed,
                              participation=participation, seconds=seconds, **extra)


def checked_run_record(algorithm: Algorithm, problem: Federation, *, rounds: int, completed_rounds: int,
                       seed: Any, participation: Participation | None, seconds: float,
                       **extra: Any) -> RunRecord:
    """:func:`run_record` for arguments the caller has already checked (an Algorithm, Python
    ints 0 <= completed_rounds <= rounds, a finite float seconds >= 0): ``run`` calls it once per
    run, where the checks would be a measurable share of a short run."""
    config: dict[str, Any] = {
        "algorithm": algorithm.name,
        "hyperparameters": algorithm.hyperparameters(),
        "problem": repr(problem),
        "rounds": int(rounds),
        "completed_rounds": int(completed_rounds),
        "participation": repr(participation) if participation is not None else "full",
        "seconds": float(seconds),
    }
    int_seed: int | None = None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        int_seed = int(seed)
    elif seed is not None:
        config["seed_sequence"] = repr(seed)
    config.update(extra)
    versions, commit, dirty = _environment()
    return RunRecord(config=config, seed=int_seed, versions=dict(versions),
                     python=platform.python_version(), git_commit=commit, git_dirty=dirty,
                     timestamp=_timestamp())


#: (second, its ISO 8601 text), replaced as one tuple so that threads never see a mixed pair
_STAMP: tuple[int, str] = (-1, "")


def _timestamp() -> str:
    """The current UTC time to the second, ISO 8601 (as ``datetime.now(timezone.utc).isoformat(
    timespec="seconds")``), formatted once per second: runs of a few rounds start many per second."""
    global _STAMP
    second = time.time_ns() // 1_000_000_000           # the clock's floor, as datetime.now truncates
    cached = _STAMP
    if cached[0] == second:
        return cached[1]
    text = _dt.datetime.fromtimestamp(second, _dt.timezone.utc).isoformat(timespec="seconds")
    _STAMP = (second, text)
    return text
