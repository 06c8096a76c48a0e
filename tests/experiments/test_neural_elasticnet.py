"""Helpers and verdicts of experiments/neural_elasticnet.py (seed 003 on the MNIST MLP)."""

from __future__ import annotations

import pytest

from experiments import neural_elasticnet as E


def test_runs_are_each_base_with_and_without_the_elastic_net():
    runs = E._runs(E.QUICK)
    assert set(runs) == {b + s for b in E.BASES for s in ("", "+EN")}
    for b in E.BASES:
        plain, en = runs[b], runs[b + "+EN"]
        assert plain.base == en.base == b
        assert plain.lambda1 == 0 and plain.eps == 0
        assert en.lambda1 == E.QUICK["lambda1"] and en.eps == E.QUICK["eps"]
    assert runs["scaffold"].lambda2 == 0      # plain SCAFFOLD; FedDyn needs its alpha = lambda2 > 0


def _results(nnz_en=0.2, acc_en=0.7):
    runs = [b + s for b in E.BASES for s in ("", "+EN")]
    return {"majority_acc": 0.1, "bases": list(E.BASES), "runs": runs, "acc_tolerance": 0.05,
            "acc": {r: [0.1, acc_en if r.endswith("+EN") else 0.72] for r in runs},
            "nonzero_fraction": {r: [nnz_en if r.endswith("+EN") else 0.5] * 3 for r in runs},
            "entropy": {r: [0.1 if r.endswith("+EN") else 0.2] * 3 for r in runs}}


def test_verdicts():
    by = {}
    for c in E.checks(_results()):
        by.setdefault(c.theorem, []).append(c)
    assert [c.status for c in by["fewer-nonzeros"]] == ["holds"] * 3
    assert by["fewer-nonzeros"][0].ratio == pytest.approx(0.4)
    assert by["lower-entropy"][0].ratio == pytest.approx(0.5)
    assert by["accuracy-kept"][0].ratio == pytest.approx(0.02 / 0.05)
    worse = E.checks(_results(nnz_en=0.6, acc_en=0.6))
    assert {c.status for c in worse if c.theorem in ("fewer-nonzeros", "accuracy-kept")} == {"violated"}


@pytest.mark.parametrize("base", E.HIST_BASES)
def test_transmitted_changes_are_what_the_round_transmits(base):
    """x_{T+1} - x_T with one client alone equals the values the round reports as
    transmitted: same non-zero count and same entropy (Communication record)."""
    import numpy as np

    from fltheory.algorithms import FedElasticNet, run
    from fltheory.compression import entropy
    from fltheory.problems import random_quadratic

    fed = random_quadratic(3, 6, L=2.0, mu=0.2, heterogeneity=1.0, seed=2)
    alg = FedElasticNet(base=base, lambda1=0.05, lambda2=0.1, eps=0.01, solver="gd", lr=0.1, local_steps=4)
    hist = run(alg, fed, 3, x0=np.ones(6), seed=0)
    D = E.transmitted_changes(alg, fed, hist.state, np.random.default_rng(0))
    assert D.shape == (3, 6)
    for k in range(3):
        _, info = alg.round(hist.state, fed, E._OneClient(k), np.random.default_rng(0))
        sent = D[k]
        assert info.clients.tolist() == [k]
        if base == "fedprox":
            assert info.communication.nonzeros_up == np.count_nonzero(sent)
            assert info.communication.entropy_up == pytest.approx(entropy(sent), abs=1e-12)
        else:                                        # SCAFFOLD also sends its control change
            assert info.communication.nonzeros_up >= np.count_nonzero(sent)
    if base == "fedprox":
        assert np.count_nonzero(D == 0) > 0          # the l1 term and the threshold zero some entries


FINDING = ("FINDING: on the QUICK instance of neural_elasticnet (seed 0: 1000 MNIST images at 14x14, 10 "
           "Dirichlet(0.3) clients, MLP 196-200-100-10, minibatch 10, 5 local steps at rate 0.05, "
           "15 rounds), "
           "FedElasticNet on FedDyn (lambda2 = 0.01, lambda1 = 1e-4, eps = 1e-3) ends at test accuracy 0.720 "
           "against 0.785 for FedDyn: 6.5 points below, beyond the 5-point tolerance of 'accuracy-kept' "
           "(one run, untuned coefficients; seed 003 tunes lambda1, lambda2 and the rates per data set)")


@pytest.mark.xfail(strict=True, reason=FINDING)
def test_elasticnet_on_feddyn_keeps_the_accuracy_on_the_quick_instance():
    from fltheory.reproduce import experiment_rng
    res = E.run(dict(E.QUICK), experiment_rng(0, E.NAME))
    kept = [c for c in E.checks(res) if c.theorem == "accuracy-kept"]
    assert all(c.status == "holds" for c in kept), [c.detail for c in kept]
