"""fltheory: numerical checks of federated-optimization theory.

Public names are re-exported from the subpackages on purpose; see
``fltheory.problems``, ``fltheory.algorithms``, ``fltheory.theory``,
``fltheory.optim`` and ``fltheory.nn``.
"""

from . import errors
from .errors import (AssumptionError, DivergenceError, FLTheoryError,
                     InvalidHyperparameterError, InvalidProblemError, NotAffineError)

__version__ = "0.1.0"

__all__ = ["errors", "FLTheoryError", "InvalidProblemError", "InvalidHyperparameterError",
           "AssumptionError", "DivergenceError", "NotAffineError", "__version__"]
