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

# Every source file imported from here on is stamped (fltheory/_import_stamps.py), so that
# fltheory reproduce never stores a result of code that changed on disk after this process
# imported it (modules imported already, this package among them, are stamped now).
from ._import_stamps import install as _install_import_stamps
# Same bits whatever the BLAS thread count: see fltheory/_threads.py.
from ._threads import pin_process_blas as _pin_process_blas

_install_import_stamps()
_pin_process_blas()

__all__ = ["errors", "FLTheoryError", "InvalidProblemError", "InvalidHyperparameterError",
           "AssumptionError", "DivergenceError", "NotAffineError", "OptionalDependencyError",
           "__version__"]
