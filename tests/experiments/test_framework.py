"""The experiment protocol: declarations, registry validation, Check rules,
per-experiment seeding, macro names."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fltheory.errors import FLTheoryError
from fltheory.reproduce import (
    Check,
    ExperimentDefinitionError,
    Theorem,
    discover,
    experiment_rng,
    format_macro_value,
    macro_name,
)

from .fake_package import good, make_package


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_discover_finds_valid_modules_sorted_and_skips_private(root):
    pkg = make_package(root, {"beta": good("beta"), "alpha": good("alpha"),
                              "_helpers": "X = 1\n"})
    exps = discover(pkg)
    assert [e.name for e in exps] == ["alpha", "beta"]
    assert exps[0].quick == {"n": 200, "reps": 3}
    assert [t.key for t in exps[0].theorems] == ["clt", "never"]
    assert exps[0].expected_axes == 2


def test_empty_package_is_an_empty_registry(root):
    assert discover(make_package(root, {})) == []


@pytest.mark.parametrize("mutation, message", [
    (lambda s: s.replace('NAME = "alpha"', 'NAME = "other"'), "NAME is 'other', expected the module name 'alpha'"),
    (lambda s: s.replace('TITLE = ', 'TITLEX = '), "missing TITLE"),
    (lambda s: s.replace('EXPECTED_AXES = 2', 'EXPECTED_AXES = 0'), "EXPECTED_AXES must be an int >= 1"),
    (lambda s: s.replace('QUICK = {"n": 200, "reps": 3}', 'QUICK = {"n": float("nan")}'), "QUICK is not JSON-able"),
    (lambda s: s.replace('QUICK = {"n": 200, "reps": 3}', 'QUICK = [1]'), "QUICK must be a dict"),
    (lambda s: s.replace('Theorem("never"', 'Theorem("clt"'), "THEOREMS keys must be unique"),
    (lambda s: s.replace('THEOREMS = [', 'THEOREMS = ["a string", '), "THEOREMS must be a non-empty list of Theorem"),
    (lambda s: s.replace('def macros(results):', 'macros = 3\ndef _macros(results):'), "macros must be a function"),
    (lambda s: s.replace('def run(config, rng):', 'def _run(config, rng):'), "missing run"),
    (lambda s: "import not_a_module_anywhere\n" + s, "failed to import"),
])
def test_registry_reports_malformed_modules_clearly(root, mutation, message):
    pkg = make_package(root, {"alpha": mutation(good("alpha")), "ok": good("ok")})
    with pytest.raises(ExperimentDefinitionError) as info:
        discover(pkg)
    text = str(info.value)
    assert message in text
    assert f"{pkg}.alpha" in text          # names the module
    assert f"{pkg}.ok" not in text         # and only the broken one
    assert isinstance(info.value, FLTheoryError) and isinstance(info.value, ValueError)


def test_registry_lists_every_broken_module_at_once(root):
    pkg = make_package(root, {"a": good("a").replace('NAME = "a"', 'NAME = "x"'),
                              "b": good("b").replace("EXPECTED_AXES = 2", "EXPECTED_AXES = 'two'")})
    with pytest.raises(ExperimentDefinitionError) as info:
        discover(pkg)
    assert f"{pkg}.a" in str(info.value) and f"{pkg}.b" in str(info.value)


def test_unknown_package_is_a_clear_error():
    with pytest.raises(ExperimentDefinitionError, match="cannot import the experiments package 'no_such_pkg_zz'"):
        discover("no_such_pkg_zz")


def test_check_rules():
    assert Check("t", "holds", 0.5).ratio == pytest.approx(0.5)
    assert Check("t", "holds", np.float64(1.0)).ratio == pytest.approx(1.0)
    with pytest.raises(ExperimentDefinitionError, match=r"'holds' with measured/bound ratio 1.5"):
        Check("t", "holds", 1.5)
    with pytest.raises(ExperimentDefinitionError, match="must give the instance"):
        Check("t", "violated", 2.0, "")
    with pytest.raises(ExperimentDefinitionError, match="must give the reason"):
        Check("t", "not checkable", None)
    with pytest.raises(ExperimentDefinitionError, match="status must be one of"):
        Check("t", "fine", 0.1)  # type: ignore[arg-type]
    with pytest.raises(ExperimentDefinitionError, match="finite and >= 0"):
        Check("t", "violated", float("nan"), "instance")
    with pytest.raises(ExperimentDefinitionError, match="finite and >= 0"):
        Check("t", "holds", -0.1)


def test_theorem_label():
    assert Theorem("k", "seed 000 (EFL)", "Theorem 2", "eq. 10").label() == "Theorem 2, eq. 10 (seed 000 (EFL))"
    assert Theorem("k", "p", "Lemma 1").label() == "Lemma 1 (p)"


def test_experiment_rng_depends_only_on_seed_and_name():
    a = experiment_rng(3, "alpha").standard_normal(4)
    assert np.array_equal(a, experiment_rng(3, "alpha").standard_normal(4))
    assert not np.allclose(a, experiment_rng(3, "beta").standard_normal(4))
    assert not np.allclose(a, experiment_rng(4, "alpha").standard_normal(4))


@pytest.mark.parametrize("exp, key, expected", [
    ("objective_shift", "max_ratio", r"\flObjectiveShiftMaxRatio"),
    ("objective_shift", "ratio_n2_depart", r"\flObjectiveShiftRatioNTwoDepart"),
    ("fedopt2", "rate-10", r"\flFedoptTwoRateOneZero"),
])
def test_macro_names_are_letters_only(exp, key, expected):
    name = macro_name(exp, key)
    assert name == expected
    assert re.fullmatch(r"\\[A-Za-z]+", name)


def test_macro_values():
    assert format_macro_value(7) == "7"
    assert float(format_macro_value(0.123456)) == pytest.approx(0.1235)
    assert format_macro_value(1.5e-7) == r"\ensuremath{1.5\times10^{-7}}"
    assert format_macro_value(123456.0) == r"\ensuremath{1.235\times10^{5}}"


def test_readme_example_is_a_valid_experiment_that_holds(root):
    """The complete example of experiments/README.md, run as written."""
    from pathlib import Path

    from fltheory.reproduce import reproduce
    readme = Path(__file__).resolve().parents[2] / "experiments" / "README.md"
    code = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)[0]
    pkg = make_package(root, {"gd_rate": code})
    (exp,) = discover(pkg)
    (outcome,) = reproduce([exp], root / "out", show_progress=False)
    assert outcome.action == "computed", outcome.error
    assert outcome.status == "holds"


@pytest.mark.parametrize("draw", ["np.random.rand()", "__import__('random').random()"])
def test_run_may_not_use_global_generators(root, draw):
    src = good("alpha").replace("    x = rng.standard_normal(", f"    {draw}\n    x = rng.standard_normal(")
    assert draw in src
    (exp,) = discover(make_package(root, {"alpha": src}))
    with pytest.raises(ExperimentDefinitionError, match="global random generator"):
        exp.run(exp.quick, experiment_rng(0, "alpha"))
    (ok,) = discover(make_package(root, {"alpha": good("alpha")}))
    assert set(ok.run(ok.quick, experiment_rng(0, "alpha"))) == {"n", "means", "first"}
