"""Argument checks shared by the random generators."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidHyperparameterError


def as_generator(seed: Any, name: str = "seed") -> np.random.Generator:
    """An int seed (>= 0) or a numpy Generator -> Generator (a Generator is used as is)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return np.random.default_rng(int(seed))
    raise InvalidHyperparameterError(
        f"{name} must be a non-negative int or a numpy.random.Generator, got {seed!r}")


def count(name: str, value: Any, minimum: int = 1) -> int:
    """An integer in [minimum, MAX_SIZE] (bools and floats rejected; larger sizes
    cannot be allocated)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not minimum <= value <= MAX_SIZE:
        raise InvalidHyperparameterError(
            f"{name} must be an integer in [{minimum}, {MAX_SIZE}], got {value!r}")
    return int(value)


#: Largest client count / dimension / sample count a generator accepts.
MAX_SIZE = 10**6


def int_labels(labels: Any) -> np.ndarray:
    """A 1-D array of non-negative integer labels -> int64."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.number):
        raise InvalidHyperparameterError(
            f"labels must be a non-empty 1-D array of class indices, got shape {arr.shape} dtype {arr.dtype}")
    if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)) or np.any(arr < 0):
        bad = int(np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)) | (arr < 0))[0])
        raise InvalidHyperparameterError(
            f"labels must be non-negative integers, got labels[{bad}] = {arr[bad]!r}")
    return arr.astype(np.int64)
