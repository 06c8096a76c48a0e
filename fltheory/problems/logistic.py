"""Logistic-regression clients, binary and multinomial (docs/theory/problems.md).

Binary (labels y in {-1, +1}, parameter x in R^f):

    f_i(x) = (1/n_i) sum_j log(1 + exp(-y_j a_j^T x)) + (reg/2) ||x||^2,
    grad f_i = -(1/n_i) sum_j y_j s(-y_j a_j^T x) a_j + reg x,
    hess f_i = (1/n_i) A_i^T diag(s(z) s(-z)) A_i + reg I,

with s the logistic sigmoid.  Smoothness L_i = lambda_max(A_i^T A_i)/(4 n_i) + reg
(attained at x = 0, so it is the exact sup of lambda_max of the Hessian) and
strong convexity reg.

Multinomial (labels 0..C-1, ``n_classes=C``): the parameter is the
row-major flattening of W in R^{f x C}, x[j*C + c] = W[j, c] (W =
x.reshape(f, C)); logits z = W^T a, f_i(W) = (1/n_i) sum_j (logsumexp(z_j) -
z_{j,y_j}) + (reg/2)||W||_F^2 (the softmax model of FedProx's synthetic
data).  Hessian (1/n_i) sum_j (a_j a_j^T) kron (diag p_j - p_j p_j^T) + reg I.
Since lambda_max(diag p - p p^T) <= max_c 2 p_c (1 - p_c) <= 1/2 (Gershgorin),
L_i = lambda_max(A_i^T A_i)/(2 n_i) + reg is a valid (not always attained)
smoothness bound.  Without ridge the softmax loss is invariant under
W -> W + v 1^T; ``optimum()`` then returns the minimiser with W 1 = 0.

Data are stored padded to (N, n_max, f) with zero rows past n_i; every oracle
runs a few batched matmuls over the client axis (no loop over clients or
samples).  Loss, gradient and the Fisher diagonals run over *size groups* of
the listed clients, each padded only to its own largest n_i (exact optimal
cuts, ``_logistic_buckets``; a loop over a handful of groups), so clients of
very unequal sizes cost about sum_i n_i rows, not m * n_max.  On request
(``with_threads(2)``) the local-step gradient (``row_gradient``) spreads the
groups over threads when a step is large (numpy releases the GIL in matmul
and exp), each client computed by the same operations as without threads.  Losses use logaddexp / logsumexp and
gradients expit / softmax, so margins of size 1e4 neither overflow nor warn.

``fisher_diag`` returns the *true* Fisher diagonal (the Hessian diagonal
without the ridge term: s(z)s(-z) a^2 for binary, a^2 p (1 - p) for
multinomial); ``empirical_fisher_diag`` returns (1/n_i) sum_j g_ij (.) g_ij
with g_ij the per-sample data gradients.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, in_unit_interval, positive
from ..errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from . import _logistic_oracles as lo
from ._logistic_buckets import Bucket, Part, make_plan, thread_shares
from ._process_shares import RemoteShare, SharedRowGradient
from ._separation import is_separable
from .base import Federation, RowGradient, finite_output, first_of_run, normalize_weights
from .constants import CurvatureBounds
from .newton import newton
from ..aliases import ClientSelection

__all__ = ["LogisticFederation"]

OPTIMUM_TOL = 1e-10
#: Full Newton steps taken past OPTIMUM_TOL (each kept only where it lowers ||grad||; see
#: ``newton``'s ``polish_steps``): the optima end at the rounding floor even when feature scales mix.
_POLISH_STEPS = 4
_N_BUCKETS = 4
_MAX_PLANS = 16     # cached size-bucket plans (one per distinct client list of length >= 2)
# Multiply-adds (x2) per local step below which a second thread costs more than it
# saves (a hand-off is ~20 us; Synthetic(1,1) does 1.2e7 per step).
_MIN_THREADED_FLOPS = 2.0e6
_POOLS: dict[int, ThreadPoolExecutor] = {}
# a forked child inherits the pools but not their worker threads: it starts with none (else a
# threaded gradient in the child would wait for ever on a pool whose workers do not exist)
os.register_at_fork(after_in_child=_POOLS.clear)


def _pool(threads: int) -> ThreadPoolExecutor:
    """A process-wide pool of ``threads - 1`` workers (the caller's thread is the other one)."""
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(threads - 1, thread_name_prefix="fltheory-logistic")
    return pool


def _put(out: np.ndarray, pos: np.ndarray | slice | None, G: np.ndarray) -> None:
    if pos is None:
        out[...] = G
    else:
        out[pos] = G


def _share_function(share: list[Part], m: int, C: int | None, reg: float
                    ) -> Callable[[np.ndarray, np.ndarray], None]:
    """``fn(X, out)``: the gradient rows of one share's clients (of a list of ``m``) at the
    points X, written into ``out`` (module level: worker processes build it from the same
    arrays, ``_process_shares``)."""
    if C is None:
        def binary(X: np.ndarray, out: np.ndarray) -> None:
            for pos, A, y, rw in share:              # a few size groups, not clients
                _put(out, pos, lo.binary_grad(A, y, rw, X if pos is None else X[pos], reg))
        return binary
    softmax = lo.SoftmaxGroupsGrad([(p.A, p.y, p.rw) for p in share], C, _share_rows(share, m), m)

    def multinomial(X: np.ndarray, out: np.ndarray) -> None:
        softmax(X, reg, out)
    return multinomial


def _share_rows(share: list[Part], m: int) -> np.ndarray:
    """Positions, in the caller's list of ``m`` clients, of the rows a share computes."""
    return np.concatenate([np.arange(m)[p.pos] if p.pos is not None else np.arange(m) for p in share])


def _localised(share: list[Part], m: int) -> list[Part]:
    """The share's parts with positions among the share's own rows (``_share_rows``
    order: part after part) instead of the caller's list of ``m`` clients."""
    out, start = [], 0
    for p in share:
        k = p.A.shape[0]
        out.append(Part(slice(start, start + k), p.A, p.y, p.rw))
        start += k
    return out


def _check_data(features: Sequence[Any], labels: Sequence[Any], n_classes: int | None
                ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    try:
        N, Ny = len(features), len(labels)
    except TypeError:
        raise InvalidProblemError(
            "features and labels must be sequences of per-client arrays, got "
            f"{type(features).__name__} and {type(labels).__name__}") from None
    if N == 0 or N != Ny:
        raise InvalidProblemError(
            f"features and labels must be non-empty sequences of equal length, got {N} and {Ny}")
    As = [finite_array(f"features[{i}]", a, ndim=2) for i, a in enumerate(features)]
    ys = [finite_array(f"labels[{i}]", v, ndim=1) for i, v in enumerate(labels)]
    f = As[0].shape[1]
    if f == 0:
        raise InvalidProblemError("features[0] has no columns; need at least one feature")
    for i, (a, v) in enumerate(zip(As, ys)):
        if a.shape[0] == 0:
            raise InvalidProblemError(f"client {i} is empty (features[{i}] has shape {a.shape})")
        if a.shape[1] != f:
            raise InvalidProblemError(f"features[{i}] has {a.shape[1]} columns, expected {f} like features[0]")
        if v.shape != (a.shape[0],):
            raise InvalidProblemError(
                f"labels[{i}] must have shape ({a.shape[0]},) to match features[{i}], got {v.shape}")
        if n_classes is None:
            bad = np.flatnonzero((v != 1.0) & (v != -1.0))
            if bad.size:
                raise InvalidProblemError(
                    f"binary labels must be -1 or +1, got labels[{i}][{bad[0]}] = {v[bad[0]]!r} "
                    "(for class indices 0..C-1 pass n_classes=C)")
        else:
            bad = np.flatnonzero((v != np.round(v)) | (v < 0) | (v >= n_classes))
            if bad.size:
                raise InvalidProblemError(
                    f"labels must be integers in [0, {n_classes}) for n_classes={n_classes}, "
                    f"got labels[{i}][{bad[0]}] = {v[bad[0]]!r}")
    return As, ys


class LogisticFederation(Federation):
    """N logistic-regression clients (see the module docstring for the formulas).

    Parameters
    ----------
    features : sequence of arrays (n_i, f)
        Per-client feature rows; clients may hold different numbers of rows.
    labels : sequence of arrays (n_i,)
        Binary: values in {-1, +1}.  Multinomial (``n_classes`` given):
        integers 0..C-1.
    n_samples : array (N,), optional
        Must equal the row counts if given; weights default to p_i = n_i / n.
    weights : array (N,), optional
        Positive client weights (normalised to sum 1); override n_i / n.
    reg : float
        Ridge coefficient reg >= 0 of every client.
    n_classes : int, optional
        C >= 2 for the multinomial (softmax) model; dimension f*C.
    """

    def __init__(self, features: Sequence[Any], labels: Sequence[Any], n_samples: ArrayLike | None = None,
                 weights: ArrayLike | None = None, reg: float = 0.0, *, n_classes: int | None = None) -> None:
        if n_classes is not None:
            if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
                raise InvalidProblemError(f"n_classes must be an integer >= 2, got {n_classes!r}")
            n_classes = int(n_classes)
        reg = positive("reg", reg, allow_zero=True, error=InvalidProblemError)
        As, ys = _check_data(features, labels, n_classes)
        rows = np.array([a.shape[0] for a in As], dtype=np.int64)
        if n_samples is not None:
            ns = np.asarray(n_samples)
            if ns.shape != rows.shape or not np.array_equal(ns, rows):
                raise InvalidProblemError(
                    f"n_samples must equal the per-client row counts {rows.tolist()[:10]}, "
                    f"got {np.asarray(n_samples).tolist()[:10] if ns.ndim else n_samples!r}")
        N, nmax, f = len(As), int(rows.max()), As[0].shape[1]
        A = np.zeros((N, nmax, f))
        y = np.zeros((N, nmax))
        for i, (a, v) in enumerate(zip(As, ys)):        # construction only
            A[i, : a.shape[0]] = a
            y[i, : a.shape[0]] = v
        self._setup(A, y, rows, weights, reg, n_classes)

    def _setup(self, A: np.ndarray, y: np.ndarray, rows: np.ndarray, weights: Any,
               reg: float, n_classes: int | None) -> None:
        N, nmax, f = A.shape
        self._A = A
        self._y = y.astype(np.int64) if n_classes is not None else y
        self._rows = rows
        self._mask = np.arange(nmax)[None, :] < rows[:, None]
        self._rw = self._mask / rows[:, None]
        self.reg = float(reg)
        self.n_classes = n_classes
        self.n_features = f
        self.n_clients = N
        self.dim = f if n_classes is None else f * n_classes
        self.weights, self.n_samples = normalize_weights(N, rows, weights)
        self._explicit_weights = weights is not None
        self._plans: dict[tuple[str, int, bytes], list[Bucket] | None] = {}
        self._row_gradients: dict[tuple[Any, ...], Any] = {}   # bindings, fused softmax

    @classmethod
    def _from_padded(cls, A: np.ndarray, y: np.ndarray, rows: np.ndarray, weights: Any,
                     reg: float, n_classes: int | None) -> LogisticFederation:
        out = cls.__new__(cls)
        out._setup(A, y, rows, weights, reg, n_classes)
        return out

    _threads: int = 1
    _processes: int = 1

    def with_threads(self, threads: int) -> LogisticFederation:
        """Copy whose local-step gradient (``row_gradient``) spreads its size groups
        over ``threads`` threads (default 1: no threads; it also ends ``with_processes``).
        Only steps of at least ~2e6 flops use them.  Every client is computed by the
        same operations in any thread, so results are bitwise identical for every count.
        Threads of one process contend for the interpreter lock between a softmax
        step's many short numpy calls: on Synthetic(1,1) two threads burn about 1.3x
        the CPU of one and are no faster (benchmarks/logistic_rounds.py), hence the
        default; :meth:`with_processes` avoids the contention."""
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
            raise InvalidHyperparameterError(f"threads must be an integer >= 1, got {threads!r}")
        out = copy.copy(self)
        out._threads, out._processes = int(threads), 1
        return out

    def with_processes(self, processes: int) -> LogisticFederation:
        """Copy whose local-step gradient (``row_gradient``) spreads its size groups over
        the calling thread and ``processes - 1`` worker processes (default 1: none; it also
        ends ``with_threads``).

        Each bound run of clients a, a+1, ..., b-1 (e.g. full participation) registers its
        shares with the workers once (their size groups are pickled to them); other client
        lists (partial participation) stay in this process.  A round's plain local steps (FedAvg, FedProx, SCAFFOLD,
        ...) and FedOpt's fused client-optimizer steps then run as one message per share:
        the rows are copied into memory shared with the workers, the first share's steps
        run here while the workers run theirs, and their rows are copied back
        (``SharedRowGradient.map_rows``); any other use of the gradient shares each single
        call the same way.  The workers build their shares from the same arrays with the
        same function, so results are bitwise identical for every count.  Only steps of at
        least ~2e6 flops use them.  The workers (fresh interpreters, started once per
        process and share slot) pay off for a fixed client list on free cores (full
        participation: Synthetic(1,1) FedAvg rounds about 1.8x one thread,
        ``benchmarks/logistic_rounds.py``).  When three
        calls in a row are slower than computing every share here (another process holds
        a worker's core), the next calls stay here for a while (the same bits).  A worker
        that cannot be started, or dies during a call, raises
        :class:`~fltheory.errors.WorkerProcessError`; the next call starts a new one.  A
        forked child computes the workers' shares itself."""
        if isinstance(processes, bool) or not isinstance(processes, (int, np.integer)) or processes < 1:
            raise InvalidHyperparameterError(f"processes must be an integer >= 1, got {processes!r}")
        out = copy.copy(self)
        out._threads, out._processes = 1, int(processes)
        return out

    @property
    def worker_processes(self) -> int:
        """``with_processes``' count (1: none)."""
        return self._processes

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles leave the bound local-step gradients behind (closures
        holding buffers and a lock); they are rebuilt on first use."""
        state = self.__dict__.copy()
        state["_row_gradients"] = {}
        return state

    # ------------------------------------------------------------ data view
    @property
    def is_multinomial(self) -> bool:
        """True for the softmax model (``n_classes`` given)."""
        return self.n_classes is not None

    @property
    def features(self) -> list[np.ndarray]:
        """Per-client feature arrays (n_i, f) (copies)."""
        return [self._A[i, :n].copy() for i, n in enumerate(self._rows)]

    @property
    def labels(self) -> list[np.ndarray]:
        """Per-client label arrays (n_i,) (copies)."""
        return [self._y[i, :n].copy() for i, n in enumerate(self._rows)]

    def sample_mask(self, clients: ClientSelection = None) -> np.ndarray:
        """(m, n_max) boolean mask of real rows (row j of client i is real iff j < n_i)."""
        return self._mask[self._clients(clients)].copy()

    def _data(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._is_all(idx):
            return self._A, self._y, self._rw
        return self._A[idx], self._y[idx], self._rw[idx]

    # -------------------------------------------------------------- oracles
    def _call(self, which: str, X: Any, clients: Any) -> np.ndarray:
        idx = self._clients(clients)
        X = np.ascontiguousarray(self._points(X, idx.shape[0]))
        C = self.n_classes
        fn: Callable[..., np.ndarray]
        if C is None:
            fn = {"loss": lo.binary_loss, "grad": lo.binary_grad, "hess": lo.binary_hess}[which]
        else:
            fn = {"loss": lo.multi_loss, "grad": lo.multi_grad, "hess": lo.multi_hess}[which]
        args = (self.reg,) if C is None else (self.reg, C)
        with np.errstate(over="ignore", invalid="ignore"):
            if which == "hess":
                return finite_output(f"client {which}", self._bucketed(fn, X, idx, args))
            return finite_output(f"client {which}", self._planned(fn, X, idx, args))

    def _planned(self, fn: Callable[..., np.ndarray], X: np.ndarray, idx: np.ndarray,
                 args: tuple = ()) -> np.ndarray:
        """``fn(A, y, rw, X, *args)`` over the size groups of ``self._plan(idx)``
        (each padded only to its own largest n_i), or once over the fully padded
        rows when one group is optimal.  ``fn`` must act row-by-row on clients."""
        plan = self._plan(idx)
        if plan is None:
            A, y, rw = self._data(idx)
            return fn(A, y, rw, X, *args)
        out = None
        for b in plan:                                   # a few size groups, not clients
            res = fn(b.A, b.y, b.rw, X[b.pos], *args)
            if out is None:
                out = np.empty((idx.shape[0],) + res.shape[1:])
            out[b.pos] = res
        assert out is not None                           # a plan has at least one group
        return out

    def _plan(self, idx: np.ndarray) -> list[Bucket] | None:
        """Size-bucket plan of the client list ``idx`` (see ``_logistic_buckets``),
        cached per distinct list: local loops call the oracles tau times on the
        same clients, so the groups' padded rows are gathered once."""
        if idx.shape[0] < 2:
            return None                                  # one client: nothing to group
        key = (idx.dtype.str, idx.shape[0], idx.tobytes())
        try:
            return self._plans[key]
        except KeyError:
            pass
        work = 4.0 * self.n_features * (1 if self.n_classes is None else self.n_classes)
        plan = make_plan(self._A, self._y, self._rw, self._rows, idx, work)
        if len(self._plans) >= _MAX_PLANS:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def _bucketed(self, fn: Callable[..., np.ndarray], X: np.ndarray, idx: np.ndarray,
                  args: tuple) -> np.ndarray:
        """Evaluate ``fn`` on groups of rows with similar n_i, each padded only to
        its own largest n_i (a loop over at most ``_N_BUCKETS`` groups).  Used for
        Hessians, whose cost grows with the padded row count; with heavy-tailed
        sizes (FedProx's lognormal) this avoids most of the padding work."""
        n = self._rows[idx]
        m = idx.shape[0]
        if m < 2 or n.max() * m <= 2 * n.sum():
            A, y, rw = self._data(idx)
            return fn(A, y, rw, X, *args)
        order = np.argsort(n, kind="stable")
        out = None
        for part in np.array_split(order, min(_N_BUCKETS, m)):
            k = int(n[part].max())
            rows = idx[part]
            res = fn(self._A[rows, :k], self._y[rows, :k], self._rw[rows, :k], X[part], *args)
            if out is None:
                out = np.empty((m,) + res.shape[1:])
            out[part] = res
        assert out is not None                           # m >= 2 clients: at least one group
        return out

    def row_gradient(self, clients: ClientSelection, rng: np.random.Generator | None) -> RowGradient:
        """The exact gradient bound to the listed clients: their size groups
        (``_plan``) and, for softmax clients, the label positions of each group
        are picked once; every call then runs the batched oracle of
        ``client_grad`` on each group (same operations, same bits) without
        argument checks.  Softmax groups share one logit buffer, so the softmax
        runs once over all of them (``SoftmaxGroupsGrad``).  Large steps spread
        the groups over ``with_threads`` threads (``thread_shares``), the caller's
        thread taking the first share.  Stochastic oracles and subclasses: the
        generic hook."""
        if type(self) is not LogisticFederation or self.is_stochastic:
            return super().row_gradient(clients, rng)
        idx = self._clients(clients)
        key = (self._threads, self._processes, self.reg, idx.dtype.str, idx.shape[0], idx.tobytes())
        grad = self._row_gradients.get(key)
        if grad is None:
            if len(self._row_gradients) >= _MAX_PLANS:
                self._row_gradients.clear()
            grad = self._row_gradients[key] = self._bound_gradient(idx)
        return grad

    def _bound_gradient(self, idx: np.ndarray) -> RowGradient:
        """The function returned by ``row_gradient`` for the checked client list ``idx``
        (cached per list, thread count and reg).  Each share keeps its buffers between
        calls (``SoftmaxGroupsGrad``: concurrent calls wait for each other), never values."""
        plan = self._plan(idx)
        m = idx.shape[0]
        if plan is None:
            A, y, rw = self._data(idx)
            parts = [Part(None, A, y, rw)]
        else:
            parts = [Part(b.pos, b.A, b.y, b.rw) for b in plan]
        reg, C = self.reg, self.n_classes
        per_row = 4.0 * self.n_features * (1 if C is None else C)
        workers = max(self._threads, self._processes if first_of_run(idx) is not None else 1)
        if sum(p.A.shape[0] * p.A.shape[1] for p in parts) * per_row < _MIN_THREADED_FLOPS:
            workers = 1
        shares = thread_shares(parts, m, workers, per_row) if workers > 1 else [parts]

        if self._processes > 1 and len(shares) > 1 and first_of_run(idx) is not None:
            # contiguous runs only (full participation): another list would ship its size groups
            # to the workers again (partial participation: every round)
            remote = [RemoteShare(j, _share_function, (_localised(share, m), rows.shape[0], C, reg), rows, m,
                                  self.dim) for j, share in enumerate(shares[1:]) for rows in [_share_rows(share, m)]]
            rows0 = _share_rows(shares[0], m)
            return SharedRowGradient(_share_function(shares[0], m, C, reg),
                                     (_share_function, (_localised(shares[0], m), rows0.shape[0], C, reg)),
                                     rows0, remote, m)
        work = [_share_function(share, m, C, reg) for share in shares]
        pool = _pool(len(work)) if len(work) > 1 else None

        def grad(X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
            X = np.ascontiguousarray(X)
            if out is None:
                out = np.empty(X.shape)
            if pool is None:
                work[0](X, out)
                return out
            others = [pool.submit(share, X, out) for share in work[1:]]
            try:
                work[0](X, out)                          # this thread takes the first share
            finally:
                for f in others:                         # never return while a share still writes
                    f.result()
            return out
        return grad

    def loss_and_grad_norm2(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F(x_t) and ||grad F(x_t)||^2 for every row x_t of X (T, d) -> ((T,), (T,)).

        Each point takes one pass over the data: every client's loss and gradient
        come from the same logits (``binary_loss_grad`` / ``multi_loss_grad``, the
        operations of ``client_loss`` and ``client_grad``), then F = sum_i p_i f_i
        and grad F = sum_i p_i grad f_i as in :meth:`Federation.loss` and
        :meth:`Federation.grad`: the same numbers as the default hook at half the
        cost.  Softmax clients run all size groups in one logit buffer
        (``SoftmaxGroupsGrad`` with losses, same bits).  The loop runs over the T
        points (one per call from ``run``)."""
        C = self.n_classes
        fn: Callable[..., np.ndarray] = lo.binary_loss_grad if C is None else lo.multi_loss_grad
        args = (self.reg,) if C is None else (self.reg, C)
        idx = np.arange(self.n_clients)
        softmax = self._all_clients_softmax() if C is not None else None
        T = X.shape[0]
        losses, norms = np.empty(T), np.empty(T)
        for t in range(T):                               # points of a history, not clients
            x = self._check_point(X[t])
            Xb = np.ascontiguousarray(np.broadcast_to(x, (self.n_clients, self.dim)))
            with np.errstate(over="ignore", invalid="ignore"):
                if softmax is None:
                    both = self._planned(fn, Xb, idx, args)
                    client_losses, grads = np.ascontiguousarray(both[:, 0]), np.ascontiguousarray(both[:, 1:])
                else:
                    client_losses, grads = np.empty(self.n_clients), np.empty((self.n_clients, self.dim))
                    softmax(Xb, self.reg, grads, client_losses)
                finite_output("client loss and gradient", client_losses)
                finite_output("client loss and gradient", grads)
            losses[t] = float(self.weights @ client_losses)
            norms[t] = float(np.sum((self.weights @ grads) ** 2))
        return losses, norms

    def _all_clients_softmax(self) -> lo.SoftmaxGroupsGrad:
        """Softmax losses and gradients of every client in one logit buffer (the size
        groups of ``_plan``), built once per federation and reg."""
        key = (0, self.reg, "all clients", self.n_clients, b"")
        fused = self._row_gradients.get(key)
        if not isinstance(fused, lo.SoftmaxGroupsGrad):
            assert self.n_classes is not None
            idx = np.arange(self.n_clients)
            plan = self._plan(idx)
            if plan is None:
                A, y, rw = self._data(idx)
                groups, order = [(A, y, rw)], idx
            else:
                groups, order = [(b.A, b.y, b.rw) for b in plan], np.concatenate([b.pos for b in plan])
            fused = lo.SoftmaxGroupsGrad(groups, self.n_classes, order, self.n_clients)
            if len(self._row_gradients) >= _MAX_PLANS:
                self._row_gradients.clear()
            self._row_gradients[key] = fused
        return fused

    def client_loss(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """f_i(X[r]) for each listed client -> (m,)."""
        return self._call("loss", X, clients)

    def client_grad(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """grad f_i(X[r]) -> (m, d)."""
        return self._call("grad", X, clients)

    def client_hess(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Hessian of f_i at X[r] (ridge included) -> (m, d, d)."""
        return self._call("hess", X, clients)

    def fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """True Fisher diagonal -> (m, d): the diagonal of the Hessian without
        the ridge term (binary: (1/n_i) sum_j s(z_j)s(-z_j) a_j^2; multinomial:
        (1/n_i) sum_j a_jk^2 p_jc (1 - p_jc) at index k*C + c)."""
        idx = self._clients(clients)
        X = np.ascontiguousarray(self._points(X, idx.shape[0]))
        if self.n_classes is None:
            return self._planned(lo.binary_fisher_diag, X, idx)
        return self._planned(lo.multi_fisher_diag, X, idx, (self.n_classes,))

    def per_sample_grads(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Per-sample gradients g_ij of f_ij(x) = l(x; a_j, y_j) + (reg/2)||x||^2,
        so f_i = (1/n_i) sum_j f_ij -> (m, n_max, d); rows j >= n_i are zero
        (see :meth:`sample_mask`)."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        A, y, _ = self._data(idx)
        if self.n_classes is None:
            G = lo.binary_per_sample(A, y, X)
        else:
            G = lo.multi_per_sample(A, y, X, self.n_classes)
        if self.reg:
            G += self.reg * X[:, None, :]
        G *= self._mask[idx][:, :, None]
        return G

    def empirical_fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """(1/n_i) sum_j g_ij (.) g_ij with g_ij the per-sample gradients of the
        data term (ridge excluded) -> (m, d)."""
        idx = self._clients(clients)
        X = np.ascontiguousarray(self._points(X, idx.shape[0]))
        if self.n_classes is None:
            return self._planned(lo.binary_empirical_fisher_diag, X, idx)
        return self._planned(lo.multi_empirical_fisher_diag, X, idx, (self.n_classes,))

    def accuracy(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Fraction of each listed client's rows classified correctly at X[r] -> (m,):
        binary: sign(a^T x) = y (a zero margin counts as wrong); multinomial:
        argmax_c (W^T a)_c = y (ties resolved to the lowest class index)."""
        idx = self._clients(clients)
        X = np.ascontiguousarray(self._points(X, idx.shape[0]))
        A, y, rw = self._data(idx)
        if self.n_classes is None:
            right = y * lo._matvec(A, X) > 0
        else:
            m, n, f = A.shape
            right = np.argmax(np.matmul(A, X.reshape(m, f, self.n_classes)), axis=2) == y
        return np.einsum("mn,mn->m", rw, right.astype(np.float64))

    def _minibatch_grad(self, X: np.ndarray, idx: np.ndarray, rng: np.random.Generator,
                        batch_size: int) -> np.ndarray:
        """Mean of ``batch_size`` per-sample gradients (ridge included), rows
        j = floor(u n_i) with u ~ U[0, 1) from one ``rng.random((m, b))`` call."""
        m = idx.shape[0]
        u = rng.random((m, batch_size))
        n = self._rows[idx][:, None]
        rows = np.minimum((u * n).astype(np.int64), n - 1)
        A = self._A[idx[:, None], rows]
        y = self._y[idx[:, None], rows]
        rw = np.full((m, batch_size), 1.0 / batch_size)
        X = np.ascontiguousarray(X)
        if self.n_classes is None:
            return lo.binary_grad(A, y, rw, X, self.reg)
        return lo.multi_grad(A, y, rw, X, self.reg, self.n_classes)

    def minibatch_variance(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Exact E||g - grad f_i(x)||^2 of the minibatch oracle at each X[r]:
        (1/b) (1/n_i) sum_j ||g_ij - grad f_i(x)||^2 -> (m,)."""
        if self._batch_size is None:
            raise InvalidProblemError("no minibatch oracle configured; call with_minibatch(b) first")
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        G = self.per_sample_grads(X, idx)
        n = self._rows[idx]
        D = (G - (G.sum(axis=1) / n[:, None])[:, None, :]) * self._mask[idx][:, :, None]
        return np.einsum("mrd,mrd->m", D, D) / n / self._batch_size

    # ------------------------------------------------------------ solutions
    @cached_property
    def _pooled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All real rows in one block with weights p_i / n_i: F = sum_rows w l + reg/2 |x|^2."""
        w = (self.weights / self._rows)[:, None] * self._mask
        return self._A[self._mask][None], self._y[self._mask][None], w[self._mask][None]

    def _pooled_fns(self) -> tuple[Callable[..., np.ndarray], ...]:
        A, y, w = self._pooled
        C = self.n_classes
        if C is None:
            return (lambda X, r: lo.binary_loss(A, y, w, X, self.reg),
                    lambda X, r: lo.binary_grad(A, y, w, X, self.reg),
                    lambda X, r: lo.binary_hess(A, y, w, X, self.reg))
        return (lambda X, r: lo.multi_loss(A, y, w, X, self.reg, C),
                lambda X, r: lo.multi_grad(A, y, w, X, self.reg, C),
                lambda X, r: lo.multi_hess(A, y, w, X, self.reg, C))

    def _null_projector(self) -> np.ndarray | None:
        if self.n_classes is None or self.reg > 0:
            return None
        C = self.n_classes
        return np.kron(np.eye(self.n_features), np.full((C, C), 1.0 / C))

    def _check_existence(self, A: np.ndarray, y: np.ndarray, what: str) -> None:
        if self.reg == 0 and is_separable(A, y, self.n_classes):
            raise InvalidProblemError(
                f"{what} has no minimiser: the data are (quasi-)linearly separable and reg = 0, "
                "so the loss decreases forever along a separating direction; use reg > 0")

    @cached_property
    def _optimum_tol(self) -> float:
        """Gradient-norm tolerance of the optima, relative to the gradient scale:
        OPTIMUM_TOL * max_ij ||a_ij||, since each loss derivative is at most 1 in
        absolute value.  An absolute 1e-10 is below float64 rounding at feature
        scale 1e8 and meaningless (1e-4 relative) at scale 1e-6."""
        big = float(np.max(np.abs(self._A)))
        if big == 0:
            return OPTIMUM_TOL
        unit = self._A / big                       # the squared norms of 1e200-sized rows overflow
        return OPTIMUM_TOL * big * float(np.sqrt(np.max(np.einsum("inf,inf->in", unit, unit))))

    @cached_property
    def _optimum(self) -> np.ndarray:
        A, y, _ = self._pooled
        self._check_existence(A[0], y[0], "the global logistic objective F")
        loss, grad, hess = self._pooled_fns()
        X = newton(loss, grad, hess, np.zeros((1, self.dim)), tol=self._optimum_tol,
                   null_projector=self._null_projector(), what="Newton on F", polish=True,
                   polish_steps=_POLISH_STEPS)
        return X[0]

    def optimum(self) -> np.ndarray:
        """x* = argmin F by damped Newton to ||grad F(x*)|| <= 1e-10 max_ij ||a_ij||.

        Raises InvalidProblemError when reg = 0 and the pooled data are
        (quasi-)separable (no minimiser), DivergenceError when Newton stalls."""
        return self._optimum.copy()

    @cached_property
    def _client_optima(self) -> np.ndarray:
        if self.reg == 0:
            for i in range(self.n_clients):    # one LP per client; run once, not a hot path
                n = self._rows[i]
                self._check_existence(self._A[i, :n], self._y[i, :n], f"client {i}'s objective f_{i}")
        N = self.n_clients
        return newton(lambda X, r: self.client_loss(X, r), lambda X, r: self.client_grad(X, r),
                      lambda X, r: self.client_hess(X, r), np.zeros((N, self.dim)),
                      tol=self._optimum_tol, null_projector=self._null_projector(),
                      what="Newton on the client objectives", polish=True, polish_steps=_POLISH_STEPS)

    def client_optima(self) -> np.ndarray:
        """x_i* = argmin f_i for every client, by batched Newton -> (N, d)."""
        return self._client_optima.copy()

    # ------------------------------------------------------------ constants
    @property
    def _curv_bound(self) -> float:
        return 0.25 if self.n_classes is None else 0.5

    @cached_property
    def _grams(self) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            G = np.matmul(np.swapaxes(self._A, 1, 2), self._A) / self._rows[:, None, None]
        if not np.isfinite(G).all():
            raise OutOfRangeError(
                f"the Gram matrices A_i^T A_i / n_i overflow float64 (largest |feature| "
                f"{float(np.max(np.abs(self._A))):.3e}): the curvature constants L and client_L are not "
                "representable; rescale the features")
        return G

    @property
    def client_L(self) -> np.ndarray:
        """L_i = c lambda_max(A_i^T A_i / n_i) + reg, c = 1/4 (binary) or 1/2 (multinomial)."""
        return self._curv_bound * np.linalg.eigvalsh(self._grams)[:, -1] + self.reg

    @property
    def client_mu(self) -> np.ndarray:
        """mu_i = reg for every client (the infimum of the curvature over R^d)."""
        return np.full(self.n_clients, self.reg)

    @property
    def L(self) -> float:
        """Smoothness of the global objective F: c lambda_max(sum_i p_i A_i^T A_i / n_i) + reg
        (c as in ``client_L``).  Not the clients' constant: use ``client_L.max()`` for that."""
        G = np.einsum("i,ijk->jk", self.weights, self._grams)
        return float(self._curv_bound * np.linalg.eigvalsh(G)[-1] + self.reg)

    def strong_convexity(self) -> float:
        """reg: the infimum over R^d of lambda_min of the Hessian of F."""
        return float(self.reg)

    def curvature_bounds(self) -> CurvatureBounds:
        """``L``, ``mu`` (= reg), ``client_L``, ``client_mu``: attained for the binary
        model (at x = 0), valid upper bounds only for the softmax model."""
        multinomial = self.is_multinomial
        return CurvatureBounds(
            L=self.L, mu=self.mu, client_L=self.client_L, client_mu=self.client_mu, exact=not multinomial,
            note=("softmax bound lambda_max(A^T A/n)/2 + reg (valid, not attained)" if multinomial else
                  "lambda_max(A^T A)/(4n) + reg: sup of the Hessian norm, attained at x = 0"))

    def client_data_bytes(self) -> int:
        """8 n_max f: one row reads its client's (padded) feature matrix."""
        return 8 * self._A.shape[1] * self._A.shape[2]

    def cvxpy_client_loss(self, client: int, y: Any) -> Any:
        """(1/n_i) sum_j log(1 + exp(-y_j a_j^T y)) + reg/2 ||y||^2 (binary model only)."""
        import cvxpy as cp
        if self.is_multinomial:
            raise InvalidHyperparameterError(
                f"solver='cvxpy' supports quadratic and binary logistic clients, got {self!r}")
        n = int(self._rows[client])
        A, lab = self._A[client, :n], self._y[client, :n]
        return cp.sum(cp.logistic(-cp.multiply(lab, A @ y))) / A.shape[0] \
            + 0.5 * self.reg * cp.sum_squares(y)

    @property
    def mu(self) -> float:
        """Strong convexity of F over R^d: reg (local curvature at x* is in
        ``constants().mu_local``)."""
        return self.reg

    # -------------------------------------------------------- shifting clients
    def _subset(self, keep: np.ndarray, weights: np.ndarray | None) -> LogisticFederation:
        rows = self._rows[keep]
        nmax = int(rows.max())
        out = LogisticFederation._from_padded(self._A[keep, :nmax], self._y[keep, :nmax], rows,
                                              weights, self.reg, self.n_classes)
        out._batch_size = self._batch_size
        out._threads, out._processes = self._threads, self._processes
        if self._noise_sigma2 is not None:
            out._noise_sigma2 = self._noise_sigma2[keep].copy()
        return out

    def without_client(self, a: int) -> LogisticFederation:
        """Remove client ``a``; weights become n_i / sum_{j != a} n_j (or the
        remaining explicit weights renormalised)."""
        if self.n_clients < 2:
            raise InvalidProblemError("cannot remove the only client of a federation")
        if isinstance(a, bool) or not (isinstance(a, (int, np.integer)) and 0 <= a < self.n_clients):
            raise InvalidProblemError(f"client index must be an integer in [0, {self.n_clients}), got {a!r}")
        keep = np.delete(np.arange(self.n_clients), a)
        return self._subset(keep, self.weights[keep] if self._explicit_weights else None)

    def with_client(self, other: Federation, *, weight: float | None = None
                    ) -> LogisticFederation:
        """Append the clients of ``other`` (same model, features and reg).

        Weights become n_i / n_total, or with ``weight`` in (0, 1) the
        newcomers get total weight ``weight`` and the old weights are scaled
        by 1 - weight."""
        if not isinstance(other, LogisticFederation):
            raise InvalidProblemError(f"other must be a LogisticFederation, got {type(other).__name__}")
        if (other.n_features, other.n_classes, other.reg) != (self.n_features, self.n_classes, self.reg):
            raise InvalidProblemError(
                "other must have the same (n_features, n_classes, reg) = "
                f"{(self.n_features, self.n_classes, self.reg)}, got "
                f"{(other.n_features, other.n_classes, other.reg)}")
        if weight is not None:
            w = in_unit_interval("weight", weight, right_closed=False, error=InvalidProblemError)
            weights = np.concatenate([self.weights * (1 - w), other.weights * w])
        elif self._explicit_weights or other._explicit_weights:
            raise InvalidProblemError(
                "with_client on federations with explicit weights needs weight= (the newcomers' total weight)")
        else:
            weights = None
        nmax = max(self._A.shape[1], other._A.shape[1])
        pad = lambda M: np.pad(M, [(0, 0), (0, nmax - M.shape[1])] + [(0, 0)] * (M.ndim - 2))
        out = LogisticFederation._from_padded(
            np.concatenate([pad(self._A), pad(other._A)]), np.concatenate([pad(self._y), pad(other._y)]),
            np.concatenate([self._rows, other._rows]), weights, self.reg, self.n_classes)
        out._explicit_weights = weight is not None
        out._threads, out._processes = self._threads, self._processes
        return self._copy_oracle_to(out, out.n_clients)

    def __repr__(self) -> str:
        kind = "binary" if self.n_classes is None else f"multinomial C={self.n_classes}"
        return (f"LogisticFederation({kind}, n_clients={self.n_clients}, n_features={self.n_features}, "
                f"dim={self.dim}, reg={self.reg:g})")
