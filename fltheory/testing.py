"""Tools for users' own tests: Hypothesis strategies, bound checks and contract checkers.

* :func:`check_algorithm` runs any algorithm class through the invariants
  every fltheory algorithm meets (same seed same bits, state never mutated,
  agreement with a reference loop, exact affine recovery on quadratics, typed
  errors on bad hyperparameters); :func:`check_federation` does the same for
  a federation (gradients and Hessians against finite differences, the
  batched oracles against one-client calls, the optimum).
* :func:`check_bound` asserts measured <= bound with a message naming the
  bound, its hypotheses and the instance.
* :func:`quadratic_federations` and :func:`logistic_federations` are
  Hypothesis strategies (they need ``pip install "fltheory[test]"``; without
  Hypothesis the rest of the module works and the strategies raise an
  ImportError saying so).  Importing the module registers the Hypothesis
  profiles ``ci`` and ``thorough`` (:mod:`fltheory.pytest_plugin`).

A complete property test (EFL Theorem 2, eq. (10), over random quadratic
federations whose clients are all L-smooth and mu-strongly convex)::

    from hypothesis import given, strategies as st
    from fltheory.testing import quadratic_federations, check_bound
    from fltheory.theory import objective_shift

    @given(quadratic_federations(n_clients=st.integers(2, 5), dim=st.integers(1, 4),
                                 L=st.floats(1, 100), mu=st.floats(0.01, 1),
                                 heterogeneity=st.floats(0.1, 100)),
           st.data())
    def test_departure_shift(fed, data):
        a = data.draw(st.integers(0, fed.n_clients - 1))
        res = objective_shift(fed, a, kind="depart")
        check_bound(res.measured, res, rtol=1e-9, label="EFL eq. 10", instance=fed)

Which constants a strategy controls: ``L`` and ``mu`` of
:func:`quadratic_federations` bound **every client** (each f_i has its
spectrum in [mu, L]); the global objective's constants ``fed.L`` and
``fed.mu`` (of F = sum p_i f_i) lie inside [mu, L] and are usually far from
them.  A bound stated for client constants must be evaluated with
``fed.client_L.max()`` and ``fed.client_mu.min()``, not ``fed.L``/``fed.mu``.

Every argument of the strategies is a value or a Hypothesis strategy.  Random
matrices are built from a numpy Generator seeded by a drawn integer (so
shrinking works on the sizes, constants and seed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numpy.typing import ArrayLike

from .contracts import (
    AlgorithmCheckReport,
    FederationCheckReport,
    check_algorithm,
    check_federation,
)
from ._validate import instance as _instance_of
from ._validate import integer, positive, real_scalar
from .errors import InvalidHyperparameterError, OptionalDependencyError
from .problems.base import Federation
from .problems.quadratic import QuadraticFederation
from .pytest_plugin import register_profiles

try:
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy
    HAVE_HYPOTHESIS = True
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    HAVE_HYPOTHESIS = False

__all__ = ["HAVE_HYPOTHESIS", "AlgorithmCheckReport", "FederationCheckReport", "build_quadratic",
           "check_algorithm", "check_bound", "check_federation", "describe_federation",
           "logistic_federations", "quadratic_federations", "register_profiles"]

#: Largest client count and dimension of ``build_quadratic`` (dense (N, d, d) Hessians, a test helper).
MAX_CLIENTS = 10_000
MAX_DIM = 1_000

_MISSING = ("fltheory.testing.{name} is a Hypothesis strategy and Hypothesis is not installed: "
            'pip install "fltheory[test]" (or pip install hypothesis)')


def _strategy(value: Any) -> Any:
    return value if isinstance(value, SearchStrategy) else st.just(value)


def _orthogonal(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """n random orthogonal d x d matrices (QR of Gaussians, sign-fixed)."""
    Z = rng.standard_normal((n, d, d))
    Q, R = np.linalg.qr(Z)
    return Q * np.sign(np.einsum("nii->ni", R))[:, None, :]


def build_quadratic(n_clients: int, dim: int, L: float, mu: float, heterogeneity: float,
                    n_samples: ArrayLike, seed: int) -> QuadraticFederation:
    """Quadratic federation whose every client has spectrum in [mu, L] (client 0
    has exactly mu and L when dim >= 2) and optima x_i* = heterogeneity * z_i,
    z_i ~ N(0, I/d).

    ``n_clients`` and ``dim`` are integers in [1, ``MAX_CLIENTS``] and [1, ``MAX_DIM``], ``L``,
    ``mu`` finite with 0 < mu <= L, ``heterogeneity`` finite and >= 0, ``seed`` an integer >= 0
    (InvalidHyperparameterError otherwise); ``n_samples`` is checked by QuadraticFederation."""
    n_clients = integer("build_quadratic: n_clients", n_clients, minimum=1, maximum=MAX_CLIENTS)
    dim = integer("build_quadratic: dim", dim, minimum=1, maximum=MAX_DIM)
    L = positive("build_quadratic: L", L)
    mu = positive("build_quadratic: mu", mu)
    heterogeneity = positive("build_quadratic: heterogeneity", heterogeneity, allow_zero=True)
    seed = integer("build_quadratic: seed", seed, minimum=0, maximum=None)
    if not (0 < mu <= L):
        raise InvalidHyperparameterError(f"need 0 < mu <= L, got mu={mu!r}, L={L!r}")
    rng = np.random.default_rng(seed)
    eig = mu + (L - mu) * rng.random((n_clients, dim))
    if dim >= 2:
        eig[0, 0], eig[0, 1] = mu, L
    Q = _orthogonal(rng, n_clients, dim)
    H = np.einsum("nij,nj,nkj->nik", Q, eig, Q)
    xs = heterogeneity * rng.standard_normal((n_clients, dim)) / np.sqrt(dim)
    e = np.einsum("nij,nj->ni", H, xs)
    return QuadraticFederation(H, e, n_samples=n_samples)


if HAVE_HYPOTHESIS:
    @st.composite
    def quadratic_federations(draw: Any, n_clients: Any = st.integers(2, 6),
                              dim: Any = st.integers(1, 4),
                              L: Any = st.floats(1.0, 1e3),
                              mu: Any = st.floats(1e-3, 1.0),
                              heterogeneity: Any = st.floats(0.0, 1e2),
                              n_samples: Any = None) -> QuadraticFederation:
        """Random :class:`QuadraticFederation` meeting the given **per-client** constants.

        Every client f_i is L-smooth and mu-strongly convex (so F is too); when
        the drawn mu exceeds the drawn L they are swapped.  ``fed.L`` and
        ``fed.mu`` are the global objective's constants, inside [mu, L]: use
        ``fed.client_L.max()`` / ``fed.client_mu.min()`` for client constants.  ``heterogeneity``
        scales the spread of the client optima.  Sample counts default to
        integers in [1, 1000] per client (so n_a/n ranges over (0, 1)).
        """
        N = draw(_strategy(n_clients))
        d = draw(_strategy(dim))
        a, b = draw(_strategy(L)), draw(_strategy(mu))
        L_, mu_ = max(a, b), min(a, b)
        het = draw(_strategy(heterogeneity))
        if n_samples is None:
            n = draw(st.lists(st.integers(1, 1000), min_size=N, max_size=N))
        else:
            n = draw(_strategy(n_samples))
        seed = draw(st.integers(0, 2 ** 32 - 1))
        return build_quadratic(N, d, L_, mu_, het, n, seed)


    @st.composite
    def logistic_federations(draw: Any, n_clients: Any = st.integers(2, 5), dim: Any = st.integers(1, 3),
                             samples: Any = st.integers(2, 30), reg: Any = st.floats(1e-2, 1.0),
                             heterogeneity: Any = st.floats(0.0, 5.0)) -> Any:
        """Random binary LogisticFederation (needs fltheory.problems.LogisticFederation):
        features ~ N(m_i, I) with client means m_i = heterogeneity * z_i, labels
        from a logistic model with a shared true weight vector; ridge ``reg`` > 0
        so F is reg-strongly convex.  ``reg`` is both the per-client and the global
        strong-convexity constant (``fed.mu``); smoothness is not prescribed:
        ``fed.client_L`` (per client) and ``fed.L`` (of F) are computed from the data."""
        from .problems import LogisticFederation  # ImportError until it exists
        N = draw(_strategy(n_clients))
        d = draw(_strategy(dim))
        sizes = draw(st.lists(_strategy(samples), min_size=N, max_size=N))
        lam = draw(_strategy(reg))
        het = draw(_strategy(heterogeneity))
        rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
        w = rng.standard_normal(d)
        feats, labels = [], []
        for i in range(N):                       # construction only
            A = het * rng.standard_normal(d) + rng.standard_normal((sizes[i], d))
            prob = 1.0 / (1.0 + np.exp(-A @ w))
            labels.append(np.where(rng.random(sizes[i]) < prob, 1.0, -1.0))
            feats.append(A)
        return LogisticFederation(feats, labels, reg=lam)
else:
    def quadratic_federations(*args: Any, **kwargs: Any) -> Any:
        """Unavailable: Hypothesis is not installed."""
        raise OptionalDependencyError(_MISSING.format(name="quadratic_federations"))

    def logistic_federations(*args: Any, **kwargs: Any) -> Any:
        """Unavailable: Hypothesis is not installed."""
        raise OptionalDependencyError(_MISSING.format(name="logistic_federations"))


def describe_federation(fed: QuadraticFederation) -> str:
    """A copy-pasteable description of a small federation (for failure messages);
    ``fed`` must be a Federation (InvalidProblemError otherwise)."""
    _instance_of("describe_federation: fed", fed, Federation, "a Federation instance")
    with np.printoptions(precision=17, threshold=10_000):
        parts = [f"{type(fed).__name__}(n_clients={fed.n_clients}, dim={fed.dim})",
                 f"weights={np.asarray(fed.weights)!r}"]
        if getattr(fed, "n_samples", None) is not None:
            parts.append(f"n_samples={np.asarray(fed.n_samples)!r}")
        if hasattr(fed, "H"):
            parts += [f"H={fed.H!r}", f"e={fed.e!r}"]
    return "\n".join(parts)


def check_bound(measured: float, bound_result: Any, *, rtol: float = 0.0, atol: float = 0.0,
                label: str = "", instance: Any = None) -> None:
    """Assert measured <= bound (1 + rtol) + atol, with a message naming the
    bound, its hypotheses, its terms and the instance.

    ``atol`` is for floating-point noise when both sides can be 0 (state in
    the test how it was derived).

    Fails as well when a hypothesis of the bound is violated (the bound has
    no value): a property test must draw instances that meet the hypotheses.
    Arguments of the wrong kind (``measured`` not a finite real number, ``bound_result`` not a
    BoundResult, ``rtol``/``atol`` not finite and >= 0, ``label`` not a str) raise
    InvalidHyperparameterError; AssertionError is kept for a bound that does not hold.
    """
    from .theory.result import BoundResult
    bound_result = _instance_of("check_bound: bound_result", bound_result, BoundResult, "a BoundResult",
                            InvalidHyperparameterError)
    if isinstance(measured, np.ndarray) and measured.ndim == 0:
        measured = measured[()]
    measured = real_scalar("check_bound: measured", measured)
    rtol = positive("check_bound: rtol", rtol, allow_zero=True)
    atol = positive("check_bound: atol", atol, allow_zero=True)
    if not isinstance(label, str):
        raise InvalidHyperparameterError(f"check_bound: label must be a str, got {label!r:.60}")
    head = f"{label + ': ' if label else ''}{bound_result.reference} [{bound_result.variant}]"
    inst = "" if instance is None else "\ninstance:\n" + (
        describe_federation(instance) if hasattr(instance, "n_clients") else repr(instance))
    if bound_result.value is None:
        raise AssertionError(f"{head}: bound not evaluated, violated hypotheses:\n{bound_result}{inst}")
    m = float(measured)
    if not np.isfinite(m):
        raise AssertionError(f"{head}: measured value is not finite ({m!r}){inst}")
    limit = bound_result.value * (1.0 + rtol) + atol
    if not m <= limit:
        terms = {k: v for k, v in dict(bound_result.terms).items() if np.ndim(v) == 0}
        raise AssertionError(
            f"{head}: measured {m!r} > bound {bound_result.value!r} (ratio "
            f"{m / bound_result.value if bound_result.value else float('inf')!r}, rtol {rtol}, atol {atol})\n"
            f"{bound_result}\nterms: {terms}{inst}")
