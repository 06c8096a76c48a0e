"""Torch-free numpy neural backend: layers with exact backward passes over one
flat parameter vector, per-sample gradients, the empirical Fisher diagonal,
exact (forward-over-reverse) Hessian-vector products, and the NeuralFederation adapter
that lets every algorithm run on small networks unchanged."""

from .data import (digits_federation, federation_from_partition, iid_partition, load_digits,
                   split_clients, synthetic_fedprox_federation, synthetic_next_char)
from .datasets import ImageDataset, MissingDataPackageError, image_federation, load_image_dataset
from .federation import HESS_MAX_DIM, NeuralFederation
from .layers import LSTM, RNN, AvgPool2D, Conv2D, Dense, Flatten, Layer, MaxPool2D, ReLU, Sigmoid, Tanh
from .losses import MSE, Loss, SoftmaxCrossEntropy
from .models import char_lstm, cnn, mlp
from .params import ParamLayout, ParamSpec
from .sequential import Sequential

__all__ = ["Layer", "Dense", "Conv2D", "MaxPool2D", "AvgPool2D", "Flatten", "ReLU", "Tanh", "Sigmoid",
           "RNN", "LSTM", "Loss", "SoftmaxCrossEntropy", "MSE", "Sequential", "ParamLayout", "ParamSpec",
           "NeuralFederation", "HESS_MAX_DIM", "mlp", "cnn", "char_lstm", "load_digits", "iid_partition",
           "split_clients", "federation_from_partition", "digits_federation", "synthetic_next_char",
           "synthetic_fedprox_federation", "ImageDataset", "MissingDataPackageError", "load_image_dataset",
           "image_federation"]
