"""The set-up and train/evaluate steps shared by the neural experiments.

:func:`image_setup` draws, from one generator and in this order, the seed of
the partition (a fresh generator seeded with it draws the subset, the label
partition and the train/test splits of :func:`~fltheory.nn.image_federation`),
the initial point ``x0`` (the model's init schemes) and the seed of the
stochastic oracle, so that every algorithm of an experiment starts from the
same point on the same data and sees the same minibatch draws.
:func:`train_and_evaluate` runs one algorithm from there and returns the run's
:class:`~fltheory.algorithms.History` with the test accuracy before and
after.  :func:`majority_accuracy` is the accuracy of always answering the
most frequent test label: the level a trained network must beat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import flag, generator, instance, scalar_int
from ..algorithms import run
from ..errors import InvalidHyperparameterError, InvalidProblemError
from .datasets import ImageDataset, image_federation, load_image_dataset
from .federation import NeuralFederation
from .sequential import Sequential

__all__ = ["ImageSetup", "image_setup", "majority_accuracy", "train_and_evaluate"]


@dataclass(frozen=True)
class ImageSetup:
    """What :func:`image_setup` drew: the data set (after downsampling), the
    federation, the partition seed, the initial point and the oracle seed."""

    dataset: ImageDataset
    fed: NeuralFederation
    partition_seed: int
    x0: np.ndarray
    oracle_seed: int | None

    @property
    def majority_acc(self) -> float:
        """:func:`majority_accuracy` of the federation's test data."""
        return majority_accuracy(self.fed)


def majority_accuracy(fed: NeuralFederation) -> float:
    """Fraction of the pooled test labels (all clients) equal to the most frequent one."""
    instance("fed", fed, NeuralFederation, "a NeuralFederation with test data")
    labels = np.concatenate([fed.client_data(i, "test")[1] for i in range(fed.n_clients)])
    if not np.issubdtype(labels.dtype, np.integer):
        raise InvalidProblemError(f"majority_accuracy needs integer class labels, got dtype {labels.dtype}")
    return float(np.bincount(labels).max() / labels.size)


def image_setup(model: Callable[[int], Sequential], rng: np.random.Generator, *, dataset: str, downsample: int,
                n_clients: int, gamma: float, n_samples: int | None = None, test_fraction: float = 0.2,
                reg: float = 0.0, draw_oracle_seed: bool = True) -> ImageSetup:
    """A Dirichlet(``gamma``) label-skewed federation of ``n_clients`` clients
    on ``dataset`` downsampled by ``downsample`` (:func:`load_image_dataset`,
    :meth:`ImageDataset.downsampled`), the network ``model(side)`` for the
    images' side length, and the draws of the module docstring (without the
    oracle seed, None, when ``draw_oracle_seed`` is False: a run with the exact
    oracle draws nothing)."""
    generator("rng", rng)
    if not callable(model):
        raise InvalidProblemError(f"model must be a callable side -> Sequential, got {model!r:.80}")
    ds = load_image_dataset(dataset).downsampled(downsample)
    net = instance("model(side)", model(ds.images.shape[1]), Sequential, "a Sequential model")
    partition_seed = int(rng.integers(2**63 - 1))
    fed = image_federation(net, ds, scalar_int("n_clients", n_clients), np.random.default_rng(partition_seed),
                           partition="dirichlet", gamma=gamma, n_samples=n_samples, test_fraction=test_fraction,
                           reg=reg)
    x0 = fed.init_params(rng)
    oracle_seed = int(rng.integers(2**63 - 1)) if flag("draw_oracle_seed", draw_oracle_seed) else None
    return ImageSetup(ds, fed, partition_seed, x0, oracle_seed)


def train_and_evaluate(algorithm: Any, fed: NeuralFederation, train_fed: Any, rounds: int, x0: np.ndarray,
                       seed: int | None, participation: Any = None) -> tuple[Any, list[float]]:
    """``run(algorithm, train_fed, rounds, x0=x0, seed=seed, participation=...)``
    (``train_fed``: e.g. ``fed.with_minibatch(b)``, or ``fed`` itself) and the
    test accuracy of ``fed`` at the first and the last server model.
    -> (History, [accuracy at x_0, accuracy at x_T])."""
    instance("fed", fed, NeuralFederation, "a NeuralFederation with test data")
    if seed is None:
        raise InvalidHyperparameterError("seed must be a non-negative integer, got None (an ImageSetup made "
                                         "with draw_oracle_seed=False has no oracle seed)")
    hist = run(algorithm, train_fed, rounds, x0=x0, seed=seed, participation=participation)
    return hist, [fed.accuracy(hist.x[0]), fed.accuracy(hist.x[-1])]
