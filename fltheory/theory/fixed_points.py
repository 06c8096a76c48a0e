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
        ||T(x~) - x~||_inf of the map the routine solved; for affine round maps on the
        full state, of an actual round from the fixed point, ||Phi(S~) - S~||_inf (the
        recovered M S~ + c - S~ can be smaller than what a round gives).
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
        Condition number cond_2(I - (linear part)) on the solved subspace (affine maps
        and closed forms): the relative accuracy of x~ is about condition * 1e-16.
        Computed by a dense decomposition on the dense route and for closed forms
        (``condition_kind`` ""); estimated on the matrix-free routes, where
        ``condition_kind`` says what kind of quantity it is.
    condition_kind : str
        "" (computed), "lower bound" (a guaranteed lower bound in exact arithmetic, from the
        singular values of the Krylov space's projected matrix), "upper bound" (a bound that
        holds when the Krylov space has found the extreme eigenvalues, the assumption of the
        spectral rate's own error bound) or "estimate" (neither).
    error_estimate : float
        Matrix-free routes: ESTIMATED relative error ||S~ - S*||_2 / ||S~||_2 of the fixed state,
        kappa * max(||P r||_2, delta, eps ||S~||_2) / ||S~||_2 with r = Phi(S~) - S~ the residual of
        an actual round, delta the measured difference of two rounds' residuals at S~ and S~ (1 + eps)
        (their rounding) and kappa an estimate of ||(I - M_V)^{-1}||_2 (``error_estimate_kind``
        says how it was obtained).  Not a guarantee: the rounding of a round is read from one
        such difference and the norm of the inverse is estimated (see the routine).
    error_estimate_kind : str
        How ``error_estimate`` was obtained ("" when it is None).
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
        fixed points); None where it is computed by a dense decomposition.  Never 0.0 on
        the Krylov routes: it is at least the rounding floor of the projected eigenvalue
        problem (about 4 sqrt(k) eps times the rate for a Krylov space of k vectors), below
        which no error can be claimed.
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
    condition_kind: str = ""
    error_estimate: float | None = None
    error_estimate_kind: str = ""

    def _summary_rows(self) -> tuple[str, list[tuple[str, str]]]:
        """Summary for ``repr`` and notebooks: the common fields, then only the
        routine-specific fields this routine filled (no None rows)."""
        title, rows = super()._summary_rows()
        common = {"x", "residual", "spectral_rate", "contraction_factor", "success", "message", "method"}
        optional_text = {"cross_check_message", "condition_kind", "error_estimate_kind"}
        kept = [(name, text) for name, text in rows
                if name in common or getattr(self, name, None) is not None]
        return f"FixedPoint ({self.method})", [(n, t) for n, t in kept
                                               if not (n in optional_text and not getattr(self, n))]

    @property
    def relative_accuracy(self) -> float | None:
        """About how accurate x~ is, relative: ``error_estimate`` when the routine computed one,
        else condition * eps (the dense route's own reading of its condition number), else None.
        An estimate, not a bound."""
        if self.error_estimate is not None:
            return self.error_estimate
        if self.condition is not None:
            return float(self.condition * np.finfo(float).eps)
        return None

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
