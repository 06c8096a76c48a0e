"""EFL (EFL) Table 1: rounds to eps accuracy as tabulated (constants
hidden: each formula is multiplied by an explicit ``constant``, default 1).

| algorithm | convexity | rounds |
|---|---|---|
| SCAFFOLD | mu-SC | G^2/(mu S eps) + G/(mu sqrt(eps)) + L/mu |
| MIME     | mu-SC | G^2/(mu S eps) + delta/mu |
| VRL-SGD  | NC    | N sigma^2/(S eps^2) + N/eps |
| FedAMP   | NC    | G^2/(L S eps) + G/eps^(3/2) + L^2/sqrt(eps) |
| EFL      | mu-SC | G^2/(mu S eps) + L/(mu sqrt(eps)) |

Note: the SCAFFOLD row has the shape of SCAFFOLD's *FedAvg* bound (their
Theorem I: a G^2/(mu S eps) sampling term and a G/(mu sqrt(eps)) drift term),
not of SCAFFOLD's own sigma^2/(mu K S eps) + beta/mu + N/S (compare
:mod:`fltheory.theory.bounds.scaffold`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._validate import checked_arguments, choice
from ..result import Assumption, BoundResult, make_result
from ._common import constant_from, positive_check, uniform_convexity, uniform_smoothness

__all__ = ["table1_rounds", "table1_rounds_from_constants", "TABLE1_ALGORITHMS"]

TABLE1_ALGORITHMS = ("SCAFFOLD", "MIME", "VRL-SGD", "FedAMP", "EFL")


@checked_arguments
def table1_rounds(algorithm: str, *, eps: float, S: int, G: float = 0.0, mu: float | None = None,
                  L: float | None = None, delta: float | None = None, N: int | None = None,
                  sigma2: float | None = None, constant: float = 1.0,
                  strict: bool = False) -> BoundResult:
    """Evaluate one row of EFL Table 1; ``terms`` holds each summand."""
    from ...errors import InvalidHyperparameterError
    algorithm = choice("algorithm", algorithm, TABLE1_ALGORITHMS)
    need = {"SCAFFOLD": ("mu", "L"), "MIME": ("mu", "delta"), "VRL-SGD": ("N", "sigma2"),
            "FedAMP": ("L",), "EFL": ("mu", "L")}[algorithm]
    given = dict(mu=mu, L=L, delta=delta, N=N, sigma2=sigma2)
    needed: dict[str, float] = {}
    for name in need:
        value = given[name]
        if value is None:
            raise InvalidHyperparameterError(f"Table 1 row {algorithm} needs {name}=")
        needed[name] = value
    checks = [positive_check("eps", eps), positive_check("S", S), positive_check("G", G, allow_zero=True)]
    checks += [positive_check(n, v, allow_zero=n in ("delta", "sigma2")) for n, v in needed.items()]
    if "N" in needed:                             # S of the N clients take part in a round
        checks.append(Assumption("1 <= S <= N", 1 <= S <= needed["N"], f"S = {S!r}, N = {N!r}"))
    if "mu" in needed and "L" in needed:          # a mu-strongly convex, L-smooth function has mu <= L
        checks.append(Assumption("mu <= L", needed["mu"] <= needed["L"], f"mu = {mu!r}, L = {L!r}"))
    terms: dict[str, float] = {}
    if all(a.held for a in checks):
        if algorithm == "SCAFFOLD":
            assert mu is not None and L is not None  # required for this row, checked above
            terms = {"G2/(mu S eps)": G ** 2 / (mu * S * eps), "G/(mu sqrt eps)": G / (mu * math.sqrt(eps)),
                     "L/mu": L / mu}
        elif algorithm == "MIME":
            assert mu is not None and delta is not None
            terms = {"G2/(mu S eps)": G ** 2 / (mu * S * eps), "delta/mu": delta / mu}
        elif algorithm == "VRL-SGD":
            assert N is not None and sigma2 is not None
            terms = {"N sigma2/(S eps2)": N * sigma2 / (S * eps ** 2), "N/eps": N / eps}
        elif algorithm == "FedAMP":
            assert L is not None
            terms = {"G2/(L S eps)": G ** 2 / (L * S * eps), "G/eps^1.5": G / eps ** 1.5,
                     "L2/sqrt eps": L ** 2 / math.sqrt(eps)}
        else:
            assert mu is not None and L is not None
            terms = {"G2/(mu S eps)": G ** 2 / (mu * S * eps), "L/(mu sqrt eps)": L / (mu * math.sqrt(eps))}
    value = constant * sum(terms.values()) if terms else None
    return make_result(value, checks, reference=f"EFL (EFL) Table 1, row {algorithm}",
                       variant=f"big_O(constant={constant})", terms=terms, strict=strict)


@checked_arguments
def table1_rounds_from_constants(constants: Any, algorithm: str, *, eps: float, S: int,
                                 N: int | None = None, **kw: Any) -> BoundResult:
    """:func:`table1_rounds` with G^2 = G2_max + max_i sigma_i^2 (Table 1's "bounded
    gradient" is EFL Assumption 4, E||g_i||^2 <= G^2 for the *stochastic* gradient, whose
    second moment is ||grad f_i||^2 + sigma_i^2; G2_max bounds the first part over the
    constants' ball; the same G^2 as :func:`~fltheory.theory.bounds.efl.efl_theorem1_from_constants`),
    mu = min_i mu_i and L = max_i L_i (SCAFFOLD and EFL assume every client mu-strongly
    convex and L-smooth; pass ``mu`` to :func:`table1_rounds` for a global-only reading),
    delta and sigma2 read from a ProblemConstants-like object."""
    g2 = constant_from(constants, "G2_max", "G2", required=False, default=None)
    if g2 is None:
        from ...errors import InvalidHyperparameterError
        raise InvalidHyperparameterError("the constants carry no G2_max/G2 (no radius given); pass G=")
    noise = constant_from(constants, "sigma2_clients", "sigma2", default=0.0, required=False)
    return table1_rounds(algorithm, eps=eps, S=S, N=N, G=math.sqrt(float(g2) + float(np.max(noise))),
                         mu=uniform_convexity(constants), L=uniform_smoothness(constants),
                         delta=constant_from(constants, "delta", default=0.0, required=False),
                         sigma2=constant_from(constants, "sigma2", default=0.0, required=False), **kw)
