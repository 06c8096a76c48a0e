"""Published bounds, one module per paper; every function returns a
:class:`~fltheory.theory.result.BoundResult` with its hypotheses checked."""

from .efl import (StepMoments, efl_abandonment, efl_heterogeneity, efl_incomplete_rate,
                  efl_inactive_rate, efl_step_moments, efl_theorem1, efl_theorem1_from_constants)
from .efl import ElasticConstants, efl_elastic_constants
from .efl_corollaries import efl_abandonment_bounds, efl_departed_moments
from .elasticnet import (elasticnet_C0, elasticnet_constants, elasticnet_sign_term,
                         elasticnet_theorem31, elasticnet_theorem31_from_constants)
from .gd_contraction import gd_contraction_factor, gd_rate_threshold, gd_step_factor
from .local_adaptivity import (fedopt_theorem1, fedopt_theorem1_from_constants,
                               fedopt_theorem1_quadratic, sgd_operator_constants)
from .scaffold import (fedavg_lower_bound, fedavg_rounds, fedavg_rounds_from_constants, scaffold_quadratic_rounds,
                       scaffold_rounds, scaffold_rounds_from_constants, scaffold_step_conditions)
from .table1 import TABLE1_ALGORITHMS, table1_rounds, table1_rounds_from_constants
from .table1_comparison import table1_efl_comparison

__all__ = [
    "StepMoments", "efl_abandonment", "efl_heterogeneity", "efl_incomplete_rate",
    "efl_inactive_rate", "efl_step_moments", "efl_theorem1", "efl_theorem1_from_constants",
    "elasticnet_C0", "elasticnet_constants", "elasticnet_sign_term", "elasticnet_theorem31",
    "elasticnet_theorem31_from_constants", "fedopt_theorem1", "fedopt_theorem1_quadratic",
    "fedopt_theorem1_from_constants", "fedavg_rounds_from_constants", "table1_rounds_from_constants",
    "sgd_operator_constants", "fedavg_lower_bound", "fedavg_rounds", "scaffold_quadratic_rounds",
    "scaffold_rounds", "scaffold_rounds_from_constants", "scaffold_step_conditions",
    "TABLE1_ALGORITHMS", "table1_rounds",
    "gd_contraction_factor", "gd_rate_threshold", "gd_step_factor", "table1_efl_comparison",
    "ElasticConstants", "efl_elastic_constants",
    "efl_abandonment_bounds", "efl_departed_moments",
]
