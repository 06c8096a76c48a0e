"""One result type for every fixed-point routine of ``fltheory.theory``.

Affine round maps (``theory.affine.fixed_point``, dense or matrix-free), the
closed-form FedOpt fixed point on quadratic clients
(``theory.closed_forms.fedopt_quadratic_fixed_point``) and root-solved
non-linear operators (``theory.operators.operator_fixed_point``) all return a
:class:`FixedPoint`.  The first seven fields mean the same for every routine;
the remaining ones are filled by the routines that compute them and are None
otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..display import SummaryDisplay

__all__ = ["FixedPoint"]


@dataclass(frozen=True, eq=False, repr=False)
class FixedPoint(SummaryDisplay):
    """A fixed point x~ = T(x~) of a round map, with its local linear behaviour.

    Common fields (every routine)
    -----------------------------
    x : ndarray (d,)
        The server model at the fixed point.
    residual : float
        ||T(x~) - x~||_inf of the map the routine solved (for affine maps on the
        full state: ||M S~ + c - S~||_inf).
    spectral_rate : float
        Spectral radius of the linear part (affine maps, on the subspace the orbit
        moves in) or of the Jacobian at x~ (non-linear maps): the exact asymptotic
        linear rate of the fixed-point iteration.
    contraction_factor : float
        Euclidean operator norm of the same linear part / Jacobian: the one-step
        contraction factor (the map contracts in the Euclidean norm iff < 1).  None
        only for matrix-free affine maps (the norm needs products with M^T).
    success : bool
        True when ``x`` is a fixed point to the routine's accuracy (every check it
        runs passed).  Routines raise rather than return garbage; ``False`` appears
        only where a routine is asked to report instead of raise (e.g. a
        disagreeing cross-check with ``strict_cross_check=False``).
    message : str
        How the point was obtained or why ``success`` is False.
    method : str
        ``"dense affine"``, ``"matrix-free affine"``, ``"closed form"``, or the
        root solver's name.

    Routine-specific fields (None where not computed)
    -------------------------------------------------
    condition : float
        Condition number of I - (linear part) on the solved subspace (affine maps
        and closed forms): the relative accuracy of x~ is about condition * 1e-16.
    S, state, initial, subspace
        Affine state maps: the fixed state vector S~, its algorithm state, the
        initial state whose conserved quantities S~ shares, and the invariant
        subspace (``theory.affine.InvariantSubspace``; matrix-free maps: the
        ``theory.matrix_free`` projector).
    optimum, bias, operator, offset, contractive, client_spectral_radii
        Closed forms: x* of F, ||x~ - x*||, the linear part A and offset b of
        x -> A x + b, ``spectral_rate < 1``, rho(I - eta_i P_i H_i) per client.
    jacobian, evaluations, cross_check, cross_check_gap, cross_check_agrees,
    cross_check_message
        Non-linear operators: the Jacobian at x~, the map evaluations, and the
        independent Anderson cross-check.
    spectral_rate_error
        Estimated bound on |spectral_rate - exact value| when the rate comes from an
        iterative eigenvalue method (matrix-free affine maps, Newton-Krylov operator
        fixed points); None where it is computed by a dense decomposition.
    """

    x: np.ndarray
    residual: float
    spectral_rate: float
    contraction_factor: float | None
    success: bool
    message: str
    method: str
    condition: float | None = None
    S: np.ndarray | None = None
    state: Any = None
    initial: np.ndarray | None = None
    subspace: Any = None
    optimum: np.ndarray | None = None
    bias: float | None = None
    operator: np.ndarray | None = None
    offset: np.ndarray | None = None
    contractive: bool | None = None
    client_spectral_radii: np.ndarray | None = None
    jacobian: np.ndarray | None = None
    evaluations: int | None = None
    cross_check: np.ndarray | None = None
    cross_check_gap: float | None = None
    cross_check_agrees: bool | None = None
    cross_check_message: str = ""
    spectral_rate_error: float | None = None

    def _summary_rows(self) -> tuple[str, list[tuple[str, str]]]:
        """Summary for ``repr`` and notebooks: the common fields, then only the
        routine-specific fields this routine filled (no None rows)."""
        title, rows = super()._summary_rows()
        common = {"x", "residual", "spectral_rate", "contraction_factor", "success", "message", "method"}
        kept = [(name, text) for name, text in rows
                if name in common or getattr(self, name, None) is not None]
        return f"FixedPoint ({self.method})", [(n, t) for n, t in kept if not (n == "cross_check_message"
                                                                              and not self.cross_check_message)]

    # names used by earlier versions (QuadraticFixedPoint, OperatorFixedPoint)
    @property
    def spectral_radius(self) -> float:
        """Same as ``spectral_rate``."""
        return self.spectral_rate

    @property
    def spectral_norm(self) -> float | None:
        """Same as ``contraction_factor``."""
        return self.contraction_factor

    @property
    def contraction_norm(self) -> float | None:
        """Same as ``contraction_factor``."""
        return self.contraction_factor
