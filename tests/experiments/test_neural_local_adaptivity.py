"""Helpers and verdicts of experiments/neural_local_adaptivity.py (seed 001 on an MNIST CNN)."""

from __future__ import annotations

import pytest

from experiments import neural_local_adaptivity as E
from fltheory.algorithms import FedAvg, FedOpt


def test_runs_map_to_the_named_client_state_and_correction():
    cfg = E.QUICK
    assert isinstance(E._algorithm("FedAvg", cfg), FedAvg)
    for name in E.RUNS[1:]:
        alg = E._algorithm(name, cfg)
        assert isinstance(alg, FedOpt)
        state, _, corr = name.partition("+")
        assert alg.client_state == state and alg.correction == (corr or "none")
        assert alg.local_steps == cfg["local_steps"]


def _results(restart=1.0, sync=1.2, final_acc=0.5):
    runs = list(E.RUNS)
    loss = {r: [2.3, 1.5] for r in runs}
    loss["restart"] = [2.3, restart]
    loss["synchronise"] = [2.3, sync]
    return {"majority_acc": 0.2, "runs": runs, "acc": {r: [0.1, final_acc] for r in runs}, "loss": loss}


def test_verdicts():
    learns, restart, corr = E.checks(_results())
    assert learns.status == "holds" and learns.ratio == pytest.approx(0.5 / 0.8)
    assert restart.status == "holds" and restart.ratio == pytest.approx(1.0 / 1.2)
    assert corr.status == "not checkable" and corr.ratio == pytest.approx(1.5)
    assert E.checks(_results(restart=1.3))[1].status == "violated"
    assert E.checks(_results(final_acc=0.1))[0].status == "violated"
