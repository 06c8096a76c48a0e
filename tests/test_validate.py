"""The shared argument checks of fltheory/_validate.py and the one-line
reproducers of issue 16 that they fix: each bad value raises a typed error
that is also the matching built-in and names the argument and the value."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import participation as P
from fltheory._validate import MAX_STEPS, integer, per_client, positive, real_scalar, scalar_int
from fltheory.algorithms import FedAvg, run
from fltheory.errors import FLTheoryError, InvalidHyperparameterError, OutOfRangeError
from fltheory.problems import QuadraticFederation, random_quadratic
from fltheory.theory.bounds import fedavg_lower_bound, scaffold_quadratic_rounds


@pytest.mark.parametrize("value", [True, "0.5", 1j, None, object(), np.nan, np.inf, [1.0]])
def test_real_scalar_refuses_non_reals(value: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match="lr") as err:
        real_scalar("lr", value)
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("value", [2.0, 1e12, True, "3", -1, MAX_STEPS + 1])
def test_integer_refuses_floats_bools_strings_and_out_of_range(value: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match="steps"):
        integer("steps", value, minimum=0)


def test_validators_accept_good_values() -> None:
    assert positive("lr", np.float32(0.5)) == 0.5
    assert integer("steps", np.int64(3)) == 3
    assert per_client("lr", [0.1, 0.2], 2).tolist() == [0.1, 0.2]
    assert per_client("local_steps", np.array([1, 2]), 2, integer=True, minimum=1, strict=False).tolist() == [1, 2]


FED = random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"seed": -1}, "seed"), ({"seed": "abc"}, "seed"), ({"seed": 1.5}, "seed"), ({"seed": True}, "seed"),
    ({"rng": "x"}, "rng"), ({"participation": "full"}, "participation"), ({"callback": 5}, "callback"),
])
def test_run_options_are_checked(kwargs: dict, named: str) -> None:
    with pytest.raises(InvalidHyperparameterError, match=named):
        run(FedAvg(lr=0.1, local_steps=2), FED, 2, **kwargs)


def test_run_refuses_endless_rounds_and_bad_x0() -> None:
    with pytest.raises(InvalidHyperparameterError, match="rounds"):
        run(FedAvg(lr=0.1, local_steps=2), FED, 10**12)
    with pytest.raises(FLTheoryError, match="x0"):
        run(FedAvg(lr=0.1, local_steps=2), FED, 2, x0=["a", "b"])


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"lr": 1j}, "lr"), ({"lr": True}, "lr"), ({"lr": "0.1"}, "lr"),
    ({"local_steps": 1e12}, "local_steps"), ({"local_steps": 2.0}, "local_steps"),
    ({"local_steps": 10**12}, "local_steps"),
])
def test_fedavg_hyperparameters(kwargs: dict, named: str) -> None:
    args = {"lr": 0.1, "local_steps": 2, **kwargs}
    with pytest.raises(InvalidHyperparameterError, match=named):
        FedAvg(**args)


def test_participation_probability_must_be_a_number() -> None:
    with pytest.raises(InvalidHyperparameterError, match="p"):
        P.Bernoulli("0.5")


def test_complex_hessian_is_refused() -> None:
    with pytest.raises(FLTheoryError, match="H"):
        QuadraticFederation(np.eye(3)[None] * (1 + 1j), np.zeros((1, 3)))


def test_bound_arguments() -> None:
    with pytest.raises(InvalidHyperparameterError, match="constant"):
        fedavg_lower_bound(G=1.0, mu=1.0, R=10, K=2, constant=-1)
    with pytest.raises(InvalidHyperparameterError, match="R"):
        fedavg_lower_bound(G=1.0, mu=1.0, R=0.001, K=2)
    with pytest.raises(InvalidHyperparameterError, match="K"):
        scaffold_quadratic_rounds(beta=1.0, sigma2=0.0, mu=0.1, K=0.5, N=2, eps=0.1, delta=0.1)
    with pytest.raises(InvalidHyperparameterError, match="G"):
        fedavg_lower_bound(G="a", mu=1.0, R=10, K=2)
    with pytest.raises(OutOfRangeError):
        fedavg_lower_bound(G=1e300, mu=1e-300, R=1, K=2)


def test_more_issue16_reproducers() -> None:
    from fltheory import compression as C
    from fltheory import nn, optim
    from fltheory.algorithms import FedAvg as _FedAvg
    from fltheory.errors import InvalidProblemError, NonFinitePointError
    from fltheory.problems import LogisticFederation, lognormal_sizes
    from fltheory.theory import (
        fedopt_operator,
        fedopt_quadratic_fixed_point,
        fedprox_exact_fixed_point,
        operator_fixed_point,
    )
    with pytest.raises(InvalidHyperparameterError, match="floats_up"):
        C.Communication(floats_up=-5)
    for shape in [(0,), (-2,), ()]:
        with pytest.raises(InvalidProblemError, match="input_shape"):
            nn.Sequential([nn.Dense(2)], input_shape=shape)
    with pytest.raises(OutOfRangeError, match="mean"):
        lognormal_sizes(5, mean=1e3, seed=0)
    adam = optim.adam(0.1)
    with pytest.raises(NonFinitePointError, match="grads"):
        adam.update(np.full((1, 3), np.nan), adam.init(np.zeros((1, 3))), np.zeros((1, 3)))
    with pytest.raises(InvalidHyperparameterError, match="bin_width"):
        C.entropy(np.ones(5), bin_width=1e-320)
    with pytest.raises(InvalidHyperparameterError, match="rng"):
        nn.iid_partition(10, 2, rng=None)
    with pytest.raises(InvalidHyperparameterError, match="method"):
        operator_fixed_point(fedopt_operator(_FedAvg(lr=0.1, local_steps=2), FED), method="bogus")
    with pytest.raises(OutOfRangeError, match="overflows"):
        fedopt_quadratic_fixed_point(FED, 1e3, 200)
    logistic = LogisticFederation([np.ones((3, 2))] * 2, [np.array([1.0, -1.0, 1.0])] * 2, reg=0.1)
    with pytest.raises(InvalidProblemError, match="QuadraticFederation"):
        fedprox_exact_fixed_point(logistic, 0.1)
    with pytest.raises(InvalidProblemError, match="numeric"):
        C.st(np.ones((3, 2)) * 1j, 0.1)


def test_nan_inputs_of_theory_routines_are_typed_errors() -> None:
    from fltheory.errors import InvalidProblemError
    from fltheory.theory import suboptimality_gaps
    from fltheory.theory.bounds import elasticnet_C0, sgd_operator_constants
    with pytest.raises(InvalidProblemError, match="W"):
        suboptimality_gaps(FED, np.full((3, 2), np.nan))
    with pytest.raises(InvalidHyperparameterError, match="lr"):
        sgd_operator_constants(np.nan, 2, 0.5, 1.0, 0.0)
    with pytest.raises(InvalidHyperparameterError, match="grads_opt"):
        elasticnet_C0(None, np.full((3, 2), np.nan))
    # the exact values are unchanged on good input: gaps at x_k* are 0
    np.testing.assert_allclose(suboptimality_gaps(FED, FED.client_optima()), 0.0, atol=1e-15)


# scalar_int: one integer, the checks and messages of per_client
@pytest.mark.parametrize("value", [3, np.int64(3), np.array(3)])
def test_scalar_int_returns_a_python_int(value):
    out = scalar_int("E", value, minimum=1, strict=False)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize(("value", "message"), [
    (0, "E must be >= 1"), (2.5, "must be an integer"), (3.0, "must be an integer"), (np.inf, "finite"),
    ("3", "numeric"),
    ([2, 3], "scalar integer"),
])
def test_scalar_int_rejects_with_the_argument_named(value, message):
    with pytest.raises(InvalidHyperparameterError, match=message):
        scalar_int("E", value, minimum=1, strict=False)


def test_scalar_int_agrees_with_per_client_on_scalars():
    for v in (1, 7, np.int64(12)):
        assert scalar_int("n", v) == per_client("n", v, None, integer=True)
