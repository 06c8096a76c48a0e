"""Local-step gradients of logistic clients shared with worker processes
(``LogisticFederation.with_processes``): the same bits as one thread for every
oracle call and every plain local descent, typed errors, no files left behind,
forked children and pickles."""

from __future__ import annotations

import glob
import multiprocessing
import os
import pickle

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, FedDyn, FedOpt, FedProx, Scaffold, run
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError, WorkerProcessError
from fltheory.optim import adagrad, sgd
from fltheory.participation import UniformSampling
from fltheory.problems import LogisticFederation
from fltheory.problems import _process_shares as shares_module
from fltheory.problems import logistic as logistic_module
from fltheory.problems.synthetic import synthetic_fedprox

from .problem_refs import make_logistic
from .share_counting import count_remote_calls


@pytest.fixture
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Share even tiny steps (the default shares only steps of >= 2e6 flops)."""
    monkeypatch.setattr(logistic_module, "_MIN_THREADED_FLOPS", 0.0)
    # and keep them shared: the workers of tiny shares are slower than this process, which would
    # otherwise compute them itself after the first call (SharedRowGradient._judge)
    monkeypatch.setattr(shares_module, "_SLOWER", float("inf"))


def _federation(kind: str) -> LogisticFederation:
    if kind == "multinomial unequal sizes":
        return synthetic_fedprox(1.0, 1.0, seed=2, reg=1e-3, n_devices=12, dim=5, n_classes=3).train
    return make_logistic(6, 6, 4, 30, n_classes=None if kind == "binary" else 3, reg=0.1)


@pytest.mark.parametrize("kind", ["binary", "multinomial", "multinomial unequal sizes"])
@pytest.mark.parametrize("clients", [None, np.array([3, 1, 1, 0, 5, 2])])
@pytest.mark.parametrize("processes", [2, 3])
def test_shared_bound_gradient_gives_the_bits_of_client_grad(any_size, kind, clients, processes):
    fed = _federation(kind)
    idx = np.arange(fed.n_clients) if clients is None else clients
    X = 0.5 * np.random.default_rng(8).standard_normal((idx.shape[0], fed.dim))
    want = fed.client_grad(X, idx)
    grad = fed.with_processes(processes).row_gradient(idx, None)
    if clients is None:
        assert isinstance(grad, shares_module.SharedRowGradient) and len(grad.remote) == processes - 1
    else:                                                 # not a run a, a+1, ...: stays in this process
        assert not isinstance(grad, shares_module.SharedRowGradient)
    np.testing.assert_array_equal(grad(X), want)
    out = np.full_like(X, np.nan)
    assert grad(X, out) is out
    np.testing.assert_array_equal(out, want)
    X2 = X[::-1].copy()                                   # new points: nothing is kept between calls
    np.testing.assert_array_equal(grad(X2), fed.client_grad(X2, idx))


ALGORITHMS = [
    FedAvg(lr=0.3, local_steps=3),
    FedProx(lr=0.3, local_steps=3, mu=0.5),
    Scaffold(lr=0.2, local_steps=3),
    FedDyn(alpha=0.1, solver="gd", lr=0.2, local_steps=3),
    FedOpt(client_optimizer=adagrad(0.2), server_optimizer=sgd(1.0), local_steps=3),
    FedAvg(lr=np.linspace(0.1, 0.4, 12), local_steps=np.arange(1, 13) % 4 + 1),
]


@pytest.mark.parametrize("alg", ALGORITHMS, ids=lambda a: type(a).__name__)
@pytest.mark.parametrize("participation", [None, "subset"])
def test_rounds_with_worker_processes_are_the_bits_of_one_thread(any_size, alg, participation):
    fed = _federation("multinomial unequal sizes")
    kw = {} if participation is None else {"participation": UniformSampling(5)}
    one = run(alg, fed, 3, seed=4, metrics=(), **kw)
    two = run(alg, fed.with_processes(2), 3, seed=4, metrics=(), **kw)
    np.testing.assert_array_equal(one.x, two.x)


def test_plain_descent_runs_as_one_message_per_share(any_size, monkeypatch):
    """FedAvg's local steps go through ``map_rows`` (all steps of a share at once), not one
    remote call per step."""
    fed = _federation("multinomial").with_processes(2)
    calls = count_remote_calls(monkeypatch)
    run(FedAvg(lr=0.3, local_steps=5), fed, 2, metrics=())
    assert calls == {"map": 2, "step": 0}


def test_with_processes_returns_a_copy_and_refuses_bad_counts():
    fed = make_logistic(4, 6, 3, 30, n_classes=None, reg=0.1)
    two = fed.with_processes(2)
    assert two._processes == 2 and two._threads == 1 and fed._processes == 1
    assert two.with_threads(2)._processes == 1 and fed.with_threads(3).with_processes(2)._threads == 1
    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(InvalidHyperparameterError, match="processes must be an integer >= 1"):
            fed.with_processes(bad)


def test_small_steps_stay_in_this_process():
    fed = make_logistic(4, 6, 3, 30, n_classes=None, reg=0.1).with_processes(2)   # far below 2e6 flops
    assert not isinstance(fed.row_gradient(None, None), shares_module.SharedRowGradient)


def test_points_of_the_wrong_shape_are_refused(any_size):
    fed = _federation("multinomial")
    grad = fed.with_processes(2).row_gradient(None, None)
    for bad in (np.zeros((fed.n_clients - 1, fed.dim)), np.zeros((fed.n_clients, fed.dim + 1)),
                np.zeros(fed.dim)):
        with pytest.raises(InvalidProblemError, match="points of shape"):
            grad(bad)
    with pytest.raises(InvalidProblemError, match="map_rows needs"):
        grad.map_rows(lambda *a: None, np.zeros((fed.n_clients + 1, fed.dim)), ())


def _raise_in_worker(grad, Y, *args):
    raise OverflowError(f"raised on {Y.shape[0]} rows")


def test_an_error_in_the_worker_is_raised_here_and_the_worker_goes_on(any_size):
    fed = _federation("multinomial")
    grad = fed.with_processes(2).row_gradient(None, None)
    Y = 0.1 * np.ones((fed.n_clients, fed.dim))
    with pytest.raises(OverflowError, match="raised on"):
        grad.map_rows(_raise_in_worker, Y, ())
    np.testing.assert_array_equal(grad(Y), fed.client_grad(Y))


def test_a_worker_dying_during_a_call_is_a_typed_error_and_the_share_moves_to_a_new_one(any_size):
    fed = _federation("multinomial")
    grad = fed.with_processes(2).row_gradient(None, None)
    X = 0.2 * np.ones((fed.n_clients, fed.dim))
    share = grad.remote[0]
    worker = share._worker

    def kill_it() -> None:                                # the caller's own share, while the worker computes
        worker.process.kill()
        worker.process.wait()
    with pytest.raises(WorkerProcessError, match=r"share worker process .* is gone"):
        share(X, np.empty_like(X), kill_it)
    assert not worker.alive()
    np.testing.assert_array_equal(grad(X), fed.client_grad(X))          # registered again, same bits
    assert share._worker is not worker and share._worker.alive()


def test_a_killed_or_stopped_worker_is_replaced_at_the_next_call(any_size):
    fed = _federation("multinomial")
    grad = fed.with_processes(2).row_gradient(None, None)
    X = np.zeros((fed.n_clients, fed.dim))
    first = grad.remote[0]._worker
    first.process.kill()
    first.process.wait()
    np.testing.assert_array_equal(grad(X), fed.client_grad(X))
    second = grad.remote[0]._worker
    assert second is not first
    shares_module.shutdown_workers()
    np.testing.assert_array_equal(grad(X), fed.client_grad(X))
    assert grad.remote[0]._worker is not second


def test_an_interrupt_while_waiting_for_the_worker_kills_it_and_the_next_call_is_exact(any_size, monkeypatch):
    """Ctrl-C in the caller between a message and its reply leaves the socket out of step: the
    worker is killed (not reused: its late answer would be read as the next call's), and the
    next call registers the share on a new worker."""
    fed = _federation("multinomial")
    grad = fed.with_processes(2).row_gradient(None, None)
    X = 0.1 * np.ones((fed.n_clients, fed.dim))
    grad(X)
    worker = grad.remote[0]._worker
    real_await = shares_module._await
    hits = [0]

    def interrupted(conn):
        hits[0] += 1
        if hits[0] == 1:
            raise KeyboardInterrupt
        real_await(conn)
    monkeypatch.setattr(shares_module, "_await", interrupted)
    with pytest.raises(KeyboardInterrupt):
        grad(X)
    assert not worker.alive() and worker.process.poll() is not None
    for _ in range(3):
        np.testing.assert_array_equal(grad(X), fed.client_grad(X))


def test_workers_run_in_their_own_session_with_absolute_paths(any_size):
    """A terminal's Ctrl-C goes to the caller's process group only, and a worker's import path
    does not depend on its current directory."""
    fed = _federation("binary")
    grad = fed.with_processes(2).row_gradient(None, None)
    worker = grad.remote[0]._worker
    assert os.getsid(worker.process.pid) == worker.process.pid != os.getsid(0)
    path = shares_module._search_path()
    assert path[0] == os.path.dirname(os.path.dirname(shares_module._package_file()))
    assert all(os.path.isabs(p) for p in path)


def test_a_worker_that_imports_another_fltheory_refuses_to_serve(any_size, monkeypatch):
    shares_module.shutdown_workers()
    monkeypatch.setattr(shares_module, "_package_file", lambda: "/elsewhere/fltheory/__init__.py")
    fed = _federation("binary")
    try:
        with pytest.raises(WorkerProcessError, match="exit code 3"):
            fed.with_processes(2).row_gradient(None, None)
    finally:
        shares_module.shutdown_workers()


def test_no_shared_files_are_left_behind(any_size):
    before = set(glob.glob(os.path.join(shares_module._shared_dir() or "/tmp", "fltheory-share-*")))
    fed = _federation("binary").with_processes(2)
    fed.row_gradient(None, None)(np.zeros((fed.n_clients, fed.dim)))
    after = set(glob.glob(os.path.join(shares_module._shared_dir() or "/tmp", "fltheory-share-*")))
    assert after <= before


def _child_gradient(grad, X, queue):
    queue.put(grad(X))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_computes_the_workers_rows_itself(any_size):
    fed = _federation("multinomial")
    grad = fed.with_processes(2).row_gradient(None, None)
    X = 0.3 * np.random.default_rng(1).standard_normal((fed.n_clients, fed.dim))
    grad(X)                                               # the worker is running
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_gradient, args=(grad, X, queue))
    child.start()
    got = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    np.testing.assert_array_equal(got, fed.client_grad(X))
    np.testing.assert_array_equal(grad(X), got)          # the parent's worker still answers


def test_federation_pickles_after_binding_shared_gradients(any_size):
    fed = _federation("multinomial").with_processes(2)
    X = np.full((fed.n_clients, fed.dim), 0.2)
    fed.row_gradient(None, None)(X)
    back = pickle.loads(pickle.dumps(fed))
    assert back._processes == 2
    np.testing.assert_array_equal(back.row_gradient(None, None)(X), fed.client_grad(X))


def test_shutdown_stops_the_workers_and_they_start_again(any_size):
    fed = _federation("binary")
    X = np.zeros((fed.n_clients, fed.dim))
    old = fed.with_processes(2).row_gradient(None, None)
    old(X)
    process = old.remote[0]._worker.process
    shares_module.shutdown_workers()
    assert process.wait(timeout=10) == 0
    fresh = fed.with_processes(3).row_gradient(None, None)
    np.testing.assert_array_equal(fresh(X), fed.client_grad(X))


def test_a_share_collected_while_its_worker_is_busy_is_dropped_later(any_size):
    """A finaliser that runs while this thread holds the worker's lock (garbage collected
    in the middle of a call) must not wait for the lock: the drop is sent with the next message."""
    fed = _federation("multinomial")
    X = np.zeros((fed.n_clients, fed.dim))
    keep = fed.with_processes(2).row_gradient(None, None)
    doomed = fed.with_processes(2).with_threads(1).with_processes(2).row_gradient(None, None)
    worker = keep.remote[0]._worker
    assert doomed.remote[0]._worker is worker
    job = doomed.remote[0].job
    with worker.lock:
        del doomed                                        # the finaliser runs now, with the lock taken
        assert worker.pending == [job]
    np.testing.assert_array_equal(keep(X), fed.client_grad(X))   # sends the drop first, then the call
    assert worker.pending == []
