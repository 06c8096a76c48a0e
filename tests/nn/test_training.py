"""fltheory.nn.training: the draws of image_setup, the majority accuracy and
train_and_evaluate, against the steps written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, run
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.nn import (
    image_federation,
    image_setup,
    load_image_dataset,
    majority_accuracy,
    mlp,
    train_and_evaluate,
)

pytest.importorskip("sklearn")

KW = {"dataset": "digits", "downsample": 2, "n_clients": 3, "gamma": 0.5, "n_samples": 300}


def _model(side: int):
    return mlp(side * side, 10, hidden=(8,))


def test_image_setup_makes_the_documented_draws_in_order() -> None:
    setup = image_setup(_model, np.random.default_rng(5), **KW)
    rng = np.random.default_rng(5)
    ds = load_image_dataset("digits").downsampled(2)
    partition_seed = int(rng.integers(2**63 - 1))
    fed = image_federation(_model(4), ds, 3, np.random.default_rng(partition_seed), partition="dirichlet",
                           gamma=0.5, n_samples=300)
    x0 = fed.init_params(rng)
    oracle_seed = int(rng.integers(2**63 - 1))
    assert (setup.partition_seed, setup.oracle_seed) == (partition_seed, oracle_seed)
    np.testing.assert_array_equal(setup.x0, x0)
    for i in range(3):
        for split in ("train", "test"):
            np.testing.assert_array_equal(setup.fed.client_data(i, split)[1], fed.client_data(i, split)[1])
    assert setup.dataset.name == "digits@4x4"
    no_seed = image_setup(_model, np.random.default_rng(5), draw_oracle_seed=False, **KW)
    assert no_seed.oracle_seed is None
    np.testing.assert_array_equal(no_seed.x0, x0)


def test_majority_accuracy_is_the_most_frequent_test_label_share() -> None:
    fed = image_setup(_model, np.random.default_rng(1), **KW).fed
    labels = np.concatenate([fed.client_data(i, "test")[1] for i in range(fed.n_clients)])
    counts = np.bincount(labels)
    assert majority_accuracy(fed) == counts.max() / labels.size
    assert 0.1 <= majority_accuracy(fed) < 1.0


def test_train_and_evaluate_is_run_then_accuracy() -> None:
    setup = image_setup(_model, np.random.default_rng(2), **KW)
    fed, mb = setup.fed, setup.fed.with_minibatch(10)
    alg = FedAvg(lr=0.1, local_steps=3)
    hist, acc = train_and_evaluate(alg, fed, mb, 4, setup.x0, setup.oracle_seed)
    ref = run(alg, mb, 4, x0=setup.x0, seed=setup.oracle_seed)
    np.testing.assert_array_equal(np.asarray(hist.x), np.asarray(ref.x))
    assert acc == [fed.accuracy(ref.x[0]), fed.accuracy(ref.x[-1])]


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(InvalidProblemError, match="model must be a callable"):
        image_setup(3, np.random.default_rng(0), **KW)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match=r"model\(side\) must be a Sequential"):
        image_setup(lambda side: None, np.random.default_rng(0), **KW)  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidHyperparameterError, match="rng must be"):
        image_setup(_model, 0, **KW)  # type: ignore[arg-type]
    with pytest.raises(InvalidHyperparameterError, match="draw_oracle_seed must be True or False"):
        image_setup(_model, np.random.default_rng(0), draw_oracle_seed=1, **KW)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="fed must be a NeuralFederation"):
        majority_accuracy(1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="fed must be a NeuralFederation"):
        train_and_evaluate(FedAvg(lr=0.1, local_steps=1), "fed", None, 1, np.zeros(2), 0)  # type: ignore[arg-type]
    setup = image_setup(_model, np.random.default_rng(0), draw_oracle_seed=False, **KW)
    with pytest.raises(InvalidHyperparameterError, match="seed must be a non-negative integer, got None"):
        train_and_evaluate(FedAvg(lr=0.1, local_steps=1), setup.fed, setup.fed, 1, setup.x0, setup.oracle_seed)
