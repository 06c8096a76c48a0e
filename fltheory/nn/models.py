"""Miniature versions of the seed papers' networks.

* :func:`mlp`: the fully connected network with two hidden layers of 200 and
  100 ReLU units used for MNIST/EMNIST-L in FedElasticNet (FedElasticNet, section 4
  "Experimental Setup", after Acar et al. 2021 and McMahan et al. 2017).
* :func:`cnn`: BetterObjects Table 1 (Conv 5x5 16 ReLU, MaxPool 2x2/2, Conv 5x5 32
  ReLU, MaxPool 2x2/2, FC 512 ReLU, output 10 with softmax), sized to the data:
  the convolutions use padding 2 ("same") so 8x8 digits give 8 -> 4 -> 2, and
  the FC width is a parameter (512 in the paper).
* :func:`char_lstm`: a small character-level LSTM (one-hot characters -> LSTM
  -> Dense over the vocabulary), the shape of FedElasticNet's Shakespeare model in
  miniature (a single LSTM layer instead of a stacked one).

The softmax of the output layer lives in the loss (SoftmaxCrossEntropy).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._validate import scalar_int
from ..errors import InvalidHyperparameterError
from .layers import LSTM, Conv2D, Dense, Flatten, MaxPool2D, ReLU
from .sequential import Sequential

__all__ = ["mlp", "cnn", "char_lstm"]


def _is_sequence(value: object) -> bool:
    """A list/tuple or a 1-D array (a 0-d array, a string or a scalar is not a sequence of sizes)."""
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def mlp(input_dim: int, n_classes: int, hidden: Sequence[int] = (200, 100)) -> Sequential:
    """Dense(h_1) ReLU ... Dense(h_k) ReLU Dense(n_classes); FedElasticNet uses (200, 100)."""
    input_dim = scalar_int("input_dim", input_dim)
    n_classes = scalar_int("n_classes", n_classes)
    if not _is_sequence(hidden):
        raise InvalidHyperparameterError(f"hidden must be a sequence (list, tuple or 1-D array) of positive integer "
                                         f"widths, got {hidden!r:.80} ({type(hidden).__name__})")
    layers = []
    for i, h in enumerate(hidden):
        layers += [Dense(scalar_int(f"hidden[{i}]", h)), ReLU()]
    return Sequential(layers + [Dense(n_classes)], (input_dim,))


def cnn(input_shape: tuple[int, int, int], n_classes: int, *, channels: tuple[int, int] = (16, 32),
        kernel: int = 5, fc: int = 512) -> Sequential:
    """BetterObjects Table 1: Conv(k, c1, pad k//2) ReLU MaxPool(2) Conv(k, c2, pad k//2)
    ReLU MaxPool(2) Flatten Dense(fc) ReLU Dense(n_classes).  Needs H, W >= 4."""
    if not _is_sequence(channels) or len(channels) != 2:
        raise InvalidHyperparameterError(f"channels must be two positive integers, got {channels!r:.80}")
    channels = (scalar_int("channels[0]", channels[0]), scalar_int("channels[1]", channels[1]))
    if not _is_sequence(input_shape) or len(input_shape) != 3:
        raise InvalidHyperparameterError(f"input_shape must be a sequence (C, H, W) of three positive integers, "
                                         f"got {input_shape!r:.80} ({type(input_shape).__name__})")
    input_shape = (scalar_int("input_shape[0]", input_shape[0]), scalar_int("input_shape[1]", input_shape[1]),
                   scalar_int("input_shape[2]", input_shape[2]))
    if min(input_shape[1:]) < 4:
        raise InvalidHyperparameterError(
            f"input_shape must be (C, H, W) with H, W >= 4 (two 2x2 poolings), got {input_shape!r}")
    n_classes = scalar_int("n_classes", n_classes)
    kernel = scalar_int("kernel", kernel)
    fc = scalar_int("fc", fc)
    pad = kernel // 2
    return Sequential([Conv2D(channels[0], kernel, padding=pad), ReLU(), MaxPool2D(2),
                       Conv2D(channels[1], kernel, padding=pad), ReLU(), MaxPool2D(2),
                       Flatten(), Dense(fc), ReLU(), Dense(n_classes)], input_shape)


def char_lstm(vocab: int, seq_len: int, hidden: int = 32) -> Sequential:
    """One-hot sequences (seq_len, vocab) -> LSTM(hidden) -> Dense(vocab) logits
    of the next character."""
    vocab = scalar_int("vocab", vocab, minimum=1)
    seq_len = scalar_int("seq_len", seq_len)
    return Sequential([LSTM(hidden), Dense(vocab, init="glorot")], (seq_len, vocab))
