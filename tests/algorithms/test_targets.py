"""Temporal-ensembling target (seed 002 Alg. 2) against its explicit sum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fltheory.algorithms.targets import TemporalEnsemble, require_ensemble
from fltheory.errors import InvalidHyperparameterError

finite = st.floats(-100, 100, allow_nan=False)


@given(beta=st.floats(0.0, 0.95), G=arrays(np.float64, (5, 3), elements=finite))
def test_target_is_bias_corrected_weighted_sum(beta, G):
    """After G_1..G_t: T = sum_s (1 - beta) beta^(t-s) G_s / (1 - beta^t)."""
    te = TemporalEnsemble(beta=beta)
    state = te.init((3,))
    for t in range(1, 6):
        state = te.update(state, G[t - 1])
        w = (1 - beta) * beta ** (t - 1 - np.arange(t))
        expected = w @ G[:t] / (1 - beta ** t)
        np.testing.assert_allclose(te.centre(state, np.zeros(3)), expected, rtol=1e-10, atol=1e-9)


@given(beta=st.floats(0.0, 0.95), g=arrays(np.float64, (4,), elements=finite))
def test_constant_sequence_is_reproduced(beta, g):
    """The bias correction makes T = G when every G_t is the same."""
    te = TemporalEnsemble(beta=beta)
    state = te.init((4,))
    for _ in range(6):
        state = te.update(state, g)
    np.testing.assert_allclose(te.centre(state, np.zeros(4)), g, rtol=1e-12, atol=1e-12)


def test_beta_zero_is_the_last_model_bit_for_bit():
    te = TemporalEnsemble(beta=0.0)
    rng = np.random.default_rng(0)
    state = te.init((6,))
    for _ in range(4):
        g = rng.standard_normal(6)
        state = te.update(state, g)
        np.testing.assert_array_equal(te.centre(state, np.zeros(6)), g)


def test_nothing_ensembled_uses_the_fallback_and_rows_update_alone():
    te = TemporalEnsemble(beta=0.5, of="local")
    state = te.init((3, 2))
    fallback = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(te.centre(state, fallback), fallback)
    state = te.update(state, np.array([[1.0, 1.0]]), rows=np.array([1]))
    out = te.centre(state, fallback)
    np.testing.assert_array_equal(out[[0, 2]], fallback[[0, 2]])
    np.testing.assert_allclose(out[1], [1.0, 1.0], rtol=1e-15)
    assert state.count.tolist() == [0, 1, 0]


@pytest.mark.parametrize("beta", [-0.5, 1.0, 2.0, float("nan"), "x"])
def test_bad_beta(beta):
    with pytest.raises(InvalidHyperparameterError, match="beta"):
        TemporalEnsemble(beta=beta)


def test_bad_of():
    with pytest.raises(InvalidHyperparameterError, match="of"):
        TemporalEnsemble(beta=0.1, of="clients")


def test_require_ensemble_returns_the_state_and_rejects_a_missing_one():
    state = TemporalEnsemble(beta=0.5).init((3,))
    assert require_ensemble(state) is state
    with pytest.raises(InvalidHyperparameterError, match="no temporal-ensembling state"):
        require_ensemble(None)


def test_fedprox_te_round_on_a_state_without_ensemble_is_a_typed_error():
    import dataclasses

    from fltheory.algorithms import FedProxTE
    from fltheory.problems import random_quadratic

    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    alg = FedProxTE(beta=0.5, mu=0.1, lr=0.1, local_steps=2)
    state = dataclasses.replace(alg.init(fed, np.zeros(2), np.random.default_rng(0)), target=None)
    with pytest.raises(InvalidHyperparameterError, match="algorithm's own init"):
        alg.round(state, fed, None, np.random.default_rng(0))
