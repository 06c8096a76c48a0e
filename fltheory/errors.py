"""Typed errors of fltheory.

Every error raised by the package derives from :class:`FLTheoryError` and from
the matching built-in exception, so ``except ValueError`` keeps working for
callers who do not know fltheory.  Messages state what was given, what was
expected, and where.
"""

from __future__ import annotations

__all__ = [
    "AssumptionError",
    "DivergenceError",
    "ExperimentDefinitionError",
    "FLTheoryError",
    "InvalidHyperparameterError",
    "InvalidProblemError",
    "MixedResultsError",
    "NonFinitePointError",
    "NotAffineError",
    "OptionalDependencyError",
    "OutOfRangeError",
    "SourcesChangedError",
    "OutputDirectoryError",
    "ResultsFileError",
    "UnclassifiedDirectionError",
    "WorkerProcessError",
]


class FLTheoryError(Exception):
    """Base class of every error raised on purpose by fltheory."""


class InvalidProblemError(FLTheoryError, ValueError):
    """A problem's data is malformed: shapes disagree, a Hessian is not
    symmetric positive definite, weights are not positive, NaN/inf values,
    labels outside the allowed set, empty clients."""


class InvalidHyperparameterError(FLTheoryError, ValueError):
    """A hyperparameter is outside its domain (negative rate, q outside
    (0, 1], local steps < 1, unknown option name, theta < 1, ...)."""


class AssumptionError(FLTheoryError, ValueError):
    """A theorem's hypothesis fails; the message names it and the values."""


class DivergenceError(FLTheoryError, ArithmeticError):
    """A run produced non-finite values; the message names round and algorithm."""


class NotAffineError(FLTheoryError, ValueError):
    """A round map asked to be affine is not (adaptive optimizers, l1 terms,
    compression, stochastic gradients)."""


class UnclassifiedDirectionError(FLTheoryError, ValueError):
    """An affine round map has an eigenvalue 1, to the precision of its spectrum, on a
    direction the algorithm does not declare conserved: a conserved quantity it does not
    declare, a flat direction of the problem, or a mode too slow for double precision.
    The exact theory refuses to guess which."""


class ExperimentDefinitionError(FLTheoryError, ValueError):
    """An experiment module's declarations are missing or malformed, or its
    run/checks/macros/plot returned something outside the protocol."""


class OptionalDependencyError(FLTheoryError, ImportError):
    """A feature needs a package that is not installed; the message names the
    feature, the package and the pip command (usually an fltheory extra)."""


class ResultsFileError(InvalidProblemError):
    """A stored results file is missing, unreadable or malformed; the message
    names the file and the field.  (A ValueError, and an InvalidProblemError
    for callers written before it existed.)"""


class OutputDirectoryError(FLTheoryError, OSError):
    """An output directory cannot be written (read-only, full, not a
    directory); the message names the directory and the system error."""


class MixedResultsError(FLTheoryError, ValueError):
    """Results in one directory were computed with different sources, library
    versions or data sources, and would be summarised together."""


class NonFinitePointError(InvalidProblemError):
    """An oracle was asked about a point with NaN or inf entries.  Inside
    :func:`fltheory.algorithms.run` this means the iterates overflowed, and the
    run reports it as a :class:`DivergenceError`."""


class OutOfRangeError(FLTheoryError, ArithmeticError):
    """The instance lies outside the range where the routine can return a
    correct float64 answer (overflow, a condition number beyond what double
    precision resolves, a solver that cannot reach the requested accuracy).
    Raised instead of returning a wrong or non-finite number."""


class SourcesChangedError(FLTheoryError, RuntimeError):
    """The source files a reproduced result is keyed by changed on disk while it was
    computed (an edit during the run, or a worker process that imported newer files than
    the key records): the result is not stored, since it could not be said which sources
    produced it.  The message names the changed modules."""


class WorkerProcessError(FLTheoryError, RuntimeError):
    """A worker process of a federation's local-step gradient (``with_processes``)
    could not be started or died while computing its share; the message names it."""
