"""Linear-programming test for (quasi-)separable logistic data.

Without a ridge term the logistic loss has a minimiser iff there is no
direction along which every row's loss is non-increasing and some row's loss
strictly decreases (Albert and Anderson, 1984, existence of the MLE):

* binary: no x with y_j a_j^T x >= 0 for all j and > 0 for some j;
* multinomial: no W with a_j^T (w_{y_j} - w_c) >= 0 for all j, c != y_j and
  > 0 for some (j, c) (each term exp(z_c - z_y) of the row loss then falls).

Both are decided by one LP: maximise the sum of the margins subject to all
margins >= 0 and the box -1 <= x <= 1; the data are separable iff the
optimum is positive (up to a relative tolerance).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from ..errors import InvalidProblemError

_REL_TOL = 1e-7   # above HiGHS feasibility slack (1e-7 per row), relative to sum |a|


def separation_margin(A: np.ndarray, y: np.ndarray, n_classes: int | None) -> float:
    """Optimal value of the separation LP for the rows (A, y) (unpadded).

    Returns the maximal sum of margins over the box; positive means a
    recession direction exists (no minimiser without ridge)."""
    n, f = A.shape
    if n_classes is None:
        M = y[:, None] * A                                    # margin rows
        M = sp.csr_matrix(M)
        nvar = f
    else:
        C = n_classes
        rows, cols = np.nonzero(np.arange(C)[None, :] != y[:, None])   # (j, c) pairs
        k = rows.shape[0]
        yj = y[rows].astype(np.int64)
        feat = np.arange(f)
        r_idx = np.repeat(np.arange(k), 2 * f)
        c_pos = (feat[None, :] * C + yj[:, None])             # column of w_{y_j}[feat]
        c_neg = (feat[None, :] * C + cols[:, None])
        c_idx = np.concatenate([c_pos, c_neg], axis=1).ravel()
        vals = np.concatenate([A[rows], -A[rows]], axis=1).ravel()
        M = sp.csr_matrix((vals, (r_idx, c_idx)), shape=(k, f * C))
        nvar = f * C
    c = -np.asarray(M.sum(axis=0)).ravel()
    res = linprog(c, A_ub=-M, b_ub=np.zeros(M.shape[0]), bounds=[(-1.0, 1.0)] * nvar,
                  method="highs")
    if res.status != 0:
        raise InvalidProblemError(f"separation test LP failed: {res.message}")
    return float(-res.fun)


def is_separable(A: np.ndarray, y: np.ndarray, n_classes: int | None) -> bool:
    """True when the rows admit a (quasi-)separating direction (see module doc)."""
    scale = float(np.abs(A).sum()) + 1e-300
    return separation_margin(A, y, n_classes) > _REL_TOL * scale
