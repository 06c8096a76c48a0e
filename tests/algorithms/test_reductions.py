"""column_sums is numpy's sum(axis=0) to the bit, whatever the shape and layout."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms._reductions import column_sums


@pytest.mark.parametrize("m", [1, 2, 5, 9, 63, 64, 65, 100, 1000, 3000])
def test_column_sums_are_the_bits_of_sum_over_axis_0(m):
    rng = np.random.default_rng(m)
    for d in (1, 2, 3, 7, 16, 33, 100, 257):
        A = rng.standard_normal((m, d)) * 10.0 ** rng.uniform(-8, 8, (m, d))      # rounding-sensitive sums
        for layout in (A, np.asfortranarray(A), A[:, ::-1]):
            assert np.array_equal(column_sums(layout).view(np.int64), layout.sum(axis=0).view(np.int64))
        assert np.array_equal((column_sums(A) / m).view(np.int64), A.mean(axis=0).view(np.int64))


@pytest.mark.parametrize("shape", [(1, 2), (3, 1), (9, 1), (100, 1), (17, 2), (64, 2), (100, 3), (1000, 20), (129, 33),
                                   (4097, 7), (64, 257)])
def test_column_sums_are_numpys_axis_zero_sums_bit_for_bit(shape):
    """Server sums (SCAFFOLD, FedDyn; einsum for many short rows) give exactly the
    bits of ``A.sum(axis=0)``: rows added in order, including the one-column case
    (pairwise in numpy) and non-contiguous inputs, which keep numpy's sum."""
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    A = rng.standard_normal(shape) * np.exp(8.0 * rng.standard_normal(shape))   # wide magnitudes: order matters
    for B in (A, A[:, ::-1], np.asfortranarray(A), A[::2]):
        assert np.array_equal(column_sums(B), B.sum(axis=0))
    seq = A[0].copy()
    for row in A[1:]:
        seq += row                                  # the row-by-row order the fast path claims
    if shape[1] >= 2:
        assert np.array_equal(column_sums(A), seq)
