"""Helper logic of experiments/neural.py."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import neural


def test_data_are_the_real_digits_with_provenance():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits
    images, labels, prov = neural._data(100, np.random.default_rng(1))
    ref = load_digits()
    assert images.shape == (100, 8, 8) and prov["dataset"] == "digits"
    assert prov["source_package"] == "scikit-learn" and prov["source_version"]
    # every drawn image is one of the library's images with its label
    flat = ref.images.reshape(len(ref.target), -1) / 16.0
    hit = [int(np.flatnonzero((flat == im.ravel()).all(axis=1))[0]) for im in images]
    np.testing.assert_array_equal(ref.target[hit], labels)


def _results(g_none, g_local, g_joint, acc_final=0.9, loss=(2.3, 0.5)):
    algs, models = list(neural.ALGORITHMS), list(neural.MODELS)
    return {"dataset": "x", "n_samples": 10, "n_clients": 2, "gamma": 0.5, "rounds": {"MLP": 1, "CNN": 1},
            "lr": {"MLP": 0.1, "CNN": 0.1}, "algorithms": algs, "models": models,
            "majority_error": {m: 0.8 for m in models}, "diverged": {m: {} for m in models},
            "acc": {m: {a: [0.1, acc_final] for a in algs} for m in models},
            "train_loss": {m: {a: list(loss) for a in algs} for m in models},
            "stat": {"grad_norm2": {"none": g_none, "local": g_local, "joint": g_joint}, "window": 2,
                     "rounds": 3, "dim": 5, "reg": 0.1, "client_lrs": [0.02, 0.01], "v0": 0.1,
                     "local_steps": 2, "server_lr": {"none": 1.0, "local": 2.0, "joint": 1.0}}}


def _traj(*levels):
    """One trajectory per client rate, settling at the given levels."""
    return [[1.0, 0.5, lv, lv] for lv in levels]


def test_checks_compare_corrected_and_uncorrected_residuals():
    res = _results(_traj(0.08, 0.06), _traj(0.03, 0.008), _traj(0.04, 0.02))
    by = {}
    for c in neural.checks(res):
        by.setdefault(c.theorem, []).append(c)
    assert [c.status for c in by["learns"]] == ["holds"] * 2
    (loc,) = by["local-correction-stationary"]
    assert loc.status == "holds" and loc.ratio == pytest.approx(0.008 / 0.06)
    (joint,) = by["joint-correction-stationary"]
    assert joint.status == "holds" and joint.ratio == pytest.approx(0.02 / 0.06)
    (van,) = by["bias-vanishes"]       # worse of local (0.008/0.03) and joint (0.5) over none (0.75)
    assert van.status == "holds" and van.ratio == pytest.approx(0.5 / 0.75)
    assert neural._exponent([0.02, 0.01], [0.03, 0.0075]) == pytest.approx(2.0)
    worse = neural.checks(_results(_traj(0.08, 0.02), _traj(0.03, 0.03), _traj(0.04, 0.001)))
    statuses = {c.theorem: c.status for c in worse if c.theorem != "learns"}
    assert statuses == {"local-correction-stationary": "violated", "joint-correction-stationary": "holds",
                        "bias-vanishes": "violated"}
    bad = neural.checks(_results(_traj(1.0, 1.0), _traj(1.0, 1.0), _traj(1.0, 1.0), acc_final=0.1,
                                 loss=(1.0, 1.5)))
    assert {c.status for c in bad if c.theorem == "learns"} == {"violated"}
    assert all("FedAvg (1 -> 1.5)" in c.detail for c in bad if c.theorem == "learns")


def test_a_diverged_algorithm_is_not_checkable_and_left_out_of_the_ratios():
    res = _results(_traj(0.08, 0.06), _traj(0.03, 0.008), _traj(0.04, 0.02))
    res["diverged"]["MLP"]["SCAFFOLD"] = {"round": 3, "error": "SCAFFOLD diverged in round 3: x"}
    res["train_loss"]["MLP"]["SCAFFOLD"] = [2.3, 9.0]
    learns = [c for c in neural.checks(res) if c.theorem == "learns"]
    assert [c.status for c in learns] == ["not checkable", "holds", "holds"]
    assert learns[1].ratio == pytest.approx((1 - 0.9) / 0.8)
    assert "SCAFFOLD" not in learns[1].detail.split("rose for:")[1]
    assert neural._divergence_round("SCAFFOLD diverged in round 12: local steps") == 12


def test_without_scikit_learn_the_experiment_stops_with_the_install_command(monkeypatch):
    from fltheory.nn import datasets

    datasets._load.cache_clear()
    real = datasets.importlib.util.find_spec
    monkeypatch.setattr(datasets.importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(datasets.MissingDataPackageError, match=r"pip install 'fltheory\[data\]'"):
        neural.run({**neural.QUICK}, np.random.default_rng(0))
    datasets._load.cache_clear()
