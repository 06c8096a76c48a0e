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

