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
