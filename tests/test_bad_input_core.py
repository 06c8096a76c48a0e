"""Bad input to the core public callables (problems, algorithms, theory, bounds)
gives a typed fltheory error naming the argument, the value given and what is
expected (issue 16, item 3).

One row per callable fixed for the fuzz suite (tests/test_fuzz_public_api.py):
a representative bad input, the error type it must raise and fragments the
message must contain.  The fuzz suite checks "typed or finite" for every bad
value; these rows pin down the *message*.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fltheory import errors
from fltheory.algorithms import FedAvg, run, run_record
from fltheory.problems import problem_constants, random_least_squares, random_quadratic, synthetic_fedprox
from fltheory.theory import (affine_round_map, contraction_factor, fixed_point, invariant_subspace,
                             matrix_free_affine_map, orbit_rate, round_map, run_affine, spectral_rate,
                             vector_to_state)


def _fed() -> Any:
    return random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


def _alg() -> FedAvg:
    return FedAvg(lr=0.1, local_steps=2)


def _amap() -> Any:
    return affine_round_map(_alg(), _fed())


def _nan_state() -> Any:
    fed, alg = _fed(), _alg()
    state = alg.init(fed, np.zeros(fed.dim), np.random.default_rng(0))
    return dataclasses.replace(state, x=np.array([np.nan, 0.0]))


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
    ("round_map x0 string",
     lambda: round_map(_alg(), _fed(), x0="abc"),
     errors.InvalidProblemError, ("x0", "'abc'", "numeric")),
    ("round_map state of another kind",
     lambda: round_map(_alg(), _fed(), state=5),
     errors.InvalidProblemError, ("state", "5", "algorithm.init")),
    ("round_map max_warmup float",
     lambda: round_map(_alg(), _fed(), max_warmup=1.5),
     errors.InvalidHyperparameterError, ("max_warmup", "1.5", "integer")),
    ("vector_to_state layout string",
     lambda: vector_to_state(np.zeros(2), _amap().round_map.template, layout="abc"),
     errors.InvalidHyperparameterError, ("layout", "'abc'", "StateLayout")),
    ("affine_round_map rtol string",
     lambda: affine_round_map(_alg(), _fed(), rtol="abc"),
     errors.InvalidHyperparameterError, ("rtol", "'abc'", "real number")),
    ("affine_round_map rng int",
     lambda: affine_round_map(_alg(), _fed(), rng=3),
     errors.InvalidHyperparameterError, ("rng", "3", "numpy.random.Generator")),
    ("affine_round_map dense_max string",
     lambda: affine_round_map(_alg(), _fed(), dense_max="abc"),
     errors.InvalidHyperparameterError, ("dense_max", "'abc'", "integer")),
    ("invariant_subspace not a map",
     lambda: invariant_subspace(1.0),
     errors.InvalidHyperparameterError, ("amap", "1.0", "AffineRoundMap")),
    ("fixed_point max_condition below 1",
     lambda: fixed_point(_amap(), max_condition=0.5),
     errors.InvalidHyperparameterError, ("max_condition", "0.5", "> 1")),
    ("fixed_point initial string",
     lambda: fixed_point(_amap(), initial="abc"),
     errors.InvalidProblemError, ("initial", "'abc'", "numeric")),
    ("spectral_rate not a map",
     lambda: spectral_rate("abc"),
     errors.InvalidHyperparameterError, ("amap", "'abc'", "affine_round_map")),
    ("contraction_factor not a map",
     lambda: contraction_factor(np.eye(2)),
     errors.InvalidHyperparameterError, ("amap", "array", "AffineRoundMap")),
    ("orbit_rate tol above 1",
     lambda: orbit_rate(_amap(), tol=2.0),
     errors.InvalidHyperparameterError, ("tol", "2.0", "(0, 1)")),
    ("run_affine communication array",
     lambda: run_affine(_alg(), _fed(), 2, communication=np.ones(2)),
     errors.InvalidHyperparameterError, ("communication", "'copy'", "array")),
    ("run_affine map of another problem",
     lambda: run_affine(_alg(), random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=1), 2,
                        amap=_amap()),
     errors.InvalidHyperparameterError, ("amap was recovered for FedAvg",)),
    ("matrix_free_affine_map NaN state",
     lambda: matrix_free_affine_map(_alg(), _fed(), state=_nan_state()),
     errors.InvalidProblemError, ("state", "finite", "nan")),
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
