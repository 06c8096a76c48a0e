"""The federation contract shared by analytic and neural clients.

A federation holds N clients with weights p_i > 0 (sum 1) and answers batched
oracle calls: ``client_grad(X, clients)`` takes an (m, d) array, one row per
listed client, and returns (m, d).  The global objective is
F(x) = sum_i p_i f_i(x).

Stochastic gradients come from the *configured oracle* of the federation:

* exact (default): ``stochastic_grad`` returns ``client_grad`` and draws nothing;
* ``with_gradient_noise(sigma2)``: g = grad f_i(x) + xi, xi ~ N(0, sigma2_i/d I),
  so E||g - grad f_i(x)||^2 = sigma2_i exactly (docs/theory/problems.md);
* ``with_minibatch(b)`` (federations with per-sample data): the mean of b
  per-sample gradients drawn uniformly with replacement, index
  j = floor(u n_i) with u ~ U[0, 1) (one ``rng.random`` call per oracle call,
  rows in the order of ``clients``).

Random draws are made in row order with one call per oracle call, so a loop
that calls the oracle one client at a time, in the same client order, draws
exactly the same numbers as the batched call (the reference loops rely on it).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, known_keywords, per_client, real_array
from ..errors import (
    InvalidHyperparameterError,
    InvalidProblemError,
    NonFinitePointError,
    OutOfRangeError,
)
from ._hook_checks import checked_hooks
from .constants import CurvatureBounds, ProblemConstants, problem_constants
from .newton import shifted_newton
from ..aliases import ClientSelection

__all__ = ["Federation", "first_of_run", "normalize_weights"]


def finite_output(what: str, values: np.ndarray) -> np.ndarray:
    """Return ``values`` if finite, else raise OutOfRangeError: an oracle asked
    about a finite point whose value overflows float64 (e.g. a logistic margin
    a^T x or a quadratic form beyond 1e308) says so instead of returning inf/NaN."""
    if not np.all(np.isfinite(values)):
        raise OutOfRangeError(
            f"{what} overflows float64 at the given point (a result entry is "
            f"{float(values.flat[int(np.argmin(np.isfinite(values)))])!r}); the point or the data are out of "
            "the representable range")
    return values


def first_of_run(clients: Any) -> int | None:
    """a when ``clients`` is a non-empty 1-d integer numpy array a, a+1, ..., b-1 (e.g. full
    participation: the clients whose data a federation can hand out as views), else None.
    No bounds are checked against a federation (callers that index with it do)."""
    if not isinstance(clients, np.ndarray) or clients.ndim != 1 or not clients.size \
            or clients.dtype.kind not in "iu":
        return None
    a = int(clients[0])
    if int(clients[-1]) - a + 1 != clients.size or (clients[1:] - clients[:-1] != 1).any():
        return None
    return a


def client_offsets(n_clients: int, offsets: ArrayLike | None) -> np.ndarray:
    """The constant added to each client's loss: zeros when None, else a finite (N,) array."""
    if offsets is None:
        return np.zeros(n_clients)
    c = finite_array("offsets", offsets, ndim=1)
    if c.shape != (n_clients,):
        raise InvalidProblemError(f"offsets must have shape ({n_clients},), got {c.shape}")
    return c


def normalize_weights(n_clients: int, n_samples: ArrayLike | None = None, weights: ArrayLike | None = None
                      ) -> tuple[np.ndarray, np.ndarray | None]:
    """Return (p, n) with p_i > 0 summing to 1.

    ``weights`` given: normalised to sum 1 (must be positive).  Otherwise
    p_i = n_i / n when ``n_samples`` is given, else uniform 1/N.
    """
    n = None
    if n_samples is not None:
        n = np.asarray(n_samples)
        if n.shape != (n_clients,):
            raise InvalidProblemError(
                f"n_samples must have shape ({n_clients},), got {n.shape}")
        if not np.issubdtype(n.dtype, np.number) or not np.all(np.isfinite(n)) \
                or np.any(n < 1) or np.any(np.mod(n, 1) != 0):
            raise InvalidProblemError(
                f"n_samples must be positive integers, got {n.tolist()[:10]}")
        n = n.astype(np.int64)
    if weights is not None:
        w = finite_array("weights", weights, ndim=1)
        if w.shape != (n_clients,):
            raise InvalidProblemError(
                f"weights must have shape ({n_clients},), got {w.shape}")
        if np.any(w <= 0):
            i = int(np.argmax(w <= 0))
            raise InvalidProblemError(
                f"weights must be positive, got weights[{i}] = {w[i]!r}")
        return w / w.sum(), n
    if n is not None:
        return n / n.sum(), n
    return np.full(n_clients, 1.0 / n_clients), None


FederationT = TypeVar("FederationT", bound="Federation")

#: ``grad(X, out=None) -> G``: an oracle bound to fixed clients (``Federation.row_gradient``).
RowGradient = Callable[..., np.ndarray]

class Federation(ABC):
    """The federation contract: N clients, weights, batched oracles and hooks.

    Required (abstract) oracles, each batched over an (m, d) array of points
    with one row per listed client:

    * ``client_loss(X, clients) -> (m,)``, ``client_grad -> (m, d)``,
      ``client_hess -> (m, d, d)``, ``fisher_diag -> (m, d)``;
    * ``optimum() -> (d,)``, ``client_optima() -> (N, d)``;
    * ``without_client(a)``, ``with_client(other)`` (objective shifts).

    Hooks: whatever an algorithm or a theory routine needs beyond the oracles
    is a method here with a generic default computed from the oracles, so a
    federation written by a user works everywhere (correct by default, fast
    where it overrides a hook).  No code branches on a concrete federation
    type.  Each hook's docstring states its contract:

    ========================  ==================================================
    ``shifted_solve``         argmin_y f_i(y) + 1/2 y^T diag(D_r) y - b_r^T y for
                              every row r (exact local solves of FedProx, FedDyn,
                              EFL, FedCurv, ...); default batched Newton
    ``smoothness_bounds``     an upper bound of each listed client's smoothness
                              constant (step sizes of proximal-gradient solves)
    ``strong_convexity``      a strong-convexity constant of F over R^d, or None
    ``curvature_bounds``      analytic L, mu, client_L, client_mu, or None (then
                              ``constants()`` estimates them from Hessians at x*)
    ``has_constant_hessians`` True when every f_i is quadratic (Hessians do not
                              depend on x): constants become exact
    ``client_gaps``           f_k(w_r) - f_k* per row (objective shifts)
    ``loss_and_grad_norm2``   F(x_t) and ||grad F(x_t)||^2 for many points at once
    ``client_block``          a federation viewing a contiguous run of clients
                              without copying their data (cache-blocked local
                              steps), or None
    ``lifted``                p independent copies side by side in R^{p d} (block
                              products of round maps in the exact theory), or None
    ``client_data_bytes``     bytes of client data one oracle row reads (the
                              block-size model of cache-blocked local steps)
    ``row_gradient``          the configured oracle bound to fixed clients, with
                              the argument checks done once (hot loops of local
                              steps)
    ``cvxpy_client_loss``     f_i as a cvxpy expression (cross-check solver only)
    ========================  ==================================================

    The hooks that take arguments (``shifted_solve``, ``smoothness_bounds``,
    ``client_gaps``, ``loss_and_grad_norm2``, ``client_block``,
    ``cvxpy_client_loss``) check them before an override runs, in this class
    and in every subclass (a typed error naming the argument, the value and the
    expectation); they run at most a few times per round.  The kernel returned
    by ``row_gradient`` is the one deliberate exception (called every local step).
    """

    n_clients: int
    dim: int
    weights: np.ndarray
    n_samples: np.ndarray | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every subclass's own hooks check their arguments (``_hook_checks``)."""
        super().__init_subclass__(**kwargs)
        checked_hooks(cls)

    # --- configured stochastic oracle ------------------------------------
    _noise_sigma2: np.ndarray | None = None   # per-client sigma_i^2, or None
    _batch_size: int | None = None

    # --- argument normalisation ------------------------------------------
    def _clients(self, clients: Any) -> np.ndarray:
        if clients is None:
            return np.arange(self.n_clients)
        idx = np.asarray(clients)
        if idx.ndim == 0:
            idx = idx[None]
        if idx.ndim != 1 or not (np.issubdtype(idx.dtype, np.integer) or idx.size == 0):
            raise InvalidProblemError(
                f"clients must be a 1-D array of integer indices, got {clients!r}")
        idx = idx.astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_clients):
            raise InvalidProblemError(
                f"client indices must lie in [0, {self.n_clients}), got {idx.tolist()[:10]}")
        return idx

    def _points(self, X: Any, m: int) -> np.ndarray:
        X = real_array("X", X, InvalidProblemError).astype(np.float64, copy=False)
        if X.ndim == 1:
            if X.shape[0] != self.dim:
                raise InvalidProblemError(
                    f"point must have length dim={self.dim}, got shape {X.shape}")
            if not np.all(np.isfinite(X)):
                raise NonFinitePointError("point contains non-finite values (NaN or inf); the "
                                          "oracles take finite points only")
            return np.broadcast_to(X, (m, self.dim))
        if X.shape != (m, self.dim):
            raise InvalidProblemError(
                f"X must have shape ({m}, {self.dim}) (one row per listed client), got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise NonFinitePointError("X contains non-finite values (NaN or inf); the oracles "
                                      "take finite points only")
        return X

    def _is_all(self, idx: np.ndarray) -> bool:
        return idx.shape[0] == self.n_clients and bool(np.all(idx == np.arange(self.n_clients)))

    # --- client oracles (batched) -----------------------------------------
    @abstractmethod
    def client_loss(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """f_i(X[r]) for the r-th listed client i -> (m,)."""

    @abstractmethod
    def client_grad(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """grad f_i(X[r]) -> (m, d)."""

    @abstractmethod
    def client_hess(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Hessian of f_i at X[r] -> (m, d, d)."""

    @abstractmethod
    def fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Fisher information diagonal of client i at X[r] -> (m, d).
        Each subclass states which Fisher (empirical or true) it returns."""

    def _minibatch_grad(self, X: np.ndarray, idx: np.ndarray, rng: np.random.Generator,
                        batch_size: int) -> np.ndarray:
        raise InvalidProblemError(
            f"{type(self).__name__} has no per-sample data; use with_gradient_noise instead of with_minibatch")

    def stochastic_grad(self, X: ArrayLike, clients: ClientSelection = None,
                        rng: np.random.Generator | None = None) -> np.ndarray:
        """Gradient from the configured oracle (see module docstring) -> (m, d).

        Exact oracle: equals ``client_grad`` and draws nothing.
        """
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        if self._noise_sigma2 is None and self._batch_size is None:
            return self.client_grad(X, idx)
        if rng is None:
            raise InvalidProblemError(
                "stochastic_grad needs a numpy.random.Generator for a stochastic oracle")
        if self._batch_size is not None:
            return self._minibatch_grad(X, idx, rng, self._batch_size)
        g = self.client_grad(X, idx)
        assert self._noise_sigma2 is not None   # neither noise nor minibatch returned above
        scale = np.sqrt(self._noise_sigma2[idx] / self.dim)
        return g + scale[:, None] * rng.standard_normal(g.shape)

    @property
    def is_stochastic(self) -> bool:
        """True when ``stochastic_grad`` draws random numbers."""
        return self._noise_sigma2 is not None or self._batch_size is not None

    @property
    def noise_sigma2(self) -> np.ndarray | None:
        """Per-client sigma_i^2 of the Gaussian-noise oracle (exact), or None."""
        return None if self._noise_sigma2 is None else self._noise_sigma2.copy()

    @property
    def batch_size(self) -> int | None:
        """Minibatch size of the sampling oracle, or None."""
        return self._batch_size

    def with_gradient_noise(self, sigma2: ArrayLike) -> Federation:
        """Copy whose oracle adds N(0, sigma2_i/d I) noise: E||g - grad||^2 = sigma2_i.

        ``sigma2`` is a scalar or a per-client array, >= 0."""
        s = per_client("sigma2", sigma2, self.n_clients, strict=False,
                       error=InvalidProblemError)
        out = copy.copy(self)
        out._noise_sigma2 = np.broadcast_to(np.asarray(s, dtype=np.float64),
                                            (self.n_clients,)).copy()
        out._batch_size = None
        return out

    def with_minibatch(self, batch_size: int) -> Federation:
        """Copy whose oracle averages ``batch_size`` per-sample gradients drawn
        uniformly with replacement."""
        b = per_client("batch_size", batch_size, None, integer=True, minimum=1,
                       strict=False, error=InvalidProblemError)
        if not isinstance(b, int):
            raise InvalidProblemError(f"batch_size must be one integer, got {batch_size!r}")
        out = copy.copy(self)
        out._batch_size = b
        out._noise_sigma2 = None
        return out

    def exact(self) -> Federation:
        """Copy with the exact gradient oracle."""
        out = copy.copy(self)
        out._batch_size = None
        out._noise_sigma2 = None
        return out

    # --- global objective --------------------------------------------------
    def _check_point(self, x: Any) -> np.ndarray:
        x = real_array("x", x, InvalidProblemError).astype(np.float64, copy=False)
        if x.shape != (self.dim,):
            raise InvalidProblemError(f"x must have shape ({self.dim},), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise NonFinitePointError(f"x must be finite, got {x!r}")
        return x

    def loss(self, x: ArrayLike) -> float:
        """F(x) = sum_i p_i f_i(x)."""
        x = self._check_point(x)
        return float(self.weights @ self.client_loss(x))

    def grad(self, x: ArrayLike) -> np.ndarray:
        """grad F(x) -> (d,)."""
        x = self._check_point(x)
        return self.weights @ self.client_grad(x)

    def hess(self, x: ArrayLike) -> np.ndarray:
        """Hessian of F at x -> (d, d)."""
        x = self._check_point(x)
        return np.einsum("i,ijk->jk", self.weights, self.client_hess(x))

    @abstractmethod
    def optimum(self) -> np.ndarray:
        """x* = argmin F."""

    @abstractmethod
    def client_optima(self) -> np.ndarray:
        """(N, d) array of the client minimisers x_i*."""

    def optimal_value(self) -> float:
        """F* = F(x*)."""
        return self.loss(self.optimum())

    def constants(self, **kwargs: Any) -> ProblemConstants:
        """:class:`~fltheory.problems.constants.ProblemConstants` of this federation
        (see that module for the formulas and keyword options)."""
        return problem_constants(self, **known_keywords("constants", kwargs, problem_constants, exclude=("fed",)))

    @abstractmethod
    def without_client(self, a: int) -> Federation:
        """The federation with client ``a`` removed (weights renormalised)."""

    @abstractmethod
    def with_client(self, other: Federation, *, weight: float | None = None) -> Federation:
        """The federation with the clients of ``other`` appended; ``weight`` in (0, 1) is
        the newcomers' total weight when the weights are explicit (else sample counts)."""

    def _copy_oracle_to(self, out: FederationT, n_new: int | None = None) -> FederationT:
        out._batch_size = self._batch_size
        if self._noise_sigma2 is not None:
            s = self._noise_sigma2
            if n_new is not None and n_new != s.shape[0]:
                if np.all(s == s[0]):
                    s = np.full(n_new, s[0])
                else:
                    raise InvalidProblemError(
                        "per-client gradient noise cannot be carried to a federation with "
                        "different clients; call with_gradient_noise on the result")
            out._noise_sigma2 = s.copy()
        return out

    # --- hooks (generic defaults; override where a federation knows better) ---
    has_constant_hessians: bool = False
    """True when every client objective is quadratic (its Hessian does not depend
    on x).  Bounds and constants computed from Hessians at one point are then
    exact on all of R^d.  Default False."""

    def shifted_solve(self, clients: np.ndarray, D: np.ndarray, b: np.ndarray, Y0: np.ndarray, *,
                      tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
        """argmin_y f_i(y) + 1/2 y^T diag(D_r) y - b_r^T y for the r-th listed client i.

        ``D``, ``b``, ``Y0`` are (m, d) (D >= 0 such that every row objective is
        strongly convex); returns (m, d).  Default: the batched damped Newton
        method of :func:`fltheory.problems.newton.shifted_newton` started at Y0,
        stopped when every row's gradient norm is <= tol (DivergenceError when
        ``max_iter`` iterations do not reach it).  Quadratic clients override it
        with one batched linear solve (H_i + diag(D_r)) y = e_i + b_r.
        """
        return shifted_newton(self, clients, D, b, Y0, tol=tol, max_iter=max_iter)

    def smoothness_bounds(self, clients: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """An upper bound L_i of the smoothness constant of each listed client -> (m,).

        Default: the federation's ``client_L`` attribute when it has one, else
        lambda_max of the Hessian at the rows of Y (a local value, exact for
        quadratic clients)."""
        bound = getattr(self, "client_L", None)
        if bound is not None:
            return np.asarray(bound)[clients]
        return np.linalg.eigvalsh(self.client_hess(Y, clients))[:, -1]

    def strong_convexity(self) -> float | None:
        """A constant mu > 0 with F mu-strongly convex on all of R^d, or None when
        the federation cannot state one (default)."""
        return None

    def curvature_bounds(self) -> CurvatureBounds | None:
        """Analytic smoothness / strong-convexity constants of F and of every client
        (:class:`~fltheory.problems.constants.CurvatureBounds`), or None (default):
        :func:`~fltheory.problems.constants.problem_constants` then reports the
        eigenvalues of the Hessians at x* as local estimates."""
        return None

    def client_gaps(self, W: np.ndarray, clients: np.ndarray) -> np.ndarray:
        """f_k(w_r) - f_k* for the r-th listed client k -> (m,), f_k* = f_k(x_k*).

        Default: the loss difference at ``client_optima``; a negative result
        within rounding (|gap| <= 64 eps max(1, |f_k*|)) is reported as 0, a
        larger negative one raises InvalidProblemError (the reported client
        minimiser is then not one)."""
        opt = self.client_optima()[clients]
        at_w = self.client_loss(W, clients)
        at_opt = self.client_loss(opt, clients)
        gap = at_w - at_opt
        tol = 64 * np.finfo(float).eps * np.maximum(1.0, np.abs(at_opt))
        if np.any(gap < -tol):
            k = int(np.argmin(gap + tol))
            raise InvalidProblemError(
                f"client {int(clients[k])}: F_k(w) - F_k* = {gap[k]!r} < 0; its reported minimiser "
                "is not one")
        return np.where(gap < 0, 0.0, gap)

    def loss_and_grad_norm2(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F(x_t) and ||grad F(x_t)||^2 for every row x_t of X (T, d) -> ((T,), (T,)).

        Default: ``loss`` and ``grad`` point by point."""
        loss = np.array([self.loss(x) for x in X])
        grads = np.array([float(np.sum(self.grad(x) ** 2)) for x in X])
        return loss, grads

    def client_block(self, start: int, stop: int) -> Federation | None:
        """A federation whose clients 0..stop-start-1 are this one's clients
        start..stop-1 with the *exact* oracle, sharing (not copying) their data,
        or None (default) when the federation cannot provide one cheaply.

        Local steps cut large batches into such blocks so that a block's data
        stay in cache while it runs all its steps; weights of the block are not
        meaningful (only the client oracles are used)."""
        return None

    def lifted(self, copies: int) -> Federation | None:
        """The federation on R^{copies d} whose client i is f_i^(p)(y) = sum_k f_i(y_k),
        y_k = y[k d:(k + 1) d] (``copies`` independent copies side by side, exact oracle),
        or None (default) when the federation cannot provide it cheaply.  The exact
        theory runs one round of it to apply a round map's linear part to ``copies``
        vectors at once (``fltheory.problems.lifted``)."""
        return None

    @property
    def worker_processes(self) -> int:
        """Processes (the caller's and its workers) that ``row_gradient``'s bound
        gradient spreads its rows over (``with_processes`` of the federations that offer
        it); 1 (default): none.  With more than one, ``local_descent`` leaves the local
        steps of a batch its threads would run as one block (or of any batch, with one
        thread) to the bound gradient's ``map_rows``; larger batches are cut into blocks
        whose views (``client_block``) have no workers."""
        return 1

    def client_data_bytes(self) -> int:
        """Bytes of client data one gradient-oracle row streams (the cache-block
        size model of ``client_block`` users).  Default 8 d."""
        return 8 * self.dim

    def row_gradient(self, clients: ClientSelection, rng: np.random.Generator | None
                     ) -> RowGradient:
        """The configured oracle bound to the listed clients, for loops that call it many times.

        ``clients`` is checked once, here.  The returned function
        ``grad(X, out=None)`` gives the same numbers (and draws the same random
        numbers, in the same order) as ``stochastic_grad(X, clients, rng)`` but
        checks nothing: X must be a finite float64 (m, d) array, one row per
        listed client, and ``out`` (an (m, d) float64 array, or None) may be used
        for the result, which is returned.  A value that overflows float64 comes
        back as inf or NaN instead of an OutOfRangeError: the caller checks its
        iterates (``local_descent`` raises DivergenceError).

        Default: ``stochastic_grad`` with the checked indices (``out`` unused).
        Quadratic clients override it with the batched product on the selected
        Hessians, picked once (views for a contiguous run of clients).
        """
        idx = self._clients(clients)

        def grad(X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
            return self.stochastic_grad(X, idx, rng)
        return grad

    def cvxpy_client_loss(self, client: int, y: Any) -> Any:
        """f_client(y) as a cvxpy expression of the cvxpy variable ``y`` (the
        cross-check solver of FedElasticNet).  Default: InvalidHyperparameterError,
        as no expression can be derived from the oracles."""
        raise InvalidHyperparameterError(
            f"solver='cvxpy' needs a cvxpy expression of the client losses; {self!r} "
            "does not provide one (Federation.cvxpy_client_loss)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_clients={self.n_clients}, dim={self.dim})"


checked_hooks(Federation)
