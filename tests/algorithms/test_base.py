"""algorithms.base: aggregation weights, per-client hyperparameters and every
algorithm's own averaging version (its server step replaced by plain averaging)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import (
    EFL,
    FedAvg,
    FedCurv,
    FedCurvTE,
    FedDyn,
    FedElasticNet,
    FedOpt,
    FedProx,
    FedProxTE,
    Scaffold,
)
from fltheory.algorithms.base import aggregation_weights, resolve_per_client
from fltheory.errors import InvalidHyperparameterError
from fltheory.problems import QuadraticFederation


def _fed() -> QuadraticFederation:
    H = np.stack([np.eye(2) * (i + 1) for i in range(3)])
    return QuadraticFederation(H, np.ones((3, 2)), n_samples=[1, 2, 5])


def test_aggregation_weights_follow_their_definitions():
    fed = _fed()
    S = np.array([0, 2])
    np.testing.assert_allclose(aggregation_weights(fed, S, "weights"), np.array([1, 5]) / 6)
    np.testing.assert_allclose(aggregation_weights(fed, S, "samples"), np.array([1, 5]) / 6)
    np.testing.assert_allclose(aggregation_weights(fed, S, "uniform"), [0.5, 0.5])
    assert aggregation_weights(fed, np.array([], dtype=np.int64), "uniform").shape == (0,)
    with pytest.raises(InvalidHyperparameterError, match="aggregation"):
        aggregation_weights(fed, S, "median")


def test_resolve_per_client_broadcasts_and_validates():
    np.testing.assert_array_equal(resolve_per_client("lr", 0.5, 3), [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(resolve_per_client("local_steps", [1, 2, 3], 3, integer=True), [1, 2, 3])
    with pytest.raises(ValueError, match="lr"):
        resolve_per_client("lr", [0.1, 0.2], 3)


@pytest.mark.parametrize("alg", [FedAvg(server_lr=0.3), FedProx(mu=0.1, server_lr=0.3),
                                 FedCurv(alpha=0.1, server_lr=0.3), Scaffold(server_lr=0.3),
                                 FedElasticNet(lambda1=0.01, lambda2=0.1, server_lr=0.3)],
                         ids=lambda a: a.name)
def test_server_rate_algorithms_average_at_rate_one(alg):
    avg = alg.averaging_version()
    assert avg.server_lr == 1.0 and type(avg) is type(alg)
    same = {f.name for f in dataclasses.fields(alg)} - {"server_lr"}
    assert all(getattr(avg, n) is getattr(alg, n) for n in same)


def test_fedopt_averages_with_server_sgd_of_rate_one():
    alg = FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.adam(0.3), local_steps=2)
    avg = alg.averaging_version()
    g = np.array([[0.5, -2.0]])
    u, _ = avg.server_optimizer.update(g, avg.server_optimizer.init(np.zeros((1, 2))), np.zeros((1, 2)))
    np.testing.assert_array_equal(u, -g)                   # x + u = x - pseudo-gradient = plain average
    with pytest.raises(InvalidHyperparameterError, match="client_state='restart'"):
        dataclasses.replace(alg, client_state="persist").averaging_version()


@pytest.mark.parametrize("alg", [FedProxTE(beta=0.3, mu=0.1), FedCurvTE(beta=0.3, alpha=0.1)],
                         ids=lambda a: a.name)
def test_temporal_ensembles_have_no_operator(alg):
    with pytest.raises(InvalidHyperparameterError, match="temporal-ensembling"):
        alg.averaging_version()


def test_algorithms_without_a_server_rate_are_their_own_averaging_version():
    for alg in (FedDyn(alpha=0.5), EFL()):
        assert alg.averaging_version() is alg


@pytest.mark.parametrize("integer", [False, True])
def test_resolve_per_client_scalar_fast_path_matches_the_checked_path(integer):
    """Plain Python scalars skip the array checks: same arrays, same errors."""
    from fltheory._validate import per_client
    goods = [1, 7, 10**7] if integer else [0.05, 3, 1e-300, 1e300]
    for v in goods:
        got = resolve_per_client("v", v, 4, integer=integer, strict=not integer, minimum=1 if integer else 0.0)
        want = np.broadcast_to(np.asarray(per_client("v", np.asarray(v), 4, integer=integer,
                                                     strict=not integer, minimum=1 if integer else 0.0),
                                          dtype=np.int64 if integer else np.float64), (4,))
        assert got.dtype == want.dtype and got.flags.writeable
        np.testing.assert_array_equal(got, want)
    bads: list[object] = [0, -3, 10**7 + 1, 2.0, 10**30, True, float("nan")] if integer else \
        [0.0, -1.0, float("nan"), float("inf"), True, 10**400, "0.1"]
    for bad in bads:
        with pytest.raises(InvalidHyperparameterError):
            resolve_per_client("v", bad, 4, integer=integer, strict=not integer, minimum=1 if integer else 0.0)


def test_deferred_communication_is_measured_once_when_read():
    from fltheory.algorithms.base import DeferredCommunication, RoundInfo
    from fltheory.compression import Communication
    rng = np.random.default_rng(3)
    up, dc = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    down = np.broadcast_to(rng.standard_normal(8), (3, 8))
    info = RoundInfo(np.arange(3), np.full(3, 2), DeferredCommunication((up, dc), down, up_kind="sparse"))
    first = info.communication
    assert first == Communication.measure(np.hstack([up, dc]), down, up_kind="sparse")
    assert info.communication is first
    assert "RoundInfo(" in repr(info)


def _hand_local_models(alg, state, fed):
    """y_i after the round's local steps from ``state``, a plain loop per client (exact
    oracle, full participation): FedAvg, SCAFFOLD (corrected by c - c_i), FedProx
    (gradient steps on f_i + mu/2 ||y - x||^2), client AdaGrad (eps 1e-8, restart)."""
    ys = []
    for i in range(fed.n_clients):
        y, nu = state.x.copy(), np.zeros(fed.dim)
        for _ in range(2):
            g = fed.H[i] @ y - fed.e[i]
            if isinstance(alg, Scaffold):
                g = g + state.c - state.c_clients[i]
            if isinstance(alg, FedProx):
                g = g + alg.mu * (y - state.x)
            if isinstance(alg, FedOpt):
                nu = nu + g * g
                y = y - 0.1 * g / (np.sqrt(nu) + 1e-8)
            else:
                y = y - 0.1 * g
        ys.append(y)
    return np.array(ys)


@pytest.mark.parametrize("alg", [FedAvg(lr=0.1, local_steps=2), Scaffold(lr=0.1, local_steps=2),
                                 FedProx(lr=0.1, local_steps=2, mu=0.3),
                                 FedOpt(client_optimizer=optim.adagrad(0.1), server_optimizer=optim.sgd(1.0),
                                        local_steps=2)])
def test_rounds_report_the_communication_of_their_messages(alg):
    """The deferred measurement of a round equals Communication.measure of what was sent,
    recomputed by a loop per client: the model changes (and SCAFFOLD's control changes
    c_i^+ - c_i) up, the model (and c) down to every participant."""
    from fltheory.compression import Communication
    fed = _fed()
    rng = np.random.default_rng(0)
    state = alg.init(fed, np.array([0.3, -0.2]), rng)
    state, _ = alg.round(state, fed, None, rng)
    new, info = alg.round(state, fed, None, rng)
    m, d = fed.n_clients, fed.dim
    delta = _hand_local_models(alg, state, fed) - state.x
    if isinstance(alg, Scaffold):
        dc = state.c_clients - state.c - delta / 0.2 - state.c_clients     # option II: c_i - c + (x - y)/(K eta)
        up, down = np.hstack([delta, dc]), np.broadcast_to(np.concatenate([state.x, state.c]), (m, 2 * d))
        np.testing.assert_allclose(new.c_clients - state.c_clients, dc, rtol=0, atol=1e-14)
    else:
        up, down = delta, np.broadcast_to(state.x, (m, d))
    want = Communication.measure(up, down)
    got = info.communication
    for field in ("floats_up", "floats_down", "nonzeros_up", "nonzeros_down", "bits_up", "bits_down",
                  "entries_up"):
        assert getattr(got, field) == getattr(want, field), field
    assert got.entropy_up == pytest.approx(want.entropy_up, rel=1e-12)


@pytest.mark.parametrize("bad_steps", [np.array([1.5, 2.0, 1.0, 1.0]), np.array([1, -1, 1, 1]),
                                       np.array([[1, 1, 1, 1]]), [1, 1, np.nan, 1]])
def test_full_participation_keeps_its_step_checks_for_overridden_nominal_steps(bad_steps):
    """participants(None) builds full participation directly only from an int64 vector of
    steps >= 0; anything else an algorithm's nominal_steps returns goes through
    FullParticipation.draw and gets its typed error."""

    @dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
    class OddSteps(FedAvg):
        def nominal_steps(self, problem):
            return bad_steps

    fed = QuadraticFederation(np.stack([np.eye(3)] * 4), np.ones((4, 3)))
    with pytest.raises(InvalidHyperparameterError, match="local_steps"):
        OddSteps().participants(fed, None, np.random.default_rng(0), 0)


def test_full_participation_built_directly_equals_the_draw():
    from fltheory.participation import FullParticipation
    fed = QuadraticFederation(np.stack([np.eye(3)] * 5), np.ones((5, 3)))
    alg = FedAvg(local_steps=np.array([3, 1, 2, 7, 1]))
    rng = np.random.default_rng(0)
    direct = alg.participants(fed, None, rng, 4)
    drawn = FullParticipation().draw(rng, 4, alg.nominal_steps(fed))
    for a, b in ((direct.clients, drawn.clients), (direct.steps, drawn.steps)):
        assert a.dtype == b.dtype == np.int64
        np.testing.assert_array_equal(a, b)
    direct.steps[:] = 0                                  # the round's own copy: later draws unaffected
    np.testing.assert_array_equal(alg.participants(fed, None, rng, 5).steps, [3, 1, 2, 7, 1])


# --- the per-(algorithm, federation) plan of full participation ------------------------------

def _quadratic(N, d, seed):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, d, d))
    return QuadraticFederation(B @ np.swapaxes(B, 1, 2) / d + 0.5 * np.eye(d), rng.standard_normal((N, d)))


@pytest.mark.parametrize("make", [
    lambda: FedAvg(lr=0.05, local_steps=3, aggregation="weights"),
    lambda: FedAvg(lr=0.05, local_steps=2, aggregation="uniform", server_lr=0.5),
    lambda: __import__("fltheory.algorithms.scaffold", fromlist=["Scaffold"]).Scaffold(lr=0.05, local_steps=3),
    lambda: __import__("fltheory.algorithms.fedprox", fromlist=["FedProx"]).FedProx(lr=0.05, local_steps=3, mu=0.2),
    lambda: __import__("fltheory.algorithms.fedprox", fromlist=["FedProx"]).FedProx(mu=0.2, solver="exact"),
    lambda: FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.adam(0.1), local_steps=3),
    lambda: FedOpt(client_optimizer=optim.sgd(0.05), server_optimizer=optim.sgd(1.0), local_steps=2,
                   client_lr_scale=0.5),
])
def test_cached_full_participation_rounds_equal_the_drawn_ones_bit_for_bit(make):
    """One algorithm object alternating between two federations (different N, weights) with
    participation=None (the cached plan) gives exactly the states of rounds with an explicit
    FullParticipation() (the draw path, nothing cached): the plan is never stale."""
    from fltheory.participation import FullParticipation
    feds = [_quadratic(5, 3, 1), _quadratic(7, 3, 2)]
    feds[1] = QuadraticFederation(feds[1].H, feds[1].e, weights=np.arange(1.0, 8.0) / 28.0)
    alg, rng = make(), np.random.default_rng(0)
    cached = [alg.init(f, np.zeros(3), rng) for f in feds]
    drawn = list(cached)
    for _ in range(3):
        for j, f in enumerate(feds):
            cached[j], info = alg.round(cached[j], f, None, rng)
            drawn[j], ref = make().round(drawn[j], f, FullParticipation(), rng)
            np.testing.assert_array_equal(info.clients, ref.clients)
            np.testing.assert_array_equal(info.steps, ref.steps)
            for name, value in vars(cached[j]).items():
                if isinstance(value, np.ndarray):
                    assert value.tobytes() == getattr(drawn[j], name).tobytes(), name


@pytest.mark.parametrize("make", [
    lambda: FedAvg(lr=0.05, local_steps=3, aggregation="weights"),
    lambda: __import__("fltheory.algorithms.fedprox", fromlist=["FedProx"]).FedProx(lr=0.05, local_steps=3, mu=0.2),
    lambda: FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.sgd(1.0), local_steps=3),
])
def test_cached_rounds_see_weights_changed_in_place(make):
    """A federation's weights changed in place between rounds (the arrays are writable): the
    cached plan must not keep the old ones (review finding: it did, silently)."""
    from fltheory.participation import FullParticipation
    fed = QuadraticFederation(_quadratic(5, 3, 1).H, _quadratic(5, 3, 1).e, weights=np.arange(1.0, 6.0))
    alg, rng = make(), np.random.default_rng(0)
    cached = drawn = alg.init(fed, np.zeros(3), rng)
    for t in range(3):
        cached, _ = alg.round(cached, fed, None, rng)
        drawn, _ = make().round(drawn, fed, FullParticipation(), rng)
        assert cached.x.tobytes() == drawn.x.tobytes(), t
        fed.weights[:] = np.roll(fed.weights, 1)           # in place, between rounds


def test_cached_plan_sees_a_list_hyperparameter_changed_in_place():
    """A list given as local_steps and changed in place between rounds (review finding: the
    cached plan kept the old steps); only immutable hyperparameters are cached."""
    for make in (lambda s: FedAvg(lr=0.05, local_steps=s), lambda s: EFL(lr=0.05, local_steps=s),
                 lambda s: FedOpt(client_optimizer=optim.sgd(0.05), server_optimizer=optim.sgd(1.0), local_steps=s)):
        fed = _quadratic(4, 3, 3)
        alg = make([2, 2, 2, 2])
        rng = np.random.default_rng(0)
        state, _ = alg.round(alg.init(fed, np.zeros(3), rng), fed, None, rng)
        alg.local_steps[0] = 5
        _, info = alg.round(state, fed, None, rng)
        assert info.steps.tolist() == [5, 2, 2, 2], type(alg).__name__


def test_cached_plan_respects_an_overridden_participants():
    """A subclass overriding participants() is called with participation=None (review finding:
    the cached plan bypassed it)."""
    from fltheory.algorithms.scaffold import Scaffold

    for base in (FedAvg, Scaffold, FedOpt):
        class DropLast(base):                              # type: ignore[misc, valid-type]
            def participants(self, problem, participation, rng, t):
                part = super().participants(problem, participation, rng, t)
                return type(part)(part.clients[:-1], part.steps[:-1])

        kwargs = ({"client_optimizer": optim.sgd(0.05), "server_optimizer": optim.sgd(1.0)} if base is FedOpt
                  else {"lr": 0.05})
        alg, fed, rng = DropLast(local_steps=2, **kwargs), _quadratic(4, 3, 3), np.random.default_rng(0)
        _, info = alg.round(alg.init(fed, np.zeros(3), rng), fed, None, rng)
        assert info.clients.tolist() == [0, 1, 2], base.__name__


def test_replaced_full_participants_do_not_carry_stale_bounds():
    """dataclasses.replace of the shared full participants with other steps gives bounds None
    (review finding: the old bounds were carried over and trusted by the local loop, so a
    client given 0 steps still took 2)."""
    from fltheory.participation import Participation, full_participants

    class Straggle(Participation):
        def draw(self, rng, t, local_steps):
            part = full_participants(len(local_steps), int(local_steps[0]))
            steps = np.array(part.steps)
            steps[0] = 0
            return dataclasses.replace(part, steps=steps)

    assert Straggle().draw(None, 0, np.array([2] * 4)).bounds is None
    fed, alg = _quadratic(4, 3, 3), FedAvg(lr=0.05, local_steps=2)
    _, info = alg.round(alg.init(fed, np.ones(3), None), fed, Straggle(), None)
    assert info.communication.nonzeros_up == 9             # client 0 sends a zero change


def test_cached_full_participants_are_read_only_and_match_the_draw():
    from fltheory.participation import FullParticipation
    fed = _quadratic(4, 2, 0)
    alg = FedAvg(lr=0.1, local_steps=3)
    part = alg.participants(fed, None, np.random.default_rng(0), 0)
    ref = FullParticipation().draw(np.random.default_rng(0), 0, alg.nominal_steps(fed))
    np.testing.assert_array_equal(part.clients, ref.clients)
    np.testing.assert_array_equal(part.steps, ref.steps)
    assert part.bounds == (3, 3) and part.identity
    with pytest.raises(ValueError):
        part.steps[0] = 0
    with pytest.raises(ValueError):
        part.clients[0] = 1


def test_plan_is_not_used_for_array_hyperparameters_or_overridden_nominal_steps():
    """Array hyperparameters (mutable) and a nominal_steps of a class that does not declare
    _constant_nominal_steps are never cached: a later change is seen."""
    fed = _quadratic(4, 2, 0)
    steps = np.array([1, 2, 3, 4])
    alg = FedAvg(lr=0.1, local_steps=steps)
    assert alg.participants(fed, None, None, 0).steps.tolist() == [1, 2, 3, 4]
    steps[0] = 5                                        # mutating the caller's array is seen
    assert alg.participants(fed, None, None, 1).steps.tolist() == [5, 2, 3, 4]

    counter = [0]

    @dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
    class Growing(FedAvg):
        def nominal_steps(self, problem):
            counter[0] += 1
            return np.full(problem.n_clients, counter[0], dtype=np.int64)

    g = Growing(local_steps=1)
    assert g.participants(fed, None, None, 0).steps.tolist() == [1] * 4
    assert g.participants(fed, None, None, 1).steps.tolist() == [2] * 4


def test_algorithm_with_a_plan_pickles_and_copies():
    import copy
    import pickle
    fed = _quadratic(4, 2, 0)
    alg = FedAvg(lr=0.1, local_steps=2)
    state = alg.init(fed, np.zeros(2), None)
    state, _ = alg.round(state, fed, None, None)
    for clone in (pickle.loads(pickle.dumps(alg)), copy.deepcopy(alg), copy.copy(alg)):
        assert clone.hyperparameters() == alg.hyperparameters()
        again, _ = clone.round(alg.init(fed, np.zeros(2), None), fed, None, None)
        assert again.x.tobytes() == state.x.tobytes()


def test_round_with_a_negative_counter_is_a_typed_error_on_the_cached_path():
    fed = _quadratic(4, 2, 0)
    alg = FedAvg(lr=0.1, local_steps=2)
    state = alg.init(fed, np.zeros(2), None)
    alg.round(state, fed, None, None)                     # the plan exists now
    with pytest.raises(InvalidHyperparameterError, match="t must be an integer >= 0"):
        alg.round(dataclasses.replace(state, t=-1), fed, None, None)
