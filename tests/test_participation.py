"""Participation models: inclusion frequencies against theory (Monte Carlo with
5-sigma binomial tolerances), step distributions, schedules, the documented
draw order, and validation."""

import re

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError
from fltheory.participation import (Bernoulli, BinomialSteps, FixedSteps, FullParticipation, FullSteps,
                                    IncompleteSteps, Participants, Participation, Schedule, TimeVarying,
                                    UniformSampling, UniformSteps, checked_draw)

R = 4000          # Monte Carlo rounds


def _tol(p, n=R, z=5.0):
    """z standard errors of a frequency with success probability p over n trials."""
    return z * np.sqrt(p * (1 - p) / n) + 1e-12


def _freq(part, N, E=None, rounds=R, seed=0):
    rng = np.random.default_rng(seed)
    E = np.full(N, 3) if E is None else E
    inc = np.zeros((rounds, N), dtype=bool)
    for t in range(rounds):
        c = part.draw(rng, t, E).clients
        inc[t, c] = True
    return inc


def test_full_participation_draws_nothing():
    rng = np.random.default_rng(1)
    before = rng.bit_generator.state
    p = FullParticipation().draw(rng, 0, np.array([2, 3, 1]))
    assert p.clients.tolist() == [0, 1, 2] and p.steps.tolist() == [2, 3, 1]
    assert rng.bit_generator.state == before
    assert FullParticipation().inclusion_probabilities(3).tolist() == [1.0, 1.0, 1.0]


def test_uniform_sampling_inclusion_and_pair_frequencies():
    N, S = 6, 2
    part = UniformSampling(S)
    inc = _freq(part, N)
    assert np.all(inc.sum(axis=1) == S)
    p1 = S / N
    np.testing.assert_allclose(inc.mean(axis=0), p1, atol=_tol(p1))
    p2 = S * (S - 1) / (N * (N - 1))                     # without replacement
    pair = (inc[:, 0] & inc[:, 1]).mean()
    assert abs(pair - p2) <= _tol(p2)
    np.testing.assert_allclose(part.inclusion_probabilities(N), p1, rtol=1e-15)


def test_uniform_sampling_draw_order_documented():
    E = np.array([1, 2, 3, 4, 5])
    a = UniformSampling(3).draw(np.random.default_rng(9), 0, E)
    rng = np.random.default_rng(9)
    expected = np.sort(rng.choice(np.arange(5), size=3, replace=False))
    assert a.clients.tolist() == expected.tolist()
    assert a.steps.tolist() == E[expected].tolist()
    assert np.all(np.diff(a.clients) > 0)


def test_bernoulli_inclusion_and_empty_rounds():
    p = np.array([0.1, 0.5, 0.9, 0.3])
    inc = _freq(Bernoulli(p), 4, seed=3)
    assert np.all(np.abs(inc.mean(axis=0) - p) <= _tol(p))
    p_empty = np.prod(1 - p)
    assert abs((inc.sum(axis=1) == 0).mean() - p_empty) <= _tol(p_empty)
    # empty rounds are returned as empty Participants
    rng = np.random.default_rng(0)
    rounds = [Bernoulli(0.05).draw(rng, t, np.full(3, 2)) for t in range(200)]
    empty = [r for r in rounds if r.m == 0]
    assert empty and empty[0].clients.shape == (0,) and empty[0].steps.shape == (0,)


def test_bernoulli_draw_order_documented():
    p = np.array([0.2, 0.7, 0.5])
    got = Bernoulli(p).draw(np.random.default_rng(4), 0, np.array([1, 1, 1]))
    u = np.random.default_rng(4).random(3)
    assert got.clients.tolist() == np.flatnonzero(u < p).tolist()


def test_uniform_steps_distribution():
    E = np.array([4, 2, 0])
    part = IncompleteSteps(FullParticipation(), UniformSteps())
    rng = np.random.default_rng(5)
    S = np.array([part.draw(rng, t, E).steps for t in range(R)])
    for k, e in enumerate(E):
        for v in range(e + 1):
            assert abs((S[:, k] == v).mean() - 1 / (e + 1)) <= _tol(1 / (e + 1))
    assert S.max(axis=0).tolist() == [4, 2, 0]


def test_binomial_and_inactive_steps():
    E = np.full(3, 5)
    prob, y = 0.3, 0.25
    part = IncompleteSteps(FullParticipation(), BinomialSteps(prob), inactive_prob=y)
    rng = np.random.default_rng(6)
    S = np.array([part.draw(rng, t, E).steps for t in range(R)]).ravel()
    n = S.size
    # P(s = 0) = y + (1 - y)(1 - prob)^E ; E[s] = (1 - y) E prob
    p0 = y + (1 - y) * (1 - prob) ** 5
    assert abs((S == 0).mean() - p0) <= _tol(p0, n)
    mean = (1 - y) * 5 * prob
    second = (1 - y) * (5 * prob * (1 - prob) + (5 * prob) ** 2)
    var = second - mean ** 2
    assert abs(S.mean() - mean) <= 5 * np.sqrt(var / n)


def test_inactive_only_and_per_client_inactive():
    E = np.full(2, 3)
    part = IncompleteSteps(FullParticipation(), inactive_prob=np.array([0.0, 0.6]))
    rng = np.random.default_rng(7)
    S = np.array([part.draw(rng, t, E).steps for t in range(R)])
    assert np.all(S[:, 0] == 3)
    assert set(np.unique(S[:, 1]).tolist()) == {0, 3}
    assert abs((S[:, 1] == 0).mean() - 0.6) <= _tol(0.6)


def test_fixed_and_time_varying_steps():
    E = np.array([5, 5, 5, 5])
    fixed = IncompleteSteps(UniformSampling(2), FixedSteps([1, 2, 3, 4]))
    rng = np.random.default_rng(8)
    for t in range(20):
        p = fixed.draw(rng, t, E)
        assert p.steps.tolist() == (p.clients + 1).tolist()
    tv = IncompleteSteps(FullParticipation(),
                         TimeVarying(lambda t: FullSteps() if t % 2 == 0
                                     else (lambda rng, t, E: np.minimum(E, 1))))
    assert tv.draw(rng, 0, E).steps.tolist() == [5, 5, 5, 5]
    assert tv.draw(rng, 1, E).steps.tolist() == [1, 1, 1, 1]


def test_plain_callable_with_clients_argument():
    part = IncompleteSteps(FullParticipation(), lambda rng, t, E, clients: E - (clients % 2))
    assert part.draw(np.random.default_rng(0), 0, np.array([3, 3, 3])).steps.tolist() == [3, 2, 3]


@pytest.mark.parametrize("dist", [
    lambda rng, t, E: E + 1,                       # above E
    lambda rng, t, E: E * 0 - 1,                   # negative
    lambda rng, t, E: E[:-1],                      # wrong length
    lambda rng, t, E: E * 0.5 + 0.25,              # not integers
    FixedSteps([9, 9, 9]),
])
def test_step_range_violations_raise(dist):
    with pytest.raises(InvalidHyperparameterError):
        IncompleteSteps(FullParticipation(), dist).draw(np.random.default_rng(0), 2, np.array([2, 3, 4]))


def test_schedule_departure_and_arrival():
    sched = Schedule(FullParticipation(), departures={0: 3}, arrivals={4: 2})
    E = np.full(5, 2)
    assert sched.available(0, 5).tolist() == [0, 1, 2, 3]
    assert sched.available(2, 5).tolist() == [0, 1, 2, 3, 4]
    assert sched.available(3, 5).tolist() == [1, 2, 3, 4]
    assert sched.draw(None, 1, E).clients.tolist() == [0, 1, 2, 3]
    assert sched.draw(None, 7, E).clients.tolist() == [1, 2, 3, 4]
    both = Schedule(FullParticipation(), departures={1: 5}, arrivals={1: 2})
    assert [1 in both.available(t, 3) for t in range(7)] == [False, False, True, True, True, False, False]


def test_schedule_restricts_sampling_with_uniform_inclusion():
    sched = Schedule(IncompleteSteps(UniformSampling(2), UniformSteps()), departures={0: 0, 1: 0})
    inc = _freq(sched, 5, seed=2)
    assert not inc[:, :2].any()
    np.testing.assert_allclose(inc[:, 2:].mean(axis=0), 2 / 3, atol=_tol(2 / 3))
    # too few present clients for S
    with pytest.raises(InvalidHyperparameterError, match="available"):
        Schedule(UniformSampling(3), departures={0: 0, 1: 0, 2: 0}).draw(np.random.default_rng(0), 0, np.ones(4))
    # Bernoulli under a schedule consumes the same uniforms as without it
    b = Schedule(Bernoulli(0.5), departures={1: 0})
    got = b.draw(np.random.default_rng(3), 0, np.ones(3))
    u = np.random.default_rng(3).random(3)
    assert got.clients.tolist() == [i for i in (0, 2) if u[i] < 0.5]


def test_reproducible_and_reference_draw_order():
    """The documented order: base choice, then rng.integers(0, E + 1), then rng.random(m)."""
    part = IncompleteSteps(UniformSampling(3), UniformSteps(), inactive_prob=0.3)
    E = np.array([2, 4, 6, 8, 10])
    a = [part.draw(np.random.default_rng(11), t, E) for t in range(3)]
    b = [part.draw(np.random.default_rng(11), t, E) for t in range(3)]
    for x, y in zip(a, b):
        assert x.clients.tolist() == y.clients.tolist() and x.steps.tolist() == y.steps.tolist()
    rng = np.random.default_rng(21)
    got = part.draw(rng, 0, E)
    ref = np.random.default_rng(21)
    c = np.sort(ref.choice(np.arange(5), size=3, replace=False))
    s = ref.integers(0, E[c] + 1)
    s = np.where(ref.random(3) < 0.3, 0, s)
    assert got.clients.tolist() == c.tolist() and got.steps.tolist() == s.tolist()


class _OnlyDraw(Participation):
    def draw(self, rng, t, local_steps):
        E = np.asarray(local_steps)
        return Participants(np.arange(E.shape[0]), E)


@pytest.mark.parametrize("make", [
    lambda: UniformSampling(0),
    lambda: UniformSampling(2.5),
    lambda: Bernoulli(0.0),
    lambda: Bernoulli(1.2),
    lambda: Bernoulli([0.5, 0.0]),
    lambda: BinomialSteps(1.5),
    lambda: FixedSteps([1, -1]),
    lambda: IncompleteSteps(FullParticipation(), inactive_prob=1.0),
    lambda: IncompleteSteps(FullParticipation(), inactive_prob=-0.1),
    lambda: IncompleteSteps("full"),
    lambda: Schedule(FullParticipation(), departures={-1: 2}),
    lambda: Schedule(FullParticipation(), departures={1: 2}, arrivals={1: 2}),
    lambda: TimeVarying(3),
])
def test_invalid_constructors(make):
    with pytest.raises(InvalidHyperparameterError):
        make()


def test_invalid_at_draw_time():
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidHyperparameterError, match="N = 3"):
        UniformSampling(4).draw(rng, 0, np.ones(3))
    with pytest.raises(InvalidHyperparameterError, match="3 clients"):
        Bernoulli([0.5, 0.5]).draw(rng, 0, np.ones(3))
    with pytest.raises(InvalidHyperparameterError, match="Generator"):
        UniformSampling(1).draw(0, 0, np.ones(3))
    with pytest.raises(InvalidHyperparameterError, match="local_steps"):
        UniformSampling(1).draw(rng, 0, np.array([1.5, 2]))
    with pytest.raises(InvalidHyperparameterError, match="scheduled"):
        Schedule(FullParticipation(), arrivals={5: 1}).draw(rng, 0, np.ones(3))
    with pytest.raises(InvalidHyperparameterError, match="draw_among"):
        Schedule(_OnlyDraw(), departures={0: 1}).draw(rng, 0, np.ones(3))


def test_full_participants_values_sharing_and_errors():
    from fltheory.errors import InvalidHyperparameterError
    from fltheory.participation import FullParticipation, full_participants
    part = full_participants(5, 3)
    ref = FullParticipation().draw(np.random.default_rng(0), 0, np.full(5, 3))
    np.testing.assert_array_equal(part.clients, ref.clients)
    np.testing.assert_array_equal(part.steps, ref.steps)
    assert part.clients.dtype == part.steps.dtype == np.int64
    assert part.bounds == (3, 3) and part.identity
    assert full_participants(5, 3) is part                # shared: read-only, a function of (N, steps)
    assert not part.clients.flags.writeable and not part.steps.flags.writeable
    assert full_participants(0, 2).m == 0
    for bad in ((-1, 2), (3, -1), (True, 1), (2.0, 1), ("3", 1)):
        with pytest.raises(InvalidHyperparameterError):
            full_participants(*bad)


def test_full_participants_cache_holds_a_bounded_number_of_clients():
    """The shared cache keeps at most _FULL_MAX_CLIENTS clients over its entries besides the
    newest one (before: up to 64 entries whatever their size, 1 GB at N = 1e6); entries are
    still shared while they fit."""
    from fltheory import participation as P
    P._FULL.clear()
    small = P.full_participants(10, 2)
    assert P.full_participants(10, 2) is small
    big = P.full_participants(P._FULL_MAX_CLIENTS, 1)       # does not fit beside the small one
    assert set(P._FULL) == {(P._FULL_MAX_CLIENTS, 1)} and P.full_participants(P._FULL_MAX_CLIENTS, 1) is big
    P.full_participants(3, 1)                                # nor does anything beside the big one
    assert set(P._FULL) == {(3, 1)}
    for n in range(1, P._FULL_MAX + 5):                      # many small entries: at most _FULL_MAX
        P.full_participants(n, 7)
        assert len(P._FULL) <= P._FULL_MAX
    assert sum(k[0] for k in P._FULL) <= P._FULL_MAX_CLIENTS
    P._FULL.clear()


def test_full_participants_from_several_threads():
    """Threads asking for different (N, steps) at once while the cache fills and clears (review
    finding: the size bound iterated the dict and raised RuntimeError 'dictionary changed size during
    iteration'); thread switches forced every microsecond to make the interleavings likely."""
    import sys
    import threading

    from fltheory.participation import full_participants
    errors: list[str] = []

    def worker(off: int) -> None:
        try:
            for i in range(5000):
                part = full_participants(1 + (i * 7 + off) % 300, 1)
                assert part.m == 1 + (i * 7 + off) % 300
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_full_participants_cache_writers_never_iterate_a_dict_another_thread_changes(monkeypatch):
    """The size bound iterates the cache; a cache whose iteration yields the GIL between keys (as a
    garbage collection running Python code can) must still never be changed under it: writers are
    serialised.  Without the lock this raises RuntimeError within a few hundred misses."""
    import threading
    import time

    from fltheory import participation

    class Cache(dict):
        def __iter__(self):
            size = len(self)
            for key in list(super().keys()):
                time.sleep(0)                       # let another thread run mid-iteration
                yield key
            if len(self) != size:                   # what dict iteration would detect
                raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(participation, "_FULL", Cache())
    errors: list[str] = []

    def worker(off: int) -> None:
        try:
            for i in range(300):
                n = 1 + (i * 7 + off) % 90
                assert participation.full_participants(n, 1 + off).m == n
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


class _Fixed(Participation):
    """A participation model written outside fltheory that returns a fixed draw."""

    def __init__(self, clients, steps):
        self.clients, self.steps = clients, steps

    def draw(self, rng, t, local_steps):
        return Participants(np.asarray(self.clients), np.asarray(self.steps))


@pytest.mark.parametrize("clients, steps, says", [
    ([1, 1], [2, 2], "distinct indices"),          # SCAFFOLD's c = mean c_i would break
    ([2, 0], [2, 2], "ascending order"),
    ([0, 7], [2, 2], "in 0..3"),                   # numpy would raise a bare IndexError
    ([-1, 2], [2, 2], "in 0..3"),
    ([0, 2], [-1, 2], "client 0 got -1 steps"),    # read as 0 steps before
    ([0, 2], [2, 50], "client 2 got 50 steps, outside [0, E = 2]"),
    ([0, 2], [2.0, 2.0], "1-D integer array"),
    ([0, 2], [2], "2 clients but 1 step counts"),
])
def test_rounds_refuse_a_user_models_draw_that_breaks_the_contract(clients, steps, says):
    from fltheory.algorithms import FedAvg, Scaffold
    from fltheory.problems import random_quadratic
    fed = random_quadratic(4, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    for alg in (FedAvg(lr=0.1, local_steps=2), Scaffold(lr=0.1, local_steps=2)):
        state = alg.init(fed, np.zeros(3), np.random.default_rng(0))
        with pytest.raises(InvalidHyperparameterError, match=r"participation model _Fixed, round 0: .*"
                           + re.escape(says)):
            alg.round(state, fed, _Fixed(clients, steps), np.random.default_rng(0))


def test_a_valid_user_draw_is_taken_as_drawn_and_keeps_scaffolds_invariant():
    from fltheory.algorithms import Scaffold
    from fltheory.problems import random_quadratic
    fed = random_quadratic(4, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    alg = Scaffold(lr=0.1, local_steps=3)
    state = alg.init(fed, np.ones(3), np.random.default_rng(0))
    narrow, info = alg.round(state, fed, _Fixed(np.array([1, 3], dtype=np.int32), np.array([3, 1], dtype=np.int16)),
                             np.random.default_rng(0))
    wide, _ = alg.round(state, fed, _Fixed([1, 3], [3, 1]), np.random.default_rng(0))
    assert info.clients.tolist() == [1, 3] and info.steps.tolist() == [3, 1]
    for a, b in ((narrow.x, wide.x), (narrow.c, wide.c), (narrow.c_clients, wide.c_clients)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(narrow.c, narrow.c_clients.mean(axis=0), rtol=0, atol=1e-15)
    assert np.all(narrow.c_clients[[0, 2]] == 0) and np.all(narrow.c_clients[[1, 3]] != 0)
    drawn = checked_draw(_Fixed(np.array([1, 3], dtype=np.int32), [3, 1]), None, 0, np.full(4, 3))
    assert drawn.clients.dtype == drawn.steps.dtype == np.int64
