"""Certified worst cases over a whole function class with PEPit (extra ``pep``).

Where a bound's hypotheses define a class PEPit can express, the worst case
over the class is the value of a small semidefinite program (performance
estimation, Drori & Teboulle 2014; Taylor, Hendrickx & Glineur 2017), solved
here with PEPit (Goujaud et al.) through cvxpy/Clarabel.  Two classes:

* :func:`pep_objective_shift`: the minimiser shift between two objectives of
  EFL Theorem 2 (Ma et al., EFL, eq. (10)/(11)).  The other clients'
  aggregate G and the moving client f_a are both L-smooth and mu-strongly
  convex (the family the search samples: every client's spectrum in [mu, L]).
  Depart: w* = argmin (1 - p) G + p f_a, w^* = argmin G, p = n_a/n.  Join:
  w* = argmin G, w^* = argmin (1 - q) G + q f_a, q = n_a/(n + n_a).  With the
  gap D (D^_a = f_a(w^*) - f_a* for the printed bounds and the derived
  departure; D~_a = f_a(w*) - f_a* for the derived join) normalised to D <= 1,
  the SDP value is sup ||w* - w^*||^2 / D; divided by the bound's coefficient
  c L s^2 / mu^2 (c = 8 printed, 2 derived; s = p or q) it is the certified
  worst measured/bound over the class, with the class constants L and mu.
* :func:`pep_gradient_steps`: tau gradient steps of rate eta on an L-smooth
  mu-strongly convex function, sup ||x_tau - x*||^2 / ||x_0 - x*||^2 -- the
  per-client contraction rho_i that LocalAdaptivity Theorem 1 (Wang et al., Local
  Adaptivity) uses ("squared" form: max(|1 - eta mu|, |1 - eta L|)^(2 tau)).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidHyperparameterError

__all__ = ["PepResult", "pep_gradient_steps", "pep_objective_shift"]


@dataclass(frozen=True)
class PepResult:
    """A certified worst case.

    Attributes
    ----------
    worst : float
        The SDP value: sup of the performance measure over the class
        (dual value, an upper bound certified by the solver's dual solution).
    coefficient : float
        What the bound gives for the same normalisation (the bound's value per
        unit gap, or the bound's contraction factor).
    ratio : float
        worst / coefficient: the certified worst measured/bound.
    """

    worst: float
    coefficient: float
    ratio: float


def _pep() -> tuple[type, type]:
    try:
        from PEPit import PEP
        from PEPit.functions import SmoothStronglyConvexFunction
    except ImportError as exc:
        raise InvalidHyperparameterError(
            "certified worst cases need PEPit: pip install 'fltheory[pep]'") from exc
    return PEP, SmoothStronglyConvexFunction


def _check(mu: float, L: float) -> None:
    if not (0 < mu < L):
        raise InvalidHyperparameterError(
            f"PEPit's smooth strongly convex class needs 0 < mu < L, got mu={mu!r}, L={L!r}")


def _solve(problem: object) -> float:
    import cvxpy as cp
    value = problem.solve(verbose=0, solver=cp.CLARABEL)  # type: ignore[attr-defined]
    if value is None:
        raise ArithmeticError("PEPit found no finite worst case (solver status not optimal)")
    return float(value)


def pep_objective_shift(kind: str, share: float, L: float, mu: float,
                        variant: str = "as_printed") -> PepResult:
    """Certified worst ||w* - w^*||^2 / D over the class, against EFL eq. (10)/(11).

    Parameters
    ----------
    kind : {"depart", "join"}
    share : float
        depart: the leaver's share of all data, n_a/n in (0, 1) (the depart search space's
        ``share`` is n_a over the others' data, r: pass r/(1 + r)); join: the newcomer's data
        over the others', n_a/n > 0, as in the join search space.
    L, mu : float
        Class constants, 0 < mu < L.
    variant : {"as_printed", "derived"}
    """
    PEP, SSC = _pep()
    _check(mu, L)
    if kind not in ("depart", "join") or variant not in ("as_printed", "derived"):
        raise InvalidHyperparameterError(
            "kind must be 'depart' or 'join' and variant 'as_printed' or 'derived', "
            f"got {kind!r}, {variant!r}")
    if not share > 0 or (kind == "depart" and not share < 1):
        raise InvalidHyperparameterError(f"share must lie in (0, 1) (depart) or be > 0 (join), got {share!r}")
    s = share if kind == "depart" else share / (1 + share)
    problem = PEP()
    G = problem.declare_function(SSC, mu=mu, L=L)
    fa = problem.declare_function(SSC, mu=mu, L=L)
    mixed = (1 - s) * G + s * fa
    if kind == "depart":
        w_old, w_new = mixed.stationary_point(), G.stationary_point()
    else:
        w_old, w_new = G.stationary_point(), mixed.stationary_point()
    xa = fa.stationary_point()
    at = w_old if (kind == "join" and variant == "derived") else w_new
    problem.set_initial_condition(fa(at) - fa(xa) <= 1)
    problem.set_performance_metric((w_old - w_new) ** 2)
    worst = _solve(problem)
    coefficient = (8.0 if variant == "as_printed" else 2.0) * L * s ** 2 / mu ** 2
    return PepResult(worst, coefficient, worst / coefficient)


def pep_gradient_steps(L: float, mu: float, lr: float, steps: int) -> PepResult:
    """Certified worst ||x_tau - x*||^2 / ||x_0 - x*||^2 of ``steps`` gradient steps
    x <- x - lr grad f(x) over L-smooth mu-strongly convex f, against the
    contraction max(|1 - lr mu|, |1 - lr L|)^(2 steps) of LocalAdaptivity's squared form."""
    PEP, SSC = _pep()
    _check(mu, L)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InvalidHyperparameterError(f"steps must be an integer >= 1, got {steps!r}")
    if not lr > 0:
        raise InvalidHyperparameterError(f"lr must be > 0, got {lr!r}")
    problem = PEP()
    f = problem.declare_function(SSC, mu=mu, L=L)
    xs = f.stationary_point()
    x0 = problem.set_initial_point()
    problem.set_initial_condition((x0 - xs) ** 2 <= 1)
    x = x0
    for _ in range(steps):
        x = x - lr * f.gradient(x)
    problem.set_performance_metric((x - xs) ** 2)
    worst = _solve(problem)
    coefficient = max(abs(1 - lr * mu), abs(1 - lr * L)) ** (2 * steps)
    return PepResult(worst, coefficient, worst / coefficient)
