"""Malformed inputs raise the typed errors, with messages naming the value."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.problems import (
    LogisticFederation,
    dirichlet_partition,
    m_class_partition,
    problem_constants,
    random_least_squares,
    random_quadratic,
    synthetic_fedprox,
)

A2 = [np.ones((2, 2)), np.ones((3, 2))]
YB = [np.array([1.0, -1.0]), np.array([1.0, 1.0, -1.0])]
YM = [np.array([0, 1]), np.array([2, 1, 0])]


def _fed():
    rng = np.random.default_rng(0)
    return LogisticFederation([rng.standard_normal((3, 2)), rng.standard_normal((4, 2))],
                              [np.array([1.0, -1, 1]), np.array([-1.0, 1, 1, -1])], reg=0.1)


CASES = [
    # (callable, error, fragment of the message)
    (lambda: LogisticFederation([np.array([[1.0, np.nan]])], [np.array([1.0])]), InvalidProblemError, "nan"),
    (lambda: LogisticFederation([np.array([[1.0, np.inf]])], [np.array([1.0])]), InvalidProblemError, "inf"),
    (lambda: LogisticFederation([np.ones((2, 2))], [np.array([1.0, np.nan])]), InvalidProblemError, "nan"),
    (lambda: LogisticFederation([np.ones((2, 2))], [np.array([0.0, 1.0])]), InvalidProblemError, "0.0"),
    (lambda: LogisticFederation([np.ones((2, 2))], [np.array([1.0, 2.0])]), InvalidProblemError, "2.0"),
    (lambda: LogisticFederation([np.ones((2, 2))], [np.array([0, 3])], n_classes=3), InvalidProblemError, "3"),
    (lambda: LogisticFederation([np.ones((2, 2))], [np.array([0, 0.5])], n_classes=3), InvalidProblemError, "0.5"),
    (lambda: LogisticFederation([np.ones((2, 2))], [np.array([-1, 0])], n_classes=3), InvalidProblemError, "-1"),
    (lambda: LogisticFederation(A2, YM, n_classes=1), InvalidProblemError, "n_classes"),
    (lambda: LogisticFederation(A2, YM, n_classes=2.5), InvalidProblemError, "2.5"),
    (lambda: LogisticFederation([np.ones((0, 2)), np.ones((3, 2))], [np.ones(0), YB[1]]), InvalidProblemError, "empty"),
    (lambda: LogisticFederation([], []), InvalidProblemError, "non-empty"),
    (lambda: LogisticFederation(A2, YB[:1]), InvalidProblemError, "2 and 1"),
    (lambda: LogisticFederation([np.ones((2, 2)), np.ones((3, 3))], YB), InvalidProblemError, "3 columns"),
    (lambda: LogisticFederation([np.ones(2)], [np.ones(2)]), InvalidProblemError, "shape (2,)"),
    (lambda: LogisticFederation(A2, [YB[0], np.ones(2)]), InvalidProblemError, "labels[1]"),
    (lambda: LogisticFederation(A2, YB, reg=-0.1), InvalidProblemError, "-0.1"),
    (lambda: LogisticFederation(A2, YB, reg=np.nan), InvalidProblemError, "reg"),
    (lambda: LogisticFederation(A2, YB, weights=[1.0, -2.0]), InvalidProblemError, "-2.0"),
    (lambda: LogisticFederation(A2, YB, weights=[1.0]), InvalidProblemError, "(2,)"),
    (lambda: LogisticFederation(A2, YB, n_samples=[2, 4]), InvalidProblemError, "[2, 3]"),
    (lambda: LogisticFederation(A2, [np.array(["a", "b"]), YB[1]]), InvalidProblemError, "numeric"),
    (lambda: _fed().client_grad(np.zeros((2, 3))), InvalidProblemError, "(2, 2)"),
    (lambda: _fed().client_grad(np.zeros((2, 2)), [0, 2]), InvalidProblemError, "[0, 2)"),
    (lambda: _fed().with_minibatch(0), InvalidProblemError, "batch_size"),
    (lambda: _fed().minibatch_variance(np.zeros(2)), InvalidProblemError, "with_minibatch"),
    (lambda: _fed().with_gradient_noise(-1.0), InvalidProblemError, "sigma2"),
    (lambda: _fed().without_client(5), InvalidProblemError, "5"),
    (lambda: _fed().with_client(LogisticFederation([np.ones((1, 3))], [np.ones(1)])), InvalidProblemError, "n_features"),
    (lambda: _fed().with_client(_fed(), weight=1.5), InvalidProblemError, "1.5"),
    (lambda: _fed().with_minibatch(2).stochastic_grad(np.zeros(2), None, None), InvalidProblemError, "Generator"),
    (lambda: random_quadratic(3, 2, L=1.0, mu=2.0, heterogeneity=0.0, seed=0), InvalidHyperparameterError, "L >= mu"),
    (lambda: random_quadratic(3, 2, L=1.0, mu=0.0, heterogeneity=0.0, seed=0), InvalidHyperparameterError, "mu"),
    (lambda: random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=-1.0, seed=0), InvalidHyperparameterError, "-1.0"),
    (lambda: random_quadratic(1, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=0), InvalidHyperparameterError, "single"),
    (lambda: random_quadratic(3, 1, L=2.0, mu=1.0, heterogeneity=0.0, seed=0), InvalidHyperparameterError, "dimension 1"),
    (lambda: random_quadratic(0, 2, L=1.0, mu=1.0, heterogeneity=0.0, seed=0), InvalidHyperparameterError, "n_clients"),
    (lambda: random_quadratic(2, 2, L=1.0, mu=1.0, heterogeneity=0.0, seed=-3), InvalidHyperparameterError, "-3"),
    (lambda: random_quadratic(2, 2, L=1.0, mu=1.0, heterogeneity=0.0, seed=0, constants="local"),
     InvalidHyperparameterError, "local"),
    (lambda: random_least_squares(2, 3, rows=[2, 5], seed=0), InvalidHyperparameterError, "rows[0] = 2"),
    (lambda: random_least_squares(2, 3, rows=[4, 0], seed=0), InvalidHyperparameterError, "rows"),
    (lambda: synthetic_fedprox(-1.0, 0.0, seed=0), InvalidHyperparameterError, "alpha"),
    (lambda: synthetic_fedprox(0.0, 0.0, seed=0, n_classes=1), InvalidHyperparameterError, "n_classes"),
    (lambda: dirichlet_partition(np.array([0, 1, 1]), 2, 0.0, np.random.default_rng(0)), InvalidHyperparameterError, "gamma"),
    (lambda: dirichlet_partition(np.array([0, 1.5]), 2, 1.0, np.random.default_rng(0)), InvalidHyperparameterError, "1.5"),
    (lambda: dirichlet_partition(np.array([0, 1]), 3, 1.0, np.random.default_rng(0)), InvalidHyperparameterError, "n_clients = 3"),
    (lambda: m_class_partition(np.array([0, 1, 1]), 2, 3, np.random.default_rng(0)), InvalidHyperparameterError, "m = 3"),
    (lambda: m_class_partition(np.array([0, 1, 1]), 5, 1, np.random.default_rng(0)), InvalidHyperparameterError, "class 0"),
    (lambda: problem_constants(_fed(), radius=-1.0), InvalidHyperparameterError, "radius"),
    (lambda: problem_constants(_fed(), center=np.zeros(3)), InvalidHyperparameterError, "center"),
    (lambda: problem_constants(random_quadratic(2, 2, L=2.0, mu=1.0, heterogeneity=1.0, seed=0), scaffold_B2=1e-6),
     InvalidHyperparameterError, "lambda_max(K)"),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_malformed_input_raises_typed_error_naming_the_value(case):
    fn, err, fragment = CASES[case]
    with pytest.raises(err) as info:
        fn()
    assert fragment.lower() in str(info.value).lower(), str(info.value)


def test_errors_are_also_builtin_value_errors():
    with pytest.raises(ValueError):
        LogisticFederation(A2, YB, reg=-1.0)
