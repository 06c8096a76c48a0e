"""Label-skewed partitions of a labelled data set over clients (docs/theory/problems.md).

Both functions return a list of N int64 index arrays (sorted), disjoint,
into the given ``labels``.
"""

from __future__ import annotations


import numpy as np
from numpy.typing import ArrayLike

from .._validate import positive
from ..errors import InvalidHyperparameterError
from ._seeding import as_generator, count, int_labels

__all__ = ["dirichlet_partition", "m_class_partition"]


def dirichlet_partition(labels: ArrayLike, n_clients: int, gamma: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Dirichlet label skew (Hsu, Qi and Brown, 2019).

    Every client draws class proportions q_i ~ Dir(gamma * prior), prior the
    class frequencies of ``labels``, and receives s_i = floor(n / N) samples
    (the first n mod N clients one more): class counts ~ Multinomial(s_i, q_i)
    drawn without replacement from the remaining pool; when a class runs out
    its mass is redistributed over the classes still available (q_i
    renormalised over them) until s_i samples are taken; when q_i puts no mass on
    any class still available (numpy returns an exactly one-hot q_i for very small
    gamma), the rest of the s_i is drawn uniformly over the available classes.
    Small gamma gives one-class clients as long as their class lasts, gamma ->
    infinity the class prior.  Every sample is assigned.
    """
    y = int_labels(labels)
    N = count("n_clients", n_clients)
    gamma = positive("gamma", gamma)
    rng = as_generator(rng, "rng")
    n = y.shape[0]
    if N > n:
        raise InvalidHyperparameterError(f"n_clients = {N} exceeds the number of samples {n}")
    classes, y_idx = np.unique(y, return_inverse=True)
    C = classes.shape[0]
    prior = np.bincount(y_idx, minlength=C) / n
    pools = [rng.permutation(np.flatnonzero(y_idx == c)) for c in range(C)]
    left = np.array([p.shape[0] for p in pools])
    taken = np.zeros(C, dtype=np.int64)
    sizes = np.full(N, n // N)
    sizes[: n % N] += 1
    out = []
    for i in range(N):                          # construction only
        q = rng.dirichlet(gamma * prior)
        need = int(sizes[i])
        counts = np.zeros(C, dtype=np.int64)
        while need > 0:
            avail = left - counts
            w = np.where(avail > 0, q, 0.0)
            if w.sum() <= 0:                    # q puts no mass on what is left
                w = (avail > 0).astype(np.float64)
            draw = np.minimum(rng.multinomial(need, w / w.sum()), avail)
            counts += draw
            need -= int(draw.sum())
        parts = [pools[c][taken[c]: taken[c] + counts[c]] for c in range(C)]
        taken += counts
        left -= counts
        out.append(np.sort(np.concatenate(parts)).astype(np.int64))
    return out


def m_class_partition(labels: ArrayLike, n_clients: int, m: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Pathological split: every client holds exactly ``m`` distinct classes.

    The classes are put in a random order pi and client i receives the m
    classes pi[(i m + k) mod C], k = 0..m-1 (distinct since m <= C); each class
    is then split evenly (sizes differing by at most one) among the clients
    holding it.  When N m < C some classes go to no client and their samples
    are unused; otherwise every sample is assigned.
    """
    y = int_labels(labels)
    N = count("n_clients", n_clients)
    m = count("m", m)
    rng = as_generator(rng, "rng")
    classes, y_idx = np.unique(y, return_inverse=True)
    C = classes.shape[0]
    if m > C:
        raise InvalidHyperparameterError(f"m = {m} exceeds the number of classes {C} present in labels")
    order = rng.permutation(C)
    held = order[(np.arange(N)[:, None] * m + np.arange(m)[None, :]) % C]      # (N, m)
    holders = [np.flatnonzero((held == c).any(axis=1)) for c in range(C)]
    parts: list[list[np.ndarray]] = [[] for _ in range(N)]
    for c in range(C):                                                         # construction only
        if holders[c].size == 0:
            continue
        idx = rng.permutation(np.flatnonzero(y_idx == c))
        if idx.shape[0] < holders[c].size:
            raise InvalidHyperparameterError(
                f"class {classes[c]} has {idx.shape[0]} samples but {holders[c].size} clients must hold it")
        for client, chunk in zip(holders[c], np.array_split(idx, holders[c].size)):
            parts[client].append(chunk)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]
