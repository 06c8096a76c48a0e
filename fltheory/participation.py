"""Who takes part in a round and how many local steps each completes.

A participation model answers ``draw(rng, t, local_steps) -> Participants``:
``local_steps`` is the (N,) array of nominal local steps E_i; the result lists
the participating clients (sorted ascending) and the number of local steps
s_k in {0, ..., E_k} each completes (0 = inactive, < E_k = incomplete; EFL
section 4).  Models that draw nothing (``FullParticipation``) leave the
generator untouched, so deterministic runs consume no randomness.

**Empty rounds.**  ``Participants`` may be empty (m = 0): :class:`Bernoulli`
can select nobody, and a :class:`Schedule` can leave no client available.
Algorithms must accept m = 0 (the round leaves the server model unchanged
unless the algorithm's own rule says otherwise, e.g. a server momentum still
decays); clients with s_k = 0 are listed as participants with 0 steps
(EFL's inactive clients), not dropped.

**Models.**

* :class:`FullParticipation` -- every available client, E_k steps.
* :class:`UniformSampling` (S) -- S clients uniformly without replacement.
* :class:`Bernoulli` (p) -- client i independently with probability p_i.
* :class:`IncompleteSteps` (base, distribution, inactive_prob) -- the
  clients of ``base`` complete s_k ~ ``distribution`` steps, and each is
  inactive (s_k = 0) with probability ``inactive_prob``.  Ready-made
  distributions: :class:`FullSteps`, :class:`UniformSteps`,
  :class:`BinomialSteps`, :class:`FixedSteps`, :class:`TimeVarying`; any
  callable ``(rng, t, E) -> s`` or ``(rng, t, E, clients) -> s`` works.
* :class:`Schedule` (base, departures, arrivals) -- client a leaves at round
  t_a (absent for t >= t_a), client b arrives at round t_b (absent for
  t < t_b); ``base`` draws among the clients present (EFL sections 4.3
  and 4.4).

**Draw order** (so that a reference loop calling the same object reproduces a
run bit for bit): every model states exactly which generator calls it makes,
in order; wrappers first let their base draw, then make their own calls.
"""

from __future__ import annotations

import inspect
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validate import in_unit_interval, integer, real_array
from .errors import InvalidHyperparameterError

__all__ = ["Participants", "checked_draw", "full_participants", "Participation", "FullParticipation",
           "UniformSampling", "Bernoulli", "IncompleteSteps", "Schedule", "StepDistribution", "FullSteps",
           "UniformSteps", "BinomialSteps", "FixedSteps", "TimeVarying"]


@dataclass(frozen=True)
class Participants:
    """clients: (m,) sorted int64 indices; steps: (m,) int64 completed steps.

    m may be 0 (nobody takes part this round); steps may contain 0 (inactive).

    ``bounds``: (min, max) of ``steps`` and ``identity``: True when ``clients`` is
    0, 1, ..., N-1 for the federation's N, set only by :func:`full_participants` (so
    that rounds need not recompute them); not constructor arguments, so that
    ``Participants(...)`` and ``dataclasses.replace`` (which builds a new instance
    through the constructor) never carry bounds that do not match ``steps``:
    elsewhere they are None / False.
    """

    clients: np.ndarray
    steps: np.ndarray
    bounds: tuple[int, int] | None = field(default=None, init=False, compare=False, repr=False)
    identity: bool = field(default=False, init=False, compare=False, repr=False)

    @property
    def m(self) -> int:
        return int(self.clients.shape[0])


#: (N, steps) -> Participants of full participation with read-only arrays (see full_participants)
_FULL: dict[tuple[int, int], Participants] = {}
_FULL_LOCK = threading.Lock()
_FULL_MAX = 64
#: ... and at most this many clients over all entries (two int64 arrays each: 32 MB), besides the
#: newest entry, which is always kept (N = 1e6 keeps one entry, not 64 of 16 MB)
_FULL_MAX_CLIENTS = 1 << 21


def full_participants(n_clients: int, steps: int) -> Participants:
    """Every client 0..N-1 with the same ``steps`` (the draw of :class:`FullParticipation`
    for a constant vector of nominal steps), with ``bounds = (steps, steps)`` and
    ``identity = True``.  The arrays are read-only and shared between calls with the
    same (N, steps) (their contents are a function of the key, so they are never stale:
    they are views of immutable ``bytes``, so writing to them raises ValueError and their
    WRITEABLE flag cannot be set again)."""
    part = _FULL.get((n_clients, steps)) if type(n_clients) is int and type(steps) is int else None
    if part is None:
        key = (integer("n_clients", n_clients, minimum=0, maximum=None),
               integer("steps", steps, minimum=0, maximum=None))
        # views of immutable bytes: read-only, and the flag cannot be turned back on
        clients = np.frombuffer(np.arange(key[0], dtype=np.int64).tobytes(), dtype=np.int64)
        E = np.frombuffer(np.full(key[0], key[1], dtype=np.int64).tobytes(), dtype=np.int64)
        part = Participants(clients, E)
        object.__setattr__(part, "bounds", (key[1], key[1]) if key[0] else (0, 0))
        object.__setattr__(part, "identity", True)
        # writers take the lock, so the size bound never iterates a dict that another thread
        # changes (even a C-level copy of the keys can be interrupted by a garbage collection
        # that runs Python code); readers only call _FULL.get, which is atomic
        with _FULL_LOCK:
            if len(_FULL) >= _FULL_MAX or sum(k[0] for k in _FULL) + key[0] > _FULL_MAX_CLIENTS:
                _FULL.clear()
            _FULL[key] = part
    return part


def _nominal(local_steps: Any) -> np.ndarray:
    if type(local_steps) is np.ndarray and local_steps.dtype == np.int64 and local_steps.ndim == 1:
        # integers: finite and integral by type, so >= 0 is the only check left
        if not bool((local_steps >= 0).all()):
            raise InvalidHyperparameterError(
                f"local_steps must be a 1-D array of integers >= 0 (one per client), got {local_steps!r}")
        return local_steps.copy()
    E = np.asarray(local_steps)
    if E.ndim != 1 or not np.issubdtype(E.dtype, np.number) or not np.all(np.isfinite(E)) \
            or np.any(np.mod(E, 1) != 0) or np.any(E < 0):
        raise InvalidHyperparameterError(
            f"local_steps must be a 1-D array of integers >= 0 (one per client), got {local_steps!r}")
    return E.astype(np.int64)


def _library_model(model: Any) -> bool:
    """True when ``model`` and every ``base`` it wraps are this module's own classes (their
    draws meet the contract by construction, so :func:`checked_draw` need not check them)."""
    while type(model).__module__ == __name__:
        model = getattr(model, "base", None)
        if model is None:
            return True
    return False


def checked_draw(model: Any, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
    """``model.draw(rng, t, local_steps)``, held to the contract of this module when the model
    (or a model it wraps) is written outside fltheory: a :class:`Participants` whose ``clients``
    are distinct client indices in ascending order within 0..N-1 (N = len(local_steps)) and
    whose ``steps`` are integers s_k in 0..E_k, one per client (integer arrays of another
    width are returned as int64).  Anything else raises InvalidHyperparameterError naming the
    model, the round and the offending entry, instead of a round computed from it (a client
    listed twice would break SCAFFOLD's invariant c = mean c_i; a negative step count would
    be read as 0)."""
    draw = getattr(model, "draw", None)
    if not callable(draw):
        raise InvalidHyperparameterError(
            f"participation model must have a draw(rng, t, local_steps) method, got {type(model).__name__}")
    drawn = draw(rng, t, local_steps)
    if _library_model(model):
        return drawn
    where = f"participation model {type(model).__name__}, round {t}"
    if not isinstance(drawn, Participants):
        raise InvalidHyperparameterError(
            f"{where}: draw must return fltheory.participation.Participants, got {type(drawn).__name__}")
    c, s = drawn.clients, drawn.steps
    for name, a in (("clients", c), ("steps", s)):
        if not isinstance(a, np.ndarray) or a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            raise InvalidHyperparameterError(
                f"{where}: Participants.{name} must be a 1-D integer array, got {a!r}")
    if c.shape != s.shape:
        raise InvalidHyperparameterError(
            f"{where}: {c.shape[0]} clients but {s.shape[0]} step counts")
    E = _nominal(local_steps)
    n = E.shape[0]
    if c.shape[0]:
        if int(c[0]) < 0 or int(c[-1]) >= n or not bool((c[1:] > c[:-1]).all()):
            raise InvalidHyperparameterError(
                f"{where}: clients must be distinct indices in 0..{n - 1} in ascending order, got {c.tolist()}")
        bad = (s < 0) | (s > E[c])
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidHyperparameterError(
                f"{where}: client {int(c[i])} got {int(s[i])} steps, outside [0, E = {int(E[c[i]])}]")
    if c.dtype != np.int64 or s.dtype != np.int64:
        return Participants(c.astype(np.int64), s.astype(np.int64))
    return drawn


def _check_rng(rng: Any, where: str) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InvalidHyperparameterError(
            f"{where}: rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


class Participation(ABC):
    """Base class: subclasses implement :meth:`draw`.

    Models that can be restricted by a :class:`Schedule` also implement
    :meth:`draw_among` (all models of this module do).
    """

    @abstractmethod
    def draw(self, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
        """The participants of round t and their completed local steps."""

    def available(self, t: int, n_clients: int) -> np.ndarray:
        """Indices of the clients present in round t (all, unless a schedule says otherwise)."""
        return np.arange(n_clients)

    def draw_among(self, rng: np.random.Generator, t: int, local_steps: np.ndarray,
                   candidates: np.ndarray) -> Participants:
        """The participants of round t chosen among ``candidates`` (sorted indices)."""
        raise InvalidHyperparameterError(
            f"{type(self).__name__} does not implement draw_among, so it cannot be restricted "
            "to the clients present under a Schedule")


class _Restrictable(Participation):
    """``draw`` = ``draw_among`` over ``available(t, N)``."""

    def draw(self, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
        E = _nominal(local_steps)
        return self.draw_among(rng, t, E, self.available(t, E.shape[0]))


class FullParticipation(_Restrictable):
    """Every client, every round, all E_i local steps.  Draws nothing."""

    def draw(self, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
        E = _nominal(local_steps)
        return Participants(np.arange(E.shape[0], dtype=np.int64), E.copy())

    def draw_among(self, rng: np.random.Generator, t: int, local_steps: np.ndarray,
                   candidates: np.ndarray) -> Participants:
        E = _nominal(local_steps)
        c = np.asarray(candidates, dtype=np.int64)
        return Participants(c.copy(), E[c].copy())

    def inclusion_probabilities(self, n_clients: int) -> np.ndarray:
        """P(client i takes part) = 1."""
        return np.ones(n_clients)


class UniformSampling(_Restrictable):
    """S clients drawn uniformly without replacement among those available.

    Draw order: one call ``rng.choice(candidates, size=S, replace=False)``
    (``candidates`` the sorted available indices, all N without a schedule),
    then the result is sorted.  Every selected client completes E_k steps.
    Inclusion probability S / N per client (S / #available under a schedule).

    Parameters
    ----------
    S : int
        Clients per round, in [1, N] (N is checked at draw time); a round
        with fewer than S available clients raises.
    """

    def __init__(self, S: int) -> None:
        if isinstance(S, bool) or not isinstance(S, (int, np.integer)) or S < 1:
            raise InvalidHyperparameterError(f"UniformSampling: S must be an integer >= 1, got {S!r}")
        self.S = int(S)

    def draw_among(self, rng: np.random.Generator, t: int, local_steps: np.ndarray,
                   candidates: np.ndarray) -> Participants:
        rng = _check_rng(rng, "UniformSampling.draw")
        E = _nominal(local_steps)
        if self.S > E.shape[0]:
            raise InvalidHyperparameterError(
                f"UniformSampling: S must lie in [1, N = {E.shape[0]}], got S = {self.S}")
        c = np.asarray(candidates, dtype=np.int64)
        if self.S > c.shape[0]:
            raise InvalidHyperparameterError(
                f"UniformSampling: round {t} has {c.shape[0]} available clients, fewer than S = {self.S}")
        chosen = np.sort(rng.choice(c, size=self.S, replace=False)).astype(np.int64)
        return Participants(chosen, E[chosen].copy())

    def inclusion_probabilities(self, n_clients: int) -> np.ndarray:
        """P(client i takes part) = S / N (without a schedule)."""
        return np.full(n_clients, self.S / n_clients)


class Bernoulli(_Restrictable):
    """Each available client takes part independently with probability p_i.

    Draw order: one call ``u = rng.random(N)`` (for all N clients, present or
    not); client i takes part iff u_i < p_i and i is available.  The round
    may be empty (see the module doc).  Every selected client completes E_k
    steps.

    Parameters
    ----------
    p : float or (N,) array
        Probabilities in (0, 1].
    """

    def __init__(self, p: ArrayLike) -> None:
        arr = real_array("Bernoulli: p", p, InvalidHyperparameterError).astype(np.float64) \
            if np.ndim(p) else None
        if arr is None:
            self.p: float | np.ndarray = in_unit_interval("Bernoulli: p", p)
        else:
            if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) \
                    or np.any(arr <= 0) or np.any(arr > 1):
                raise InvalidHyperparameterError(
                    f"Bernoulli: p must be a scalar or a 1-D per-client array in (0, 1], got {p!r}")
            self.p = arr

    def _p(self, n: int) -> np.ndarray:
        if isinstance(self.p, np.ndarray):
            if self.p.shape[0] != n:
                raise InvalidHyperparameterError(
                    f"Bernoulli: p has {self.p.shape[0]} entries but there are {n} clients")
            return self.p
        return np.full(n, self.p)

    def draw_among(self, rng: np.random.Generator, t: int, local_steps: np.ndarray,
                   candidates: np.ndarray) -> Participants:
        rng = _check_rng(rng, "Bernoulli.draw")
        E = _nominal(local_steps)
        n = E.shape[0]
        p = self._p(n)
        u = rng.random(n)
        present = np.zeros(n, dtype=bool)
        present[np.asarray(candidates, dtype=np.int64)] = True
        chosen = np.flatnonzero((u < p) & present).astype(np.int64)
        return Participants(chosen, E[chosen].copy())

    def inclusion_probabilities(self, n_clients: int) -> np.ndarray:
        """P(client i takes part) = p_i (without a schedule)."""
        return self._p(n_clients).copy()


# ---- step distributions --------------------------------------------------------------

class StepDistribution(ABC):
    """Completed local steps of the selected clients: ``(rng, t, E, clients) -> s``
    with E, clients, s of shape (m,) and 0 <= s <= E."""

    @abstractmethod
    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray,
                 clients: np.ndarray) -> np.ndarray:
        ...


class FullSteps(StepDistribution):
    """s_k = E_k.  Draws nothing."""

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray,
                 clients: np.ndarray) -> np.ndarray:
        return np.asarray(E, dtype=np.int64).copy()


class UniformSteps(StepDistribution):
    """s_k uniform on {0, ..., E_k}.  Draw order: one call ``rng.integers(0, E + 1)``."""

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray,
                 clients: np.ndarray) -> np.ndarray:
        return rng.integers(0, np.asarray(E, dtype=np.int64) + 1).astype(np.int64)


class BinomialSteps(StepDistribution):
    """s_k ~ Binomial(E_k, prob) (each step completed independently with
    probability ``prob`` in [0, 1]).  Draw order: one call ``rng.binomial(E, prob)``."""

    def __init__(self, prob: float) -> None:
        self.prob = in_unit_interval("BinomialSteps: prob", prob, left_closed=True)

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray,
                 clients: np.ndarray) -> np.ndarray:
        return rng.binomial(np.asarray(E, dtype=np.int64), self.prob).astype(np.int64)


class FixedSteps(StepDistribution):
    """s_k = steps[k] for a fixed per-client (N,) array (checked against E_k at
    draw time).  Draws nothing."""

    def __init__(self, steps: Any) -> None:
        arr = np.asarray(steps)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)) \
                or np.any(np.mod(arr, 1) != 0) or np.any(arr < 0):
            raise InvalidHyperparameterError(
                f"FixedSteps: steps must be a 1-D per-client array of integers >= 0, got {steps!r}")
        self.steps = arr.astype(np.int64)

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray,
                 clients: np.ndarray) -> np.ndarray:
        c = np.asarray(clients, dtype=np.int64)
        if c.size and c.max() >= self.steps.shape[0]:
            raise InvalidHyperparameterError(
                f"FixedSteps: steps has {self.steps.shape[0]} entries, got client {int(c.max())}")
        return self.steps[c].copy()


def _accepts_clients(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` takes a fourth positional argument (``clients``)."""
    if isinstance(fn, StepDistribution):
        return True
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 4


def _call(fn: Callable[..., Any], rng: np.random.Generator, t: int, E: np.ndarray,
          clients: np.ndarray) -> Any:
    return fn(rng, t, E, clients) if _accepts_clients(fn) else fn(rng, t, E)


class TimeVarying(StepDistribution):
    """A different distribution each round: ``schedule(t)`` returns the
    distribution of round t (a :class:`StepDistribution` or a callable
    ``(rng, t, E[, clients])``), whose draws are then made."""

    def __init__(self, schedule: Callable[[int], Any]) -> None:
        if not callable(schedule):
            raise InvalidHyperparameterError(
                f"TimeVarying: schedule must be a callable of the round t, got {schedule!r}")
        self.schedule = schedule

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray,
                 clients: np.ndarray) -> np.ndarray:
        dist = self.schedule(t)
        if not callable(dist):
            raise InvalidHyperparameterError(
                f"TimeVarying: schedule({t}) must return a step distribution, got {dist!r}")
        return _call(dist, rng, t, E, clients)


class IncompleteSteps(_Restrictable):
    """The clients of ``base`` complete a random number of local steps.

    Draw order: (1) ``base`` makes its calls; (2) ``distribution`` makes its
    calls on the (m,) nominal steps E of the selected clients; (3) if
    ``inactive_prob`` is non-zero anywhere, one call ``rng.random(m)`` and
    client k is set inactive (s_k = 0) iff that number is < y_k.

    Parameters
    ----------
    base : Participation
        Who is selected (e.g. :class:`FullParticipation`, :class:`UniformSampling`).
    distribution : StepDistribution or callable, optional
        ``(rng, t, E) -> s`` or ``(rng, t, E, clients) -> s`` returning integers
        in [0, E_k] (checked; a violation raises InvalidHyperparameterError).
        Default :class:`FullSteps`.
    inactive_prob : float or (N,) array
        y_k in [0, 1): probability that a selected client does no step (EFL section 4.1).  Default 0.
    """

    def __init__(self, base: Participation, distribution: Any = None, *,
                 inactive_prob: Any = 0.0) -> None:
        if not isinstance(base, Participation):
            raise InvalidHyperparameterError(
                f"IncompleteSteps: base must be a Participation, got {type(base).__name__}")
        if distribution is not None and not callable(distribution):
            raise InvalidHyperparameterError(
                f"IncompleteSteps: distribution must be callable, got {distribution!r}")
        self.base = base
        self.distribution = FullSteps() if distribution is None else distribution
        y = np.asarray(inactive_prob, dtype=np.float64)
        if y.ndim > 1 or y.size == 0 or not np.all(np.isfinite(y)) or np.any(y < 0) or np.any(y >= 1):
            raise InvalidHyperparameterError(
                f"IncompleteSteps: inactive_prob must be a scalar or per-client array in [0, 1), "
                f"got {inactive_prob!r}")
        self.inactive_prob = y

    def available(self, t: int, n_clients: int) -> np.ndarray:
        return self.base.available(t, n_clients)

    def draw_among(self, rng: np.random.Generator, t: int, local_steps: np.ndarray,
                   candidates: np.ndarray) -> Participants:
        E = _nominal(local_steps)
        chosen = self.base.draw_among(rng, t, E, candidates)
        c = chosen.clients
        E_sel = E[c]
        raw = np.asarray(_call(self.distribution, rng, t, E_sel.copy(), c.copy()))
        if raw.shape != E_sel.shape or not np.issubdtype(raw.dtype, np.number) \
                or not np.all(np.isfinite(raw)) or np.any(np.mod(raw, 1) != 0):
            raise InvalidHyperparameterError(
                f"IncompleteSteps: round {t}: the step distribution must return {E_sel.shape[0]} integers, "
                f"got {raw!r}")
        s = raw.astype(np.int64)
        bad = (s < 0) | (s > E_sel)
        if np.any(bad):
            i = int(np.argmax(bad))
            raise InvalidHyperparameterError(
                f"IncompleteSteps: round {t}: client {int(c[i])} got {int(s[i])} steps, "
                f"outside [0, E = {int(E_sel[i])}]")
        if np.any(self.inactive_prob > 0):
            y = self.inactive_prob
            if y.ndim == 1:
                if y.shape[0] != E.shape[0]:
                    raise InvalidHyperparameterError(
                        f"IncompleteSteps: inactive_prob has {y.shape[0]} entries but there are "
                        f"{E.shape[0]} clients")
                y = y[c]
            s = np.where(_check_rng(rng, "IncompleteSteps.draw").random(c.shape[0]) < y, 0, s)
        return Participants(c, s.astype(np.int64))


class Schedule(_Restrictable):
    """Client departure and arrival (EFL sections 4.3 and 4.4).

    Client a in ``departures`` (mapping a -> t_a) is present only for
    t < t_a; client b in ``arrivals`` (b -> t_b) only for t >= t_b; a client
    in both is present for t_b <= t < t_a.  ``base`` draws among the present
    clients (its own draw order unchanged, applied to the restricted
    candidate set; this wrapper draws nothing).

    Parameters
    ----------
    base : Participation
        Must implement :meth:`Participation.draw_among` (all models here do).
    departures, arrivals : mapping int -> int, optional
        Client index -> round (>= 0).
    """

    def __init__(self, base: Participation, *, departures: Mapping[int, int] | None = None,
                 arrivals: Mapping[int, int] | None = None) -> None:
        if not isinstance(base, Participation):
            raise InvalidHyperparameterError(
                f"Schedule: base must be a Participation, got {type(base).__name__}")
        self.base = base
        self.departures = self._check("departures", departures)
        self.arrivals = self._check("arrivals", arrivals)
        for c in set(self.departures) & set(self.arrivals):
            if self.arrivals[c] >= self.departures[c]:
                raise InvalidHyperparameterError(
                    f"Schedule: client {c} arrives at round {self.arrivals[c]} but departs at round "
                    f"{self.departures[c]}; it would never be present")

    @staticmethod
    def _check(name: str, mapping: Mapping[int, int] | None) -> dict[int, int]:
        out: dict[int, int] = {}
        for k, v in dict(mapping or {}).items():
            ok = all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0
                     for x in (k, v))
            if not ok:
                raise InvalidHyperparameterError(
                    f"Schedule: {name} must map client indices >= 0 to rounds >= 0, got {k!r}: {v!r}")
            out[int(k)] = int(v)
        return out

    def available(self, t: int, n_clients: int) -> np.ndarray:
        listed = list(self.departures) + list(self.arrivals)
        if listed and max(listed) >= n_clients:
            raise InvalidHyperparameterError(
                f"Schedule: client {max(listed)} is scheduled but there are {n_clients} clients")
        present = np.zeros(n_clients, dtype=bool)
        present[np.asarray(self.base.available(t, n_clients), dtype=np.int64)] = True
        for a, ta in self.departures.items():
            if t >= ta:
                present[a] = False
        for b, tb in self.arrivals.items():
            if t < tb:
                present[b] = False
        return np.flatnonzero(present).astype(np.int64)

    def draw_among(self, rng: np.random.Generator, t: int, local_steps: np.ndarray,
                   candidates: np.ndarray) -> Participants:
        E = _nominal(local_steps)
        own = self.available(t, E.shape[0])
        return self.base.draw_among(rng, t, E, np.intersect1d(candidates, own).astype(np.int64))
