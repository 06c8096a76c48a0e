"""The automatic route's fallback from a matrix-free affine map to the dense one.

``theory.affine.affine_round_map`` chooses the matrix-free route by the state's size
alone (``matrix_free=None``).  On an ill-conditioned map (a FedAvg whose rate is
1 - 1e-12, say) the matrix-free routines can refuse where the dense route answers: the
Krylov readings of the fixed point's accuracy are estimates that a dense decomposition
replaces by the exact condition number (``theory._fixed_point_accuracy``), a rate whose
Krylov error estimate does not converge, or a leading eigenvalue the Krylov space cannot
tell from 1 at its resolution.  Such a refusal is not an answer about the map, only about
the route; so when the choice was automatic and the state has at most ``max_dim``
numbers, the routine is re-run on the dense map (recovered once, with the arguments the
matrix-free map was built with) and says so: a ``RuntimeWarning`` naming the routine and
the refusal (shown by default: a rate is a bare float and carries no provenance of its
own), ``amap.cache["fallback"][routine]`` (one note per routine: "fixed point", "spectral
rate", "orbit rate", "contraction factor"), and for the fixed point its ``message``.  The
dense recovery draws its probe rounds from the generator given to ``affine_round_map``
when it first runs, so after a fallback the caller's later draws from that generator
differ from those after a matrix-free answer.  When the state is
larger, the refusal is raised again with the sizes appended, naming why the dense route
cannot run.  A map built with ``matrix_free=True`` never falls back.

Errors that do not depend on the route (a conserved quantity that drifts, a map that is
not affine, an argument of the wrong kind) are raised before the matrix-free solve runs
and are not caught here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import InvalidHyperparameterError, InvalidProblemError, UnclassifiedDirectionError

__all__ = ["REFUSALS", "DenseFallback", "with_dense_fallback"]


#: The matrix-free refusals a dense solve can answer (accuracy readings beyond
#: max_condition, a Krylov rate or solve that did not converge, an unresolved eigenvalue 1).
REFUSALS = (InvalidHyperparameterError, InvalidProblemError, UnclassifiedDirectionError)

T = TypeVar("T")


@dataclass(eq=False)
class DenseFallback:
    """How to recover the dense map of an automatically chosen matrix-free one.

    ``recover``: a call of ``affine_round_map(..., matrix_free=False)`` with the matrix-free
    map's own arguments; ``dim``: the state's size; ``max_dim``: the dense route's limit
    (``affine_round_map``'s ``max_dim``).  The dense map is recovered at most once."""

    recover: Callable[[], Any] = field(repr=False)
    dim: int
    max_dim: int
    _dense: Any = field(default=None, repr=False)

    @property
    def available(self) -> bool:
        """The state is small enough for the dense route."""
        return self.dim <= self.max_dim

    def dense_map(self) -> Any:
        """The dense AffineRoundMap (recovered on first use)."""
        if self._dense is None:
            self._dense = self.recover()
        return self._dense


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def with_dense_fallback(amap: Any, what: str, matrix_free: Callable[[], T],
                        dense: Callable[[Any, str], T]) -> T:
    """``matrix_free()``; on a refusal (``REFUSALS``) of a map whose route was chosen
    automatically, ``dense(dense_map, note)`` with ``note`` the provenance line (module
    docstring).  Without a fallback (``matrix_free=True``) the refusal propagates unchanged;
    with one whose state exceeds ``max_dim`` it is raised again, of the same type, with
    the sizes appended."""
    fallback: DenseFallback | None = getattr(amap, "dense_fallback", None)
    try:
        return matrix_free()
    except REFUSALS as exc:
        if fallback is None:
            raise
        if not fallback.available:
            raise type(exc)(
                f"{_one_line(exc)}; the automatic route cannot fall back to the dense one: the state has "
                f"{fallback.dim} numbers, more than max_dim={fallback.max_dim} (dense recovery would need "
                f"{fallback.dim} x {fallback.dim} floats and a decomposition of that size)") from exc
        note = (f"automatic route: the matrix-free {what} was refused ({type(exc).__name__}: "
                f"{_one_line(exc)}); solved on the dense route instead (state of {fallback.dim} numbers "
                f"<= max_dim={fallback.max_dim})")
        answer = dense(fallback.dense_map(), note)          # a dense refusal propagates: no note, no warning
        warnings.warn(f"{amap.algorithm}: {note}", RuntimeWarning, stacklevel=3)
        amap.cache.setdefault("fallback", {})[what] = note
        return answer
