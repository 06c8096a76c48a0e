"""The random generator of one experiment under a master seed."""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["experiment_rng"]


def experiment_rng(seed: int, name: str) -> np.random.Generator:
    """The Generator of experiment ``name`` under master seed ``seed``:
    ``PCG64(SeedSequence([seed, *words(sha256(name))]))``.  It depends only on
    (seed, name), so runs are identical whatever the order or parallelism.
    ``seed`` must be an int in [0, 2**63) and ``name`` a non-empty str (InvalidProblemError otherwise)."""
    from . import _arguments as arg
    seed = arg.seed(seed)
    name = arg.text("name", name)
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), *words])))
