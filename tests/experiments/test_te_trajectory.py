"""experiments/te_trajectory.py: PCA, winding and the temporal-ensemble target by hand, the quick run's checks
and the verdict logic."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from experiments import te_trajectory as exp


def test_pca_of_points_on_a_line_is_one_component():
    t = np.linspace(-1, 2, 7)[:, None]
    xs = np.array([1.0, 2.0, -1.0]) + t * np.array([3.0, 0.0, 4.0])
    coords, frac = exp.pca_projection(xs)
    np.testing.assert_allclose(frac, [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(np.abs(coords[:, 0]), np.abs(5.0 * (t[:, 0] - t.mean())), rtol=1e-12)


def test_winding_by_hand():
    straight = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    assert exp.winding(straight) == (1.0, 1.0)
    zigzag = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])   # path 3, displacement 1
    w, cos = exp.winding(zigzag)
    assert w == 3.0 and cos == -1.0


def test_temporal_ensemble_by_hand():
    xs = np.array([[0.0], [2.0], [4.0]])
    T = exp.temporal_ensemble(xs, 0.5)
    # That_1 = 1, T_1 = 1/(1 - 0.5) = 2; That_2 = 0.5*4 + 0.5*1 = 2.5, T_2 = 2.5/0.75
    np.testing.assert_allclose(T[:, 0], [2.0, 2.5 / 0.75], rtol=1e-15)
    np.testing.assert_allclose(exp.temporal_ensemble(np.array([[0.0], [3.0], [3.0]]), 0.0)[:, 0], [3.0, 3.0])


@pytest.fixture(scope="module")
def quick():
    return exp.run(dict(exp.QUICK, heterogeneity=[0.0, 2.0], rounds=80), np.random.default_rng(4))


def test_quick_checks_hold(quick):
    verdicts = {c.theorem: c for c in exp.checks(quick)}
    assert all(v.status == "holds" for v in verdicts.values()), verdicts
    iid = quick["levels"]["0.0"]
    assert iid["winding"] < 1.2 and iid["cosine"] > 0.5           # IID: a nearly straight late path


def test_a_straight_non_iid_path_is_flagged(quick):
    broken = copy.deepcopy(quick)
    broken["levels"]["2.0"]["winding"] = broken["levels"]["0.0"]["winding"] / 2
    check = {c.theorem: c for c in exp.checks(broken)}["fig1-drastic"]
    assert check.status == "violated" and check.ratio == pytest.approx(2.0) and "run seed" in check.detail
