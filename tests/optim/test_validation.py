"""Invalid hyperparameters and shapes raise typed errors naming the value."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError


@pytest.mark.parametrize("make,match", [
    (lambda: optim.sgd(0.0), "lr"),
    (lambda: optim.sgd(-0.1), "lr"),
    (lambda: optim.sgd(float("nan")), "lr"),
    (lambda: optim.sgd("fast"), "lr"),
    (lambda: optim.momentum(0.1, 1.0), "beta"),
    (lambda: optim.momentum(0.1, -0.1), "beta"),
    (lambda: optim.adagrad(0.1, eps=0.0), "eps"),
    (lambda: optim.adagrad(0.1, initial_accumulator=-1.0), "initial_accumulator"),
    (lambda: optim.adam(0.1, b1=1.0), "b1"),
    (lambda: optim.adam(0.1, b2=1.5), "b2"),
    (lambda: optim.adam(0.1, eps=-1e-8), "eps"),
    (lambda: optim.adam(-1.0), "lr"),
    (lambda: optim.yogi(0.1, b2=-0.5), "b2"),
    (lambda: optim.fedadam(0.1, tau=0.0), "eps"),
    (lambda: optim.fedyogi(0.0), "lr"),
    (lambda: optim.fedavgm(1.0, beta=1.0), "beta"),
])
def test_invalid_hyperparameters(make, match):
    with pytest.raises(InvalidHyperparameterError, match=match):
        make()


def test_shapes_checked():
    opt = optim.adam(0.1)
    with pytest.raises(InvalidProblemError, match="params"):
        opt.init(np.zeros(3))
    s = opt.init(np.zeros((2, 3)))
    with pytest.raises(InvalidProblemError, match="grads"):
        opt.update(np.zeros((3, 3)), s, None)
    with pytest.raises(InvalidHyperparameterError, match="clients"):
        opt.init(np.zeros((2, 3)), clients=np.array([0]))


def test_mean_rows_weights_checked():
    s = optim.adam(0.1).init(np.zeros((2, 3)))
    with pytest.raises(InvalidHyperparameterError, match="weights"):
        optim.mean_rows(s, np.array([1.0, 2.0, 3.0]))
    with pytest.raises(InvalidHyperparameterError, match="weights"):
        optim.mean_rows(s, np.array([-1.0, 1.0]))


def test_client_rows_checks_like_client_index_and_remembers_only_immutable_arrays() -> None:
    """``_checks.client_rows``: the errors of ``client_index``; an immutable index array (a read-only
    view of bytes) is remembered once checked, a writable one is checked every call."""
    from fltheory.optim import _checks
    with pytest.raises(InvalidHyperparameterError, match=">= 0"):
        _checks.client_rows(np.array([0, -1]), 2, "here")
    with pytest.raises(InvalidHyperparameterError, match="clients must be"):
        _checks.client_rows(np.array([0, 1, 2]), 2, "here")
    with pytest.raises(InvalidHyperparameterError, match="clients must be"):
        _checks.client_rows(np.array([0.0, 1.0]), 2, "here")
    frozen = np.frombuffer(np.arange(3, dtype=np.int64).tobytes(), dtype=np.int64)
    _checks.client_rows(frozen, 3, "here")
    assert _checks._KNOWN_CLIENTS[0][0] is frozen
    with pytest.raises(InvalidHyperparameterError, match="clients must be"):
        _checks.client_rows(frozen, 4, "here")          # the remembered array, another row count
    writable = np.arange(3)
    _checks.client_rows(writable, 3, "here")
    assert _checks._KNOWN_CLIENTS[0][0] is frozen
    writable[1] = -5
    with pytest.raises(InvalidHyperparameterError, match=">= 0"):
        _checks.client_rows(writable, 3, "here")
    with pytest.raises(InvalidHyperparameterError, match=">= 0"):
        optim.adagrad(0.1).init(np.zeros((3, 2)), writable)
