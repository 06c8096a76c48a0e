"""History and its provenance record: RunRecord, argument checks shared by every runner."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, History, check_run_arguments, run
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.problems.generators import random_quadratic
from fltheory.results import RunRecord

from .test_run import ALGS, fed_noisy


def test_provenance_hyperparameters_are_plain_data():
    import json

    from fltheory.algorithms.fedcurv import FedCurvTE
    fed = fed_noisy()
    for alg in [*ALGS, FedCurvTE(beta=0.3, fisher="proxy", proxy=fed.exact(), lr=0.1, local_steps=2)]:
        h = run(alg, fed, 1, seed=0)
        json.dumps(h.record["hyperparameters"])


def test_record_is_a_run_record_readable_by_key():
    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    h = run(FedAvg(lr=0.1, local_steps=2), fed, 3, seed=7)
    assert isinstance(h, History) and isinstance(h.record, RunRecord)
    assert h.record.seed == 7 and h.record["seed"] == 7
    assert h.record["algorithm"] == "FedAvg" == h.record.config["algorithm"]
    assert h.record["rounds"] == 3 and h.record["completed_rounds"] == 3
    assert h.record["participation"] == "full"
    assert RunRecord.from_dict(h.record.to_dict()) == h.record
    with pytest.raises(KeyError):
        h.record["no such key"]
    g = run(FedAvg(lr=0.1, local_steps=2), fed, 1, rng=np.random.default_rng(0))
    assert g.record.seed is None
    s = run(FedAvg(lr=0.1, local_steps=2), fed, 1, seed=np.random.SeedSequence(3))
    assert s.record.seed is None and "SeedSequence" in s.record["seed_sequence"]


def test_shared_argument_check():
    fed = random_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=0)
    np.testing.assert_array_equal(check_run_arguments(FedAvg(), fed, 0, None), np.zeros(2))
    with pytest.raises(InvalidHyperparameterError, match="rounds"):
        check_run_arguments(FedAvg(), fed, -1, None)
    with pytest.raises(InvalidHyperparameterError, match="rounds"):
        check_run_arguments(FedAvg(), fed, True, None)
    with pytest.raises(InvalidProblemError, match="x0"):
        check_run_arguments(FedAvg(), fed, 1, [np.inf, 0.0])
