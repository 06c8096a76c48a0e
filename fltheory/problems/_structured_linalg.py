"""Linear algebra of diagonal-plus-low-rank matrices A = diag(a) + V^T V, batched.

Every routine takes a stack of diagonals ``a`` (m, d) with a > 0 and factors
``V`` (m, r, d) (row k of V_j is the k-th column of U_j = V_j^T) and never
forms a d x d matrix: products cost O(m d r), solves O(m d r^2 + m r^3).

* :func:`matvec`: A_j x_j;
* :func:`woodbury_solve`: A_j^{-1} b_j by the Sherman-Morrison-Woodbury identity
  A^{-1} = D^{-1} - D^{-1} V^T (I_r + V D^{-1} V^T)^{-1} V D^{-1}, followed by
  iterative refinement;
* :func:`extreme_eigenvalues`: lambda_min(A_j), lambda_max(A_j) by bisection on
  an exact eigenvalue count (Sylvester's law of inertia, below);
* :func:`lanczos_extremes`: the same from ARPACK (large total rank), an estimate;
* :func:`bracketed_extremes`: Lanczos estimates turned exact: brackets around
  them certified by the eigenvalue count, then bisection inside them (a few
  counts instead of about 110).

Eigenvalue count.  For lambda different from every a_k, the symmetric block
matrix [[diag(a) - lambda I, V^T], [V, -I_r]] has two Schur complements, so by
Sylvester's law of inertia

    #{eig(A) < lambda} = #{k : a_k < lambda} - #{eig(C(lambda)) < 0},
    C(lambda) = I_r + V (diag(a) - lambda I)^{-1} V^T   (r x r),

the Haynsworth inertia additivity formula.  Bisection on this count pins the
extreme eigenvalues to a few units in the last place of max_k(a_k +
||V[:, k]||^2) (the rounding of the count near an eigenvalue), at O(d r^2 + r^3)
per client and step.
"""

from __future__ import annotations

import numpy as np

__all__ = ["matvec", "woodbury_solve", "wide_residual", "count_below", "extreme_eigenvalues", "lanczos_extremes",
           "bracketed_extremes"]

_EPS = float(np.finfo(np.float64).eps)


def matvec(a: np.ndarray, V: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Rows (diag(a_j) + V_j^T V_j) x_j -> (m, d) for a (m, d), V (m, r, d), X (m, d)."""
    out = a * X
    if V.shape[1]:
        c = np.matmul(V, X[:, :, None])                     # (m, r, 1): V_j x_j
        out += np.matmul(np.swapaxes(c, 1, 2), V)[:, 0, :]  # c_j^T V_j
    return out


def _woodbury_once(a: np.ndarray, V: np.ndarray, B: np.ndarray) -> np.ndarray:
    Z = B / a
    if not V.shape[1]:
        return Z
    Va = V / a[:, None, :]                                       # V D^{-1}
    C = np.matmul(Va, np.swapaxes(V, 1, 2))                      # V D^{-1} V^T (m, r, r)
    C += np.eye(V.shape[1])
    t = np.linalg.solve(C, np.matmul(V, Z[:, :, None]))          # (m, r, 1)
    return Z - np.matmul(np.swapaxes(t, 1, 2), Va)[:, 0, :]


#: Bytes of factors handled per chunk of rows by the solves and the eigenvalue count (their
#: temporaries are of the size of the chunk's factors: memory stays O(chunk), not O(N d r)).
CHUNK_BYTES = 1 << 20


def _row_chunks(V: np.ndarray) -> list[slice]:
    m, r, d = V.shape
    per = max(1, CHUNK_BYTES // max(8 * max(r, 1) * d, 1))        # rank 0: the (m, d) temporaries
    return [slice(k, min(k + per, m)) for k in range(0, m, per)] or [slice(0, 0)]


def woodbury_solve(a: np.ndarray, V: np.ndarray, B: np.ndarray, *, refine: int = 4,
                   wide: bool = False) -> np.ndarray:
    """Rows (diag(a_j) + V_j^T V_j)^{-1} b_j -> (m, d), a > 0, in chunks of rows
    (:func:`_woodbury_refined` on each)."""
    if len(_row_chunks(V)) == 1:
        return _woodbury_refined(a, V, B, refine, wide)
    out = np.empty(B.shape)
    for c in _row_chunks(V):
        out[c] = _woodbury_refined(a[c], V[c], B[c], refine, wide)
    return out


def wide_residual(a: np.ndarray, V: np.ndarray, B: np.ndarray, X: np.ndarray) -> np.ndarray:
    """B - (diag(a) + V^T V) X row-wise, computed in ``numpy.longdouble`` (64-bit mantissa on
    x86) and rounded to float64 once."""
    wide = np.longdouble
    R = B.astype(wide) - matvec(a.astype(wide), V.astype(wide), X.astype(wide))
    return R.astype(np.float64)


def _woodbury_refined(a: np.ndarray, V: np.ndarray, B: np.ndarray, refine: int, wide: bool) -> np.ndarray:
    """Rows (diag(a_j) + V_j^T V_j)^{-1} b_j -> (m, d), a > 0.

    The Woodbury identity (module docstring) with an r x r capacitance
    I + V D^{-1} V^T (symmetric positive definite, eigenvalues >= 1), then up to
    ``refine`` steps of iterative refinement x <- x + A^{-1}(b - A x), each row stopped
    as soon as its own correction (max |dx_j|) stops halving: so a row's result never
    depends on the other rows solved with it (chunks of rows change no bit).  With
    float64 residuals the result is
    backward stable (forward error about cond(A) 1e-16); with ``wide`` residuals
    (:func:`wide_residual`, mixed-precision refinement as in
    :func:`fltheory.problems.quadratic.refined_solve`) the forward error drops to
    about 1e-16 + cond(A) 1e-19.
    """
    X = _woodbury_once(a, V, B)
    previous = np.full(X.shape[0], np.inf)
    rows = np.arange(X.shape[0])                     # rows still refined
    for _ in range(refine):
        if not rows.size:
            break
        every = rows.size == X.shape[0]
        ar, Vr, Br, Xr = (a, V, B, X) if every else (a[rows], V[rows], B[rows], X[rows])
        R = wide_residual(ar, Vr, Br, Xr) if wide else Br - matvec(ar, Vr, Xr)
        dX = _woodbury_once(ar, Vr, R)
        size = np.max(np.abs(dX), axis=1, initial=0.0)
        keep = size < 0.5 * previous[rows]
        rows = rows[keep]
        X[rows] = Xr[keep] + dX[keep]
        previous[rows] = size[keep]
    return X


def _count_below(a: np.ndarray, V: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """#{eig(diag(a_j) + V_j^T V_j) < lam_j} for every row j (inertia formula)."""
    shift = a - lam[:, None]
    hit = shift == 0.0
    if np.any(hit):                          # lambda equal to a diagonal entry: move it one ulp down
        lam = np.where(hit.any(axis=1), np.nextafter(lam, -np.inf), lam)
        shift = a - lam[:, None]
    below = np.count_nonzero(shift < 0, axis=1)
    if not V.shape[1]:
        return below
    C = np.matmul(V / shift[:, None, :], np.swapaxes(V, 1, 2))
    C += np.eye(V.shape[1])
    C = 0.5 * (C + np.swapaxes(C, 1, 2))
    return below - np.count_nonzero(np.linalg.eigvalsh(C) < 0, axis=1)


def count_below(a: np.ndarray, V: np.ndarray, lam: float) -> int:
    """#{eig(diag(a) + V^T V) < lam} for one matrix (a (d,), V (R, d)), exactly up to the
    rounding of the inertia formula (module docstring)."""
    return int(_count_below(a[None], V[None], np.array([float(lam)]))[0])


def _bisect(a: np.ndarray, V: np.ndarray, lo: np.ndarray, hi: np.ndarray, target: np.ndarray,
            max_steps: int = 200) -> np.ndarray:
    """Smallest lambda (to the bracket width of ~2 ulp) with count_below(lambda) >= target,
    given count(lo) < target <= count(hi) row-wise."""
    lo, hi = lo.copy(), hi.copy()
    for _ in range(max_steps):
        width = hi - lo
        active = width > 4 * _EPS * np.maximum(np.abs(hi), np.abs(lo))
        if not np.any(active):
            break
        mid = lo + 0.5 * width
        up = _count_below(a, V, mid) >= target
        hi = np.where(active & up, mid, hi)
        lo = np.where(active & ~up, mid, lo)
    return 0.5 * (lo + hi)


def extreme_eigenvalues(a: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lambda_min, lambda_max) of every diag(a_j) + V_j^T V_j -> ((m,), (m,)), a > 0, in
    chunks of rows (:func:`_extremes` on each: brackets and bisection below)."""
    chunks = _row_chunks(V)
    if len(chunks) == 1:
        return _extremes(a, V)
    parts = [_extremes(a[c], V[c]) for c in chunks]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _extremes(a: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lambda_min, lambda_max) of every diag(a_j) + V_j^T V_j -> ((m,), (m,)), a > 0.

    Brackets: diag(a) <= A gives lambda_min >= min a; the Rayleigh quotients of
    the unit vectors give a_k + ||V[:, k]||^2, so lambda_min <= min_k and
    lambda_max >= max_k of them; lambda_max <= max a + trace(V^T V).  Bisection on
    the exact eigenvalue count then halves each bracket to about 4 ulp (module
    docstring).  Rank 0: the extremes of a, exactly.
    """
    lo_a, hi_a = a.min(axis=1), a.max(axis=1)
    if not V.shape[1]:
        return lo_a.copy(), hi_a.copy()
    d = a.shape[1]
    col = np.einsum("mrd,mrd->md", V, V)
    rayleigh = a + col
    up = 1.0 + 8 * _EPS
    lam_min = _bisect(a, V, lo_a * (1.0 - 8 * _EPS), rayleigh.min(axis=1) * up, np.ones(a.shape[0], dtype=int))
    top_hi = (hi_a + col.sum(axis=1)) * up
    lam_max = _bisect(a, V, rayleigh.max(axis=1) * (1.0 - 8 * _EPS), top_hi, np.full(a.shape[0], d))
    return lam_min, lam_max


def lanczos_extremes(a: np.ndarray, V: np.ndarray, *, tol: float = 1e-12) -> tuple[float, float, float]:
    """(lambda_min, lambda_max, residual) of one diag(a) + V^T V (a (d,), V (R, d)) from
    ARPACK's implicitly restarted Lanczos on the matrix-vector product (O(d R) each).

    Ritz values are Rayleigh quotients, so the returned lambda_max is a lower
    bound of the true one and lambda_min an upper bound; ``residual`` is the
    largest Ritz residual norm ||A y - theta y||, within which an eigenvalue lies.
    """
    from scipy.sparse.linalg import LinearOperator, eigsh

    d = a.shape[0]

    def mv(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        return a * x + V.T @ (V @ x)

    op = LinearOperator((d, d), matvec=mv, dtype=np.float64)
    rng = np.random.default_rng(0)               # deterministic start vector
    start = rng.standard_normal(d)
    hi_val, hi_vec = eigsh(op, k=1, which="LA", tol=tol, v0=start)
    lo_val, lo_vec = eigsh(op, k=1, which="SA", tol=tol, v0=start)
    res = max(float(np.linalg.norm(mv(v[:, 0]) - t[0] * v[:, 0])) for t, v in ((hi_val, hi_vec), (lo_val, lo_vec)))
    return float(lo_val[0]), float(hi_val[0]), res


def _straddle(a: np.ndarray, V: np.ndarray, center: float, width: float, target: int) -> tuple[float, float] | None:
    """[lo, hi] around ``center`` with count_below(lo) < target <= count_below(hi), widening
    ``width`` by doubling (at most 60 times); None if no such bracket is found."""
    for _ in range(60):
        lo, hi = center - width, center + width
        counts = _count_below(a[None], V[None], np.array([lo]))[0], _count_below(a[None], V[None], np.array([hi]))[0]
        if counts[0] < target <= counts[1]:
            return lo, hi
        width *= 2.0
    return None


def bracketed_extremes(a: np.ndarray, V: np.ndarray, guess_min: float, guess_max: float,
                       radius: float) -> tuple[float, float] | None:
    """(lambda_min, lambda_max) of one diag(a) + V^T V (a (d,), V (R, d)) to about 4 ulp, from
    estimates within about ``radius`` (e.g. Ritz values and their residual norm).

    Each estimate gets a bracket [lo, hi] certified by the exact eigenvalue count
    (count(lo) < target <= count(hi): no eigenvalue of the wrong side, whatever the
    estimate's quality), widened by doubling from max(2 radius, 8 eps |estimate|),
    then bisection (:func:`_bisect`) shrinks it.  None when no bracket is found."""
    d = a.shape[0]
    out = []
    for center, target in ((guess_min, 1), (guess_max, d)):
        bracket = _straddle(a, V, center, max(2.0 * radius, 8 * _EPS * abs(center), 1e-300), target)
        if bracket is None:
            return None
        lam = _bisect(a[None], V[None], np.array([bracket[0]]), np.array([bracket[1]]), np.array([target]))
        out.append(float(lam[0]))
    return out[0], out[1]
