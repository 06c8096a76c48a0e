"""Bad input to the core public callables (problems, algorithms, theory, bounds)
gives a typed fltheory error naming the argument, the value given and what is
expected (issue 16, item 3).

One row per callable fixed for the fuzz suite (tests/test_fuzz_public_api.py):
a representative bad input, the error type it must raise and fragments the
message must contain.  The fuzz suite checks "typed or finite" for every bad
value; these rows pin down the *message*.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fltheory import errors
from fltheory.algorithms import FedAvg, run, run_record
from fltheory.problems import problem_constants, random_least_squares, random_quadratic, synthetic_fedprox


def _fed() -> Any:
    return random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


def _alg() -> FedAvg:
    return FedAvg(lr=0.1, local_steps=2)


#: (id, call, expected error type, fragments of the message)
CASES: list[tuple[str, Callable[[], Any], type[Exception], tuple[str, ...]]] = [
    ("random_least_squares rows huge",
     lambda: random_least_squares(3, 2, rows=10**12, seed=0),
     errors.InvalidHyperparameterError, ("rows", "1000000000000", "at most")),
    ("random_least_squares total size",
     lambda: random_least_squares(3, 100, rows=10**6, seed=0),
     errors.InvalidHyperparameterError, ("sum(rows) * dim", "1e+08")),
    ("synthetic_fedprox intercept array",
     lambda: synthetic_fedprox(0.5, 0.5, seed=0, intercept=np.ones(3)),
     errors.InvalidHyperparameterError, ("intercept", "True or False")),
    ("problem_constants rng not a generator",
     lambda: problem_constants(_fed(), rng=5),
     errors.InvalidHyperparameterError, ("rng", "5", "numpy.random.Generator")),
    ("problem_constants radius overflows",
     lambda: problem_constants(_fed(), radius=1e300),
     errors.OutOfRangeError, ("radius=1e+300", "overflow")),
    ("run_record algorithm not an Algorithm",
     lambda: run_record("FedAvg", _fed(), rounds=2, completed_rounds=2, seed=0, participation=None,
                        seconds=0.1),
     errors.InvalidHyperparameterError, ("algorithm", "'FedAvg'", "Algorithm")),
    ("run_record completed_rounds above rounds",
     lambda: run_record(_alg(), _fed(), rounds=2, completed_rounds=3, seed=0, participation=None,
                        seconds=0.1),
     errors.InvalidHyperparameterError, ("completed_rounds", "<= 2", "3")),
    ("run_record seconds NaN",
     lambda: run_record(_alg(), _fed(), rounds=2, completed_rounds=2, seed=0, participation=None,
                        seconds=float("nan")),
     errors.InvalidHyperparameterError, ("seconds", "finite", "nan")),
    ("run metrics array",
     lambda: run(_alg(), _fed(), 2, metrics=np.ones((3, 2))),
     errors.InvalidHyperparameterError, ("metrics", "unknown name")),
]


@pytest.mark.parametrize(("call", "error", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_typed_error_naming_it(call: Callable[[], Any], error: type[Exception],
                                                   fragments: tuple[str, ...]) -> None:
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, errors.FLTheoryError)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
