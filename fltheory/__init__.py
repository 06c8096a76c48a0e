"""fltheory: numerical checks of federated-optimization theory.

The top level holds the typed errors; the public names live in the
subpackages, each re-exporting its own on purpose: ``fltheory.problems``
(federations, generators, constants), ``fltheory.algorithms`` (every
algorithm, ``run``), ``fltheory.theory`` (round maps, fixed points, bounds),
``fltheory.optim``, ``fltheory.compression``, ``fltheory.participation``,
``fltheory.nn`` and ``fltheory.testing``.
"""

from . import errors
from .errors import (AssumptionError, DivergenceError, FLTheoryError,
                     InvalidHyperparameterError, InvalidProblemError, NotAffineError,
                     OptionalDependencyError)

__version__ = "0.1.0"

# Same bits whatever the BLAS thread count: see fltheory/_threads.py.
from ._threads import pin_process_blas as _pin_process_blas

_pin_process_blas()

__all__ = ["errors", "FLTheoryError", "InvalidProblemError", "InvalidHyperparameterError",
           "AssumptionError", "DivergenceError", "NotAffineError", "OptionalDependencyError",
           "__version__"]
