"""Federated algorithms: keyword-only hyperparameters + ``init`` + ``round``; ``run``.

Every algorithm follows ``algorithms.base`` and has a plain per-client
reference loop in ``algorithms.reference`` / ``algorithms.reference_drift``.
"""

from .affine_run import run_affine
from .base import Algorithm, RoundInfo
from .efl import EFL
from .elasticnet import FedElasticNet
from .fedavg import FedAvg
from .fedcurv import FedCL, FedCurv, FedCurvTE
from .feddyn import FedDyn
from .fedopt import FedOpt
from .fedprox import FedProx, FedProxTE
from .run import History, run
from .scaffold import Scaffold
from .targets import TemporalEnsemble

__all__ = ["Algorithm", "RoundInfo", "History", "run", "run_affine", "FedAvg", "FedProx",
           "FedProxTE", "FedCurv", "FedCurvTE", "FedCL", "TemporalEnsemble", "FedOpt",
           "Scaffold", "FedDyn", "FedElasticNet", "EFL"]
