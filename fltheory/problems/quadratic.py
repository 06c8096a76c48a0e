"""Quadratic clients f_i(x) = 1/2 x^T H_i x - e_i^T x + c_i (docs/theory/problems.md).

grad f_i = H_i x - e_i, Hessian H_i, x_i* = H_i^{-1} e_i,
L_i = lambda_max(H_i), mu_i = lambda_min(H_i); x* = (sum p_i H_i)^{-1} sum p_i e_i.

Least-squares clients f_i = 1/(2 n_i) ||A_i x - b_i||^2 + (ridge/2)||x||^2 map
onto this with H_i = A_i^T A_i / n_i + ridge I, e_i = A_i^T b_i / n_i,
c_i = ||b_i||^2 / (2 n_i); they keep their rows, which enables the minibatch
oracle and the empirical Fisher.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, in_unit_interval, positive
from ..errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ._chunking import client_slices
from ._process_shares import RemoteShare, SharedRowGradient
from .base import client_offsets, Federation, RowGradient, finite_output, first_of_run, normalize_weights
from .constants import CurvatureBounds
from ..aliases import ClientSelection

__all__ = ["QuadraticFederation"]

_SYM_TOL = 1e-10


_POOLS: dict[int, ThreadPoolExecutor] = {}
_MIN_THREADED_FLOATS = 1 << 18      # below ~2 MB of H a second thread costs more than it saves
# below ~1 MB of H a round's local steps in a worker process save less than its message costs (~40 us)
_MIN_SHARED_FLOATS = 1 << 17
_SHARE_BLOCK_BYTES = 1 << 23


def _hx(H: np.ndarray, X: np.ndarray, threads: int = 1, out: np.ndarray | None = None) -> np.ndarray:
    """Rows H_r x_r for symmetric H_r, computed as x_r^T H_r: numpy's stacked
    (1, d) @ (d, d) kernel streams H about twice as fast as (d, d) @ (d, 1) for
    small d (benchmarks/oracles.py).  H is exactly symmetric (the constructor
    symmetrises it), so the two agree up to summation order.  With
    ``threads > 1`` and a large stack, contiguous blocks of rows are handed to
    a thread pool (numpy releases the GIL in matmul); each row is computed by
    the same kernel, so the result is identical to the single-threaded one.
    ``out``: an optional (m, d) float64 array that receives the result."""
    m, d = X.shape
    rows = out
    out = np.empty((m, 1, d)) if rows is None else rows[:, None, :]
    if threads <= 1 or m < 2 * threads or H.size < _MIN_THREADED_FLOATS:
        np.matmul(X[:, None, :], H, out=out)
        return out[:, 0, :]
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="fltheory-hx")
    cuts = np.linspace(0, m, threads + 1).astype(int)

    def block(k: int) -> None:
        a, b = cuts[k], cuts[k + 1]
        np.matmul(X[a:b, None, :], H[a:b], out=out[a:b])

    list(pool.map(block, range(threads)))
    return out[:, 0, :]


#: (array, a): the last immutable run of clients found by _first_of_run (one tuple: read atomically)
_NOTHING = object()                 # no client array remembered yet (None is a valid selection: all clients)
_LAST_RUN: list[tuple[Any, int]] = [(_NOTHING, 0)]


class _QuadraticRows:
    """``fn(X, out)``: out = H_i x_i - e_i for the rows of one share (the operations of
    ``QuadraticFederation.row_gradient``: the batched product, then the subtraction), on
    its own Hessians H (k, d, d) and e (k, d); pickled to a worker process once."""

    def __init__(self, H: np.ndarray, e: np.ndarray) -> None:
        self.H, self.e = H, e
        #: rows per cache block of a round's local steps in a share (``_blockwise``): 8 MB of H
        #: (16 MB measured no faster here, benchmarks/README.md "Issue 17 targets")
        self.block_rows = max(1, _SHARE_BLOCK_BYTES // max(1, 8 * H.shape[1] * H.shape[2]))

    def __call__(self, X: np.ndarray, out: np.ndarray) -> None:
        np.matmul(X[:, None, :], self.H, out=out[:, None, :])
        out -= self.e

    def block(self, start: int, stop: int) -> _QuadraticRows:
        """The same function on rows start..stop-1 of the share (views of H and e)."""
        return _QuadraticRows(self.H[start:stop], self.e[start:stop])


class _CallerRows:
    """A share's function on the caller's points (rows a..b-1 of X and out)."""

    def __init__(self, fn: _QuadraticRows, a: int, b: int) -> None:
        self.fn, self.a, self.b = fn, a, b

    def __call__(self, X: np.ndarray, out: np.ndarray) -> None:
        self.fn(X[self.a:self.b], out[self.a:self.b])


def _shared_quadratic_gradient(H: np.ndarray, e: np.ndarray, processes: int) -> SharedRowGradient:
    """The bound gradient of ``with_processes``: ``processes`` contiguous shares of the
    rows (sizes differing by at most one), the first in this thread; single calls are
    computed here (one remote call per step costs more than a step of a small share)."""
    m = H.shape[0]
    size, longer = divmod(m, processes)
    cuts = [j * size + min(j, longer) for j in range(processes + 1)]
    remote = [RemoteShare(j - 1, _QuadraticRows, (H[cuts[j]:cuts[j + 1]], e[cuts[j]:cuts[j + 1]]),
                          np.arange(cuts[j], cuts[j + 1]), m, H.shape[2]) for j in range(1, processes)]
    own = _QuadraticRows(H[:cuts[1]], e[:cuts[1]])
    return SharedRowGradient(_CallerRows(own, 0, cuts[1]), (_QuadraticRows, (H[:cuts[1]], e[:cuts[1]])),
                             np.arange(cuts[1]), remote, m, whole=_QuadraticRows(H, e))


def _first_of_run(clients: Any, n_clients: int) -> int | None:
    """a when ``clients`` is an int64 array a, a+1, ..., b-1 with 0 <= a < b <= n_clients
    (e.g. full participation), else None (then the indices go through the full checks).

    An array whose contents can never change (a read-only view of ``bytes``, e.g. the
    shared clients of ``fltheory.participation.full_participants``) is remembered once
    checked (a strong reference, so its identity cannot be reused), and the same object
    is then recognised without passes over it."""
    known, first = _LAST_RUN[0]
    if clients is known:
        return first if first + clients.shape[0] <= n_clients else None
    if type(clients) is not np.ndarray or clients.dtype != np.int64:
        return None
    a = first_of_run(clients)
    if a is None or a < 0 or a + clients.size > n_clients:
        return None
    if type(clients.base) is bytes and not clients.flags.writeable:
        _LAST_RUN[0] = (clients, a)
    return a


# Bytes of Hessians checked and symmetrised at a time (at most 1/16 of H: _chunking.client_slices):
# construction then peaks at the final H plus about 3 such chunks (instead of 3 full copies of H).
_CHUNK_BYTES = 1 << 18


def _symmetric_positive_definite(H: np.ndarray, *, copied: bool) -> np.ndarray:
    """0.5 (H_i + H_i^T) for every client after checking |H_i - H_i^T| <= 1e-10 max(max|H_i|, 1)
    and that the result is positive definite (InvalidProblemError naming the client).

    Works on chunks of clients with one reused buffer, so that building a federation
    peaks at about the final H plus two chunks; every entry is computed by the same
    operations as the whole-array expression 0.5 * (H + H^T), hence the same bits.
    ``copied``: H is already a private copy (symmetrised in place)."""
    N, d, _ = H.shape
    chunks = client_slices(N, 8 * d * d, _CHUNK_BYTES)
    out = H if copied else np.empty_like(H)
    buf = np.empty((chunks[0].stop - chunks[0].start, d, d))
    for c in chunks:
        Hc = H[c]
        T = np.swapaxes(Hc, 1, 2)
        tmp = buf[: Hc.shape[0]]
        np.subtract(Hc, T, out=tmp)
        asym = np.abs(tmp, out=tmp).max(axis=(1, 2))
        scale = np.maximum(np.abs(Hc, out=tmp).max(axis=(1, 2)), 1.0)
        bad = np.flatnonzero(asym > _SYM_TOL * scale)
        if bad.size:
            i = c.start + int(bad[0])
            raise InvalidProblemError(
                f"H[{i}] is not symmetric: max |H - H^T| = {asym[bad[0]]:.3e}")
        np.multiply(Hc, 0.5, out=tmp)                # 0.5 H + 0.5 H^T: the bits of 0.5 (H + H^T)
        tmp += 0.5 * T                               # (halving is exact), no overflow near 1e308
        out[c] = tmp
    for c in chunks:
        try:
            np.linalg.cholesky(out[c])
        except np.linalg.LinAlgError:
            lam = np.concatenate([np.linalg.eigvalsh(out[b])[:, 0] for b in chunks])
            i = int(np.argmin(lam))
            raise InvalidProblemError(
                f"H[{i}] is not positive definite: smallest eigenvalue {lam[i]:.3e} <= 0") from None
    return out


#: Largest condition number at which :func:`refined_solve` answers; its relative
#: error is about 1e-16 + cond * 1e-19 (measured 1e-13 at 1e8, 1e-5 at 1e14).
MAX_SOLVE_CONDITION = 1e15


def refined_solve(H: Any, b: Any, what: str, max_steps: int = 10) -> np.ndarray:
    """Rows of H_r^{-1} b_r for SPD H (m, d, d), b (m, d).

    A float64 LU solve has relative forward error up to about cond(H) * 1e-16
    (2e-9 at cond 1e8, 3e-3 at 1e14, 0.2 at 1e16, measured against 60-digit
    arithmetic).  Mixed-precision iterative refinement, x <- x + H^{-1} r with
    the residual r = b - H x computed in ``numpy.longdouble`` (64-bit mantissa
    on x86), lowers it to about 1e-16 + cond * 1e-19; steps stop when the
    correction stops shrinking.  Above cond = :data:`MAX_SOLVE_CONDITION`
    (1e15) the answer would not be trustworthy: OutOfRangeError names the
    routine and the condition number.
    """
    wide = np.longdouble
    Hw = np.asarray(H).astype(wide)
    bw = np.asarray(b).astype(wide)
    H64 = Hw.astype(np.float64)
    lam = np.linalg.eigvalsh(H64)
    with np.errstate(divide="ignore"):
        cond = np.where(lam[:, 0] > 0, lam[:, -1] / np.maximum(lam[:, 0], np.finfo(float).tiny), np.inf)
    if np.any(cond > MAX_SOLVE_CONDITION):
        k = int(np.argmax(cond))
        raise OutOfRangeError(
            f"{what}: condition number {cond[k]:.3g} (row {k}) exceeds {MAX_SOLVE_CONDITION:.0e}; "
            "float64 cannot resolve the solution to any useful accuracy")
    x = np.linalg.solve(H64, bw.astype(np.float64)[:, :, None])[:, :, 0]
    previous = np.inf
    for _ in range(max_steps):
        r = (bw - np.einsum("mij,mj->mi", Hw, x.astype(wide))).astype(np.float64)
        dx = np.linalg.solve(H64, r[:, :, None])[:, :, 0]
        size = float(np.max(np.linalg.norm(dx, axis=1)))
        if not size < 0.5 * previous:          # stagnated at the precision floor
            break
        x = x + dx
        previous = size
    return x


class QuadraticFederation(Federation):
    """N quadratic clients with stacked Hessians H (N, d, d) and linear terms e (N, d).

    Parameters
    ----------
    H : array (N, d, d)
        Symmetric positive-definite client Hessians.
    e : array (N, d)
        Linear terms: grad f_i(x) = H_i x - e_i.
    n_samples : array (N,), optional
        Sample counts n_i; default weights are p_i = n_i / n.
    weights : array (N,), optional
        Positive weights (normalised to sum 1); override ``n_samples``.
    offsets : array (N,), optional
        Constants c_i added to the losses (they change no gradient).
    """

    def __init__(self, H: ArrayLike, e: ArrayLike, n_samples: ArrayLike | None = None, weights: ArrayLike | None = None,
                 offsets: ArrayLike | None = None) -> None:
        self._setup(H, e, n_samples, weights, offsets, owned=False)

    @classmethod
    def _adopt(cls, H: np.ndarray, e: np.ndarray, *, n_samples: ArrayLike | None = None,
               weights: ArrayLike | None = None, offsets: ArrayLike | None = None) -> QuadraticFederation:
        """The federation of ``QuadraticFederation(H, e, ...)``, taking ownership of the
        C-contiguous float64 array ``H`` (checked and symmetrised in place, then stored, instead of
        copied): for generators that built H themselves and hold no other reference to it,
        so that construction does not need a second copy of the Hessians."""
        fed = cls.__new__(cls)
        fed._setup(H, e, n_samples, weights, offsets, owned=True)
        return fed

    def _setup(self, H: ArrayLike, e: ArrayLike, n_samples: ArrayLike | None, weights: ArrayLike | None,
               offsets: ArrayLike | None, *, owned: bool) -> None:
        H_in = H
        H = finite_array("H", H, ndim=3, copy=not owned)
        e = finite_array("e", e, ndim=2, copy=not owned)
        N, d, d2 = H.shape
        if N == 0 or d == 0:
            raise InvalidProblemError(f"H must have at least one client and dimension, got shape {H.shape}")
        if d != d2:
            raise InvalidProblemError(f"each H_i must be square, got H of shape {H.shape}")
        if e.shape != (N, d):
            raise InvalidProblemError(f"e must have shape ({N}, {d}) to match H {H.shape}, got {e.shape}")
        copied = owned or not (isinstance(H_in, np.ndarray) and np.may_share_memory(H, H_in))
        H = _symmetric_positive_definite(H, copied=copied)
        self.H = H
        self.e = e
        self.n_clients, self.dim = N, d
        self.weights, self.n_samples = normalize_weights(N, n_samples, weights)
        self.offsets = client_offsets(N, offsets)
        self._A: np.ndarray | None = None     # padded rows (N, n_max, d)
        self._b: np.ndarray | None = None     # padded targets (N, n_max)
        self._rows: np.ndarray | None = None  # n_i rows per client
        self._ridge = 0.0
        self._explicit_weights = weights is not None

    # ------------------------------------------------------------------ data
    @classmethod
    def from_least_squares(cls, A: Sequence[Any], b: Sequence[Any], *, ridge: float = 0.0,
                           weights: ArrayLike | None = None) -> QuadraticFederation:
        """Clients f_i(x) = 1/(2 n_i) ||A_i x - b_i||^2 + (ridge/2) ||x||^2.

        ``A`` and ``b`` are sequences of per-client arrays (n_i, d) and (n_i,);
        clients may hold different numbers of rows.  Weights default to
        p_i = n_i / n.  Each H_i must be positive definite (enough rows, or
        ridge > 0).
        """
        ridge = positive("ridge", ridge, allow_zero=True, error=InvalidProblemError)
        for name, seq in (("A", A), ("b", b)):
            try:
                len(seq)
            except TypeError:
                raise InvalidProblemError(
                    f"{name} must be a sequence of per-client arrays, got {seq!r:.80} ({type(seq).__name__})") from None
            if isinstance(seq, (str, bytes)):
                raise InvalidProblemError(f"{name} must be a sequence of per-client arrays, got the string {seq!r:.80}")
        if len(A) != len(b) or len(A) == 0:
            raise InvalidProblemError(
                f"A and b must be non-empty sequences of equal length, got {len(A)} and {len(b)}")
        # read only (copied into the padded arrays below): no private copies of the caller's float64 arrays
        As = [finite_array(f"A[{i}]", a, ndim=2, copy=False) for i, a in enumerate(A)]
        bs = [finite_array(f"b[{i}]", v, ndim=1, copy=False) for i, v in enumerate(b)]
        d = As[0].shape[1]
        for i, (a, v) in enumerate(zip(As, bs)):
            if a.shape[0] == 0:
                raise InvalidProblemError(f"client {i} has no rows (A[{i}] has shape {a.shape})")
            if a.shape[1] != d:
                raise InvalidProblemError(f"A[{i}] has {a.shape[1]} columns, expected {d}")
            if v.shape != (a.shape[0],):
                raise InvalidProblemError(f"b[{i}] must have shape ({a.shape[0]},), got {v.shape}")
        n = np.array([a.shape[0] for a in As])
        N, nmax = len(As), int(n.max())
        Ap = np.zeros((N, nmax, d))
        bp = np.zeros((N, nmax))
        for i, (a, v) in enumerate(zip(As, bs)):   # construction only, not a hot path
            Ap[i, : a.shape[0]] = a
            bp[i, : a.shape[0]] = v
        return cls._from_padded(Ap, bp, n, ridge, weights)

    @classmethod
    def _from_padded(cls, Ap: np.ndarray, bp: np.ndarray, n: np.ndarray, ridge: float,
                     weights: ArrayLike | None) -> QuadraticFederation:
        """The least-squares federation of checked, zero-padded rows Ap (N, n_max, d) and
        targets bp (N, n_max) with n (N,) rows per client (both arrays are stored, not copied):
        H_i = A_i^T A_i / n_i + ridge I, e_i = A_i^T b_i / n_i, c_i = ||b_i||^2 / (2 n_i)."""
        d = Ap.shape[2]
        H = np.einsum("nri,nrj->nij", Ap, Ap)
        H /= n[:, None, None]                       # the operations of A^T A / n + ridge I, in place
        H += ridge * np.eye(d)
        e = np.einsum("nri,nr->ni", Ap, bp) / n[:, None]
        c = np.einsum("nr,nr->n", bp, bp) / (2 * n)
        fed = cls._adopt(H, e, n_samples=n, weights=weights, offsets=c)
        fed._A, fed._b, fed._rows, fed._ridge = Ap, bp, n, ridge
        return fed

    _threads: int = 1
    _processes: int = 1

    def with_threads(self, threads: int) -> QuadraticFederation:
        """Copy whose ``client_grad`` / ``client_loss`` split large client stacks
        over ``threads`` threads (default 1).  Results are bitwise identical;
        whether it is faster depends on free cores (benchmarks/README.md)."""
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
            raise InvalidHyperparameterError(f"threads must be an integer >= 1, got {threads!r}")
        out = copy.copy(self)
        out._threads = int(threads)
        return out

    def with_processes(self, processes: int) -> QuadraticFederation:
        """Copy whose local steps split the clients into ``processes`` contiguous shares:
        the first runs in the calling thread, the others in worker processes, all of a
        round's steps at once (one message per share and round, each share in 8 MB cache
        blocks: ``SharedRowGradient.map_rows``): the plain steps of ``local_descent``
        (FedAvg, FedProx and FedDyn with gradient steps, SCAFFOLD, ...) and FedOpt's fused
        client-optimizer steps (an optimizer from a factory of ``fltheory.optim``, which
        pickles); default 1, none.

        Each bound run of clients a, a+1, ..., b-1 (e.g. full participation) sends its
        shares' Hessians to the workers once; the workers run the same operations on the
        same numbers, so results are bitwise identical for every count.  Other client
        lists (partial participation), single gradient calls and the steps of an optimizer
        assembled by hand stay in this process.  Used when the bound clients' Hessians
        hold at least ``2 * processes`` clients and ~1 MB, and the local loop would run
        them as one block in one thread (less than 2.5 MB, ``blocking._SPLIT_BYTES``, with two
        threads or more; any batch with one thread, ``set_num_threads(1)``); larger batches
        run in blocks on the local loop's threads as without workers (measured as fast or
        faster there, and less hurt by a busy core).  It pays off on free cores when
        the clients' data fit one core's cache (N = 100, d = 50: rounds 1.3-1.6x faster than
        the default; benchmarks/blocked.py).  When three calls in a row are slower than computing every
        share here (another process holds a worker's core), the next calls stay here for a
        while.  See :meth:`LogisticFederation.with_processes` for the workers' life cycle."""
        if isinstance(processes, bool) or not isinstance(processes, (int, np.integer)) or processes < 1:
            raise InvalidHyperparameterError(f"processes must be an integer >= 1, got {processes!r}")
        out = copy.copy(self)
        out._processes = int(processes)
        return out

    @property
    def worker_processes(self) -> int:
        """``with_processes``' count (1: none)."""
        return self._processes

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles leave the bound shared gradients behind (they hold worker
        sockets); they are rebuilt on first use."""
        state = self.__dict__.copy()
        state.pop("_shared_gradients", None)
        return state

    @property
    def has_data(self) -> bool:
        """True when built from least-squares rows (minibatch oracle available)."""
        return self._A is not None

    # --------------------------------------------------------------- oracles
    def _H(self, idx: np.ndarray) -> np.ndarray:
        return self.H if self._is_all(idx) else self.H[idx]

    def _e(self, idx: np.ndarray) -> np.ndarray:
        return self.e if self._is_all(idx) else self.e[idx]

    def client_loss(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """f_i(x) = 1/2 x^T H_i x - e_i^T x + c_i for each listed client -> (m,)."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        with np.errstate(over="ignore", invalid="ignore"):
            HX = _hx(self._H(idx), X, self._threads)
            out = 0.5 * np.einsum("mi,mi->m", X, HX) - np.einsum("mi,mi->m", self._e(idx), X) \
                + self.offsets[idx]
        return finite_output("client loss", out)

    def client_grad(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """grad f_i(x) = H_i x - e_i for each listed client -> (m, d)."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        with np.errstate(over="ignore", invalid="ignore"):
            G = _hx(self._H(idx), X, self._threads)
            G -= self._e(idx)
        return finite_output("client gradient", G)

    def row_gradient(self, clients: ClientSelection, rng: np.random.Generator | None) -> RowGradient:
        """The exact gradient H_i y - e_i bound to the listed clients, computed as
        ``client_grad`` does (same bits), with the clients' H_i and e_i picked once:
        views for a contiguous ascending run of clients (e.g. full participation),
        a gathered copy otherwise.  Stochastic oracles and subclasses: the generic
        hook (:meth:`Federation.row_gradient`)."""
        if type(self) is not QuadraticFederation or self.is_stochastic:
            return super().row_gradient(clients, rng)
        a = 0 if clients is None else _first_of_run(clients, self.n_clients)
        if a is not None:                      # a checked run a, a+1, ..., a+m-1 (None: all): views
            m = self.n_clients if clients is None else clients.shape[0]   # type: ignore[union-attr]
            H, e = self.H[a:a + m], self.e[a:a + m]
        else:
            idx = self._clients(clients)
            m = idx.shape[0]
            H, e = self.H[idx], self.e[idx]
        if self._processes > 1 and a is not None and m >= 2 * self._processes and H.size >= _MIN_SHARED_FLOATS:
            # contiguous runs only (full participation): another list would send its gathered
            # Hessians to the workers again and keep them cached (partial participation: every round)
            key = (self._processes, a, m)
            cache = self.__dict__.setdefault("_shared_gradients", {})
            shared = cache.get(key)
            if shared is None:
                if len(cache) >= 16:
                    cache.clear()
                shared = cache[key] = _shared_quadratic_gradient(H, e, self._processes)
            return shared
        threads = self._threads
        if threads > 1 and m >= 2 * threads and H.size >= _MIN_THREADED_FLOATS:
            def grad(X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
                G = _hx(H, X, threads, out)
                G -= e
                return G
            return grad

        views: list[Any] = [None, None, None, None, None]   # X, out, their (m, 1, d) views, shape: last call

        def grad_one_thread(X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
            # the kernel of _hx, one thread; the local loop passes the same X and out every
            # step, whose (m, 1, d) views are then reused
            if out is not None and X is views[0] and out is views[1] and X.shape == out.shape == views[4]:
                np.matmul(views[2], H, out=views[3])
                out -= e
                return out
            G = np.empty(X.shape) if out is None else out
            X3, G3 = X[:, None, :], G[:, None, :]
            np.matmul(X3, H, out=G3)
            G -= e
            if out is not None:
                views[:] = [X, out, X3, G3, X.shape]
            return G
        return grad_one_thread

    def client_hess(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """H_i (independent of x) -> (m, d, d), a copy."""
        idx = self._clients(clients)
        self._points(X, idx.shape[0])
        return self.H[idx].copy()

    def fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """True Fisher diagonal of the Gaussian linear model with unit noise
        variance, which equals diag(H_i) (independent of x) -> (m, d).

        For least-squares clients the ridge term is excluded, so this is
        diag(A_i^T A_i / n_i).  The empirical Fisher is
        :meth:`empirical_fisher_diag`."""
        idx = self._clients(clients)
        self._points(X, idx.shape[0])
        diag = np.einsum("mii->mi", self.H[idx])
        return diag - self._ridge

    def per_sample_residuals(self, X: ArrayLike, idx: ClientSelection) -> np.ndarray:
        """r_ij = a_ij^T x_i - b_ij for the rows x_i of X (m, d) and the listed clients
        ``idx``, zero on padding rows -> (m, n_max)."""
        self._require_data("per-sample residuals")
        clients = self._clients(idx)
        return self._per_sample_residuals(self._points(X, clients.shape[0]), clients)

    def _per_sample_residuals(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """:meth:`per_sample_residuals` without argument checks (callers checked them)."""
        A_all, b_all, rows_all = self._require_data("per-sample residuals")
        A = A_all[idx]
        r = np.einsum("mrd,md->mr", A, X) - b_all[idx]
        r[np.arange(A.shape[1])[None, :] >= rows_all[idx][:, None]] = 0.0
        return r

    def empirical_fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """(1/n_i) sum_j g_ij (.) g_ij with per-sample gradients
        g_ij = a_ij (a_ij^T x - b_ij) of the data term (least-squares clients only)."""
        A_all, _, rows_all = self._require_data("the empirical Fisher")
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        r = self._per_sample_residuals(X, idx)
        return np.einsum("mr,mrd->md", r * r, A_all[idx] ** 2) / rows_all[idx][:, None]

    def _require_data(self, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The padded rows, targets and row counts (A, b, n_i); InvalidProblemError without data."""
        if self._A is None or self._b is None or self._rows is None:
            raise InvalidProblemError(
                f"{what} needs least-squares rows; build with QuadraticFederation.from_least_squares")
        return self._A, self._b, self._rows

    def _minibatch_grad(self, X: np.ndarray, idx: np.ndarray, rng: np.random.Generator,
                        batch_size: int) -> np.ndarray:
        """Mean of ``batch_size`` per-sample gradients a_j (a_j^T x - b_j) + ridge x,
        rows j = floor(u n_i), u ~ U[0,1), drawn with replacement."""
        A_all, b_all, rows_all = self._require_data("the minibatch oracle")
        m = idx.shape[0]
        u = rng.random((m, batch_size))
        rows = np.minimum((u * rows_all[idx][:, None]).astype(np.int64), rows_all[idx][:, None] - 1)
        A = A_all[idx[:, None], rows]                        # (m, b, d)
        r = np.einsum("mbd,md->mb", A, X) - b_all[idx[:, None], rows]
        return np.einsum("mb,mbd->md", r, A) / batch_size + self._ridge * X

    def minibatch_variance(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Exact E||g - grad f_i(x)||^2 of the minibatch oracle at each X[r]:
        (1/b) (1/n_i) sum_j ||g_ij - mean_j g_ij||^2 -> (m,)."""
        A_all, _, rows_all = self._require_data("the minibatch variance")
        if self._batch_size is None:
            raise InvalidProblemError("no minibatch oracle configured; call with_minibatch(b) first")
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        r = self._per_sample_residuals(X, idx)
        n = rows_all[idx]
        G = r[:, :, None] * A_all[idx]                       # (m, n_max, d), zero on padding
        mean = G.sum(axis=1) / n[:, None]
        second = np.einsum("mrd,mrd->m", G, G) / n
        return (second - np.einsum("md,md->m", mean, mean)) / self._batch_size

    # ------------------------------------------------------------- solutions
    def hess(self, x: ArrayLike | None = None) -> np.ndarray:
        """sum_i p_i H_i (the point is optional: F is quadratic)."""
        if x is not None:
            self._check_point(x)
        return np.einsum("i,ijk->jk", self.weights, self.H)

    def optimum(self) -> np.ndarray:
        """x* = (sum p_i H_i)^{-1} sum p_i e_i of the stored data (:func:`refined_solve`).

        Relative error about 1e-16 + cond x 1e-19 against the exact optimum of the stored
        float64 H_i, e_i and p_i (measured against rational arithmetic, 4 x 4, two clients:
        at most 8e-8 at cond 1e13, 8e-7 at 1e14, 1.2e-5 at 1e15); above cond 1e15
        OutOfRangeError.  The rounding of the data themselves is another matter: if e_i was
        computed as H_i x in float64, the stored problem's optimum differs from x by up to
        about cond x 1e-16 relative (1% at cond 1e15), which no solver can undo."""
        return self._optimum.copy()

    @cached_property
    def _optimum(self) -> np.ndarray:
        wide = np.longdouble
        H = np.einsum("i,ijk->jk", self.weights.astype(wide), self.H.astype(wide))
        b = self.weights.astype(wide) @ self.e.astype(wide)
        return refined_solve(H[None], b[None], "the global optimum x*")[0]

    def client_optima(self) -> np.ndarray:
        """x_i* = H_i^{-1} e_i -> (N, d), refined as :meth:`optimum`."""
        return self._client_optima.copy()

    @cached_property
    def _client_optima(self) -> np.ndarray:
        return refined_solve(self.H, self.e, "the client optima x_i*")

    @cached_property
    def client_eigenvalues(self) -> np.ndarray:
        """Ascending eigenvalues of each H_i -> (N, d)."""
        return np.linalg.eigvalsh(self.H)

    @property
    def client_L(self) -> np.ndarray:
        """L_i = lambda_max(H_i) -> (N,)."""
        return self.client_eigenvalues[:, -1].copy()

    @property
    def client_mu(self) -> np.ndarray:
        """mu_i = lambda_min(H_i) -> (N,)."""
        return self.client_eigenvalues[:, 0].copy()

    @property
    def L(self) -> float:
        """Smoothness of the global objective F: lambda_max(sum p_i H_i).

        Not the clients' constant: a bound stated for L-smooth clients needs
        ``client_L.max()`` (>= this value)."""
        return float(np.linalg.eigvalsh(self.hess())[-1])

    @property
    def mu(self) -> float:
        """Strong convexity of the global objective F: lambda_min(sum p_i H_i).

        Not the clients' constant: a bound stated for mu-strongly convex clients
        needs ``client_mu.min()`` (<= this value)."""
        return float(np.linalg.eigvalsh(self.hess())[0])

    # ------------------------------------------------------- federation hooks
    has_constant_hessians = True

    def shifted_solve(self, clients: np.ndarray, D: np.ndarray, b: np.ndarray, Y0: np.ndarray, *,
                      tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
        """argmin_y f_i(y) + 1/2 y^T diag(D_r) y - b_r^T y: the batched linear solve
        (H_i + diag(D_r)) y = e_i + b_r (``Y0``, ``tol``, ``max_iter`` unused)."""
        d = self.dim
        A = self.H[clients] + D[:, :, None] * np.eye(d)
        return np.linalg.solve(A, (self.e[clients] + b)[:, :, None])[:, :, 0]

    def smoothness_bounds(self, clients: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """L_i = lambda_max(H_i) (exact)."""
        return self.client_L[clients]

    def strong_convexity(self) -> float:
        """lambda_min(sum p_i H_i)."""
        return self.mu

    def curvature_bounds(self) -> CurvatureBounds:
        """Extreme eigenvalues of sum p_i H_i and of each H_i (exact)."""
        return CurvatureBounds(L=self.L, mu=self.mu, client_L=self.client_L, client_mu=self.client_mu,
                               exact=True, note="lambda_max of the Hessian")

    def client_gaps(self, W: np.ndarray, clients: np.ndarray) -> np.ndarray:
        """f_k(w) - f_k* = 1/2 (w - x_k*)^T H_k (w - x_k*) exactly (no cancellation)."""
        R = W - self.client_optima()[clients]
        return 0.5 * np.einsum("mi,mij,mj->m", R, self.H[clients], R)

    def loss_and_grad_norm2(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F(x_t) and ||grad F(x_t)||^2 for all rows at once, from Hbar = sum p_i H_i,
        ebar = sum p_i e_i and cbar = sum p_i c_i: F(x) = 1/2 x^T Hbar x - ebar^T x + cbar."""
        Hbar, ebar, cbar = self._global_quadratic()
        HX = X @ Hbar
        loss = 0.5 * np.einsum("td,td->t", HX, X) - X @ ebar + cbar
        G = HX - ebar
        return loss, np.einsum("td,td->t", G, G)

    def _global_quadratic(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(Hbar, ebar, cbar) = (sum p_i H_i, sum p_i e_i, sum p_i c_i), computed once
        per federation (one pass over the N Hessians) and reused while H, e, offsets
        and weights are the same array objects (views such as ``client_block`` or
        replaced arrays recompute; in-place edits of H are not tracked)."""
        cached = self.__dict__.get("_global_cache")
        if cached is not None:
            H, e, offsets, weights = cached[0]
            if H is self.H and e is self.e and offsets is self.offsets and weights is self.weights:
                return cached[1]
        p = self.weights
        value = (np.einsum("i,ijk->jk", p, self.H), p @ self.e, float(p @ self.offsets))
        self.__dict__["_global_cache"] = ((self.H, self.e, self.offsets, p), value)
        return value

    def client_block(self, start: int, stop: int) -> QuadraticFederation | None:
        """A shallow copy whose H and e are the views H[start:stop], e[start:stop]
        (exact oracle only; the subclasses' own oracles are not assumed to read H, e:
        None for them)."""
        if type(self) is not QuadraticFederation or self.is_stochastic:
            return None
        view = copy.copy(self)
        for cached in ("_optimum", "_client_optima", "client_eigenvalues", "_shared_gradients"):
            view.__dict__.pop(cached, None)                 # per-instance caches
        view._processes = 1            # a block runs on the local loop's threads, not in the workers
        view.H = self.H[start:stop]
        view.e = self.e[start:stop]
        view.n_clients = stop - start
        return view

    def lifted(self, copies: int) -> Federation | None:
        """``copies`` independent copies in R^{copies d} sharing H and e
        (:class:`~fltheory.problems.lifted.LiftedQuadraticFederation`); exact oracle of
        this class only (None for a stochastic oracle or a subclass with its own oracles)."""
        if type(self) is not QuadraticFederation or self.is_stochastic:
            return None
        from .lifted import LiftedQuadraticFederation
        return LiftedQuadraticFederation(self, copies)

    def client_data_bytes(self) -> int:
        """8 d^2: one row reads its client's Hessian H_i."""
        return 8 * self.dim * self.dim

    def cvxpy_client_loss(self, client: int, y: Any) -> Any:
        """1/2 ||L_i^T y||^2 - e_i^T y with H_i = L_i L_i^T (Cholesky)."""
        import cvxpy as cp
        Lc = np.linalg.cholesky(self.H[client])
        return 0.5 * cp.sum_squares(Lc.T @ y) - self.e[client] @ y

    # ------------------------------------------------------- shifting clients
    def _subset(self, keep: np.ndarray, weights: np.ndarray | None) -> QuadraticFederation:
        n = None if self.n_samples is None else self.n_samples[keep]
        out = QuadraticFederation(self.H[keep], self.e[keep], n_samples=n, weights=weights,
                                  offsets=self.offsets[keep])
        if self.has_data:
            A, b, rows = self._require_data("subsetting")
            out._A, out._b, out._rows, out._ridge = A[keep], b[keep], rows[keep], self._ridge
        out._batch_size = self._batch_size
        out._threads, out._processes = self._threads, self._processes
        if self._noise_sigma2 is not None:
            out._noise_sigma2 = self._noise_sigma2[keep].copy()
        return out

    def without_client(self, a: int) -> QuadraticFederation:
        """Remove client ``a``; weights become n_i / sum_{j != a} n_j (or the
        remaining explicit weights renormalised)."""
        if self.n_clients < 2:
            raise InvalidProblemError("cannot remove the only client of a federation")
        if isinstance(a, (bool, np.bool_)) or not (isinstance(a, (int, np.integer)) and 0 <= a < self.n_clients):
            raise InvalidProblemError(f"client index must be an integer in [0, {self.n_clients}), got {a!r}")
        keep = np.delete(np.arange(self.n_clients), a)
        w = self.weights[keep] if self._explicit_weights else None
        return self._subset(keep, w)

    def with_client(self, other: Federation, *, weight: float | None = None
                    ) -> QuadraticFederation:
        """Append the clients of ``other``.

        With sample counts on both sides the weights become n_i / n_total.  With
        explicit weights, pass ``weight`` (total weight of the newcomers in
        (0, 1)); the old weights are scaled by 1 - weight.
        """
        if not isinstance(other, QuadraticFederation):
            raise InvalidProblemError(f"other must be a QuadraticFederation, got {type(other).__name__}")
        if other.dim != self.dim:
            raise InvalidProblemError(f"other has dim {other.dim}, expected {self.dim}")
        H = np.concatenate([self.H, other.H])
        e = np.concatenate([self.e, other.e])
        c = np.concatenate([self.offsets, other.offsets])
        if weight is not None:
            w = in_unit_interval("weight", weight, right_closed=False, error=InvalidProblemError)
            weights = np.concatenate([self.weights * (1 - w), other.weights * w])
            n = None
        elif self._explicit_weights or other._explicit_weights or \
                self.n_samples is None or other.n_samples is None:
            raise InvalidProblemError(
                "with_client needs sample counts on both federations, or an explicit weight=")
        else:
            weights, n = None, np.concatenate([self.n_samples, other.n_samples])
        out = QuadraticFederation(H, e, n_samples=n, weights=weights, offsets=c)
        out._explicit_weights = weight is not None
        if self.has_data and other.has_data and self._ridge == other._ridge:
            (A1, b1, rows1), (A2, b2, rows2) = self._require_data("merging"), other._require_data("merging")
            nmax = max(A1.shape[1], A2.shape[1])

            def pad(A: np.ndarray) -> np.ndarray:
                return np.pad(A, [(0, 0), (0, nmax - A.shape[1])] + [(0, 0)] * (A.ndim - 2))

            out._A = np.concatenate([pad(A1), pad(A2)])
            out._b = np.concatenate([pad(b1), pad(b2)])
            out._rows = np.concatenate([rows1, rows2])
            out._ridge = self._ridge
        out._threads, out._processes = self._threads, self._processes
        return self._copy_oracle_to(out, out.n_clients)
