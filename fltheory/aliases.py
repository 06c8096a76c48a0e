"""Type aliases used in public signatures.

Each alias names what a parameter accepts, so a signature reads as its
documentation; all are plain unions, usable in annotations of user code
(``from fltheory.aliases import Rate``).

``Rate``
    A step size: one number shared by every client, or one value per client
    (array-like of length N, the number of clients).
``Steps``
    A number of local steps: one integer for every client, or one per client.
``Seed``
    A non-negative int seed or a ``numpy.random.Generator`` (used as is).
``ClientSelection``
    Client indices: an int, a 1-D integer array-like, or None (every client).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["ArrayLike", "Rate", "Steps", "Seed", "ClientSelection"]

Rate: TypeAlias = "float | ArrayLike"
Steps: TypeAlias = "int | ArrayLike"
Seed: TypeAlias = "int | np.random.Generator"
ClientSelection: TypeAlias = "int | Sequence[int] | np.ndarray | None"
