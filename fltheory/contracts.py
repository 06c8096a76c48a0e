"""Contract checks for users' own algorithms and federations (re-exported by ``fltheory.testing``).

:func:`check_algorithm` holds an algorithm to the invariants of the Algorithm
contract (``fltheory.algorithms.base``) and :func:`check_federation` holds a
federation to the oracle contract (``fltheory.problems.base``), each against
mathematics rather than against itself: a reference loop, an exactly
recovered affine round map, central finite differences, first-order
optimality.  Both raise ``AssertionError`` listing every failed check, and
otherwise return a report of what was checked (with the numbers).

>>> from fltheory.algorithms import FedAvg
>>> from fltheory.testing import check_algorithm
>>> report = check_algorithm(FedAvg, hyperparameters={"lr": 0.1, "local_steps": 3})
>>> [name for name, status, _ in report.checks if status == "passed"]  # doctest: +NORMALIZE_WHITESPACE
['same seed, same bits', 'state never mutated', 'agrees with the reference loop',
 'affine recovery on a quadratic', 'typed errors on bad hyperparameters']
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .display import SummaryDisplay, format_value
from ._validate import flag, instance, integer, positive
from .errors import FLTheoryError, InvalidHyperparameterError, NotAffineError

__all__ = ["AlgorithmCheckReport", "FederationCheckReport", "check_algorithm", "check_federation",
           "default_bad_hyperparameters"]

#: check_algorithm runs this many rounds at most (it runs each check several times; a contract check
#: needs a few rounds, and a huge count would only make it hang)
_MAX_CHECK_ROUNDS = 1000
#: check_federation samples at most this many points per client (finite differences cost d oracle calls each)
_MAX_CHECK_POINTS = 100

Check = tuple[str, str, str]          # (name, "passed" | "skipped" | "FAILED", detail)


@dataclass(repr=False)
class _Report(SummaryDisplay):
    subject: str
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, status: str, detail: str) -> None:
        self.checks.append((name, status, detail))

    @property
    def failures(self) -> list[Check]:
        """The failed checks."""
        return [c for c in self.checks if c[1] == "FAILED"]

    def _summary_rows(self) -> tuple[str, list[tuple[str, str]]]:
        return (f"{type(self).__name__} of {self.subject}",
                [(name, f"{status}: {detail}") for name, status, detail in self.checks])

    def raise_on_failure(self) -> None:
        """AssertionError listing every failed check (with the numbers)."""
        if self.failures:
            lines = "\n".join(f"  - {n}: {d}" for n, _, d in self.failures)
            raise AssertionError(f"{self.subject} breaks {len(self.failures)} contract check(s):\n{lines}")


class AlgorithmCheckReport(_Report):
    """What :func:`check_algorithm` checked: ``checks`` is a list of (name, status, detail)."""


class FederationCheckReport(_Report):
    """What :func:`check_federation` checked: ``checks`` is a list of (name, status, detail)."""


# ------------------------------------------------------------------ helpers
def _tree_equal(a: Any, b: Any) -> bool:
    """Bitwise equality of nested states (dataclasses, NamedTuples, sequences, dicts, arrays)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        return a_arr.shape == b_arr.shape and a_arr.dtype == b_arr.dtype and bool(
            np.array_equal(a_arr, b_arr, equal_nan=a_arr.dtype.kind in "fc"))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(
            _tree_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and a.keys() == b.keys() and all(_tree_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(
            _tree_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return a is b


def default_bad_hyperparameters(hyperparameters: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Values every algorithm must reject: NaN for each float hyperparameter given,
    and -1 (and 0 for step counts) for the rates and step counts present."""
    bad: dict[str, list[Any]] = {}
    for name, value in hyperparameters.items():
        if isinstance(value, float | np.floating) and not isinstance(value, bool):
            bad.setdefault(name, []).append(float("nan"))
    for name in ("lr", "server_lr"):
        if name in hyperparameters and isinstance(hyperparameters[name], int | float):
            bad.setdefault(name, []).append(-1.0)
    if "local_steps" in hyperparameters and isinstance(hyperparameters["local_steps"], int):
        bad.setdefault("local_steps", []).extend([0, -1])
    return bad


def _default_problem(seed: int) -> Any:
    from .problems import random_quadratic
    return random_quadratic(5, 3, L=4.0, mu=0.5, heterogeneity=2.0, seed=seed)


# ---------------------------------------------------------- check_algorithm
def check_algorithm(algorithm: Any, *, hyperparameters: Mapping[str, Any] | None = None,
                    problem: Any = None, rounds: int = 4, seed: int = 0, participation: Any = None,
                    noise: float = 0.1, reference: Callable[..., np.ndarray] | None = None,
                    affine: bool | None = None,
                    bad_hyperparameters: Mapping[str, Sequence[Any]] | None = None,
                    rtol: float = 1e-10) -> AlgorithmCheckReport:
    """Run an algorithm through the invariants of the Algorithm contract.

    Parameters
    ----------
    algorithm : Algorithm subclass, factory function or instance
        A class or factory (such as ``FedProxTE``) is called with ``hyperparameters``
        (keyword-only); the bad-hyperparameter check needs one.
    hyperparameters : mapping, optional
        Constructor arguments (taken from the instance when one is given).
    problem : Federation, optional
        Default: a 5-client, 3-dimensional quadratic federation
        (``random_quadratic(5, 3, L=4, mu=0.5, heterogeneity=2, seed=seed)``).
    rounds, seed : int
        Rounds of each run and the seed of every run.
    participation : Participation, optional
        For the randomized checks; default ``UniformSampling(S = N - 2)`` (at least 1).
    noise : float
        sigma^2 of the Gaussian gradient noise of the randomized checks (0 for exact gradients).
    reference : callable, optional
        A plain reference loop ``(alg, problem, rounds, participation, rng, x0) -> (rounds+1, d)``
        server models; default: the loop registered with
        ``fltheory.algorithms.reference.register`` for the class, if any.
    affine : bool or None
        Whether the algorithm's deterministic round is affine on quadratics.  ``True``
        requires exact affine recovery, ``False`` skips it, ``None`` checks it and
        records a non-affine algorithm as skipped.
    bad_hyperparameters : mapping name -> values, optional
        Values the constructor must reject with a typed error (an FLTheoryError that is also
        a ValueError or TypeError, naming the argument); default
        :func:`default_bad_hyperparameters`.
    rtol : float
        Relative tolerance of the reference-loop and affine agreements.

    Checks
    ------
    1. same seed, same bits: two runs with the same seed (sampled participation,
       noisy gradients) give bitwise equal models and losses;
    2. state never mutated: ``round`` leaves every earlier state bitwise unchanged
       (also after later rounds: no array is shared and written later);
    3. reference loop: the fast path equals the reference loop to ``rtol``;
    4. affine recovery: with exact gradients and full participation, iterating the
       recovered map S -> M S + c reproduces the simulated run to ``rtol``;
    5. typed errors on bad hyperparameters.

    Returns
    -------
    AlgorithmCheckReport

    Raises
    ------
    AssertionError
        Listing every failed check.
    """
    from .algorithms import Algorithm, run
    from .algorithms.reference import REFERENCES
    from .participation import Participation, UniformSampling
    from .problems import Federation

    if hyperparameters is not None:
        instance("check_algorithm: hyperparameters", hyperparameters, Mapping, "a mapping name -> value or None",
                 InvalidHyperparameterError)
    if problem is not None:
        instance("check_algorithm: problem", problem, Federation, "a Federation or None", InvalidHyperparameterError)
    rounds = integer("check_algorithm: rounds", rounds, minimum=1, maximum=_MAX_CHECK_ROUNDS)
    seed = integer("check_algorithm: seed", seed, minimum=0, maximum=None)
    if participation is not None:
        instance("check_algorithm: participation", participation, Participation, "a Participation or None",
                 InvalidHyperparameterError)
    noise = positive("check_algorithm: noise", noise, allow_zero=True)
    if reference is not None and not callable(reference):
        raise InvalidHyperparameterError(f"check_algorithm: reference must be a callable or None, got {reference!r}")
    if affine is not None:
        affine = flag("check_algorithm: affine", affine)
    if bad_hyperparameters is not None:
        instance("check_algorithm: bad_hyperparameters", bad_hyperparameters, Mapping,
                 "a mapping name -> sequence of values or None", InvalidHyperparameterError)
    rtol = positive("check_algorithm: rtol", rtol)
    if isinstance(algorithm, Algorithm):
        alg, build = algorithm, type(algorithm)
        hp = dict(hyperparameters) if hyperparameters is not None else dict(alg.hyperparameters())
    elif callable(algorithm):
        build = algorithm
        hp = dict(hyperparameters or {})
        alg = build(**hp)
        if not isinstance(alg, Algorithm):
            raise InvalidHyperparameterError(
                f"check_algorithm: {getattr(algorithm, '__name__', algorithm)!r} built a "
                f"{type(alg).__name__}, expected an fltheory Algorithm")
    else:
        raise InvalidHyperparameterError(
            f"check_algorithm: algorithm must be an Algorithm class, factory or instance, "
            f"got {type(algorithm).__name__}")
    cls = type(alg)
    label = getattr(build, "__name__", cls.__name__)
    fed = _default_problem(seed) if problem is None else problem
    noisy = fed.with_gradient_noise(noise) if noise > 0 else fed
    part = participation if participation is not None else UniformSampling(max(1, fed.n_clients - 2))
    report = AlgorithmCheckReport(subject=f"{label}({format_value(hp, 80)})")

    # 1. same seed, same bits
    h1 = run(alg, noisy, rounds, participation=part, seed=seed)
    h2 = run(alg, noisy, rounds, participation=part, seed=seed)
    same = np.array_equal(h1.x, h2.x) and np.array_equal(np.asarray(h1.loss), np.asarray(h2.loss))
    report.add("same seed, same bits", "passed" if same else "FAILED",
               f"{rounds} rounds, seed {seed}: max |x1 - x2| = {np.abs(h1.x - h2.x).max():.3g}")

    # 2. state never mutated
    rng = np.random.default_rng(seed)
    state = alg.init(noisy, np.zeros(fed.dim), rng)
    kept: list[tuple[int, Any, Any]] = [(0, state, copy.deepcopy(state))]
    for t in range(rounds):
        state, _ = alg.round(state, noisy, part, rng)
        kept.append((t + 1, state, copy.deepcopy(state)))
    changed = [t for t, st, snap in kept if not _tree_equal(st, snap)]
    report.add("state never mutated", "FAILED" if changed else "passed",
               f"states of rounds {changed} changed after later rounds" if changed else
               f"{len(kept)} states compared bitwise after {rounds} rounds")

    # 3. reference loop
    loop = reference
    if loop is None:
        loop = next((REFERENCES[c] for c in cls.__mro__ if c in REFERENCES), None)
    if loop is None:
        report.add("agrees with the reference loop", "skipped", "no reference loop given or registered")
    else:
        xs = np.asarray(loop(alg, noisy, rounds, part, np.random.default_rng(seed), np.zeros(fed.dim)))
        err = float(np.abs(xs - h1.x).max() / max(1.0, float(np.abs(xs).max())))
        report.add("agrees with the reference loop", "passed" if err <= rtol else "FAILED",
                   f"max relative difference {err:.3g} (rtol {rtol:g})")

    # 4. affine recovery on a quadratic
    if affine is False:
        report.add("affine recovery on a quadratic", "skipped", "affine=False")
    else:
        exact = fed.exact() if hasattr(fed, "exact") else fed
        try:
            simulated = run(alg, exact, rounds, seed=seed)
            through_map = run(alg, exact, rounds, seed=seed, method="affine")
        except NotAffineError as exc:
            report.add("affine recovery on a quadratic", "FAILED" if affine else "skipped",
                       f"round map not affine: {exc}")
        else:
            err = float(np.abs(through_map.x - simulated.x).max()
                        / max(1.0, float(np.abs(simulated.x).max())))
            report.add("affine recovery on a quadratic", "passed" if err <= max(rtol, 1e-9) else "FAILED",
                       f"map iterate vs simulation: max relative difference {err:.3g}")

    # 5. typed errors on bad hyperparameters
    if not isinstance(algorithm, Algorithm) or hyperparameters is not None:
        bad = (dict(bad_hyperparameters) if bad_hyperparameters is not None
               else default_bad_hyperparameters(hp))
        problems: list[str] = []
        tried = 0
        for name, values in bad.items():
            for value in values:
                tried += 1
                try:
                    build(**{**hp, name: value})
                except FLTheoryError as exc:
                    if not isinstance(exc, ValueError | TypeError):
                        problems.append(f"{name}={value!r}: {type(exc).__name__} is neither a "
                                        "ValueError nor a TypeError")
                    elif name not in str(exc):
                        problems.append(f"{name}={value!r}: message does not name {name!r}: {exc}")
                except Exception as exc:
                    problems.append(f"{name}={value!r}: untyped {type(exc).__name__}: {exc}")
                else:
                    problems.append(f"{name}={value!r} accepted")
        if tried == 0:
            report.add("typed errors on bad hyperparameters", "skipped", "no bad values to try")
        else:
            report.add("typed errors on bad hyperparameters", "FAILED" if problems else "passed",
                       "; ".join(problems) if problems else f"{tried} bad values rejected with typed errors")
    else:
        report.add("typed errors on bad hyperparameters", "skipped",
                   "an instance was given without its hyperparameters")
    report.raise_on_failure()
    return report


# --------------------------------------------------------- check_federation
def check_federation(federation: Any, *, points: int = 2, seed: int = 0, step: float = 1e-5,
                     fd_tol: float = 1e-6, exact_tol: float = 1e-10,
                     hessians: bool = True) -> FederationCheckReport:
    """Hold a federation to the oracle contract, against finite differences and optimality.

    Parameters
    ----------
    federation : Federation
    points : int
        Random points per client (rows drawn around the optimum with unit spread).
    seed : int
        Seed of the points.
    step : float
        Central-difference step h, relative to 1 + |x_j|; in (0, 0.1] (a larger relative step
        measures curvature, not the derivative).
    fd_tol : float
        Tolerance of finite-difference agreements, relative to 1 + the largest entry
        compared (central differences err by O(h^2) times the third derivative).
    exact_tol : float
        Tolerance of identities that hold up to rounding (batched rows, global sums, optimality).
    hessians : bool
        Also check ``client_hess`` (against differences of ``client_grad``) and the
        global constants ``fed.mu <= eig(hess F) <= fed.L``.

    Checks
    ------
    gradients: ``client_grad`` vs central differences of ``client_loss``;
    Hessians: ``client_hess`` symmetric and equal to central differences of ``client_grad``;
    batching: rows of a batched call equal single-client calls on a client subset;
    global sums: ``loss``, ``grad`` equal the p-weighted client sums;
    optimum: grad F(x*) = 0 and F(x*) below F at perturbed points;
    client optima: grad f_i(x_i*) = 0;
    constants: mu <= eigenvalues of hess F <= L at the sampled points (``fed.L``, ``fed.mu`` are
    the global objective's constants).

    Returns
    -------
    FederationCheckReport

    Raises
    ------
    AssertionError
        Listing every failed check.
    """
    from .problems import Federation

    instance("check_federation: federation", federation, Federation, "a Federation", InvalidHyperparameterError)
    points = integer("check_federation: points", points, minimum=1, maximum=_MAX_CHECK_POINTS)
    seed = integer("check_federation: seed", seed, minimum=0, maximum=None)
    step = positive("check_federation: step", step)
    if step > 0.1:
        raise InvalidHyperparameterError(f"check_federation: step must be in (0, 0.1] (a relative central-difference "
                                         f"step), got {step!r}")
    fd_tol = positive("check_federation: fd_tol", fd_tol)
    exact_tol = positive("check_federation: exact_tol", exact_tol)
    hessians = flag("check_federation: hessians", hessians)
    fed = federation.exact() if hasattr(federation, "exact") else federation
    N, d = fed.n_clients, fed.dim
    rng = np.random.default_rng(seed)
    report = FederationCheckReport(subject=f"{type(federation).__name__}(n_clients={N}, dim={d})")
    x_star = np.asarray(fed.optimum(), dtype=np.float64)
    clients = np.tile(np.arange(N), points)
    X = x_star + rng.standard_normal((clients.size, d))

    def rel(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a - b).max() / (1.0 + max(float(np.abs(a).max()), float(np.abs(b).max()))))

    def fd(fun: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        cols = []
        for j in range(d):                       # loop over coordinates, not clients
            h = step * (1.0 + np.abs(X[:, j]))
            Xp, Xm = X.copy(), X.copy()
            Xp[:, j] += h
            Xm[:, j] -= h
            diff = (fun(Xp) - fun(Xm))
            cols.append(diff / (2 * h).reshape((-1,) + (1,) * (diff.ndim - 1)))
        return np.stack(cols, axis=-1)

    G = np.asarray(fed.client_grad(X, clients))
    err = rel(G, fd(lambda Y: np.asarray(fed.client_loss(Y, clients))))
    report.add("gradients vs finite differences", "passed" if err <= fd_tol else "FAILED",
               f"max relative error {err:.3g} (tol {fd_tol:g}) at {X.shape[0]} points")

    if hessians:
        Hs = np.asarray(fed.client_hess(X, clients))
        asym = rel(Hs, np.swapaxes(Hs, -1, -2))
        err = rel(Hs, fd(lambda Y: np.asarray(fed.client_grad(Y, clients))))
        ok = err <= fd_tol and asym <= exact_tol
        report.add("Hessians vs finite differences", "passed" if ok else "FAILED",
                   f"max relative error {err:.3g} (tol {fd_tol:g}), asymmetry {asym:.3g}")

    subset = np.arange(N)[::2][::-1].copy()
    Y = X[: subset.size]
    rows = np.asarray(fed.client_grad(Y, subset))
    singles = np.concatenate([np.asarray(fed.client_grad(Y[k][None, :], np.array([i])))
                              for k, i in enumerate(subset)])
    err = rel(rows, singles)
    report.add("batched rows equal single-client calls", "passed" if err <= exact_tol else "FAILED",
               f"clients {subset.tolist()}: max relative difference {err:.3g}")

    x = X[0]
    p = np.asarray(fed.weights, dtype=np.float64)
    Xall = np.broadcast_to(x, (N, d))
    err_g = rel(np.asarray(fed.grad(x)), p @ np.asarray(fed.client_grad(Xall)))
    err_f = rel(np.atleast_1d(fed.loss(x)), np.atleast_1d(p @ np.asarray(fed.client_loss(Xall))))
    ok = max(err_g, err_f) <= exact_tol
    report.add("global loss and gradient are the weighted client sums", "passed" if ok else "FAILED",
               f"loss {err_f:.3g}, gradient {err_g:.3g}; weights sum to {p.sum():.17g}")

    g_star = float(np.linalg.norm(fed.grad(x_star)))
    scale = float(np.linalg.norm(fed.grad(x))) + 1.0
    f_star = float(fed.loss(x_star))
    probe = x_star + 1e-3 * rng.standard_normal((8, d))
    lower = min(float(fed.loss(y)) for y in probe)
    ok = g_star <= 1e-7 * scale and lower >= f_star - exact_tol * (1.0 + abs(f_star))
    report.add("optimum: grad F(x*) = 0 and F(x*) minimal nearby", "passed" if ok else "FAILED",
               f"||grad F(x*)|| = {g_star:.3g} (scale {scale:.3g}); min F(perturbed) - F(x*) = "
               f"{lower - f_star:.3g}")

    if hasattr(fed, "client_optima"):
        try:
            xi = np.asarray(fed.client_optima())
        except FLTheoryError as exc:
            report.add("client optima", "skipped", f"not available: {exc}")
        else:
            gi = np.linalg.norm(np.asarray(fed.client_grad(xi)), axis=1).max()
            report.add("client optima: grad f_i(x_i*) = 0", "passed" if gi <= 1e-7 * scale else "FAILED",
                       f"max ||grad f_i(x_i*)|| = {gi:.3g}")

    if hessians and hasattr(fed, "L") and hasattr(fed, "mu"):
        L, mu = float(fed.L), float(fed.mu)
        eig = np.concatenate([np.linalg.eigvalsh(np.asarray(fed.hess(y))) for y in X[: min(4, len(X))]])
        tol = exact_tol * max(1.0, abs(L))
        ok = eig.min() >= mu - tol and eig.max() <= L + tol
        report.add("constants: fed.mu <= eig(hess F) <= fed.L", "passed" if ok else "FAILED",
                   f"eigenvalues in [{eig.min():.6g}, {eig.max():.6g}], mu = {mu:.6g}, L = {L:.6g}")
    report.raise_on_failure()
    return report
