"""EFL (EFL) Table 1's comparison of EFL with the other strongly convex rows, in closed form.

Table 1 of Ma et al., "Towards Heterogeneous Clients with Elastic Federated
Learning" (arXiv:2106.09433) lists rounds to eps-accuracy (constants hidden)

    SCAFFOLD  G^2/(mu S eps) + G/(mu sqrt(eps)) + L/mu
    MIME      G^2/(mu S eps) + delta/mu
    EFL       G^2/(mu S eps) + L/(mu sqrt(eps))

and its caption says EFL "preserves the optimal statistical rates (first term
in SCAFFOLD) while improves the optimization".  The statistical terms are
identical; the optimization terms compare as

    EFL - SCAFFOLD = (L (1 - sqrt(eps)) - G) / (mu sqrt(eps)),
    EFL - MIME     = (L / sqrt(eps) - delta) / mu,

so EFL's bound is the smaller one exactly when G > L (1 - sqrt(eps)) (against
SCAFFOLD's row) and when delta > L / sqrt(eps) (against MIME's).  The non-convex
rows (VRL-SGD, FedAMP) assume different hypotheses and are not compared.
"""

from __future__ import annotations

import math
from typing import Any

from ..._validate import integer
from ...errors import InvalidHyperparameterError
from .table1 import table1_rounds

__all__ = ["table1_efl_comparison"]


def _pos(name: str, value: Any, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidHyperparameterError(f"{name} must be a real number, got {value!r}") from exc
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise InvalidHyperparameterError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}, got "
                                         f"{v!r}")
    return v


def table1_efl_comparison(*, eps: float, S: int, G: float, mu: float, L: float,
                          delta: float | None = None) -> dict[str, dict[str, float | bool | None]]:
    """EFL's Table 1 row against SCAFFOLD's (and MIME's when ``delta`` is given).

    Returns ``{row: {"efl", "other", "ratio", "efl_optimization", "other_optimization",
    "optimization_ratio", "efl_tighter", "threshold"}}`` where ``ratio`` = EFL / other
    (whole bounds; None when the other bound is 0), ``optimization_ratio`` = EFL's optimization term / the other's,
    (None when the other row's optimization term is 0, e.g. MIME with delta = 0),
    ``efl_tighter`` is ``ratio < 1`` and ``threshold`` is the closed-form crossover:
    G* = L (1 - sqrt(eps)) for SCAFFOLD (EFL tighter iff G > G*), delta* = L / sqrt(eps)
    for MIME (EFL tighter iff delta > delta*).

    Raises
    ------
    InvalidHyperparameterError
        Unless eps, mu, L > 0, mu <= L, S an integer >= 1 and G, delta >= 0.
    """
    eps_, mu_, L_ = _pos("eps", eps), _pos("mu", mu), _pos("L", L)
    G_ = _pos("G", G, allow_zero=True)
    S_ = integer("S", S, minimum=1, maximum=None)
    if mu_ > L_:
        raise InvalidHyperparameterError(f"need mu <= L (a mu-strongly convex, L-smooth objective), got "
                                         f"mu = {mu_!r}, L = {L_!r}")
    efl = table1_rounds("EFL", eps=eps_, S=int(S_), G=G_, mu=mu_, L=L_)
    out: dict[str, dict[str, float | bool | None]] = {}
    rows: list[tuple[str, float | None, float | None, float]] = [
        ("SCAFFOLD", L_, None, L_ * (1 - math.sqrt(eps_)))]
    if delta is not None:
        rows.append(("MIME", None, _pos("delta", delta, allow_zero=True), L_ / math.sqrt(eps_)))
    e_opt = efl.terms["L/(mu sqrt eps)"]
    for name, row_L, row_delta, threshold in rows:
        other = table1_rounds(name, eps=eps_, S=int(S_), G=G_, mu=mu_, L=row_L, delta=row_delta)
        assert efl.value is not None and other.value is not None
        o_opt = other.value - other.terms["G2/(mu S eps)"]
        out[name] = {"efl": efl.value, "other": other.value,
                     "ratio": efl.value / other.value if other.value > 0 else None,
                     "efl_optimization": e_opt, "other_optimization": o_opt,
                     "optimization_ratio": e_opt / o_opt if o_opt > 0 else None,
                     "efl_tighter": efl.value < other.value, "threshold": threshold}
    return out
