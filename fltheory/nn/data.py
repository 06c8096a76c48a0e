"""Data for neural federations that needs no network access.

* :func:`load_digits`: the 8x8 digits bundled with scikit-learn (optional
  extra ``fltheory[data]``; imported lazily, MissingDataPackageError, an
  ImportError, with the install command if missing), pixels scaled to [0, 1];
  MNIST and provenance records are in :mod:`fltheory.nn.datasets`.
* :func:`synthetic_next_char`: a next-character task from per-client Markov
  chains over a small alphabet.
* :func:`iid_partition`, :func:`split_clients`, :func:`federation_from_partition`:
  turn a pooled data set and a partition (lists of indices, e.g. from
  ``fltheory.problems.partitions.dirichlet_partition`` / ``m_class_partition``)
  into a :class:`NeuralFederation` with a per-client train/test split.
* :func:`synthetic_fedprox_federation`: FedProx Synthetic(alpha, beta) from
  ``fltheory.problems.synthetic.synthetic_fedprox`` (its 90/10 split) for a
  network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..aliases import Seed
from .._validate import (choice, flag, generator, in_unit_interval, instance, known_keywords, per_client, positive,
                         scalar_int)
from ..errors import InvalidHyperparameterError, InvalidProblemError
from .federation import NeuralFederation
from .partitions import iid_partition, split_clients
from .losses import Loss, SoftmaxCrossEntropy
from .sequential import Sequential

__all__ = ["load_digits", "iid_partition", "split_clients", "federation_from_partition",
           "digits_federation", "synthetic_next_char", "synthetic_fedprox_federation", "PARTITIONS"]

PARTITIONS = ("iid", "dirichlet", "m_class")


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1797 scikit-learn 8x8 digits: images (1797, 8, 8) in [0, 1]
    (pixel / 16) and labels (1797,) in 0..9.  Without scikit-learn:
    :class:`fltheory.nn.datasets.MissingDataPackageError` (an ImportError)
    with the install command (``pip install 'fltheory[data]'``)."""
    from .datasets import load_image_dataset
    ds = load_image_dataset("digits")
    return ds.images.copy(), ds.labels.copy()






def federation_from_partition(model: Sequential, inputs: np.ndarray, targets: np.ndarray,
                              parts: Sequence[Any], rng: np.random.Generator, *,
                              loss: Loss | None = None, test_fraction: float = 0.2) -> NeuralFederation:
    """A NeuralFederation whose client i holds ``parts[i]`` of the pooled data,
    split by :func:`split_clients`; loss defaults to SoftmaxCrossEntropy.

    ``inputs`` (n, *model.input_shape) and ``targets`` (n,) are arrays with one
    row per pooled sample; ``parts`` lists integer index arrays into range(n),
    one per client; bad input raises a typed error naming the argument."""
    instance("model", model, Sequential, "a Sequential model")
    if loss is not None:
        instance("loss", loss, Loss, "a Loss (e.g. SoftmaxCrossEntropy()) or None")
    tu, tt, su, st = split_clients(inputs, targets, parts, test_fraction, rng)
    return NeuralFederation(model, loss or SoftmaxCrossEntropy(), tu, tt, test_inputs=su, test_targets=st)


def digits_federation(model: Sequential, n_clients: int, rng: np.random.Generator, *,
                      partition: str = "iid", gamma: float = 0.5, classes_per_client: int = 2,
                      parts: Sequence[Any] | None = None, test_fraction: float = 0.2) -> NeuralFederation:
    """The sklearn digits over ``n_clients`` clients.

    ``partition``: "iid" (:func:`iid_partition`), "dirichlet" (label skew
    Dir(gamma prior), ``fltheory.problems.partitions.dirichlet_partition``) or
    "m_class" (``classes_per_client`` labels per client, ``m_class_partition``);
    or pass explicit index lists as ``parts``.  Each client's samples are then
    split by :func:`split_clients`.  Inputs are shaped for the model: (64,)
    for an MLP, (1, 8, 8) for a CNN.
    """
    instance("model", model, Sequential, "a Sequential model")
    n_clients = scalar_int("n_clients", n_clients)
    generator("rng", rng)
    choice("partition", partition, PARTITIONS)
    in_unit_interval("test_fraction", test_fraction, right_closed=False)
    images, labels = load_digits()
    shape = tuple(model.input_shape)
    if shape == (64,):
        inputs = images.reshape(-1, 64)
    elif shape == (1, 8, 8):
        inputs = images[:, None]
    else:
        raise InvalidProblemError(f"digits inputs are (64,) or (1, 8, 8); the model expects {shape}")
    if parts is None:
        if partition == "iid":
            parts = iid_partition(labels.shape[0], n_clients, rng)
        elif partition == "dirichlet":
            from ..problems.partitions import dirichlet_partition
            parts = dirichlet_partition(labels, n_clients, gamma, rng)
        elif partition == "m_class":
            from ..problems.partitions import m_class_partition
            parts = m_class_partition(labels, n_clients, classes_per_client, rng)
        else:
            raise InvalidHyperparameterError(f"partition must be one of {PARTITIONS}, got {partition!r}")
    elif isinstance(parts, (str, bytes, np.ndarray)) or not isinstance(parts, Sequence):
        raise InvalidProblemError(f"parts must be a list of index arrays (one per client) or None, got "
                                  f"{parts!r:.80} ({type(parts).__name__})")
    elif len(parts) != n_clients:
        raise InvalidProblemError(f"parts has {len(parts)} entries, expected n_clients={n_clients}")
    return federation_from_partition(model, inputs, labels, parts, rng, test_fraction=test_fraction)


def synthetic_fedprox_federation(model: Sequential, alpha: float, beta: float, *, seed: Seed,
                                 iid: bool = False, **kwargs: Any) -> NeuralFederation:
    """Synthetic(alpha, beta) of FedProx (docs/theory/problems.md) for a network:
    the raw features (no intercept column; the network has biases) and
    labels of ``synthetic_fedprox(alpha, beta, iid=iid, seed=seed, **kwargs)``
    with its per-device 90/10 train/test split.  The model must take inputs
    (dim,) and output n_classes logits (60 and 10 by default)."""
    from ..problems.synthetic import synthetic_fedprox
    instance("model", model, Sequential, "a Sequential model")
    data = synthetic_fedprox(alpha, beta, iid=flag("iid", iid), seed=seed,
                             **known_keywords("synthetic_fedprox_federation", kwargs, synthetic_fedprox,
                                              exclude=("alpha", "beta", "iid", "seed")))
    d, C = data.W.shape[1:]
    if tuple(model.input_shape) != (d,) or tuple(model.output_shape) != (C,):
        raise InvalidProblemError(f"Synthetic data has inputs ({d},) and {C} classes; the model maps "
                                  f"{model.input_shape} -> {model.output_shape}")
    return NeuralFederation(model, SoftmaxCrossEntropy(), data.X_train, data.y_train,
                            test_inputs=data.X_test, test_targets=data.y_test)


def synthetic_next_char(n_clients: int, rng: np.random.Generator, *, vocab: int = 8, seq_len: int = 6,
                        n_samples: int | Sequence[int] = 60, heterogeneity: float = 0.5,
                        concentration: float = 1.0) -> tuple[list, list]:
    """Per-client next-character data from first-order Markov chains.

    A shared transition matrix P_0 and client matrices Q_i have rows drawn
    from the symmetric Dirichlet(c 1) with c = ``concentration`` (a scalar
    > 0; 1 gives the uniform distribution on the simplex); client i's chain is
    P_i = (1 - h) P_0 + h Q_i with h = ``heterogeneity`` in [0, 1].  Each
    sample is a chain path c_0..c_T of length T + 1 = seq_len + 1 started
    from the uniform distribution; the input is the one-hot encoding of
    c_0..c_{T-1} (seq_len, vocab) and the target is c_T.

    Returns (inputs, targets): lists of (n_i, seq_len, vocab) and (n_i,).
    """
    n_clients = scalar_int("n_clients", n_clients)
    generator("rng", rng)
    vocab = scalar_int("vocab", vocab, minimum=1)
    seq_len = scalar_int("seq_len", seq_len)
    h = in_unit_interval("heterogeneity", heterogeneity, left_closed=True)
    conc = positive("concentration", concentration)      # one scalar: the symmetric Dirichlet(conc 1_vocab)
    ns = np.broadcast_to(np.asarray(per_client("n_samples", n_samples, n_clients, integer=True)),
                         (n_clients,))
    P0 = rng.dirichlet(np.full(vocab, conc), size=vocab)
    inputs, targets = [], []
    eye = np.eye(vocab)
    for i in range(n_clients):                         # construction only
        P = (1 - h) * P0 + h * rng.dirichlet(np.full(vocab, conc), size=vocab)
        cdf = np.cumsum(P, axis=1)
        n = int(ns[i])
        path = np.empty((n, seq_len + 1), dtype=np.int64)
        path[:, 0] = rng.integers(0, vocab, size=n)
        for t in range(seq_len):                       # vectorised over samples
            u = rng.random(n)[:, None]
            path[:, t + 1] = np.minimum((u > cdf[path[:, t]]).sum(axis=1), vocab - 1)
        inputs.append(eye[path[:, :-1]])
        targets.append(path[:, -1])
    return inputs, targets
