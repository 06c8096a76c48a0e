"""Bad input to the test helpers of fltheory.testing gives typed errors (issue 16, item 3);
a bound that does not hold still gives the AssertionError a test expects."""

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.testing import build_quadratic, check_bound, describe_federation
from fltheory.theory import BoundResult


def _bound(value: float = 1.0) -> BoundResult:
    return BoundResult(value=value, assumptions=(), reference="EFL Theorem 1", variant="printed")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n_clients": 0}, r"build_quadratic: n_clients must be an integer >= 1 and <= 10000, got 0"),
    ({"dim": 2.0}, r"build_quadratic: dim must be an integer, got 2.0"),
    ({"L": float("nan")}, r"build_quadratic: L must be finite, got nan"),
    ({"mu": -1.0}, r"build_quadratic: mu must be finite and > 0, got -1.0"),
    ({"mu": 3.0}, r"need 0 < mu <= L, got mu=3.0, L=2.0"),
    ({"heterogeneity": "abc"}, r"heterogeneity must be a real number, got 'abc'"),
    ({"seed": -1}, r"build_quadratic: seed must be an integer >= 0, got -1"),
])
def test_build_quadratic_names_the_bad_argument(kwargs, message):
    args = {"n_clients": 3, "dim": 2, "L": 2.0, "mu": 0.5, "heterogeneity": 1.0, "n_samples": None, "seed": 0}
    with pytest.raises(InvalidHyperparameterError, match=message):
        build_quadratic(**{**args, **kwargs})


def test_build_quadratic_meets_its_constants():
    fed = build_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, n_samples=[1, 2, 3], seed=4)
    eig = np.linalg.eigvalsh(fed.H)
    assert eig.min() >= 0.5 - 1e-12 and eig.max() <= 2.0 + 1e-12
    np.testing.assert_allclose(eig[0], [0.5, 2.0], rtol=1e-12)


def test_describe_federation_refuses_what_is_not_a_federation():
    with pytest.raises(InvalidProblemError, match=r"describe_federation: fed must be a Federation instance, got 1.5"):
        describe_federation(1.5)
    fed = build_quadratic(2, 1, L=1.0, mu=1.0, heterogeneity=0.0, n_samples=None, seed=0)
    assert describe_federation(fed).startswith("QuadraticFederation(n_clients=2, dim=1)")


def test_check_bound_types_its_arguments_and_keeps_the_assertion_verdict():
    with pytest.raises(InvalidHyperparameterError, match=r"check_bound: bound_result must be a BoundResult, got 1.0"):
        check_bound(0.5, 1.0)
    with pytest.raises(InvalidHyperparameterError, match=r"check_bound: measured must be finite, got nan"):
        check_bound(float("nan"), _bound())
    with pytest.raises(InvalidHyperparameterError, match=r"check_bound: rtol must be finite and >= 0, got -0.1"):
        check_bound(0.5, _bound(), rtol=-0.1)
    with pytest.raises(InvalidHyperparameterError, match=r"check_bound: label must be a str, got 3"):
        check_bound(0.5, _bound(), label=3)
    check_bound(np.float64(0.5), _bound())
    check_bound(np.array(1.0), _bound())                  # 0-d arrays are numbers
    with pytest.raises(AssertionError, match=r"measured 1.5 > bound 1.0"):
        check_bound(1.5, _bound())
    check_bound(1.5, _bound(), rtol=0.5)
