"""Theory computed, not asserted: closed-form fixed points, objective shifts and
published bounds (``fltheory.theory.bounds``), each returning a
:class:`BoundResult` with its hypotheses checked.  Symbolic derivations live in
``fltheory.theory.symbolic`` (imported on demand: it needs sympy)."""

from . import bounds
from .closed_forms import (QuadraticFixedPoint, client_contraction_matrices,
                           fedavg_first_order_bias, fedopt_quadratic_fixed_point,
                           fedopt_quadratic_round_map, fedopt_small_rate_limit,
                           fedprox_exact_fixed_point, mann_rate)
from .objective_shift import objective_shift, suboptimality_gaps
from .result import Assumption, BoundResult

__all__ = [
    "Assumption", "BoundResult",
    "QuadraticFixedPoint", "client_contraction_matrices", "fedopt_quadratic_round_map",
    "fedopt_quadratic_fixed_point", "fedopt_small_rate_limit", "fedavg_first_order_bias",
    "fedprox_exact_fixed_point", "mann_rate", "objective_shift", "suboptimality_gaps", "bounds",
]
