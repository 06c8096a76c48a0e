"""The shape of every algorithm: keyword-only hyperparameters + ``init`` + ``round``.

An algorithm is a frozen, keyword-only dataclass of hyperparameters (validated
in ``__post_init__``) with two methods:

* ``init(problem, x0, rng) -> State``: a frozen dataclass holding the server
  model ``x``, the round counter ``t`` and whatever the algorithm carries
  (control variates, h, residuals, targets, optimizer state);
* ``round(state, problem, participation, rng) -> (State, RoundInfo)``.

``RoundInfo`` holds diagnostics (who took part, completed steps,
communication) and never feeds back into the state.

``init``, ``round``, ``nominal_steps``, ``participants`` and
``linear_invariants`` of every subclass check their arguments first (a
Federation, a state of this algorithm for this problem's dimension, a
Participation or None, a Generator or None): typed errors, O(1) per round
(``algorithms._method_checks``).

Random numbers are drawn in a fixed order every round: first
``participation.draw``, then the local oracle calls step by step (all active
rows of step k in client order, then step k+1), then anything the algorithm
itself samples.  ``algorithms.reference`` follows the same order one client at a time.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from .._validate import MAX_STEPS, per_client
from ..errors import InvalidHyperparameterError
from ..compression import Communication
from ..participation import FullParticipation, Participants, Participation, checked_draw, full_participants
from ..optim.base import Optimizer
from ..problems.base import Federation
from ._method_checks import checked_methods
from .invariants import LinearInvariant

__all__ = ["Algorithm", "DeferredCommunication", "RoundInfo", "aggregation_weights", "resolve_per_client",
           "AGGREGATIONS"]

AGGREGATIONS = ("weights", "samples", "uniform")


class RoundInfo:
    """Diagnostics of one round (never part of the algorithm state).

    clients : (m,) participating client indices.
    steps : (m,) completed local steps.
    communication : ``fltheory.compression.Communication`` of the round.
    extra : algorithm-specific diagnostics (e.g. EFL's client-side model copy).

    ``communication`` may be given as a :class:`DeferredCommunication`: it is
    then measured the first time it is read (counts and the entropy of the
    uplink values, which cost passes over the (m, d) messages), so rounds whose
    communication nobody reads do not pay for it.  The value is the same.
    """

    __slots__ = ("_communication", "clients", "extra", "steps")

    def __init__(self, clients: np.ndarray, steps: np.ndarray, communication: Any,
                 extra: Mapping[str, Any] | None = None) -> None:
        self.clients = clients
        self.steps = steps
        self._communication = communication
        self.extra: Mapping[str, Any] = {} if extra is None else extra

    def held_bytes(self) -> int:
        """Bytes held by a communication not yet measured (0 once measured or if given measured)."""
        comm = self._communication
        return comm.held_bytes() if isinstance(comm, DeferredCommunication) else 0

    @property
    def communication(self) -> Any:
        comm = self._communication
        if isinstance(comm, DeferredCommunication):
            comm = self._communication = comm.measure()
        return comm

    def __repr__(self) -> str:
        return (f"RoundInfo(clients={self.clients!r}, steps={self.steps!r}, "
                f"communication={self.communication!r}, extra={self.extra!r})")


class DeferredCommunication:
    """``Communication.measure(up, down, **options)`` computed when first read.

    ``up`` is an (m, d) array or a tuple of (m, d_j) arrays sent side by side
    (stacked with ``np.hstack`` only when measured).  The arrays are held, not
    copied: pass arrays that nothing modifies afterwards (the round's own
    temporaries, or the new state's arrays, which rounds never modify in place).
    """

    __slots__ = ("down", "options", "up")

    def __init__(self, up: np.ndarray | tuple[np.ndarray, ...], down: np.ndarray, **options: Any) -> None:
        self.up = up
        self.down = down
        self.options = options

    def held_bytes(self) -> int:
        """Bytes of the arrays this measurement holds until it is read."""
        if type(self.up) is np.ndarray and type(self.down) is np.ndarray:     # the usual case, per round
            return self.up.nbytes + self.down.nbytes
        ups = self.up if isinstance(self.up, tuple) else (self.up,)
        return sum(int(np.asarray(u).nbytes) for u in ups) + int(np.asarray(self.down).nbytes)

    def measure(self) -> Communication:
        up = np.hstack(self.up) if isinstance(self.up, tuple) else self.up
        return Communication.measure(up, self.down, **self.options)


def resolve_per_client(name: str, value: Any, n_clients: int, *, integer: bool = False,
                       minimum: float = 0.0, strict: bool = True) -> np.ndarray:
    """A scalar or per-client hyperparameter as an (N,) array, validated against N.

    A plain Python scalar that passes the checks of ``per_client`` is filled
    directly (the same array, without the array checks: rounds call this every
    round); anything else goes through ``per_client``."""
    if _plain_scalar(value, integer=integer, minimum=minimum, strict=strict):
        return np.full(n_clients, value, dtype=np.int64 if integer else np.float64)
    v = per_client(name, value, n_clients, integer=integer, minimum=minimum, strict=strict)
    dtype = np.int64 if integer else np.float64
    return np.broadcast_to(np.asarray(v, dtype=dtype), (n_clients,)).copy()


def _plain_scalar(value: Any, *, integer: bool, minimum: float, strict: bool) -> bool:
    """True for a Python int (or float when not ``integer``) that ``per_client`` accepts."""
    kind = type(value)
    if kind is int:
        ok = -(2 ** 62) < value < 2 ** 62
    elif kind is float and not integer:
        ok = math.isfinite(value)
    else:
        return False
    return ok and (value > minimum if strict else value >= minimum) and (not integer or value <= MAX_STEPS)


def aggregation_weights(problem: Federation, clients: np.ndarray, scheme: str) -> np.ndarray:
    """Server weights w_i of the participating clients, summing to 1.

    ``"weights"``: w_i = p_i / sum_{j in S} p_j (docs/theory/index.md#algorithms, FedAvg);
    ``"samples"``: w_i = n_i / sum_{j in S} n_j (BetterObjects Alg. 1; needs n_i);
    ``"uniform"``: w_i = 1 / |S| (SCAFFOLD, FedDyn).
    """
    if clients.size == 0:
        return np.zeros(0)
    if scheme == "weights":
        w = problem.weights[clients]
    elif scheme == "samples":
        if problem.n_samples is None:
            raise InvalidHyperparameterError(
                "aggregation='samples' needs a federation with n_samples; this one has none")
        w = problem.n_samples[clients].astype(np.float64)
    elif scheme == "uniform":
        w = np.ones(clients.shape[0])
    else:
        raise InvalidHyperparameterError(f"aggregation must be one of {AGGREGATIONS}, got {scheme!r}")
    return w / w.sum()


class Algorithm(ABC):
    """Base class of every federated algorithm (see module docstring)."""

    name: ClassVar[str] = "algorithm"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every subclass's own init / round / nominal_steps / participants /
        linear_invariants check their arguments (``_method_checks``)."""
        super().__init_subclass__(**kwargs)
        checked_methods(cls)

    @abstractmethod
    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> Any:
        """The initial state at server model ``x0``."""

    @abstractmethod
    def round(self, state: Any, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[Any, RoundInfo]:
        """One communication round."""

    def hyperparameters(self) -> dict[str, Any]:
        """The constructor arguments, for provenance records."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
        return out

    def averaging_version(self) -> Algorithm:
        """This algorithm with its server step replaced by plain averaging (rate 1).

        One round of the result from server model x is the operator
        T(x) = x + sum_i w_i Delta_i(x) of Wang et al., *Local Adaptivity in
        Federated Learning* (LocalAdaptivity, eq. 6) whose fixed points are those of
        the algorithm with any server step (``fltheory.theory.fedopt_operator``).
        Every algorithm answers for itself (its server rate or optimizer may
        have any name); raises InvalidHyperparameterError when a round of the
        algorithm is not a function of x alone.  Default: InvalidHyperparameterError
        (an algorithm that does not declare its averaging version is never
        silently run with its own server step).
        """
        raise InvalidHyperparameterError(
            f"{self.name} does not declare its averaging version (Algorithm.averaging_version): "
            "no operator T(x) can be built from it")

    def nominal_steps(self, problem: Federation) -> np.ndarray:
        """(N,) nominal local steps E_i (from ``local_steps``; 1 for one-shot exact solvers)."""
        steps = getattr(self, "local_steps", 1)
        return resolve_per_client("local_steps", steps, problem.n_clients, integer=True,
                                  minimum=1, strict=False)

    # --- linear invariants (exact theory; see algorithms/invariants.py) ---------------------
    def linear_invariants(self, problem: Federation) -> tuple[LinearInvariant, ...]:
        """Linear functionals of the state that every full-participation, exact-gradient
        round conserves (eigenvalue-1 left eigenvectors of the affine round map that
        exist for a structural reason).  Default: none.  An algorithm that has any
        must override this and prove each one in its docstring; the exact theory
        (``fltheory.theory.affine``) excludes exactly these directions and refuses to
        guess others."""
        return ()

    def linear_part_is_symmetric(self, problem: Federation) -> bool:
        """True when, on quadratic clients under full participation with exact gradients,
        the linear part M of the affine round map S -> M S + c is a symmetric matrix in
        the flat state layout (``fltheory.theory.round_maps``).  The matrix-free exact
        theory then uses symmetric Krylov methods (Lanczos eigenvalues with quadratic
        error bounds, conjugate-gradient fixed points) and checks the claim
        (u^T M v = v^T M u for random u, v).  Default False; an algorithm that returns
        True proves it in its docstring."""
        return False

    def participants(self, problem: Federation, participation: Participation | None,
                     rng: np.random.Generator, t: int) -> Participants:
        """Draw the round's participants (full participation when ``None``).

        Full participation of an algorithm whose hyperparameters are all immutable
        (no array) and whose nominal steps are one number E for every client returns
        ``fltheory.participation.full_participants(N, E)`` (read-only arrays shared
        between rounds, the same values as the draw), found through
        :meth:`_plan`; anything else goes through ``FullParticipation.draw`` /
        ``participation.draw`` and their typed errors."""
        if participation is None:
            plan = self._plan(problem)
            if plan is not None:
                return plan.participants
            return FullParticipation().draw(rng, t, self.nominal_steps(problem))
        return checked_draw(participation, rng, t, self.nominal_steps(problem))

    #: True on classes whose ``nominal_steps(problem)`` depends only on the hyperparameters
    #: and the federation's N (then :meth:`_plan` may cache it); a subclass that overrides
    #: ``nominal_steps`` must set it again in its own body to keep the cache.
    _constant_nominal_steps: ClassVar[bool] = True

    def _plan(self, problem: Federation) -> FullPlan | None:
        """What full participation of this algorithm on ``problem`` keeps from round to round
        (:class:`FullPlan`), or None when it cannot be cached: a hyperparameter that is an
        array (mutable), nominal steps that differ between clients, or a ``nominal_steps``
        defined by a class that does not declare ``_constant_nominal_steps``.

        The plan is held by the algorithm (a frozen dataclass: its hyperparameters never
        change) with a weak reference to the federation it was made for (federations are
        immutable); another federation replaces it, so it is never stale."""
        plan = self.__dict__.get("_full_plan")
        if plan is False:                                  # known not cacheable for this class + values
            return None
        if plan is not None and plan.problem() is problem:
            return plan
        if not _constant_steps_class(type(self)) or _defining_class(type(self), "participants") is not Algorithm \
                or not all(_immutable(getattr(self, f.name)) for f in dataclasses.fields(self)):  # type: ignore[arg-type]
            object.__setattr__(self, "_full_plan", False)
            return None
        steps = self.nominal_steps(problem)
        if not (type(steps) is np.ndarray and steps.shape == (problem.n_clients,) and steps.dtype == np.int64
                and steps.size and bool((steps == steps[0]).all()) and steps[0] >= 0):
            return None
        plan = FullPlan(self, problem, int(steps[0]))
        object.__setattr__(self, "_full_plan", plan)
        return plan

    def __getstate__(self) -> dict[str, Any]:
        """The instance dictionary without the cached :class:`FullPlan` (it holds a weak reference)."""
        state = dict(self.__dict__)
        state.pop("_full_plan", None)
        return state


#: Hyperparameter values a plan may depend on without going stale: immutable scalars and strings
#: (an optimizer is a frozen record of functions and numbers).  A list, an array or any other
#: object could be changed in place after the plan was made.
_IMMUTABLE = (bool, int, float, complex, str, bytes, type(None), np.number, np.bool_)


def _immutable(value: Any) -> bool:
    if isinstance(value, (_IMMUTABLE, Optimizer)):
        return True
    return isinstance(value, tuple) and all(_immutable(v) for v in value)


def _defining_class(cls: type, name: str) -> type | None:
    """The class of ``cls``'s MRO whose own body defines ``name``."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return None


def _constant_steps_class(cls: type) -> bool:
    """The class defining ``cls.nominal_steps`` declares ``_constant_nominal_steps`` in its own body."""
    for klass in cls.__mro__:
        if "nominal_steps" in vars(klass):
            return bool(vars(klass).get("_constant_nominal_steps", False))
    return False


class FullPlan:
    """Per (algorithm, federation): full participation and the per-client arrays every
    round of it would otherwise rebuild (same values, read-only):

    * ``participants``: ``full_participants(N, E)``;
    * ``lr``: the (N,) client rates ``resolve_per_client("lr", algorithm.lr, N)`` as a
      read-only view of one number (row stride 0; rounds read it as one scalar rate)
      when the algorithm has a scalar ``lr``, else None;
    * :meth:`weights`: ``aggregation_weights(problem, 0..N-1, scheme)``, computed once per scheme.
    """

    __slots__ = ("_n", "_rows", "_weights", "lr", "participants", "problem")

    def __init__(self, algorithm: Algorithm, problem: Federation, steps: int) -> None:
        n = problem.n_clients
        self.problem = weakref.ref(problem)
        self.participants = full_participants(n, steps)
        self._n = n
        self._rows: dict[str, np.ndarray | None] = {}
        self.lr: np.ndarray | None = self.scalar_rows("lr", getattr(algorithm, "lr", None))
        self._weights: dict[str, np.ndarray] = {}

    def scalar_rows(self, name: str, value: Any) -> np.ndarray | None:
        """``resolve_per_client(name, value, N)`` as a read-only (N,) view of one number (row
        stride 0) when ``value`` is a plain Python int or float, else None; computed once per
        name (the algorithm's hyperparameters never change)."""
        if name not in self._rows:
            rows = None
            if type(value) in (int, float):
                one = resolve_per_client(name, value, 1)
                rows = np.ndarray((self._n,), dtype=np.float64, buffer=one, strides=(0,))
                rows.flags.writeable = False
            self._rows[name] = rows
        return self._rows[name]

    def weights(self, problem: Federation, scheme: str) -> np.ndarray:
        """``aggregation_weights(problem, 0..N-1, scheme)``, the same bits.  ``"uniform"`` depends
        on N only and is computed once (read-only); ``"weights"`` and ``"samples"`` are recomputed
        every call from the federation's arrays (a caller may have changed them in place since the
        last round: a cached copy would silently be stale), ``"weights"`` as p / sum(p) without the
        gather of p[clients] (the same numbers: the gather of all clients in order is a copy)."""
        if scheme == "uniform":
            w = self._weights.get(scheme)
            if w is None:
                w = aggregation_weights(problem, self.participants.clients, scheme)
                w.flags.writeable = False
                self._weights[scheme] = w
            return w
        if scheme == "weights":
            p = problem.weights
            return p / np.add.reduce(p)                    # p.sum() itself, without its Python wrapper
        return aggregation_weights(problem, self.participants.clients, scheme)


checked_methods(Algorithm)
