"""BoundResult: hypotheses drop the value, strict raises, NaN never escapes."""

import math

import pytest

from fltheory.errors import AssumptionError
from fltheory.theory.result import Assumption, make_result


def test_failed_hypothesis_drops_value_and_strict_names_it():
    a = (Assumption("x > 0", False, "x = -1"), Assumption("y > 0", True, "y = 2"))
    r = make_result(3.0, a, reference="paper, eq. 1", variant="as_printed", measured=1.0)
    assert r.value is None and not r.valid and r.ratio is None and r.holds is None
    assert [v.name for v in r.violated] == ["x > 0"]
    assert "VIOLATED" in str(r)
    with pytest.raises(AssumptionError, match=r"paper, eq. 1: x > 0 fails \(x = -1\)"):
        make_result(3.0, a, reference="paper, eq. 1", variant="as_printed", strict=True)


def test_ratio_and_holds():
    r = make_result(4.0, (Assumption("ok", True, ""),), reference="r", variant="v", measured=1.0)
    assert r.ratio == pytest.approx(0.25) and r.holds
    r = make_result(0.5, (), reference="r", variant="v", measured=1.0)
    assert r.ratio == pytest.approx(2.0) and r.holds is False


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_value_is_never_returned(bad):
    with pytest.raises(AssumptionError):
        make_result(bad, (), reference="r", variant="v")


def test_bound_result_refuses_a_zero_dimensional_array_of_assumptions():
    """A 0-d array is not an iterable of Assumption (it raised a raw TypeError from tuple())."""
    import numpy as np

    from fltheory.errors import InvalidHyperparameterError
    from fltheory.theory.result import bound_result

    with pytest.raises(InvalidHyperparameterError, match=r"assumptions must be an iterable of Assumption, got array"):
        bound_result(1.0, np.array(0.5), reference="r", variant="as_printed")
