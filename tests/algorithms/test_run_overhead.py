"""run()'s cheap diagnostics: the objective evaluated in batches of rows, the communication
measured when first read (bounded memory), the same values as the per-round route."""

from __future__ import annotations

import importlib
import pickle

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import EFL, FedAvg, FedDyn, FedElasticNet, FedOpt, FedProx, Scaffold, run
from fltheory.algorithms.base import DeferredCommunication, RoundInfo
from fltheory.algorithms.history import MAX_PENDING_BYTES, RoundCommunication
from fltheory.errors import DivergenceError, InvalidHyperparameterError, InvalidProblemError, NonFinitePointError
from fltheory.participation import IncompleteSteps, UniformSampling, UniformSteps
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic

run_module = importlib.import_module("fltheory.algorithms.run")

ALGS = [
    FedAvg(lr=0.1, local_steps=3),
    FedProx(lr=0.1, local_steps=3, mu=0.3),
    Scaffold(lr=0.1, local_steps=3),
    FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.adam(0.1), local_steps=3),
    FedDyn(alpha=0.1),
    FedElasticNet(lambda1=0.01, lambda2=0.1, server_lr=0.3),
    EFL(lr=0.1, local_steps=3),
]


def fed(seed: int = 0, noisy: bool = True):
    f = random_quadratic(6, 4, L=4.0, mu=0.5, heterogeneity=1.0, seed=seed)
    return f.with_gradient_noise(0.5) if noisy else f


@pytest.mark.parametrize("alg", ALGS, ids=lambda a: a.name)
def test_communication_read_later_equals_the_measurement_in_its_round(alg):
    """run() keeps each round's RoundInfo and measures when the History is read: the values
    are those read right after the round (the held arrays are never changed by later rounds)."""
    part = IncompleteSteps(UniformSampling(3), UniformSteps())
    f = fed()
    gen = np.random.default_rng(5)
    state = alg.init(f, np.zeros(f.dim), gen)
    eager = []
    for _ in range(9):
        state, info = alg.round(state, f, part, gen)
        eager.append(info.communication)
    h = run(alg, f, 9, participation=part, seed=5)
    assert isinstance(h.communication, RoundCommunication)
    assert h.communication == eager and eager == h.communication
    assert h.total_communication() == sum(eager[1:], eager[0])


class _CountingInfo:
    """A RoundInfo stand-in whose communication counts its reads."""

    reads = 0

    def __init__(self, value: int) -> None:
        self.value = value

    def held_bytes(self) -> int:
        return 100

    @property
    def communication(self) -> int:
        _CountingInfo.reads += 1
        return self.value


def test_pending_communication_is_bounded_and_measured_once():
    _CountingInfo.reads = 0
    comms = RoundCommunication(max_bytes=300)
    for k in range(2):
        comms.append(_CountingInfo(k))
    assert _CountingInfo.reads == 0                   # nothing read yet
    comms.append(_CountingInfo(2))
    assert _CountingInfo.reads == 3                   # 300 bytes pending: measured, arrays released
    comms.append(_CountingInfo(3))
    assert _CountingInfo.reads == 3
    assert list(comms) == [0, 1, 2, 3] and _CountingInfo.reads == 4
    assert comms[1] == 1 and comms[-1] == 3 and comms[1:3] == [1, 2] and len(comms) == 4
    assert _CountingInfo.reads == 4                   # each round measured once


def test_round_communication_behaves_as_a_list():
    h = run(FedAvg(lr=0.1, local_steps=2), fed(), 4, seed=1)
    c = h.communication
    plain = list(c)
    assert len(c) == 4 and c[0] == plain[0] and c[-1] == plain[-1] and c[1:3] == plain[1:3]
    assert c == plain and c != plain[:3] and c != "abcd" and repr(c) == repr(plain)
    assert pickle.loads(pickle.dumps(c)) == plain and type(pickle.loads(pickle.dumps(c))) is list
    assert run(FedAvg(lr=0.1, local_steps=2), fed(), 4, seed=1).communication == c


def test_pending_communication_is_capped_in_bytes_held():
    """The cap counts the bytes the deferred measurements actually hold (a round may send several
    (m, d) arrays or matrices), not rounds of one (N, d) uplink."""
    assert MAX_PENDING_BYTES == 2 ** 25
    up = (np.zeros((4, 1000)), np.zeros((4, 10_000)))               # 32,000 + 320,000 bytes
    info = RoundInfo(np.arange(4), np.ones(4, dtype=np.int64), DeferredCommunication(up, np.zeros(1000)))
    assert info.held_bytes() == 32_000 + 320_000 + 8_000
    comms = RoundCommunication(max_bytes=1_000_000)
    comms.append(info)
    comms.append(RoundInfo(np.arange(4), np.ones(4, dtype=np.int64), DeferredCommunication(up, np.zeros(1000))))
    assert comms._held == 2 * 360_000 and comms._resolved == 0
    comms.append(RoundInfo(np.arange(4), np.ones(4, dtype=np.int64), DeferredCommunication(up, np.zeros(1000))))
    assert comms._held == 0 and comms._resolved == 3               # 1.08 MB >= 1 MB: measured
    assert info.held_bytes() == 0                                  # measured: nothing held any more


def test_batched_objective_equals_the_hook_row_by_row():
    """150 rounds: three batches of up to 64 rows.  Every F(x_t) and ||grad F(x_t)||^2 equals
    the hook on that row alone to rounding, and the run with a callback (one row per call)."""
    f = fed(2, noisy=False)
    alg = FedAvg(lr=0.2, local_steps=3)
    h = run(alg, f, 150, seed=0)
    one = [f.loss_and_grad_norm2(x[None, :]) for x in h.x]
    np.testing.assert_allclose(h.loss, [v[0][0] for v in one], rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(h.grad_norm2, [v[1][0] for v in one], rtol=1e-12, atol=1e-28)
    with_callback = run(alg, f, 150, seed=0, callback=lambda t, s, i: False)
    assert with_callback.x.tobytes() == h.x.tobytes()
    np.testing.assert_allclose(h.loss, with_callback.loss, rtol=1e-14)
    # the gap is F(x_t) - F*: a difference of F by rounding (|F| eps) is the bound on its change
    assert np.all(np.abs(h.loss_gap - with_callback.loss_gap) <= 4 * np.finfo(float).eps * np.abs(h.loss))


@pytest.mark.parametrize("alg", [FedAvg(lr=3.0, local_steps=5), FedProx(lr=3.0, local_steps=5, mu=0.1)],
                         ids=lambda a: a.name)
def test_divergence_names_the_same_round_with_batched_rows(alg, monkeypatch):
    """lr = 3 > 2 / L: F(x_t) overflows while x_t is still finite.  Batched and row-by-row
    evaluation name the same first round and the same values."""
    f = random_quadratic(3, 2, L=4.0, mu=0.5, heterogeneity=1.0, seed=0)
    messages = []
    for rows in (64, 1):
        monkeypatch.setattr(run_module, "_BATCH_ROWS", rows)
        with pytest.raises(DivergenceError, match=rf"{alg.name} diverged in round \d+") as err:
            run(alg, f, 400, seed=0, x0=np.ones(2))
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "F(x) = " in messages[0]


def test_metrics_as_arrays():
    """A 0-d array is not a collection of names: a typed error naming the argument and the value;
    a 1-d array of names is a collection."""
    with pytest.raises(InvalidHyperparameterError, match=r"metrics must be a collection.*array\(0\.5\)"):
        run(FedAvg(), fed(), 1, metrics=np.array(0.5))
    with pytest.raises(InvalidHyperparameterError, match="metrics"):
        run(FedAvg(), fed(), 1, metrics=np.array("loss"))
    h = run(FedAvg(), fed(), 2, metrics=np.array(["loss", "dist2"]))
    assert h.loss is not None and h.dist2 is not None and h.grad_norm2 is None and h.loss_gap is None


@pytest.mark.parametrize("rows", [64, 1], ids=["batched", "row-by-row"])
def test_metric_values_are_the_same_bits_for_every_metrics(rows, monkeypatch):
    """Batched (a lead row in the first call) or one row per call (F* a call of its own), each
    metric is the same bits whichever others are asked; the gap at x_0 = x* is exactly 0."""
    monkeypatch.setattr(run_module, "_BATCH_ROWS", rows)
    f = fed(4, noisy=False)
    alg = FedAvg(lr=0.1, local_steps=2)
    full = run(alg, f, 70, x0=f.optimum())
    assert full.loss_gap[0] == 0.0
    for metrics in [("loss",), ("grad_norm2",), ("loss_gap",), ("dist2", "loss")]:
        some = run(alg, f, 70, x0=f.optimum(), metrics=metrics)
        for name in metrics:
            assert getattr(some, name).tobytes() == getattr(full, name).tobytes(), name


def test_distances_equal_the_direct_formulas_bit_for_bit():
    """One difference X - x* gives ||x_t - x*||^2 and the zero gap where x_t == x*: the same bits as
    np.sum((X - x*) ** 2, axis=1) and (X == x*).all(axis=1), including -0.0 against 0.0 and
    differences in the subnormal range."""
    gen = np.random.default_rng(3)
    x_star = gen.standard_normal(5)
    x_star[1] = 0.0
    X = gen.standard_normal((7, 5)) * np.logspace(-300, 3, 7)[:, None] + x_star
    X[2] = x_star
    X[3] = x_star
    X[3, 1] = -0.0                                         # equal to x* (0.0 == -0.0)
    X[4] = x_star
    X[4, 0] = np.nextafter(x_star[0], np.inf)             # one ulp away: not x*
    X[5] = x_star
    X[5, 1] = 5e-324                                      # a subnormal away from 0
    loss = gen.standard_normal(7)
    gap, dist2 = run_module._distances(X, loss, x_star, 0.25, True)
    expected_gap = loss - 0.25
    expected_gap[(X == x_star).all(axis=1)] = 0.0
    np.testing.assert_array_equal(gap, expected_gap)
    assert (gap == 0).tolist() == [False, False, True, True, False, False, False]
    assert np.sum((X - x_star) ** 2, axis=1).tobytes() == dist2.tobytes()
    assert gap.tobytes() == expected_gap.tobytes()
    assert run_module._distances(X, loss, None, None, True) == (None, None)
    assert run_module._distances(X, None, x_star, None, False) == (None, None)
    only_dist2 = run_module._distances(X, None, x_star, None, True)
    assert only_dist2[0] is None and only_dist2[1].tobytes() == dist2.tobytes()


def test_run_evaluates_the_hook_without_its_argument_check_and_with_the_same_bits():
    """run() calls the implementation behind the checked hook (its rows are valid by construction):
    the check is not run (a non-finite row passes through it), and F, ||grad F||^2 are the bits of
    the checked hook's values on the run's one batch (lead row x*, then x_0..x_R)."""
    from fltheory.errors import NonFinitePointError
    f = fed(noisy=False)
    evaluate = run_module._unchecked_hook(f)
    bad = np.full((1, f.dim), np.nan)
    with pytest.raises(NonFinitePointError):
        f.loss_and_grad_norm2(bad)
    with np.errstate(invalid="ignore"):
        assert np.isnan(evaluate(bad)[0]).all()
    h = run(FedAvg(lr=0.1, local_steps=3), f, 5)
    loss, g2 = f.loss_and_grad_norm2(np.array([f.optimum(), *h.x]))
    assert h.loss.tobytes() == loss[1:].tobytes() and h.grad_norm2.tobytes() == g2[1:].tobytes()


def test_a_hook_set_on_the_instance_is_called_as_it_is():
    f = fed(noisy=False)
    seen = []

    def hook(X):
        seen.append(X.shape)
        return np.zeros(X.shape[0]), np.ones(X.shape[0])

    f.loss_and_grad_norm2 = hook
    h = run(FedAvg(lr=0.1, local_steps=3), f, 2, metrics=("loss", "grad_norm2"))
    assert seen == [(4, f.dim)] and h.loss.tolist() == [0.0] * 3 and h.grad_norm2.tolist() == [1.0] * 3


def test_checked_run_record_is_run_record_without_the_checks():
    from fltheory.algorithms.history import checked_run_record, run_record
    f, alg = fed(), FedAvg(lr=0.1, local_steps=3)
    a = run_record(alg, f, rounds=4, completed_rounds=3, seed=2, participation=None, seconds=0.5, extra_key=1)
    b = checked_run_record(alg, f, rounds=4, completed_rounds=3, seed=2, participation=None, seconds=0.5,
                           extra_key=1)
    assert a.config == b.config and a.seed == b.seed and a.versions == b.versions
    with pytest.raises(InvalidHyperparameterError, match="completed_rounds"):
        run_record(alg, f, rounds=2, completed_rounds=3, seed=2, participation=None, seconds=0.5)


class _BadOptimum(QuadraticFederation):
    """A user federation whose optimum() returns whatever the test puts in ``value``."""

    value: object = None

    def optimum(self):
        return self.value


@pytest.mark.parametrize(("value", "error", "match"), [
    (np.full(3, np.nan), NonFinitePointError, r"optimum\(\) contains a non-finite value nan at index \(0,\)"),
    (np.array([1.0, -np.inf, 0.0]), NonFinitePointError, r"non-finite value -inf at index \(1,\)"),
    (np.zeros((3, 1)), InvalidProblemError, r"shape \(3,\), got shape \(3, 1\)"),
    ([[0.0], [1.0, 2.0]], InvalidProblemError, r"_BadOptimum.optimum\(\) must be numeric"),
    (np.array([1j, 0, 0]), InvalidProblemError, r"must be numeric \(real numbers\), got dtype complex128"),
])
def test_run_checks_a_user_optimum_once(value, error, match):
    """The batched objective takes x* unchecked, so run() checks what a user's optimum()
    returns (it used to reach the hook's own check, or a bare numpy error)."""
    fed = _BadOptimum(np.stack([np.eye(3)] * 2), np.ones((2, 3)))
    fed.value = value
    for callback in (None, lambda t, state, info: None):
        with pytest.raises(error, match=match):
            run(FedAvg(lr=0.05, local_steps=2), fed, 3, seed=0, callback=callback)
    run(FedAvg(lr=0.05, local_steps=2), fed, 3, seed=0, metrics=("loss",))    # x* not needed: not asked


def test_run_calls_init_without_its_argument_check_after_checking_the_same_arguments():
    """run() checks x0, the problem and the generator itself, then calls the implementation behind
    the checked ``init`` (the check would only repeat them): the implementation accepts what the
    check refuses, run() still refuses it with its own typed error, and the state is the checked one's."""
    f, alg = fed(noisy=False), FedAvg(lr=0.1, local_steps=3)
    raw_init = run_module._unchecked(alg, "init")
    bad = np.full(f.dim, np.nan)
    with pytest.raises(InvalidProblemError, match="x0"):
        alg.init(f, bad, np.random.default_rng(0))
    assert np.isnan(raw_init(f, bad, np.random.default_rng(0)).x).all()
    with pytest.raises(InvalidProblemError, match="x0"):
        run(alg, f, 2, x0=bad)
    x0 = np.linspace(-1.0, 1.0, f.dim)
    assert raw_init(f, x0, None).x.tobytes() == alg.init(f, x0, None).x.tobytes()


def test_an_init_set_on_the_instance_is_called_as_it_is():
    f, alg = fed(noisy=False), FedAvg(lr=0.1, local_steps=3)
    calls = []
    checked = alg.init

    def init(problem, x0, rng):
        calls.append(x0.shape)
        return checked(problem, x0, rng)

    object.__setattr__(alg, "init", init)
    assert run_module._unchecked(alg, "init") is init
    run(alg, f, 2)
    assert calls == [(f.dim,)]


def test_record_timestamp_is_the_current_second_in_iso_format():
    import datetime as dt
    history_module = importlib.import_module("fltheory.algorithms.history")
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    stamp = run(FedAvg(lr=0.1, local_steps=3), fed(noisy=False), 1).record.timestamp
    after = dt.datetime.now(dt.timezone.utc)
    assert before <= dt.datetime.fromisoformat(stamp) <= after
    assert stamp.endswith("+00:00") and len(stamp) == len("2026-01-31T12:00:00+00:00")
    assert history_module._timestamp() >= stamp


def test_record_timestamp_cache_is_one_consistent_pair(monkeypatch):
    """The once-per-second cache holds (second, its text) as one tuple, replaced whole."""
    import datetime as dt
    history_module = importlib.import_module("fltheory.algorithms.history")
    for ns in (1_700_000_000_999_999_999, 1_700_000_001_000_000_000, 1_700_000_001_500_000_000):
        monkeypatch.setattr(history_module.time, "time_ns", lambda ns=ns: ns)
        text = dt.datetime.fromtimestamp(ns // 10**9, dt.timezone.utc).isoformat(timespec="seconds")
        assert history_module._timestamp() == text
        assert history_module._STAMP == (ns // 10**9, text)


def test_held_bytes_of_plain_arrays_and_of_tuples():
    up, down = np.zeros((4, 3)), np.zeros(3)
    assert DeferredCommunication(up, down).held_bytes() == up.nbytes + down.nbytes
    assert DeferredCommunication((up, up[:, :2]), down).held_bytes() == up.nbytes + 4 * 2 * 8 + down.nbytes
