"""benchmarks/construction.py measures what it says: its quick cases run, and the peak
ratio it reports for a construction that allocates a known extra amount is that amount."""

from __future__ import annotations

import numpy as np
import pytest

from ._load import benchmark

construction = benchmark("construction")


class _Holder:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a


def test_peak_ratio_of_a_known_allocation_pattern():
    """Building an 8 MB array through one 8 MB temporary peaks at 2x the result."""
    def build() -> _Holder:
        tmp = np.ones(1 << 20)
        out = tmp * 2.0
        del tmp
        return _Holder(out)

    ratio, mb, _ = construction.peak_ratio(build)
    assert mb == pytest.approx(8.388608)
    assert ratio == pytest.approx(2.0, abs=0.01)


def test_quick_cases_of_several_megabytes_stay_below_one_and_a_half():
    for name, build in construction.cases(quick=True):
        ratio, mb, _ = construction.peak_ratio(build)
        if mb >= 4:
            assert ratio <= 1.5, name
