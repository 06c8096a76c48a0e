"""Theory computed, not asserted.

* Round maps of whole algorithm states, their exact affine recovery on
  quadratic problems, fixed points, exact asymptotic rates and contraction
  factors (``round_maps``, ``affine``);
* the FedOpt operator T(x) = sum p_i E[O_i(x)] for non-linear clients and
  adaptive optimizers: root-solved fixed points, Jacobians, Lipschitz ratios,
  minimizer inconsistency (``operators``);
* closed-form fixed points of FedOpt-type algorithms on quadratic clients
  (``closed_forms``) and objective shifts (``objective_shift``);
* every published bound of the seed papers (``fltheory.theory.bounds``), each
  returning a :class:`BoundResult` with its hypotheses checked.

Symbolic derivations live in ``fltheory.theory.symbolic`` (imported on demand).
"""

from ..algorithms import register_run_method
from . import bounds
from .affine import (AffineFixedPoint, AffineRoundMap, InvariantSubspace, affine_round_map,
                     contraction_factor, fixed_point, invariant_subspace, orbit_rate,
                     spectral_rate)
from .closed_forms import (QuadraticFixedPoint, client_contraction_matrices,
                           fedavg_first_order_bias, fedopt_quadratic_fixed_point,
                           fedopt_quadratic_round_map, fedopt_small_rate_limit,
                           fedprox_exact_fixed_point, mann_rate)
from .fixed_points import FixedPoint
from .objective_shift import objective_shift, suboptimality_gaps
from .operators import (FedOptOperator, Inconsistency, LipschitzRatios, OperatorFixedPoint,
                        anderson_fixed_point, fedopt_operator, lipschitz_ratios,
                        minimizer_inconsistency, operator_fixed_point, operator_jacobian,
                        sgd_contraction_bound)
from .result import Assumption, BoundResult, bound_result
from .round_maps import RoundMap, StateLayout, round_map, state_layout, state_to_vector, vector_to_state
from .run_affine import run_affine
from .matrix_free import MatrixFreeAffineMap, matrix_free_affine_map
from .operator_newton import (
    DiscontinuityLayerError,
    LayerCrossing,
    NoFixedPointError,
    continuation_fixed_point,
    diagnosed_fixed_point,
    discontinuity_layers,
    newton_krylov_fixed_point,
)

__all__ = [
    "Assumption", "BoundResult", "bound_result", "bounds",
    "RoundMap", "StateLayout", "round_map", "state_layout", "state_to_vector", "vector_to_state",
    "FixedPoint", "AffineRoundMap", "AffineFixedPoint", "InvariantSubspace", "affine_round_map",
    "invariant_subspace", "fixed_point", "spectral_rate", "contraction_factor", "orbit_rate",
    "MatrixFreeAffineMap", "matrix_free_affine_map",
    "FedOptOperator", "OperatorFixedPoint", "LipschitzRatios", "Inconsistency", "fedopt_operator",
    "operator_fixed_point", "anderson_fixed_point", "operator_jacobian", "lipschitz_ratios",
    "sgd_contraction_bound", "minimizer_inconsistency", "newton_krylov_fixed_point",
    "diagnosed_fixed_point", "discontinuity_layers", "DiscontinuityLayerError", "NoFixedPointError", "LayerCrossing",
    "continuation_fixed_point",
    "QuadraticFixedPoint", "client_contraction_matrices", "fedopt_quadratic_round_map",
    "fedopt_quadratic_fixed_point", "fedopt_small_rate_limit", "fedavg_first_order_bias",
    "fedprox_exact_fixed_point", "mann_rate", "objective_shift", "suboptimality_gaps",
    "run_affine",
]

register_run_method("affine", run_affine, "fltheory.theory.run_affine")
