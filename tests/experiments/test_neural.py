"""Helper logic of experiments/neural.py."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import neural


def test_bundled_digits_equal_the_library_loader():
    pytest.importorskip("sklearn")
    from fltheory.nn import load_digits
    found = neural._bundled_digits()
    assert found is not None
    images, labels = load_digits()
    np.testing.assert_array_equal(found[0], images)
    np.testing.assert_array_equal(found[1], labels)


def test_synthetic_fallback_is_seeded_and_in_pixel_range():
    a, la = neural._synthetic_images(300, np.random.default_rng(5))
    b, lb = neural._synthetic_images(300, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(la, lb)
    assert a.shape == (300, 8, 8) and a.min() >= 0.0 and a.max() <= 1.0
    assert set(np.unique(la)) <= set(range(10))
    # nearest-prototype classification (class means) separates the classes far above chance
    means = np.stack([a[la == c].mean(axis=0) for c in range(10)])
    pred = np.argmin(((a[:, None] - means[None]) ** 2).sum(axis=(2, 3)), axis=1)
    assert np.mean(pred == la) > 0.5


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


def test_without_scikit_learn_the_synthetic_task_is_used_and_named(monkeypatch):
    import fltheory.nn as nn_pkg

    def missing():
        raise ImportError("no scikit-learn")
    monkeypatch.setattr(neural, "_bundled_digits", lambda: None)
    monkeypatch.setattr(nn_pkg, "load_digits", missing)
    cfg = {**neural.QUICK, "n_samples": 80, "n_clients": 2, "rounds": {"MLP": 2, "CNN": 1},
           "stat_samples": 80, "stat_rounds": 4, "stat_lrs": [0.02, 0.01], "window": 2}
    res = neural.run(cfg, np.random.default_rng(0))
    assert res["dataset"].startswith("synthetic")
    assert res["n_samples"] == 80
    assert len(res["acc"]["CNN"]["FedAvg"]) == 2
