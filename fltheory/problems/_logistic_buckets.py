"""Size buckets for batched logistic oracles on clients of very unequal sizes.

The batched oracles of :mod:`._logistic_oracles` run one (n, f) @ (f, C)
product per client over data padded to a common row count n, so their cost is
m * n_max rather than sum_i n_i.  With heavy-tailed sizes (FedProx's lognormal
Synthetic data: mean ~160 rows, max ~800) most of that work multiplies
padding zeros.  A *bucket plan* sorts the listed clients by size and cuts the
sorted list into contiguous groups, each padded only to its own largest size.

The cuts minimise the modelled cost

    sum_b ( |b| * max_{i in b} n_i  +  P )

exactly, by dynamic programming over the sorted sizes (s_1 <= ... <= s_m):
``best[j] = min_{i <= j} best[i-1] + (j - i + 1) s_j + P`` (cuts only where the
size changes; beyond 256 distinct sizes only every k-th such place).  P, the fixed
overhead of one more group expressed in padded rows, keeps the number of
groups small when rows are cheap (binary, few features).

A plan gathers each group's padded rows once; oracles then loop over the
groups (a handful), never over clients or samples.  Zero padding rows
contribute exact zeros, so a client's result differs from the fully padded
evaluation only by the summation order inside BLAS (relative ~1e-16).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# Fixed cost of one extra group, in multiply-adds of padded rows (about 50 us of
# numpy call overhead at a few GFLOP/s); divided by the per-row work f * C.
_GROUP_OVERHEAD_FLOPS = 1.0e5


class Bucket(NamedTuple):
    """One group: ``pos`` are positions in the caller's client list."""

    pos: np.ndarray
    A: np.ndarray      # (|b|, k, f) padded to the group's largest size k
    y: np.ndarray      # (|b|, k)
    rw: np.ndarray     # (|b|, k)


def optimal_cuts(sizes_sorted: np.ndarray, penalty: float, max_candidates: int = 256
                 ) -> list[tuple[int, int]]:
    """Contiguous groups [a, b) of an ascending size list minimising
    sum_groups (b - a) * sizes_sorted[b - 1] + penalty.

    Cuts are only placed where the size changes (equal sizes never need
    separating); if more than ``max_candidates`` such places remain, only every
    k-th is allowed, so plan construction stays O(max_candidates^2) for any m.
    Over the allowed cuts the DP is exact; with at most ``max_candidates``
    distinct sizes it is the exact optimum."""
    s = np.asarray(sizes_sorted, dtype=np.float64)
    m = s.shape[0]
    ends = np.append(np.flatnonzero(np.diff(s) > 0) + 1, m)        # allowed group ends
    if ends.size > max_candidates:
        ends = np.unique(np.append(ends[np.linspace(0, ends.size - 1, max_candidates).astype(int)], m))
    E = ends.size
    starts = np.concatenate([[0], ends[:-1]])                     # start of each block
    best = np.zeros(E + 1)
    arg = np.zeros(E + 1, dtype=np.int64)
    for j in range(1, E + 1):                       # plan construction, not per oracle call
        cost = best[:j] + (ends[j - 1] - starts[:j]) * s[ends[j - 1] - 1] + penalty
        k = int(np.argmin(cost))
        best[j], arg[j] = cost[k], k
    cuts: list[tuple[int, int]] = []
    j = E
    while j > 0:
        cuts.append((int(starts[arg[j]]), int(ends[j - 1])))
        j = int(arg[j])
    return cuts[::-1]


def make_plan(A: np.ndarray, y: np.ndarray, rw: np.ndarray, rows: np.ndarray, idx: np.ndarray,
              work_per_row: float) -> list[Bucket] | None:
    """Groups of the listed clients ``idx`` (any order, repeats allowed), or None
    when a single group padded to max n_i is already optimal."""
    n = rows[idx]
    m = idx.shape[0]
    if m < 2:
        return None
    order = np.argsort(n, kind="stable")
    cuts = optimal_cuts(n[order], _GROUP_OVERHEAD_FLOPS / max(work_per_row, 1.0))
    if len(cuts) == 1:
        return None
    plan = []
    for a, b in cuts:
        pos = order[a:b]
        k = int(n[pos].max())
        sel = idx[pos]
        plan.append(Bucket(pos, np.ascontiguousarray(A[sel, :k]), y[sel, :k], rw[sel, :k]))
    return plan
