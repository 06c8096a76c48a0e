"""Federated algorithms: keyword-only hyperparameters + ``init`` + ``round``; ``run``."""

from .base import Algorithm, RoundInfo
from .fedavg import FedAvg
from .run import History, run

__all__ = ["Algorithm", "RoundInfo", "History", "run", "FedAvg"]
