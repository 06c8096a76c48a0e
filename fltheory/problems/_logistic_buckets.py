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

``thread_shares`` spreads the groups of one oracle call over threads of about
equal modelled cost, cutting the largest groups into halves of clients when
the groups alone cannot be balanced.
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


class Part(NamedTuple):
    """Rows of one oracle call: ``pos`` selects them in the caller's client list
    (None: all of them, in order; a slice or an index array otherwise)."""

    pos: np.ndarray | slice | None
    A: np.ndarray
    y: np.ndarray
    rw: np.ndarray


def _cost(part: Part, work_per_row: float) -> float:
    m, k = part.A.shape[:2]
    return m * k * work_per_row + _GROUP_OVERHEAD_FLOPS


def _halves(part: Part, m_all: int) -> tuple[Part, Part]:
    """The part cut into its first and second half of clients (views of its data)."""
    h = part.A.shape[0] // 2
    pos = slice(0, m_all) if part.pos is None else part.pos
    first: np.ndarray | slice
    second: np.ndarray | slice
    if isinstance(pos, slice):
        a = pos.start or 0
        first, second = slice(a, a + h), slice(a + h, pos.stop)
    else:
        first, second = pos[:h], pos[h:]
    return (Part(first, part.A[:h], part.y[:h], part.rw[:h]),
            Part(second, part.A[h:], part.y[h:], part.rw[h:]))


def thread_shares(parts: list[Part], m_all: int, threads: int, work_per_row: float,
                  max_imbalance: float = 1.15) -> list[list[Part]]:
    """Parts of one oracle call spread over ``threads`` threads of about equal
    modelled cost (``|part| * rows * work_per_row`` plus the fixed cost of a call).

    Largest parts first, each to the least loaded thread; while the most loaded
    thread exceeds ``max_imbalance`` times the mean (or a thread is idle), the
    largest part of more than one client is cut into two halves of clients and
    the assignment redone (at most 2 * threads cuts).  Every client stays in
    exactly one part, so its rows are computed by the same operations as
    without threads."""
    parts = list(parts)
    for _ in range(2 * threads + 1):
        order = sorted(parts, key=lambda p: -_cost(p, work_per_row))
        load = [0.0] * threads
        shares: list[list[Part]] = [[] for _ in range(threads)]
        for p in order:
            t = load.index(min(load))
            shares[t].append(p)
            load[t] += _cost(p, work_per_row)
        balanced = max(load) <= max_imbalance * sum(load) / threads and all(shares)
        splittable = [p for p in order if p.A.shape[0] > 1]
        if balanced or not splittable:
            return [s for s in shares if s]
        big = splittable[0]
        parts = [p for p in parts if p is not big] + list(_halves(big, m_all))
    return [s for s in shares if s]
