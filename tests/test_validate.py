"""fltheory._validate.scalar_int: one integer, the checks and messages of per_client."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory._validate import per_client, scalar_int
from fltheory.errors import InvalidHyperparameterError


@pytest.mark.parametrize("value", [3, np.int64(3), 3.0, np.array(3)])
def test_scalar_int_returns_a_python_int(value):
    out = scalar_int("E", value, minimum=1, strict=False)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize(("value", "message"), [
    (0, "E must be >= 1"), (2.5, "integer-valued"), (np.inf, "finite"), ("3", "number"),
    ([2, 3], "scalar integer"),
])
def test_scalar_int_rejects_with_the_argument_named(value, message):
    with pytest.raises(InvalidHyperparameterError, match=message):
        scalar_int("E", value, minimum=1, strict=False)


def test_scalar_int_agrees_with_per_client_on_scalars():
    for v in (1, 7, 12.0):
        assert scalar_int("n", v) == per_client("n", v, None, integer=True)
