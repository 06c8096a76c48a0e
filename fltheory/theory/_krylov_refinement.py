"""Refinement of a matrix-free fixed point on a fresh Krylov space of its residual.

The Galerkin corrections of ``theory.matrix_free.refined_fixed_point`` reuse the Krylov
space the fixed point was solved on.  The residual of an actual round, r = Phi(S) - S, also
has components outside that space (the rounding of the products the space was built from),
which those corrections cannot remove: on ill-conditioned maps by rounds the residual then
stalls at a few hundred eps ||S|| (measured: SCAFFOLD N = 50, d = 20, cond 2e11, by rounds:
236 eps; FedAvg on structured clients, d = 1000, cond 7e9: 137 eps), where two evaluations of
a round differ by about 15 eps ||S||.  One correction solved on the Krylov space of r itself,

    P (I - M) P z = P r,   conjugate gradients when M_V is symmetric, GMRES otherwise,

to a relative residual ``RTOL`` within ``MAX_ROUNDS`` rounds, brings it to the level of
that rounding (1.4 and 5.5 eps in the same two cases, 17 and 8 rounds).  The caller keeps
the correction only when the residual of an actual round decreases.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

__all__ = ["MAX_ROUNDS", "RTOL", "krylov_correction"]

#: Relative residual of the correction's Krylov solve.
RTOL = 1e-2
#: Most rounds (products with M) one correction may spend.
MAX_ROUNDS = 60


def krylov_correction(amap: Any, Pr: np.ndarray) -> np.ndarray | None:
    """z with P (I - M) P z = P r to relative residual ``RTOL`` (module docstring), or None when
    the solve does not reach it within ``MAX_ROUNDS`` rounds or ``Pr`` is zero.  ``amap``: a
    MatrixFreeAffineMap (its projector P, single-vector products and ``symmetric``)."""
    norm = float(np.linalg.norm(Pr))
    if not norm > 0.0 or not np.isfinite(norm):
        return None
    P = amap.projector
    n = amap.dim

    def matvec(v: np.ndarray) -> np.ndarray:
        w = P(np.ravel(v))
        return w - P(amap.apply_linear(w))

    op = spla.LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    b = Pr / norm
    with np.errstate(all="ignore"):
        if amap.symmetric:
            z, info = spla.cg(op, b, rtol=RTOL, atol=0.0, maxiter=MAX_ROUNDS)
        else:
            z, info = spla.gmres(op, b, rtol=RTOL, atol=0.0, restart=MAX_ROUNDS, maxiter=1)
    if info != 0 or not np.all(np.isfinite(z)):
        return None
    return np.asarray(P(z), dtype=np.float64) * norm
