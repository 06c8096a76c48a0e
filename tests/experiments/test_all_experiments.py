"""Every registered experiment, in its QUICK configuration, run once per
session (module-scoped fixture) into a temporary directory.

Per experiment: it completes; its JSON states a verdict and a measured/bound
ratio for every declared theorem, consistent with each other and recomputable
from the stored numbers; its PNG is not blank and its figure has the declared
number of axes.  The cheapest experiment is run a second time to check that
the same seed gives identical numbers.  With no experiment registered this
file collects no test.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from matplotlib.image import imread

from fltheory.reproduce import STATUSES, discover, experiment_rng
from fltheory.reproduce import reproduce
from fltheory.results import to_jsonable

REGISTRY = {exp.name: exp for exp in discover()}
SEED = 0


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """(out_dir, {name: Outcome}) of one QUICK reproduce of every experiment."""
    out = tmp_path_factory.mktemp("quick_figures")
    # two processes once there are enough experiments to pay for spawning them
    jobs = 2 if len(REGISTRY) >= 3 else 1
    outcomes = reproduce(list(REGISTRY.values()), out, mode="quick", seed=SEED, jobs=jobs,
                         show_progress=False)
    return out, {o.name: o for o in outcomes}


def _doc(quick, name):
    out, outcomes = quick
    outcome = outcomes[name]
    assert outcome.action == "computed", f"{name} failed:\n{outcome.error}"
    return json.loads((out / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_checks_state_every_theorem_with_ratio_and_status(quick, name):
    exp = REGISTRY[name]
    doc = _doc(quick, name)
    checks = doc["checks"]
    assert {c["theorem"] for c in checks} == {t.key for t in exp.theorems}, \
        "every declared theorem gets at least one check, and only declared ones"
    for c in checks:
        assert c["status"] in STATUSES
        if c["status"] == "not checkable":
            assert c["detail"].strip()
        else:
            assert c["ratio"] is not None and math.isfinite(c["ratio"]) and c["ratio"] >= 0
        if c["status"] == "holds":
            assert c["ratio"] <= 1.0
        if c["status"] == "violated":
            assert c["detail"].strip(), "a violation names its instance"
    # the verdicts are a function of the stored numbers alone
    again = [c.to_dict() for c in exp.checks(doc["data"])]
    assert to_jsonable(again) == checks
    assert to_jsonable(exp.macros(doc["data"])) == doc["macros"]
    assert doc["key"]["config"] == to_jsonable(exp.quick) and doc["key"]["seed"] == SEED
    assert doc["record"]["config"] == to_jsonable(exp.quick)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_figure_is_drawn_with_the_declared_axes(quick, name):
    out, _ = quick
    exp = REGISTRY[name]
    doc = _doc(quick, name)
    img = imread(out / f"{name}.png")
    assert float(np.var(img[..., :3])) > 0.0, "blank PNG"
    assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"
    fig = exp.plot(doc["data"])          # Experiment.plot enforces EXPECTED_AXES
    assert len(fig.axes) == exp.expected_axes == doc["experiment"]["expected_axes"]


def test_same_seed_gives_identical_numbers_for_the_cheapest_experiment(quick):
    assert REGISTRY, "the bundled experiments must be discovered"
    out, outcomes = quick
    done = [o for o in outcomes.values() if o.action == "computed"]
    if not done:
        pytest.fail("no experiment completed")
    cheapest = min(done, key=lambda o: o.seconds)
    exp = REGISTRY[cheapest.name]
    stored = json.loads((out / f"{exp.name}.json").read_text())["data"]
    rerun = exp.run(exp.quick, experiment_rng(SEED, exp.name))
    assert json.dumps(rerun, sort_keys=True) == json.dumps(stored, sort_keys=True)
