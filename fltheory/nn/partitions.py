"""Splitting a data set over clients: a uniformly random partition of the
sample indices and the per-client train/test split (shared by the synthetic
federations of ``fltheory.nn.data`` and the real-data loaders of
``fltheory.nn.datasets``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validate import generator, in_unit_interval, scalar_int
from ..errors import InvalidHyperparameterError, InvalidProblemError

__all__ = ["iid_partition", "split_clients"]


def iid_partition(n: int, n_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A uniformly random split of range(n) into n_clients parts of sizes
    differing by at most one."""
    n = scalar_int("n", n)
    n_clients = scalar_int("n_clients", n_clients)
    generator("rng", rng)
    if n_clients > n:
        raise InvalidHyperparameterError(f"cannot split {n} samples over {n_clients} clients")
    return [np.sort(p) for p in np.array_split(rng.permutation(n), n_clients)]


def split_clients(inputs: np.ndarray, targets: np.ndarray, parts: Sequence[Any], test_fraction: float,
                  rng: np.random.Generator) -> tuple[list, list, list, list]:
    """Per-client train/test split: client i gets the samples ``parts[i]``,
    of which round(test_fraction n_i) (at least 1) chosen uniformly go to its
    test set.  Every part needs >= 2 samples.  -> (train_u, train_t, test_u, test_t)."""
    frac = in_unit_interval("test_fraction", test_fraction, right_closed=False)
    tu, tt, su, st = [], [], [], []
    for i, p in enumerate(parts):                      # construction only
        p = np.asarray(p, dtype=np.int64)
        if p.ndim != 1 or p.size < 2:
            raise InvalidProblemError(f"part {i} must list at least 2 sample indices, got {p.size}")
        k = min(max(1, round(frac * p.size)), p.size - 1)
        perm = rng.permutation(p)
        test, train = np.sort(perm[:k]), np.sort(perm[k:])
        tu.append(inputs[train])
        tt.append(targets[train])
        su.append(inputs[test])
        st.append(targets[test])
    return tu, tt, su, st
