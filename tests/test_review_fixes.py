"""Regressions for defects a review found in this session's changes: a forked child of a process
that used a threaded logistic gradient, and whole-number float labels in partition_labels."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from fltheory.nn.datasets import partition_labels
from fltheory.problems import LogisticFederation


def _threaded_federation() -> tuple[LogisticFederation, np.ndarray, np.ndarray]:
    """20 softmax clients of 300 samples: large enough that a local-step gradient uses the pool."""
    rng = np.random.default_rng(0)
    fed = LogisticFederation([rng.normal(size=(300, 30)) for _ in range(20)],
                             [rng.integers(0, 5, size=300) for _ in range(20)], n_classes=5).with_threads(2)
    return fed, np.arange(20), rng.normal(size=(20, fed.dim))


def _child_gradient(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    fed, clients, Y = _threaded_federation()
    queue.put(fed.row_gradient(clients, None)(Y).tobytes())


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")
def test_threaded_logistic_gradient_works_in_a_forked_child():
    """The parent runs a threaded gradient (creating the process-wide pool); a child forked afterwards
    has none of the pool's worker threads and must start its own (it waited for ever before)."""
    fed, clients, Y = _threaded_federation()
    expected = fed.row_gradient(clients, None)(Y).tobytes()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_gradient, args=(queue,))
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung on the inherited thread pool"
    assert queue.get(timeout=5) == expected


def test_partition_labels_accepts_whole_number_float_labels():
    rng = np.random.default_rng(0)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 2])
    for partition in ("iid", "dirichlet", "m_class"):
        a = partition_labels(labels, 3, np.random.default_rng(1), partition=partition)
        b = partition_labels(labels.astype(float), 3, np.random.default_rng(1), partition=partition)
        assert [x.tolist() for x in a] == [x.tolist() for x in b]
    with pytest.raises(ValueError, match="whole-number floats"):
        partition_labels(np.array([0.5, 1.0]), 2, rng)
