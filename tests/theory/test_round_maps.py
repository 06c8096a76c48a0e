"""Round maps on flat states: flattening rule, determinism, and the map itself
held to readable per-client transcriptions of the papers' updates."""

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.algorithms.base import Algorithm, RoundInfo
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedcurv import FedCurv
from fltheory.algorithms.scaffold import Scaffold
from fltheory.compression import Communication
from fltheory.errors import InvalidProblemError, NotAffineError
from fltheory.participation import Bernoulli
from fltheory.problems.generators import random_quadratic
from fltheory.theory.round_maps import (counters_of, round_map, set_counters, state_layout,
                                        state_to_vector, vector_to_state)


class _Opt(NamedTuple):
    count: np.ndarray
    trace: np.ndarray
    dim: np.ndarray


@dataclass(frozen=True)
class _Inner:
    hat: np.ndarray
    count: np.ndarray


@dataclass(frozen=True)
class _State:
    x: np.ndarray
    t: int
    ctrl: np.ndarray
    opt: _Opt
    mask: np.ndarray
    gain: float
    inner: _Inner
    none: object = None


def _state(rng, m=3, d=2):
    return _State(x=rng.standard_normal(d), t=7, ctrl=rng.standard_normal((m, d)),
                  opt=_Opt(count=np.arange(m), trace=rng.standard_normal((m, d)), dim=np.full(m, d)),
                  mask=np.array([True, False, True]), gain=0.25,
                  inner=_Inner(hat=rng.standard_normal(d), count=np.array(4)))


def test_layout_order_and_skipped_fields():
    s = _state(np.random.default_rng(0))
    lay = state_layout(s)
    assert lay.paths == ("x", "ctrl", "opt.trace", "gain", "inner.hat")
    assert lay.dim == 2 + 6 + 6 + 1 + 2
    assert lay.x_slice == slice(0, 2)
    assert set(lay.counter_paths) == {"t", "opt.count", "opt.dim", "inner.count"}
    S = state_to_vector(s)
    np.testing.assert_array_equal(S[lay.slices["opt.trace"]], s.opt.trace.ravel())
    assert S[lay.slices["gain"]][0] == 0.25


@given(st.integers(0, 2**31 - 1))
def test_vector_roundtrip(seed):
    rng = np.random.default_rng(seed)
    s = _state(rng)
    S = rng.standard_normal(state_layout(s).dim)
    back = vector_to_state(S, s)
    np.testing.assert_array_equal(state_to_vector(back), S)
    assert back.t == 7 and back.opt.count.tolist() == [0, 1, 2] and back.mask.tolist() == [True, False, True]
    assert isinstance(back.gain, float) and back.inner.count == 4
    moved = set_counters(back, {"t": 9, "opt.count": np.array([5, 5, 5])})
    assert counters_of(moved)["t"] == 9 and moved.opt.count.tolist() == [5, 5, 5]


def test_layout_mismatch_and_bad_vectors():
    s = _state(np.random.default_rng(1))
    with pytest.raises(InvalidProblemError, match="shape"):
        vector_to_state(np.zeros(3), s)
    other = _state(np.random.default_rng(1), m=4)
    with pytest.raises(InvalidProblemError, match="layout"):
        state_to_vector(other, state_layout(s))


# ---------------------------------------------------------------- the maps
@pytest.fixture(scope="module")
def fed():
    return random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.5, seed=5,
                            weights=[0.2, 0.3, 0.5], constants="clients")


def test_fedavg_round_map_is_the_per_client_loop(fed):
    lr, K = np.array([0.1, 0.2, 0.05]), np.array([2, 1, 4])
    rm = round_map(FedAvg(lr=lr, local_steps=K, server_lr=0.5), fed)
    x = np.array([0.3, -1.2])
    new = x.copy()
    for i in range(3):                      # seed 002 Alg. 1, one client at a time
        y = x.copy()
        for _ in range(K[i]):
            y = y - lr[i] * (fed.H[i] @ y - fed.e[i])
        new = new + 0.5 * fed.weights[i] * (y - x)
    np.testing.assert_allclose(rm(x), new, atol=1e-14)


@pytest.mark.parametrize("option", ["I", "II"])
def test_scaffold_round_map_is_the_per_client_loop(fed, option):
    """THEORY.md section 2 (SCAFFOLD), full participation, transcribed client by client."""
    eta, K, eta_g = 0.1, 3, 0.8
    rm = round_map(Scaffold(lr=eta, local_steps=K, server_lr=eta_g, option=option), fed)
    rng = np.random.default_rng(0)
    x, ci = rng.standard_normal(2), rng.standard_normal((3, 2))
    c = ci.mean(axis=0)
    ys, new_ci = [], []
    for i in range(3):
        y = x.copy()
        for _ in range(K):
            y = y - eta * (fed.H[i] @ y - fed.e[i] + c - ci[i])
        ys.append(y)
        new_ci.append(fed.H[i] @ x - fed.e[i] if option == "I" else ci[i] - c + (x - y) / (K * eta))
    x_new = x + eta_g / 3 * sum(y - x for y in ys)
    c_new = c + sum(new_ci[i] - ci[i] for i in range(3)) / 3
    S = np.concatenate([x, c, ci.ravel()])
    assert rm.layout.paths == ("x", "c", "c_clients")
    np.testing.assert_allclose(rm(S), np.concatenate([x_new, c_new, np.ravel(new_ci)]), atol=1e-13)


def test_fedcurv_warms_up_one_round(fed):
    rm = round_map(FedCurv(lr=0.1, local_steps=2, alpha=0.1), fed)
    assert rm.warmup == 1 and bool(np.all(rm.template.seen))
    assert rm.initial.t == 0 and rm.template.t == 1


def test_stochastic_and_partial_settings_are_refused(fed):
    alg = FedAvg(lr=0.1, local_steps=2)
    with pytest.raises(InvalidProblemError, match="stochastic"):
        round_map(alg, fed.with_gradient_noise(1.0))
    with pytest.raises(NotAffineError, match="full participation"):
        round_map(alg, fed, participation=Bernoulli(0.5))


@dataclass(frozen=True)
class _NoisyState:
    x: np.ndarray
    t: int


@dataclass(frozen=True, kw_only=True, eq=False)
class _NoisyServer(Algorithm):
    """Deterministic clients, but the server adds its own noise: not a map of the state."""

    name: ClassVar[str] = "NoisyServer"

    def init(self, problem, x0, rng):
        return _NoisyState(x=np.array(x0, dtype=float), t=0)

    def round(self, state, problem, participation, rng):
        x = state.x - 0.1 * problem.grad(state.x) + 1e-3 * rng.standard_normal(problem.dim)
        z = np.zeros((0, problem.dim))
        return _NoisyState(x=x, t=state.t + 1), RoundInfo(np.zeros(0, int), np.zeros(0, int),
                                                          Communication.measure(z, z))


def test_algorithm_drawing_random_numbers_is_refused(fed):
    with pytest.raises(NotAffineError, match="NoisyServer draws random numbers"):
        round_map(_NoisyServer(), fed)
