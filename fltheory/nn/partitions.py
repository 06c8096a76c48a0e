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


def _pooled_length(inputs: Any, targets: Any) -> int:
    """Number of pooled samples; inputs and targets must be arrays with the same leading length."""
    lengths = []
    for name, value in (("inputs", inputs), ("targets", targets)):
        if not isinstance(value, np.ndarray) or value.ndim == 0:
            raise InvalidProblemError(f"{name} must be an array with one row per sample, got {value!r:.80} "
                                      f"({type(value).__name__})")
        lengths.append(value.shape[0])
    if lengths[0] != lengths[1]:
        raise InvalidProblemError(f"inputs has {lengths[0]} samples but targets has {lengths[1]}")
    return lengths[0]


def _index_array(name: str, value: Any, n: int) -> np.ndarray:
    """A 1-D integer array of distinct-or-not indices into range(n)."""
    if isinstance(value, (str, bytes)):
        raise InvalidProblemError(f"{name} must be an array of sample indices, got the string {value!r:.80}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InvalidProblemError(f"{name} must be an array of sample indices, got {value!r:.80}") from exc
    if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise InvalidProblemError(f"{name} must be a 1-D array of integer sample indices, got {value!r:.80} "
                                  f"(dtype {arr.dtype}, shape {arr.shape})")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise InvalidProblemError(f"{name} must hold indices in [0, {n}), got values in "
                                  f"[{arr.min()}, {arr.max()}]")
    return arr


def split_clients(inputs: np.ndarray, targets: np.ndarray, parts: Sequence[Any], test_fraction: float,
                  rng: np.random.Generator) -> tuple[list, list, list, list]:
    """Per-client train/test split: client i gets the samples ``parts[i]``,
    of which round(test_fraction n_i) (at least 1) chosen uniformly go to its
    test set.  Every part needs >= 2 samples.  -> (train_u, train_t, test_u, test_t)."""
    frac = in_unit_interval("test_fraction", test_fraction, right_closed=False)
    generator("rng", rng)
    n = _pooled_length(inputs, targets)
    if isinstance(parts, (str, bytes, np.ndarray)) or not isinstance(parts, Sequence) or len(parts) == 0:
        raise InvalidProblemError(f"parts must be a non-empty list of index arrays (one per client), got "
                                  f"{parts!r:.80} ({type(parts).__name__})")
    tu, tt, su, st = [], [], [], []
    for i, part in enumerate(parts):                   # construction only
        p = _index_array(f"parts[{i}]", part, n)
        if p.size < 2:
            raise InvalidProblemError(f"part {i} must list at least 2 sample indices, got {p.size}")
        k = min(max(1, round(frac * p.size)), p.size - 1)
        perm = rng.permutation(p)
        test, train = np.sort(perm[:k]), np.sort(perm[k:])
        tu.append(inputs[train])
        tt.append(targets[train])
        su.append(inputs[test])
        st.append(targets[test])
    return tu, tt, su, st
