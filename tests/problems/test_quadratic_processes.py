"""Plain local steps of quadratic clients shared with worker processes
(``QuadraticFederation.with_processes``): the same bits as one thread for every
algorithm and participation, single calls computed here, copies and pickles."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, FedDyn, FedOpt, FedProx, Scaffold, run
from fltheory.errors import InvalidHyperparameterError
from fltheory.optim import Optimizer, adagrad, adam, sgd
from fltheory.participation import Bernoulli, IncompleteSteps, UniformSampling, UniformSteps
from fltheory.problems import QuadraticFederation, random_quadratic
from fltheory.problems import _process_shares as shares_module
from fltheory.problems import quadratic as quadratic_module

from .share_counting import count_remote_calls


@pytest.fixture
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Share even tiny federations (the default shares Hessians of >= ~1 MB)."""
    monkeypatch.setattr(quadratic_module, "_MIN_SHARED_FLOATS", 0)
    # and keep them shared: the workers of tiny shares are slower than this process, which would
    # otherwise compute them itself after the first call (SharedRowGradient._judge)
    monkeypatch.setattr(shares_module, "_SLOWER", float("inf"))


def _federation(n: int = 13, d: int = 6) -> QuadraticFederation:
    return random_quadratic(n, d, L=4.0, mu=0.5, heterogeneity=1.0, seed=3,
                            weights=np.linspace(1.0, 2.0, n))


ALGORITHMS = [
    FedAvg(lr=0.1, local_steps=4),
    FedProx(lr=0.1, local_steps=4, mu=0.5),
    Scaffold(lr=0.1, local_steps=4),
    Scaffold(lr=0.1, local_steps=4, option="I"),
    FedDyn(alpha=0.2, solver="gd", lr=0.1, local_steps=4),
    FedOpt(client_optimizer=adagrad(0.1), server_optimizer=sgd(1.0), local_steps=4),
    FedAvg(lr=np.linspace(0.05, 0.2, 13), local_steps=np.arange(13) % 3 + 1),
]
PARTICIPATION = {
    "full": None,
    "uniform": UniformSampling(6),
    "bernoulli": Bernoulli(np.full(13, 0.7)),
    "incomplete": IncompleteSteps(UniformSampling(8), UniformSteps()),
}


@pytest.mark.parametrize("alg", ALGORITHMS, ids=lambda a: type(a).__name__)
@pytest.mark.parametrize("participation", list(PARTICIPATION))
@pytest.mark.parametrize("processes", [2, 3])
def test_rounds_with_worker_processes_are_the_bits_of_one_thread(any_size, alg, participation, processes):
    fed = _federation()
    kw = {} if PARTICIPATION[participation] is None else {"participation": PARTICIPATION[participation]}
    one = run(alg, fed, 3, seed=5, **kw)
    many = run(alg, fed.with_processes(processes), 3, seed=5, **kw)
    np.testing.assert_array_equal(one.x, many.x)
    np.testing.assert_array_equal(one.loss, many.loss)


def test_plain_rounds_use_the_workers_once_per_round(any_size, monkeypatch):
    fed = _federation().with_processes(2)
    calls = count_remote_calls(monkeypatch)
    run(Scaffold(lr=0.1, local_steps=5), fed, 3, metrics=())
    assert calls == {"map": 3, "step": 0}


def test_single_calls_and_the_bound_gradient_give_client_grad_bits(any_size):
    fed = _federation()
    grad = fed.with_processes(3).row_gradient(None, None)
    assert isinstance(grad, shares_module.SharedRowGradient) and len(grad.remote) == 2
    X = np.random.default_rng(2).standard_normal((fed.n_clients, fed.dim))
    np.testing.assert_array_equal(grad(X), fed.client_grad(X))
    idx = np.array([4, 2, 2, 9, 0, 12])
    sub = fed.with_processes(2).row_gradient(idx, None)
    assert not isinstance(sub, shares_module.SharedRowGradient)     # not a run: stays in this process
    np.testing.assert_array_equal(sub(X[:6]), fed.client_grad(X[:6], idx))
    run_of = fed.with_processes(2).row_gradient(np.arange(3, 11), None)
    assert isinstance(run_of, shares_module.SharedRowGradient)
    np.testing.assert_array_equal(run_of(X[:8]), fed.client_grad(X[:8], np.arange(3, 11)))


def test_small_federations_and_lists_stay_in_this_process():
    fed = _federation().with_processes(2)                 # 13 x 6 x 6 floats: far below ~1 MB
    assert not isinstance(fed.row_gradient(None, None), shares_module.SharedRowGradient)
    assert fed.worker_processes == 2 and _federation().worker_processes == 1
    assert fed.without_client(0).worker_processes == 2
    assert fed.with_client(_federation(3), weight=0.2).worker_processes == 2


def test_bound_shared_gradients_are_cached_and_left_out_of_copies_and_pickles(any_size):
    fed = _federation().with_processes(2)
    first = fed.row_gradient(None, None)
    assert fed.row_gradient(None, None) is first
    back = pickle.loads(pickle.dumps(fed))
    assert "_shared_gradients" not in back.__dict__ and back.worker_processes == 2
    X = np.ones((fed.n_clients, fed.dim))
    np.testing.assert_array_equal(back.row_gradient(None, None)(X), fed.client_grad(X))
    assert fed.with_processes(3).row_gradient(None, None) is not first


def test_with_processes_refuses_bad_counts():
    fed = _federation()
    for bad in (0, -2, 2.0, True, "2", None):
        with pytest.raises(InvalidHyperparameterError, match="processes must be an integer >= 1"):
            fed.with_processes(bad)


def test_fused_optimizer_steps_run_in_the_workers_with_the_bits_of_one_thread(any_size, monkeypatch):
    """FedOpt's client optimizer (built by fltheory.optim, so picklable) takes all its fused
    steps in the shares; persistent client state (``client_state="persist"``, ``"synchronise"``)
    comes back row by row."""
    calls = count_remote_calls(monkeypatch)
    fed = _federation()
    for state in ("restart", "persist", "synchronise"):
        alg = FedOpt(client_optimizer=adam(0.05), server_optimizer=sgd(1.0), local_steps=3, client_state=state)
        one = run(alg, fed, 4, seed=1, metrics=())
        before = calls["map"]
        two = run(alg, fed.with_processes(2), 4, seed=1, metrics=())
        assert calls["map"] - before == 4
        np.testing.assert_array_equal(one.x, two.x)


def test_an_optimizer_built_by_hand_or_changed_steps_in_this_process(any_size, monkeypatch):
    calls = count_remote_calls(monkeypatch)
    base = adagrad(0.1)
    by_hand = Optimizer(base.init, base.update, base.precond, "by hand", base.fused)   # no recipe
    changed = base._replace(fused=adam(0.1).fused)          # its recipe would rebuild plain adagrad
    fed = _federation()
    for opt in (by_hand, changed):
        alg = FedOpt(client_optimizer=opt, server_optimizer=sgd(1.0), local_steps=3)
        one = run(alg, fed, 3, metrics=())
        two = run(alg, fed.with_processes(2), 3, metrics=())
        np.testing.assert_array_equal(one.x, two.x)
    assert calls["map"] == 0


@pytest.mark.parametrize("alg", [ALGORITHMS[2], ALGORITHMS[6],
                                 FedOpt(client_optimizer=adam(0.05), server_optimizer=sgd(1.0), local_steps=3,
                                        client_state="persist")], ids=lambda a: type(a).__name__)
def test_shares_cut_into_cache_blocks_give_the_same_bits(any_size, monkeypatch, alg):
    """Each share runs its rows block by block (8 MB of Hessians by default; here 2-3 clients)."""
    fed = _federation()
    monkeypatch.setattr(quadratic_module, "_SHARE_BLOCK_BYTES", 2 * 8 * fed.dim * fed.dim + 8)
    calls = count_remote_calls(monkeypatch)
    shared = fed.with_processes(2)
    grad = shared.row_gradient(np.arange(fed.n_clients), None)
    assert grad.remote[0].rows.shape[0] > 2 and grad._local is None
    one = run(alg, fed, 3, seed=2, metrics=())
    two = run(alg, shared, 3, seed=2, metrics=())
    assert calls["map"] == 3 and grad._local.block_rows == 2
    np.testing.assert_array_equal(one.x, two.x)


def test_row_gradient_of_all_clients_by_none_before_any_run(monkeypatch):
    """``row_gradient(None, ...)`` (all clients) right after import: the remembered-run cache
    starts empty, not at None (which compared equal to the selection None and failed)."""
    monkeypatch.setattr(quadratic_module, "_LAST_RUN", [(quadratic_module._NOTHING, 0)])
    fed = _federation()
    X = np.ones((fed.n_clients, fed.dim))
    np.testing.assert_array_equal(fed.row_gradient(None, None)(X), fed.client_grad(X))


def test_calls_slower_than_this_process_move_here_for_a_doubling_while(any_size, monkeypatch):
    """Every call through the workers judged too slow (as when another process holds their
    core): three in a row send the next 8, then 16, ... calls here (every share computed in
    this process, the same bits); a call that pays starts again at 8."""
    monkeypatch.setattr(shares_module, "_SLOWER", 0.0)
    calls = count_remote_calls(monkeypatch)
    fed = _federation()
    shared = fed.with_processes(2)
    grad = shared.row_gradient(np.arange(fed.n_clients), None)
    alg = FedAvg(lr=0.1, local_steps=4)
    one = run(alg, fed, 30, seed=3, metrics=())
    two = run(alg, shared, 30, seed=3, metrics=())
    np.testing.assert_array_equal(one.x, two.x)
    # rounds 1, 2, 3 (three in a row: the next 8 here), 12, 13, 14 (the next 16 here) go to the workers
    assert calls["map"] == 6
    assert grad.here == 0 and grad._backoff == 32 and grad._slow == 0
    run(alg, shared, 3, metrics=())
    assert calls["map"] == 9 and grad.here == 32 and grad._backoff == 64
    monkeypatch.setattr(shares_module, "_SLOWER", float("inf"))
    grad.here = 0
    run(alg, shared, 1, metrics=())
    assert calls["map"] == 10 and grad._backoff == shares_module._BACKOFF_START and grad._slow == 0


def test_a_state_class_that_does_not_pickle_keeps_the_fused_steps_here():
    """Worker processes take an optimizer's fused steps only when its state class pickles
    (checked once per class and remembered)."""
    from typing import NamedTuple

    from fltheory.algorithms.local import steps as steps_module
    from fltheory.optim.adaptive import AdaptiveState

    class LocalState(NamedTuple):          # defined in a function: pickle cannot find it by name
        a: int

    assert not steps_module._pickles(LocalState) and steps_module._PICKLES[LocalState] is False
    assert steps_module._pickles(AdaptiveState) and steps_module._PICKLES[AdaptiveState] is True
    assert not steps_module._shared_steps(adagrad(0.1), LocalState(1))
    assert steps_module._shared_steps(adagrad(0.1), adagrad(0.1).init(np.zeros((2, 3))))
    assert not steps_module._shared_steps(None, None)


@pytest.mark.parametrize("alg", [ALGORITHMS[0], ALGORITHMS[2], ALGORITHMS[5]], ids=lambda a: type(a).__name__)
def test_batches_the_threads_split_run_on_the_threads_not_in_the_workers(any_size, monkeypatch, alg):
    """The workers take a round's steps only where the local loop's threads would run one
    block; a batch of at least ``_SPLIT_BYTES`` of client data runs in blocks on the threads,
    whose views of the client data have no workers: no call reaches a worker, same bits."""
    from fltheory.algorithms.local import blocking

    fed = _federation()
    shared = fed.with_processes(2)
    one = run(alg, fed, 3, seed=4, metrics=())
    monkeypatch.setattr(blocking, "_THREADS", [2])           # whatever this machine's core count
    monkeypatch.setattr(blocking, "_SPLIT_BYTES", fed.client_data_bytes() * fed.n_clients)
    assert len(blocking.row_blocks(shared, fed.n_clients, fed.dim)) == 2
    view = shared.client_block(0, 5)
    assert view is not None and view.worker_processes == 1 and "_shared_gradients" not in vars(view)
    calls = count_remote_calls(monkeypatch)
    two = run(alg, shared, 3, seed=4, metrics=())
    assert calls == {"map": 0, "step": 0}
    np.testing.assert_array_equal(one.x, two.x)
    monkeypatch.setattr(blocking, "_SPLIT_BYTES", fed.client_data_bytes() * fed.n_clients + 1)
    three = run(alg, shared, 3, seed=4, metrics=())           # one block: the workers take the steps
    assert calls["map"] == 3
    np.testing.assert_array_equal(one.x, three.x)


def test_with_one_thread_the_workers_take_every_batch(any_size, monkeypatch):
    """``set_num_threads(1)``: a batch the thread loop would cut into blocks (more than
    ``_BLOCK_BYTES``) goes to the workers, which run both cores; same bits."""
    from fltheory.algorithms.local import blocking

    fed = _federation()
    alg = ALGORITHMS[0]
    one = run(alg, fed, 3, seed=6, metrics=())
    monkeypatch.setattr(blocking, "_THREADS", [1])
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", fed.client_data_bytes() * 4)
    assert len(blocking.row_blocks(fed, fed.n_clients, fed.dim)) == 4
    calls = count_remote_calls(monkeypatch)
    two = run(alg, fed.with_processes(2), 3, seed=6, metrics=())
    assert calls["map"] == 3
    np.testing.assert_array_equal(one.x, two.x)
