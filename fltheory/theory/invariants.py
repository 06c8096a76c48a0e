"""Conserved linear functionals of a round map, from the algorithm's declaration.

The exact theory of an affine round map S -> M S + c needs the subspace V on
which the orbit of a start moves: the start plus everything orthogonal to the
conserved functionals w (w^T M = w^T).  Those come from
``Algorithm.linear_invariants`` (each declaration is proved in the algorithm's
docstring), never from the spectrum: an eigenvalue 1 - 1e-10 of an
ill-conditioned problem and an eigenvalue exactly 1 of a conserved quantity
look the same to any tolerance.

:func:`conserved_functionals` turns the declarations into the sparse matrix
W (n, K) of the functionals on the flat state vector S
(``fltheory.theory.round_maps`` layout).  Coordinates of *frozen* fields (whose
value after a round does not depend on the state, see ``theory.affine``) are
dropped from W: every state after one round has them at their constant, so a
declared functional restricted to the other coordinates is conserved on that
set, which is where the recovered map is exact.

:func:`check_conserved` verifies a declaration against the map itself: for
the functionals W and probe directions v it requires W^T (M v - v) = 0 to the
accuracy the map was recovered with.  A declaration that fails is a bug of the
algorithm (or of its proof) and raises :class:`InvalidProblemError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..algorithms.base import Algorithm
from ..errors import InvalidProblemError
from ..problems.base import Federation
from .round_maps import StateLayout

__all__ = ["ConservedFunctionals", "check_conserved", "conserved_functionals"]


@dataclass(frozen=True, eq=False)
class ConservedFunctionals:
    """The declared conserved functionals as columns of a sparse matrix.

    W : scipy.sparse.csc_matrix (n, K)
        Column j is the coefficient vector of functional j on S.
    names : tuple of str
        Name of each declared family.
    families : tuple of slice
        Columns of W belonging to each family.
    """

    W: sp.csc_matrix
    names: tuple[str, ...]
    families: tuple[slice, ...]

    @property
    def count(self) -> int:
        """K, the number of declared functionals (before removing dependent ones)."""
        return int(self.W.shape[1])


def conserved_functionals(algorithm: Algorithm, problem: Federation, layout: StateLayout,
                          frozen: np.ndarray | None = None) -> ConservedFunctionals:
    """W of the functionals ``algorithm.linear_invariants(problem)`` on ``layout``.

    Raises
    ------
    InvalidProblemError
        A declaration names a field that is not a float leaf of the state, or
        its coefficient matrix does not fit the field's shape.
    """
    n = layout.dim
    rows_all: list[np.ndarray] = []
    cols_all: list[np.ndarray] = []
    vals_all: list[np.ndarray] = []
    names: list[str] = []
    families: list[slice] = []
    col0 = 0
    for inv in algorithm.linear_invariants(problem):
        cols_of_family: int | None = None
        for path, A in inv.terms.items():
            if path not in layout.slices:
                raise InvalidProblemError(
                    f"{algorithm.name}: declared invariant {inv.name!r} names field {path!r}, which is not "
                    f"a floating-point field of the state ({layout.describe()})")
            sl = layout.slices[path]
            size = sl.stop - sl.start
            rows = A.shape[1]
            if rows == 0 or size % rows:
                raise InvalidProblemError(
                    f"{algorithm.name}: invariant {inv.name!r}: coefficients for {path!r} have {rows} "
                    f"columns, which does not divide the field's {size} entries")
            cols = size // rows
            if cols_of_family is not None and cols != cols_of_family:
                raise InvalidProblemError(
                    f"{algorithm.name}: invariant {inv.name!r}: terms give {cols_of_family} and {cols} "
                    "values per functional row; every term needs the same")
            cols_of_family = cols
            kk, rr = np.nonzero(A)
            # entry (kk, rr) of A multiplies field row rr, every column q, in functional kk*cols + q
            q = np.arange(cols)
            rows_all.append((sl.start + rr[:, None] * cols + q[None, :]).ravel())
            cols_all.append((col0 + kk[:, None] * cols + q[None, :]).ravel())
            vals_all.append(np.repeat(A[kk, rr], cols))
        assert cols_of_family is not None
        width = inv.count * cols_of_family
        names.append(inv.name)
        families.append(slice(col0, col0 + width))
        col0 += width
    if rows_all:
        r = np.concatenate(rows_all)
        c = np.concatenate(cols_all)
        v = np.concatenate(vals_all)
        if frozen is not None and frozen.any():
            keep = ~frozen[r]
            r, c, v = r[keep], c[keep], v[keep]
        W = sp.csc_matrix((v, (r, c)), shape=(n, col0))
    else:
        W = sp.csc_matrix((n, 0))
    return ConservedFunctionals(W=W, names=tuple(names), families=tuple(families))


def check_conserved(funcs: ConservedFunctionals, apply_linear: Callable[[np.ndarray], np.ndarray],
                    probes: np.ndarray, *, rtol: float, scale: float, algorithm: str) -> float:
    """Verify W^T (M v - v) = 0 on the probe directions (columns of ``probes``).

    ``apply_linear(V)`` returns M V for an (n, p) block.  The residual of
    family f is max |W_f^T (M v - v)| / (max |W_f| * scale * max |v|); it must
    not exceed ``rtol`` (the accuracy of the recovered map).  Returns the
    largest residual.

    Raises
    ------
    InvalidProblemError
        A declared functional is not conserved (names the family and the residual).
    """
    if funcs.count == 0:
        return 0.0
    MV = apply_linear(probes)
    G = funcs.W.T @ (MV - probes)                         # (K, p)
    vmax = float(np.abs(probes).max()) or 1.0
    worst = 0.0
    for name, fam in zip(funcs.names, funcs.families, strict=True):
        Wf = funcs.W[:, fam]
        wmax = float(np.abs(Wf.data).max()) if Wf.nnz else 0.0
        if wmax == 0.0:                                   # every coefficient on frozen fields
            continue
        res = float(np.abs(G[fam]).max()) / (wmax * scale * vmax)
        worst = max(worst, res)
        if not res <= rtol:
            raise InvalidProblemError(
                f"{algorithm}: the declared invariant {name!r} is not conserved by the round map "
                f"(relative residual {res:.3e} > {rtol:.1e}); Algorithm.linear_invariants is wrong "
                "for this configuration")
    return worst
