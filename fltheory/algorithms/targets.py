"""Temporal-ensembling constraint targets (BetterObjects, Alg. 2; docs/theory/index.md#algorithms).

BetterObjects (Zhu and Ye) replaces the centre of a local penalty (FedProx's
proximal term, FedCL/FedCurv's Fisher term) by an exponential average of the
past global models G_1, G_2, ... with the bias correction of Adam:

    T_hat <- (1 - beta) G_t + beta T_hat,    T = T_hat / (1 - beta^t),

with T_hat = 0 before round 1 (Alg. 2, lines 2-5).  Indexing used here: the
loop of Alg. 2 runs after round t has produced G_t, and T is the centre of
round t + 1.  Round 1 has no target yet (Alg. 2 starts at t = 1 with G_1, so
the initial model G_0 is never ensembled); it uses the base algorithm's
centre, the model it received.  With beta = 0, T = G_t, the model every client
receives in round t + 1: the base algorithm, bit for bit.

``of`` chooses what is ensembled:

* ``"global"`` (Alg. 2 as printed): the global models.  FedProx-TE and
  FedCL-TE; for FedCurv (client Fisher) every centre w_j becomes T.
* ``"local"`` (FedCurv only): the same recursion run per client on the
  previous local models w_j that FedCurv uses as centres, each client with its
  own counter (number of its models ensembled).  This is the reading under
  which beta = 0 reproduces FedCurv exactly; BetterObjects only evaluates FedCL-TE
  ("FedCL and FedCurv are essentially the same"), so both are offered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validate import choice, real_array
from ..errors import InvalidHyperparameterError

__all__ = ["TemporalEnsemble", "EnsembleState", "require_ensemble"]


@dataclass(frozen=True)
class EnsembleState:
    """hat: (..., d) running average T_hat; count: (...) number of models ensembled."""

    hat: np.ndarray
    count: np.ndarray


def require_ensemble(state: EnsembleState | None) -> EnsembleState:
    """The ensemble state held by an algorithm state whose algorithm has a target.

    ``init`` of an algorithm with a ``TemporalEnsemble`` always stores one; a
    state without it was built for the algorithm without a target."""
    if state is None:
        raise InvalidHyperparameterError(
            "state has no temporal-ensembling state (target=None) but the algorithm has a target; "
            "start from the algorithm's own init(...)")
    return state


def _check_state(state: Any) -> None:
    if not isinstance(state, EnsembleState):
        raise InvalidHyperparameterError(
            f"state must be an EnsembleState (from TemporalEnsemble.init), got {state!r:.80} ({type(state).__name__})")


def _check_models(name: str, value: Any, shape: tuple[int, ...] | None) -> np.ndarray:
    """A finite real (d,) or (N, d) array of models (shape checked when given).  Called
    once per round (one pass over the models, nothing per local step)."""
    arr = real_array(name, value, InvalidHyperparameterError)
    if arr.ndim not in (1, 2) or (shape is not None and arr.shape != shape):
        expected = "(d,) or (N, d)" if shape is None else str(shape)
        raise InvalidHyperparameterError(f"{name} must have shape {expected}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidHyperparameterError(f"{name} must be finite, got {value!r:.80}")
    return arr


def per_row_indices(rows: Any, n: int) -> np.ndarray:
    """``rows`` as a 1-D integer index array into n rows."""
    idx = real_array("rows", rows, InvalidHyperparameterError)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or (idx.size and (idx.min() < 0 or idx.max() >= n)):
        raise InvalidHyperparameterError(f"rows must be a 1-D array of integer indices in [0, {n}), got {rows!r:.80}")
    return idx


@dataclass(frozen=True, kw_only=True)
class TemporalEnsemble:
    """Temporal-ensembling target of BetterObjects Alg. 2.

    Parameters
    ----------
    beta : float in [0, 1)
        Momentum of the ensemble (BetterObjects Table 2 uses 0.2-0.6).
    of : {"global", "local"}
        Ensemble the global models (Alg. 2 as printed) or, for FedCurv only,
        each client's previous local models (see the module docstring).
    """

    OPTIONS: ClassVar[tuple[str, ...]] = ("global", "local")
    beta: float
    of: str = "global"

    def __post_init__(self) -> None:
        try:
            b = float(self.beta)
        except (TypeError, ValueError):
            raise InvalidHyperparameterError(
                f"TemporalEnsemble beta must be a real number in [0, 1), got {self.beta!r}") from None
        if not (np.isfinite(b) and 0.0 <= b < 1.0):
            raise InvalidHyperparameterError(f"TemporalEnsemble beta must lie in [0, 1), got {b!r}")
        choice("TemporalEnsemble of", self.of, self.OPTIONS)

    def describe(self) -> dict[str, object]:
        """Plain-data form for provenance records."""
        return {"temporal_ensemble": {"beta": float(self.beta), "of": self.of}}

    def init(self, shape: tuple[int, ...]) -> EnsembleState:
        """T_hat = 0 and no model ensembled; ``shape`` is (d,) or (N, d)."""
        if not isinstance(shape, tuple) or not 1 <= len(shape) <= 2 or any(
                isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1 for n in shape):
            raise InvalidHyperparameterError(
                f"shape must be a tuple (d,) or (N, d) of positive integers, got {shape!r:.80}")
        return EnsembleState(hat=np.zeros(shape), count=np.zeros(shape[:-1], dtype=np.int64))

    def update(self, state: EnsembleState, G: np.ndarray,
               rows: np.ndarray | None = None) -> EnsembleState:
        """T_hat <- (1 - beta) G + beta T_hat and count += 1 (on ``rows`` only when given)."""
        _check_state(state)
        b = float(self.beta)
        G = _check_models("G", G, state.hat.shape if rows is None else None)
        if rows is None:
            return EnsembleState(hat=(1.0 - b) * G + b * state.hat, count=state.count + 1)
        if state.hat.ndim != 2:
            raise InvalidHyperparameterError("rows can only be given for a per-client ensemble of shape (N, d)")
        rows = per_row_indices(rows, state.hat.shape[0])
        if G.shape != (rows.shape[0], state.hat.shape[1]):
            raise InvalidHyperparameterError(
                f"G must have shape ({rows.shape[0]}, {state.hat.shape[1]}) (one row per listed row), got {G.shape}")
        hat = state.hat.copy()
        count = state.count.copy()
        hat[rows] = (1.0 - b) * G + b * state.hat[rows]
        count[rows] += 1
        return EnsembleState(hat=hat, count=count)

    def centre(self, state: EnsembleState, fallback: np.ndarray) -> np.ndarray:
        """T = T_hat / (1 - beta^count), and ``fallback`` (the base centre) where
        nothing has been ensembled yet (count 0: round 1, or a client's first round)."""
        _check_state(state)
        fallback = _check_models("fallback", fallback, state.hat.shape)
        b = float(self.beta)
        count = np.asarray(state.count)
        if count.ndim == 0:
            if count == 0:
                return np.array(fallback, dtype=np.float64, copy=True)
            return state.hat / (1.0 - b ** int(count))
        done = count > 0
        denom = np.where(done, 1.0 - b ** count.astype(np.float64), 1.0)
        return np.where(done[:, None], state.hat / denom[:, None], fallback)
