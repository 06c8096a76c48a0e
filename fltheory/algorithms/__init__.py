"""Federated algorithms: keyword-only hyperparameters + ``init`` + ``round``; ``run``.

Every algorithm follows ``algorithms.base`` and has a plain per-client
reference loop in ``algorithms.reference``.  ``run(..., method="affine")`` is
registered by ``fltheory.theory`` (``theory.run_affine``).
"""

from .base import Algorithm, RoundInfo
from .efl import EFL
from .elasticnet import FedElasticNet
from .fedavg import FedAvg
from .fedcurv import FedCL, FedCurv, FedCurvTE
from .feddyn import FedDyn
from .fedopt import FedOpt
from .fedprox import FedProx, FedProxTE
from .history import History, check_run_arguments, check_run_options, known_optimum, run_record
from .run import register_run_method, run
from .scaffold import Scaffold
from .targets import TemporalEnsemble

__all__ = ["Algorithm", "RoundInfo", "History", "run", "register_run_method",
           "check_run_arguments", "check_run_options", "run_record", "known_optimum", "FedAvg", "FedProx",
           "FedProxTE", "FedCurv", "FedCurvTE", "FedCL", "TemporalEnsemble", "FedOpt",
           "Scaffold", "FedDyn", "FedElasticNet", "EFL"]
