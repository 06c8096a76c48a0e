"""Client and server optimizers as pure (init, update, precond) triples.

>>> from fltheory import optim
>>> opt = optim.adagrad(0.1)

See :mod:`fltheory.optim.base` for the conventions (leading client axis,
own step counter, updates linear in the learning rate, ``precond`` for local
correction) and :mod:`fltheory.optim.server` for FedAvgM / FedAdagrad /
FedAdam / FedYogi.
"""

from .adaptive import AdaptiveState, adagrad, adam, yogi
from .base import Optimizer, mean_rows, put_rows, take_rows
from .chain import chain
from .first_order import MomentumState, SgdState, momentum, sgd
from .preconditioned import PreconditionedState, preconditioned
from .server import fedadagrad, fedadam, fedavg, fedavgm, fedyogi

__all__ = ["Optimizer", "take_rows", "put_rows", "mean_rows",
           "sgd", "momentum", "adagrad", "adam", "yogi", "preconditioned", "chain",
           "fedavg", "fedavgm", "fedadagrad", "fedadam", "fedyogi",
           "SgdState", "MomentumState", "AdaptiveState", "PreconditionedState"]
