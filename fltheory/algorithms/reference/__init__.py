"""Plain per-client reference loops, written for reading; test oracles only.

One module per algorithm, named as the algorithm's module
(``reference/fedavg.py`` is the loop of ``algorithms/fedavg.py``), each
registering its loop with the one registrar :func:`register`
(``reference.common``).  ``reference_run(algorithm, problem, rounds, ...)``
dispatches on the algorithm's type (nearest registered class in its MRO).
The fast path never imports this package.

A new algorithm adds ``reference/<name>.py`` with ``@register(TheClass)`` and
one import line below.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ...participation import Participation
from ...problems.base import Federation
from . import efl, elasticnet, fedavg, fedcurv, feddyn, fedopt, fedprox, scaffold  # noqa: F401  (register)
from .common import (
    REFERENCES,
    client_gradient,
    draw_participants,
    per_client_value,
    reference_st,
    reference_threshold,
    register,
)
from ...algorithms.base import Algorithm

__all__ = [
    "REFERENCES",
    "client_gradient",
    "draw_participants",
    "per_client_value",
    "reference_run",
    "reference_st",
    "reference_threshold",
    "register",
]


def reference_run(alg: Algorithm, problem: Federation, rounds: int, *,
                  participation: Participation | None = None, seed: int = 0,
                  x0: ArrayLike | None = None) -> np.ndarray:
    """Server models x_0..x_R of ``alg`` computed by its plain reference loop."""
    x0 = np.zeros(problem.dim) if x0 is None else np.array(x0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    for cls in type(alg).__mro__:
        if cls in REFERENCES:
            return REFERENCES[cls](alg, problem, rounds, participation, rng, x0)
    raise KeyError(f"no reference loop registered for {type(alg).__name__}")
