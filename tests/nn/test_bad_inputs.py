"""Every bad input of the fltheory.nn entry points is a typed error naming the
argument (issue 16, item 3): model builders, the layout, partitions and the
federation constructors, data loaders and trajectory constants."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import FLTheoryError, InvalidHyperparameterError, InvalidProblemError
from fltheory.nn import (
    Dense,
    ParamLayout,
    ParamSpec,
    ReLU,
    Sequential,
    cnn,
    federation_from_partition,
    image_federation,
    load_image_dataset,
    mlp,
    split_clients,
    synthetic_fedprox_federation,
    synthetic_next_char,
    trajectory_constants,
)

RNG = np.random.default_rng


@pytest.mark.parametrize("layers", [float("nan"), 3, True, "abc", object(), np.array([1.0])])
def test_sequential_layers_must_be_a_list(layers: object) -> None:
    with pytest.raises(InvalidProblemError, match="layers must be a list"):
        Sequential(layers, (2,))  # type: ignore[arg-type]


def test_sequential_layer_entries_are_layers() -> None:
    with pytest.raises(InvalidProblemError, match=r"layers\[1\] must be a Layer"):
        Sequential([Dense(2), 3], (2,))  # type: ignore[list-item]


@pytest.mark.parametrize("blocks", [float("nan"), 1, "ab", object(), np.ones(3)])
def test_param_layout_blocks_must_be_lists(blocks: object) -> None:
    with pytest.raises(InvalidProblemError, match="blocks must be a list"):
        ParamLayout(blocks)  # type: ignore[arg-type]


def test_param_layout_entries_are_param_specs() -> None:
    with pytest.raises(InvalidProblemError, match=r"blocks\[0\]\[1\] must be a ParamSpec"):
        ParamLayout([[ParamSpec("w", (2,)), 5]])  # type: ignore[list-item]
    with pytest.raises(InvalidProblemError, match=r"blocks\[1\] must be a list"):
        ParamLayout([[ParamSpec("w", (2,))], 1.5])  # type: ignore[list-item]
    assert ParamLayout([[ParamSpec("w", (2, 3))], [ParamSpec("b", (4,))]]).dim == 10


@pytest.mark.parametrize("hidden", [float("nan"), 5, "ab", object(), 1j])
def test_mlp_hidden_must_be_a_sequence(hidden: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match="hidden must be a sequence"):
        mlp(4, 2, hidden=hidden)  # type: ignore[arg-type]


@pytest.mark.parametrize("width", [0, -1, 2.5, float("nan"), True])
def test_mlp_hidden_widths_are_positive_integers(width: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match=r"hidden\[1\]"):
        mlp(4, 2, hidden=(3, width))  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"input_shape": float("nan")}, "input_shape must be"),
    ({"input_shape": (1, 8)}, "input_shape must be"),
    ({"input_shape": "abc"}, "input_shape must be"),
    ({"input_shape": (1, 8, np.nan)}, r"input_shape\[2\]"),
    ({"input_shape": (1, 8, 3)}, "H, W >= 4"),
    ({"channels": 4}, "channels must be two"),
    ({"channels": (4, 0)}, r"channels\[1\]"),
    ({"channels": (4, 2.5)}, r"channels\[1\]"),
    ({"kernel": 0}, "kernel"),
    ({"kernel": 2.0}, "kernel"),
    ({"fc": -3}, "fc"),
    ({"n_classes": 0}, "n_classes"),
])
def test_cnn_arguments(kwargs: dict, match: str) -> None:
    args = {"input_shape": (1, 8, 8), "n_classes": 10, **kwargs}
    with pytest.raises(InvalidHyperparameterError, match=match):
        cnn(args.pop("input_shape"), args.pop("n_classes"), **args)


def _pooled(n: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = RNG(0)
    return rng.random((n, 4)), rng.integers(0, 2, n)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"model": 1.0}, InvalidProblemError, "model must be a Sequential"),
    ({"loss": "mse"}, InvalidProblemError, "loss must be a Loss"),
    ({"inputs": [[1.0] * 4] * 12}, InvalidProblemError, "inputs must be an array"),
    ({"targets": np.zeros(5)}, InvalidProblemError, "inputs has 12 samples but targets has 5"),
    ({"parts": 3}, InvalidProblemError, "parts must be a non-empty list"),
    ({"parts": []}, InvalidProblemError, "parts must be a non-empty list"),
    ({"parts": [np.arange(6), np.array([6.0, 7.0])]}, InvalidProblemError, r"parts\[1\].*integer"),
    ({"parts": [np.arange(6), np.array([6, 12])]}, InvalidProblemError, r"parts\[1\] must hold indices in \[0, 12\)"),
    ({"parts": [np.arange(6), np.array([-1, 7])]}, InvalidProblemError, r"parts\[1\] must hold indices"),
    ({"parts": [np.arange(6), "ab"]}, InvalidProblemError, r"parts\[1\]"),
    ({"parts": [np.arange(6), np.array([6])]}, InvalidProblemError, "part 1 must list at least 2"),
    ({"rng": 0}, InvalidHyperparameterError, "rng must be a numpy.random.Generator"),
    ({"test_fraction": 1.0}, InvalidHyperparameterError, "test_fraction"),
    ({"test_fraction": float("nan")}, InvalidHyperparameterError, "test_fraction"),
])
def test_federation_from_partition_arguments(kwargs: dict, error: type, match: str) -> None:
    u, t = _pooled()
    args = {"model": mlp(4, 2, hidden=(3,)), "inputs": u, "targets": t,
            "parts": [np.arange(6), np.arange(6, 12)], "rng": RNG(0), **kwargs}
    with pytest.raises(error, match=match):
        federation_from_partition(**args)


def test_federation_from_partition_valid_split_is_unchanged() -> None:
    u, t = _pooled()
    fed = federation_from_partition(mlp(4, 2, hidden=(3,)), u, t, [np.arange(6), np.arange(6, 12)], RNG(0))
    assert fed.n_clients == 2 and int(fed.n_samples.sum()) + 2 * 1 == 12   # one test sample each (0.2 * 6)
    tu, _, su, _ = split_clients(u, t, [np.arange(6), np.arange(6, 12)], 0.2, RNG(0))
    np.testing.assert_array_equal(fed.client_data(0)[0], tu[0])
    np.testing.assert_array_equal(fed.client_data(1, "test")[0], su[1])


@pytest.mark.parametrize("rng", [float("nan"), 1, "abc", np.array([])])
def test_synthetic_next_char_needs_a_generator(rng: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match=r"rng must be a numpy\.random\.Generator"):
        synthetic_next_char(2, rng)  # type: ignore[arg-type]


def test_synthetic_fedprox_federation_arguments() -> None:
    with pytest.raises(InvalidProblemError, match="model must be a Sequential"):
        synthetic_fedprox_federation("mlp", 0.5, 0.5, seed=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidHyperparameterError, match="iid must be True or False"):
        synthetic_fedprox_federation(mlp(60, 10, hidden=(4,)), 0.5, 0.5, seed=0, iid=1)  # type: ignore[arg-type]
    with pytest.raises(FLTheoryError):
        synthetic_fedprox_federation(mlp(60, 10, hidden=(4,)), float("nan"), 0.5, seed=0)


@pytest.mark.parametrize("name", [np.array([]), np.full(2, np.nan), 3, None, "cifar"])
def test_load_image_dataset_names(name: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match="dataset must be one of"):
        load_image_dataset(name)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def digits() -> object:
    pytest.importorskip("sklearn")
    return load_image_dataset("digits")


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"model": 1.0}, InvalidProblemError, "model must be a Sequential"),
    ({"dataset": "digits"}, InvalidProblemError, "dataset must be an ImageDataset"),
    ({"n_clients": 2.0}, InvalidHyperparameterError, "n_clients"),
    ({"n_clients": 0}, InvalidHyperparameterError, "n_clients"),
    ({"rng": 3}, InvalidHyperparameterError, "rng must be a numpy.random.Generator"),
    ({"partition": "shards"}, InvalidHyperparameterError, "partition must be one of"),
    ({"partition": np.array([1])}, InvalidHyperparameterError, "partition must be one of"),
    ({"gamma": -1.0}, InvalidHyperparameterError, "gamma"),
    ({"gamma": float("nan")}, InvalidHyperparameterError, "gamma"),
    ({"n_samples": 10**9}, InvalidHyperparameterError, "n_samples must be <="),
    ({"n_samples": 1.5}, InvalidHyperparameterError, "n_samples"),
    ({"test_fraction": 0.0}, InvalidHyperparameterError, "test_fraction"),
    ({"loss": 1.0}, InvalidProblemError, "loss must be a Loss"),
    ({"reg": -1.0}, InvalidHyperparameterError, "reg"),
    ({"reg": float("inf")}, InvalidHyperparameterError, "reg"),
])
def test_image_federation_arguments(digits: object, kwargs: dict, error: type, match: str) -> None:
    args = {"model": mlp(64, 10, hidden=(4,)), "dataset": digits, "n_clients": 3, "rng": RNG(0), **kwargs}
    with pytest.raises(error, match=match):
        image_federation(**args)


def test_digits_federation_arguments(digits: object) -> None:
    from fltheory.nn import digits_federation
    model = mlp(64, 10, hidden=(4,))
    with pytest.raises(InvalidProblemError, match="model must be a Sequential"):
        digits_federation(None, 3, RNG(0))  # type: ignore[arg-type]
    with pytest.raises(InvalidHyperparameterError, match="n_clients"):
        digits_federation(model, -3, RNG(0))
    with pytest.raises(InvalidHyperparameterError, match="rng must be"):
        digits_federation(model, 3, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidHyperparameterError, match="partition must be one of"):
        digits_federation(model, 3, RNG(0), partition="bogus")
    with pytest.raises(InvalidHyperparameterError, match="test_fraction"):
        digits_federation(model, 3, RNG(0), test_fraction=2.0)
    with pytest.raises(InvalidProblemError, match="parts must be a list"):
        digits_federation(model, 3, RNG(0), parts=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match=r"parts\[0\] must hold indices"):
        digits_federation(model, 1, RNG(0), parts=[np.array([0, 5000])])


@pytest.mark.parametrize("fed", [float("nan"), 1, "fed", np.array([]), object()])
def test_trajectory_constants_needs_a_federation(fed: object) -> None:
    with pytest.raises(InvalidProblemError, match="fed must be a Federation"):
        trajectory_constants(fed, np.zeros(2), RNG(0))  # type: ignore[arg-type]


def test_valid_models_still_build() -> None:
    net = cnn((1, 8, 8), 10, channels=(2, 3), kernel=3, fc=5)
    assert net.output_shape == (10,)
    assert Sequential([Dense(3), ReLU(), Dense(2)], (4,)).dim == 4 * 3 + 3 + 3 * 2 + 2
    assert mlp(4, 2, hidden=np.array([3, 2])).dim == 4 * 3 + 3 + 3 * 2 + 2 + 2 * 2 + 2
