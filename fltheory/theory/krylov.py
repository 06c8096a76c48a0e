"""Block Krylov (Rayleigh-Ritz) for the dominant eigenvalues and the fixed point of an
affine round map, one product with M per block of vectors (``theory.matrix_free``).

The space.  From an orthonormal start block Q_1 (n, b) in the invariant subspace
V (``P Q_1 = Q_1``, P the projector onto V), block j + 1 is the orthonormalised
part of P M Q_j orthogonal to Q_1, ..., Q_j (full reorthogonalisation, twice).
Q = [Q_1 ... Q_j] spans the block Krylov space K_j = span{X, M X, ..., M^{j-1} X};
every product P M Q_j is kept, so the projected matrix T = Q^T (P M Q) is formed
from actual products, not from a recurrence.

Eigenvalues (Rayleigh-Ritz).  Ritz pairs (theta, y) of T give approximate
eigenpairs (theta, Q y) of M_V with residual rho = ||P M Q y - theta Q y||_2,
computed as ||E y_last|| from the part E of the last block's products outside
the space (the older blocks' products lie in the space up to rounding, kept
there by full reorthogonalisation).

* Symmetric M_V (declared by ``Algorithm.linear_part_is_symmetric`` and checked):
  T is symmetrised and the extreme Ritz values satisfy
  lambda_min <= theta_min <= theta_max <= lambda_max (Cauchy interlacing).  With
  delta = theta_max - (theta_2 + rho_2) an estimated lower bound of the gap to the
  next eigenvalue (theta_2 the second-largest Ritz value), the Kato-Temple
  inequality gives 0 <= lambda_max - theta_max <= rho_max^2 / delta when delta > rho_max;
  otherwise only |lambda - theta_max| <= rho_max for some eigenvalue lambda (Weyl).
  The same at the lower end.  The reported rate is max(theta_max, -theta_min) and
  its error estimate the largest amount either end can still move.  The estimate
  assumes the Krylov space has found the extreme eigenvalue (the start block has a
  component along its eigenvector; a random start has one with probability 1).
* General M_V: the Ritz value of largest modulus and its residual; for a normal M_V
  the eigenvalue error is at most rho, for a non-normal one at most
  rho cond(eigenvector basis), which is not estimated: the error reported is rho.

Fixed point (Galerkin).  With the right-hand side r as the first column of Q_1,
(I - M) z = r is solved by z = Q c, (I - T) c = Q^T r = ||r|| e_1 (the
conjugate-gradient iterate for a symmetric M_V, the full orthogonalisation method
otherwise), and its residual r - (Q c - P M Q c) is computed from the stored products.

The iteration stops when every requested quantity meets its tolerance, when the
space becomes invariant (the next block is below ``_RANK_TOL`` relative: Q then spans an
invariant subspace of M - E Q_last^T, and the rate error is raised to at least ||E||_2,
since the Ritz values can have missed eigenvalues the dropped block would have found), or
at ``max_vectors`` columns.  No rate error is reported below 4 sqrt(k) eps max|theta|, the
rounding of the projected eigenvalue problem (so 0.0 is never claimed).

Accuracy of the solve.  With R the triangular factor of the last block's outside part E,
Hbar = [I - T; -[0 R]] satisfies ||Hbar c|| = ||(I - M_V) Q c||, so its singular values lie
inside those of I - M_V (:func:`projected_singular_values`: lower bounds on cond_2(I - M_V)
and on ||(I - M_V)^{-1}||_2).
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validate import _short, finite_array, flag, integer, positive
from ..errors import InvalidHyperparameterError, InvalidProblemError

__all__ = ["DominantEigenvalues", "KrylovResult", "KrylovSpace", "block_krylov", "projected_singular_values",
           "ritz_orbit_rate"]

_RANK_TOL = 1e-10          # a new column shorter than this (relative) adds nothing to the space

#: Largest memory (bytes) a Krylov space may allocate up front (its basis and products:
#: 2 x capacity x n float64) or be allowed to grow to (``max_vectors`` columns).
MAX_SPACE_BYTES = 1 << 32


@dataclass(frozen=True)
class DominantEigenvalues:
    """Dominant eigenvalues of M_V from a Krylov space (module docstring).

    rate : float, the spectral radius estimate max |theta| over the Ritz values.
    error : float, estimated bound on |rate - rho(M_V)| (module docstring for its assumptions).
    values : complex array, the Ritz values of modulus >= 0.999 rate (largest first) with
        their residual norms in ``residuals``.
    residuals : float array.
    symmetric : bool, whether the symmetric (Kato-Temple) estimate was used.
    dimension : int, columns of the Krylov space.
    """

    rate: float
    error: float
    values: np.ndarray
    residuals: np.ndarray
    symmetric: bool
    dimension: int


class KrylovSpace:
    """Orthonormal basis Q (n, k) of V-vectors, the stored products P M Q and T = Q^T P M Q.

    Basis vectors and products are stored as the rows of contiguous (capacity, n)
    arrays that grow by doubling, so Q^T W and Q c stream each vector once.

    ``n`` (vector length) and ``capacity`` (columns allocated at first) are integers >= 1
    whose initial allocation 16 n capacity bytes is at most ``MAX_SPACE_BYTES``
    (InvalidHyperparameterError otherwise, naming the argument)."""

    def __init__(self, n: int, capacity: int = 32) -> None:
        n = integer("n", n, minimum=1, maximum=None)
        capacity = integer("capacity", capacity, minimum=1, maximum=None)
        if 16 * n * capacity > MAX_SPACE_BYTES:
            raise InvalidHyperparameterError(
                f"n={n} and capacity={capacity} ask for {16 * n * capacity:.3g} bytes of Krylov basis, "
                f"more than MAX_SPACE_BYTES={MAX_SPACE_BYTES}; expected 16 n capacity <= MAX_SPACE_BYTES")
        self.n = n
        self.k = 0
        self._B = np.empty((capacity, n))
        self._MB = np.empty((capacity, n))
        self.T = np.zeros((0, 0))
        self._new_coefficients: np.ndarray | None = None

    @property
    def Q(self) -> np.ndarray:
        return self._B[:self.k].T

    @property
    def MQ(self) -> np.ndarray:
        return self._MB[:self.k].T

    def add(self, Qb: np.ndarray, Wb: np.ndarray) -> None:
        """Append the block Qb (orthonormal, orthogonal to Q) and its product Wb = P M Qb."""
        b = Qb.shape[1]
        if self.k + b > self._B.shape[0]:
            cap = max(2 * self._B.shape[0], self.k + b)
            for name in ("_B", "_MB"):
                grown = np.empty((cap, self.n))
                grown[:self.k] = getattr(self, name)[:self.k]
                setattr(self, name, grown)
        k0, k = self.k, self.k + b
        self._B[k0:k] = Qb.T
        self._MB[k0:k] = Wb.T
        self.k = k
        Tn = np.zeros((k, k))
        Tn[:k0, :k0] = self.T
        C = self._B[:k] @ Wb                          # Q^T W: the new columns of T
        Tn[:, k0:] = C
        Tn[k0:, :k0] = (self._MB[:k0] @ Qb).T
        self.T = Tn
        self._new_coefficients = C

    def project_out(self, W: np.ndarray) -> np.ndarray:
        """W minus its components along Q (classical Gram-Schmidt, repeated once when the
        first pass cancels more than 30% of a column; the first coefficients are the new
        columns of T when W is the block just added)."""
        if self.k == 0:
            return W
        B = self._B[:self.k]
        C = self._new_coefficients
        if C is None or C.shape != (self.k, W.shape[1]):
            C = B @ W
        self._new_coefficients = None
        W1 = W - B.T @ C
        # second pass only where the first removed most of a column (Daniel, Gragg, Kaufman
        # and Stewart's criterion ||w1|| < 0.7 ||w||): otherwise w1 is orthogonal to Q to rounding
        if np.all(np.linalg.norm(W1, axis=0) >= 0.7 * np.linalg.norm(W, axis=0)):
            return W1
        return W1 - B.T @ (B @ W1)

    def coefficients(self, rhs_c: np.ndarray, symmetric: bool) -> np.ndarray:
        """c with (I - T) c = rhs_c (T symmetrised for a symmetric M)."""
        A = np.eye(self.k) - ((self.T + self.T.T) / 2 if symmetric else self.T)
        try:
            return np.linalg.solve(A, rhs_c)
        except np.linalg.LinAlgError:
            return np.linalg.lstsq(A, rhs_c, rcond=None)[0]

    def galerkin(self, rhs: np.ndarray, project: Callable[[np.ndarray], np.ndarray], symmetric: bool
                 ) -> tuple[np.ndarray, float]:
        """z = Q c with (I - T) c = Q^T rhs, and ||P rhs - (I - P M) z|| / ||P rhs|| (computed)."""
        r = project(rhs)
        rn = float(np.linalg.norm(r))
        if rn == 0.0 or self.k == 0:
            return np.zeros(self.n), 0.0
        c = self.coefficients(self.Q.T @ r, symmetric)
        z = self.Q @ c
        return z, float(np.linalg.norm(r - z + self.MQ @ c)) / rn


@dataclass(frozen=True)
class KrylovResult:
    """What :func:`block_krylov` found: ``eig`` (or None), the Galerkin solution ``z``
    (or None) with its relative residual ``solve_residual``, the number of columns
    ``dimension``, block products ``blocks``, ``converged``: every target was met *or* the
    space became invariant (``invariant``; then the Ritz values are exact eigenvalues of M on
    the space the start vectors span, up to rounding, but the stated error targets need not
    hold, and an eigenvalue the start does not excite is not among them: a start with a
    1e-11 component on M's top eigenvector can stop invariant with rate 0.7 where M's
    spectral radius is 0.9; the matrix-free routes start from random blocks), the ``space``
    itself (for further Galerkin solves), and ``outside``: the triangular factor R (b, b)
    of E = Q_out R, E the part of the last block's products P M Q_last outside the space
    (:func:`projected_singular_values` uses it)."""

    eig: DominantEigenvalues | None
    z: np.ndarray | None
    solve_residual: float
    dimension: int
    blocks: int
    converged: bool
    invariant: bool
    space: KrylovSpace
    outside: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


def _orthonormal(W: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the columns of W that are not negligible against ``scale``
    (the column norms before orthogonalisation against the existing space)."""
    if W.shape[1] == 0:
        return W
    U, s, _ = np.linalg.svd(W, full_matrices=False)
    keep = s > _RANK_TOL * max(float(scale.max(initial=0.0)), float(s.max(initial=0.0)), 1e-300)
    return U[:, keep]


def _symmetric_estimate(theta: np.ndarray, resid: dict[int, float]) -> tuple[float, float]:
    """(rate, error) from the ordered Ritz values of a symmetric T (module docstring)."""
    k = theta.shape[0]

    def end_error(j: int, nxt: int | None, sign: float) -> float:
        r = resid[j]
        if nxt is None:
            return r
        gap = sign * (theta[j] - theta[nxt]) - resid[nxt]
        return r * r / gap if gap > r else r

    top, bot = k - 1, 0
    e_top = end_error(top, top - 1 if k > 1 else None, 1.0)
    e_bot = end_error(bot, 1 if k > 1 else None, -1.0)
    rate = max(theta[top], -theta[bot], 0.0)
    worst = max(theta[top] + e_top, -theta[bot] + e_bot)
    return float(rate), float(max(worst - rate, 0.0))


def _rounding_floor(k: int, scale: float) -> float:
    """4 sqrt(k) eps ``scale``: the least error an eigenvalue of a k x k projected matrix T with
    ||T|| about ``scale`` can carry (its entries are computed inner products, its eigenvalues
    those of a matrix within about sqrt(k) eps ||T|| of it).  Error estimates never go below it,
    so an error of 0.0 is never reported; it does not include the rounding of the products
    themselves (the caller's product noise)."""
    return 4.0 * np.sqrt(max(int(k), 1)) * np.finfo(float).eps * max(float(scale), 0.0)


def projected_singular_values(result: KrylovResult) -> tuple[float, float]:
    """(sigma_max, sigma_min) of the (k + b) x k matrix Hbar = [I - T; -[0 R]] of a Krylov run,
    R the factor of the last block's products outside the space (``KrylovResult.outside``).

    For every c, (I - P M P) Q c = Q (I - T) c - E c_last, so ||Hbar c|| = ||(I - M_V) Q c||
    (exact arithmetic, Q orthonormal): the singular values of Hbar lie in
    [sigma_min(I - M_V), sigma_max(I - M_V)].  Hence 1 / sigma_min(Hbar) is a LOWER bound on
    ||(I - M_V)^{-1}||_2 and sigma_max / sigma_min a LOWER bound on cond_2(I - M_V) (equal to
    them when the space holds the extreme singular vectors).  In floating point each computed
    singular value carries an absolute error of about sqrt(k) eps ||Hbar|| (T is formed from
    computed products), so sigma_min, and the bounds, hold to about that relative to sigma_min.
    Cost: the singular values of a (k + b) x k matrix.  InvalidHyperparameterError when
    ``result`` is not a KrylovResult."""
    if not isinstance(result, KrylovResult):
        raise InvalidHyperparameterError(
            f"result must be a KrylovResult (from block_krylov), got {_short(result)} ({type(result).__name__})")
    space = result.space
    k = space.k
    if k == 0:
        return 1.0, 1.0
    R = result.outside
    b = R.shape[1] if R.ndim == 2 else 0
    rows = R.shape[0] if R.ndim == 2 else 0
    H = np.zeros((k + rows, k))
    H[:k] = np.eye(k) - space.T
    if rows and b <= k:
        H[k:, k - b:] = -R
    sv = np.linalg.svd(H, compute_uv=False)
    return float(sv[0]), float(sv[-1])


def _columns(project: Callable[[np.ndarray], np.ndarray], W: np.ndarray) -> np.ndarray:
    return np.column_stack([project(w) for w in W.T]) if W.shape[1] else W


def block_krylov(apply: Callable[[np.ndarray], np.ndarray], project: Callable[[np.ndarray], np.ndarray],
                 start: np.ndarray, *, symmetric: bool, rhs: np.ndarray | None = None,
                 want_eig: bool = True, eig_tol: float | Callable[[float], float] = 1e-12,
                 solve_tol: float = 1e-13, max_vectors: int = 400, min_blocks: int = 2) -> KrylovResult:
    """Block Krylov space of P M P from ``start`` (n, b) (module docstring).

    ``apply(V)`` returns M V for V (n, q), q <= b; ``project`` is P.  With ``rhs``
    given, its normalised projection replaces the first start column and the
    Galerkin solution of (I - M) z = rhs on V is returned.  ``eig_tol`` is relative
    to the rate, or a function rate -> accepted error; ``solve_tol`` is relative to ||P rhs||.
    ``max_vectors`` (at most n; 16 n max_vectors bytes at most ``MAX_SPACE_BYTES``) and
    ``min_blocks`` are integers >= 1.

    Raises
    ------
    InvalidHyperparameterError
        An argument of the wrong kind, named in the message: ``apply``/``project`` not
        callable, ``start`` not a finite real (n, b) array with n, b >= 1, ``rhs`` not
        None or a finite (n,) vector, a flag that is not a bool, a tolerance not a finite
        number > 0 (or an ``eig_tol`` function returning one), sizes out of range.
    InvalidProblemError
        ``apply`` or ``project`` returns NaN/inf or an array of the wrong shape: no
        Krylov space is built from it."""
    start, rhs, eig_tol, solve_tol, max_vectors, min_blocks = _checked_arguments(
        apply, project, start, symmetric, rhs, want_eig, eig_tol, solve_tol, max_vectors, min_blocks)
    n, b = start.shape
    apply, project = _checked_products(apply, project, n)
    X = _columns(project, start)
    r = None if rhs is None else project(rhs)
    rnorm = 0.0 if r is None else float(np.linalg.norm(r))
    space = KrylovSpace(n, capacity=min(32, max_vectors))
    if rnorm > 0.0:
        assert r is not None
        first = (r / rnorm)[:, None]
        rest = X[:, 1:] - first @ (first.T @ X[:, 1:])
        rest = rest - first @ (first.T @ rest)
        Qb = np.column_stack([first, _orthonormal(rest, np.linalg.norm(X[:, 1:], axis=0))])
    else:
        Qb = _orthonormal(X, np.linalg.norm(X, axis=0))
    eig: DominantEigenvalues | None = None
    z: np.ndarray | None = None
    solve_res = 0.0
    blocks = 0
    invariant = done = False
    outside: np.ndarray = np.zeros((0, 0))
    while True:
        W = _columns(project, apply(Qb))
        blocks += 1
        space.add(Qb, W)
        E = space.project_out(W)          # P M Q - Q T = E (last block rows): the Krylov residual
        b_last = Qb.shape[1]
        eig_ok = not want_eig
        if want_eig:
            eig = _dominant(space, symmetric, E, b_last)
            eig_ok = bool(eig.error <= (eig_tol(eig.rate) if callable(eig_tol)
                                        else eig_tol * max(eig.rate, np.finfo(float).tiny)))
        solve_ok = True
        if rnorm > 0.0 and rhs is not None:
            e1 = np.zeros(space.k)
            e1[0] = rnorm
            c = space.coefficients(e1, symmetric)
            solve_res = float(np.linalg.norm(E @ c[-b_last:])) / rnorm
            solve_ok = bool(solve_res <= solve_tol)
            if solve_ok or space.k >= max_vectors:
                z = space.Q @ c
                solve_res = float(np.linalg.norm(r - z + space.MQ @ c)) / rnorm   # computed, not estimated
                solve_ok = solve_res <= solve_tol
        # a rate of 1 or more: the solve is not needed (the callers refuse such a map)
        no_solve = bool(want_eig and eig_ok and eig is not None
                        and eig.rate >= 1.0 - 16 * np.finfo(float).eps)
        done = bool(eig_ok and (solve_ok or no_solve) and blocks >= min_blocks)
        if done or space.k >= max_vectors:
            outside = np.asarray(np.linalg.qr(E, mode="r"))
            break
        Qb = _orthonormal(E, np.linalg.norm(W, axis=0))
        if Qb.shape[1]:
            # a nearly dependent block amplifies the rounding outside V (and along the space)
            # by 1 / (its smallest kept singular value): project and orthogonalise once more
            Qb = _orthonormal(space.project_out(_columns(project, Qb)), np.ones(1))
        if Qb.shape[1] == 0:
            invariant = True
            outside = np.asarray(np.linalg.qr(E, mode="r"))
            break
        Qb = Qb[:, :max_vectors - space.k]
    if invariant and eig is not None and outside.size:
        # "invariant" means the next block fell below _RANK_TOL, not that it vanished: Q spans an
        # invariant subspace of M - E Q_last^T, a perturbation of norm ||E||_2 that the
        # Kato-Temple estimate (gap read from the Ritz values, which can miss eigenvalues the
        # dropped block would have found) does not see
        eig = dataclasses.replace(eig, error=max(eig.error, float(np.linalg.norm(outside, 2))))
    if rhs is not None and rnorm == 0.0:
        z = np.zeros(n)
    return KrylovResult(eig=eig, z=z, solve_residual=solve_res, dimension=space.k, blocks=blocks,
                        converged=done or invariant, invariant=invariant, space=space, outside=outside)


def ritz_orbit_rate(space: KrylovSpace, e0: np.ndarray, *, symmetric: bool, tol: float = 1e-9,
                    converged: float = 1e-8) -> float | None:
    """The largest |lambda| of M_V over the eigenvectors that ``e0`` excites, read from the
    Ritz pairs of a Krylov space that contains e0 (e.g. the space a fixed point was solved on);
    None when the space cannot decide.

    With Ritz pairs (theta_j, Q y_j) of T (||y_j|| = 1; T symmetrised when ``symmetric``),
    the coordinates q = Q^T e0 and a = Y^{-1} q (Y^T q when symmetric), mode j is excited when
    |a_j| > tol max_i |a_i|: the dense route's test (``theory.affine.orbit_rate``) with Ritz
    vectors for eigenvectors.  Ritz values closer than max(1e-10 max(1, max|theta|), 2 rho)
    form one cluster (a multiple eigenvalue), whose share is the norm of its coefficients.
    The error of a cluster's share is estimated as

        err_C = ||e0|| (omega + kappa(Y) sqrt(|C|) rho_C / delta_C) + 1e3 eps kappa(Y) ||e0||,

    with omega = ||e0 - Q q|| / ||e0|| (e0 outside the space), rho_C the largest Ritz residual
    ||P M Q y - theta Q y|| of the cluster (computed from the stored products) and
    delta_C = (distance to the nearest other Ritz value) - rho_C: the sin-theta bound of Davis
    and Kahan for a symmetric M_V (kappa = 1) with the Ritz values standing in for the rest of
    the spectrum; for a non-symmetric M_V an estimate.  Clusters are taken by decreasing
    modulus; each must be converged (rho_C <= ``converged`` max(1, max|theta|)) and decided:
    certainly not excited (share + err <= tol max|a|: next cluster) or certainly excited
    (share - err > tol max|a|: its largest |theta| is returned).  Anything else returns None
    (the caller falls back to Arnoldi from e0, whose space holds only excited modes).

    Raises InvalidHyperparameterError for an argument of the wrong kind (``space`` not a
    KrylovSpace, ``e0`` not a finite vector of the space's length, ``symmetric`` not a bool,
    ``tol`` or ``converged`` not in (0, 1)), naming it.
    """
    if not isinstance(space, KrylovSpace):
        raise InvalidHyperparameterError(
            f"space must be a KrylovSpace (e.g. block_krylov(...).space), got {_short(space)} "
            f"({type(space).__name__})")
    e0 = finite_array("e0", e0, ndim=1, error=InvalidHyperparameterError)
    if e0.shape != (space.n,):
        raise InvalidHyperparameterError(f"e0 must be a vector of shape ({space.n},), got {e0.shape}")
    symmetric = flag("symmetric", symmetric)
    for name, value in (("tol", tol), ("converged", converged)):
        if not positive(name, value) < 1:
            raise InvalidHyperparameterError(f"{name} must lie in (0, 1), got {value!r}")
    k = space.k
    norm0 = float(np.linalg.norm(e0))
    if k == 0 or norm0 == 0.0:
        return None
    Q, MQ = space.Q, space.MQ
    q = Q.T @ e0
    omega = float(np.linalg.norm(e0 - Q @ q)) / norm0
    if symmetric:
        theta_r, Y = np.linalg.eigh((space.T + space.T.T) / 2)
        theta = theta_r.astype(complex)
        a = Y.T @ q
        kappa = 1.0
    else:
        theta, Y = np.linalg.eig(space.T)
        Y = Y / np.linalg.norm(Y, axis=0)
        kappa = float(np.linalg.cond(Y))
        if not np.isfinite(kappa) or kappa > 1e12:
            return None
        a = np.linalg.solve(Y, q.astype(complex))
    modulus = np.abs(theta)
    scale = max(1.0, float(modulus.max()))
    share = np.abs(a)
    threshold = tol * float(share.max())
    floor = 1e3 * np.finfo(float).eps * kappa * norm0
    residual: dict[int, float] = {}

    def rho(j: int) -> float:
        if j not in residual:
            y = Y[:, j]
            residual[j] = float(np.linalg.norm(MQ @ y - theta[j] * (Q @ y)))
        return residual[j]

    taken = np.zeros(k, dtype=bool)
    for j in np.argsort(-modulus, kind="stable"):
        if taken[j]:
            continue
        radius = max(1e-10 * scale, 2.0 * rho(j))
        members = np.flatnonzero(~taken & (np.abs(theta - theta[j]) <= radius))
        taken[members] = True
        rho_c = max(rho(int(i)) for i in members)
        if rho_c > converged * scale:
            return None
        outside = np.ones(k, dtype=bool)
        outside[members] = False
        distance = float(np.abs(theta[members][:, None] - theta[outside][None, :]).min()) if outside.any() \
            else np.inf
        gap = distance - rho_c
        if not gap > rho_c:
            return None
        err = norm0 * (omega + kappa * np.sqrt(members.size) * rho_c / gap) + floor
        share_c = float(np.linalg.norm(a[members]))
        if share_c + err <= threshold:
            continue
        if share_c - err > threshold:
            return float(modulus[members].max())
        return None
    return None


def _checked_arguments(apply: Any, project: Any, start: Any, symmetric: Any, rhs: Any, want_eig: Any,
                       eig_tol: Any, solve_tol: Any, max_vectors: Any, min_blocks: Any
                       ) -> tuple[np.ndarray, np.ndarray | None, float | Callable[[float], float], float, int, int]:
    """The entry checks of :func:`block_krylov` (its docstring); returns the checked values."""
    for name, fn in (("apply", apply), ("project", project)):
        if not callable(fn):
            raise InvalidHyperparameterError(
                f"{name} must be a function of an (n, b) float array, got {_short(fn)} ({type(fn).__name__})")
    X = finite_array("start", start, ndim=2, error=InvalidHyperparameterError)
    n, b = X.shape
    if n == 0 or b == 0:
        raise InvalidHyperparameterError(f"start must be an (n, b) array with n, b >= 1, got shape {X.shape}")
    if rhs is not None:
        rhs = finite_array("rhs", rhs, ndim=1, error=InvalidHyperparameterError)
        if rhs.shape != (n,):
            raise InvalidHyperparameterError(f"rhs must be None or a vector of shape ({n},), got {rhs.shape}")
    flag("symmetric", symmetric)
    flag("want_eig", want_eig)
    if callable(eig_tol):
        user_tol = eig_tol

        def eig_tol(rate: float) -> float:
            return positive("eig_tol(rate)", user_tol(rate))
    else:
        eig_tol = positive("eig_tol", eig_tol)
    solve_tol = positive("solve_tol", solve_tol)
    max_vectors = integer("max_vectors", max_vectors, minimum=1, maximum=None)
    if 16 * n * min(max_vectors, n) > MAX_SPACE_BYTES:
        raise InvalidHyperparameterError(
            f"max_vectors={max_vectors} columns of length {n} need {16 * n * min(max_vectors, n):.3g} bytes, "
            f"more than MAX_SPACE_BYTES={MAX_SPACE_BYTES}; use a smaller max_vectors")
    min_blocks = integer("min_blocks", min_blocks, minimum=1, maximum=None)
    return X, rhs, eig_tol, solve_tol, min(max_vectors, n), min_blocks


def _checked_products(apply: Callable[[np.ndarray], np.ndarray], project: Callable[[np.ndarray], np.ndarray],
                      n: int) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """``apply`` and ``project`` wrapped so that a result of the wrong shape or with NaN/inf
    raises a typed error naming the function (one O(n b) pass per product; a product costs
    at least as much)."""

    def checked(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
        def call(V: np.ndarray) -> np.ndarray:
            out = fn(V)
            if not isinstance(out, np.ndarray) or out.shape != V.shape:
                raise InvalidProblemError(
                    f"{name} must return an array of the shape of its argument {V.shape}, got "
                    f"{'shape ' + str(out.shape) if isinstance(out, np.ndarray) else _short(out)}")
            if not np.isfinite(out).all():
                raise InvalidProblemError(
                    f"{name} returned NaN/inf for a finite argument of shape {V.shape}: no Krylov space "
                    "can be built (is the map defined and affine there?)")
            return out
        return call

    return checked("apply", apply), checked("project", project)


def _dominant(space: KrylovSpace, symmetric: bool, E: np.ndarray, b_last: int) -> DominantEigenvalues:
    """Ritz values of T and the residuals of the ones that decide the spectral radius:
    P M Q y - theta Q y = Q (T y - theta y) + E y_last, E the part of the last block's
    products outside the space (full reorthogonalisation keeps the older blocks' part at
    rounding level), so ||residual|| is computed from the small matrices and E."""
    T, k = space.T, space.k
    if symmetric:
        theta, Y = np.linalg.eigh((T + T.T) / 2)
        picks = sorted({0, 1, k - 2, k - 1} & set(range(k)))
    else:
        theta, Y = np.linalg.eig(T)
        order = np.argsort(-np.abs(theta))
        big = np.abs(theta) >= 0.999 * np.abs(theta).max()
        picks = sorted(set(order[:2].tolist()) | set(np.flatnonzero(big).tolist()))
    Yp = Y[:, picks]
    G = E.T @ E
    tail = Yp[-b_last:]
    outside = np.sqrt(np.maximum(np.real(np.einsum("ip,ij,jp->p", tail.conj(), G, tail)), 0.0))
    inside = np.linalg.norm(T @ Yp - Yp * theta[picks], axis=0)
    norms = np.hypot(outside, inside) / np.linalg.norm(Yp, axis=0)
    resid = {j: float(v) for j, v in zip(picks, norms, strict=True)}
    if symmetric:
        rate, error = _symmetric_estimate(theta, resid)
    else:
        j = int(np.argmax(np.abs(theta)))
        rate, error = float(np.abs(theta[j])), resid[j]
    # the computed T is T + dT with ||dT|| about sqrt(k) eps ||T|| (inner products and the eigensolver):
    # an error reported below that level would claim more than floating point gives
    error = max(error, _rounding_floor(k, float(np.abs(theta).max(initial=0.0))))
    big_j = [j for j in picks if abs(theta[j]) >= 0.999 * rate]
    big_j.sort(key=lambda j: -abs(theta[j]))
    return DominantEigenvalues(rate=rate, error=error, values=np.asarray(theta[big_j], dtype=complex),
                               residuals=np.array([resid[j] for j in big_j]), symmetric=symmetric,
                               dimension=k)
