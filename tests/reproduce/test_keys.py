"""Cache keys: the import closure, versions and data source decide freshness."""

from __future__ import annotations

import importlib
from importlib import metadata

import pytest

from fltheory.cli import main
from fltheory.reproduce import discover, import_closure, key_changes, result_key

from ..experiments.fake_package import forget, good, make_package, rewrite


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _with_helper(name: str) -> str:
    """A good experiment whose macros use a private helper module, imported lazily
    and relatively inside a function (the closure must still find it)."""
    return good(name).replace("def macros(results):\n",
                              "def macros(results):\n    from ._helper import OFFSET\n") \
                     .replace('"n_2": results["n"]}', '"n_2": results["n"] + OFFSET}')


def _keys(pkg):
    return {e.name: result_key(e, "quick", 0) for e in discover(pkg)}


def test_closure_holds_the_experiment_its_lazy_relative_imports_and_fltheory_modules(root):
    pkg = make_package(root, {"alpha": _with_helper("alpha"), "beta": good("beta"),
                              "_helper": "OFFSET = 1\n"})
    alpha, beta = discover(pkg)
    modules, third_party = import_closure(alpha)
    assert {f"{pkg}.alpha", f"{pkg}._helper", pkg, "fltheory.reproduce", "fltheory.plotting"} <= set(modules)
    assert f"{pkg}._helper" not in import_closure(beta)[0]
    assert {"numpy", "matplotlib"} <= third_party
    assert "fltheory.algorithms" not in modules        # not imported by the fake experiments
    key = result_key(alpha, "quick", 0)
    assert {"numpy", "scipy", "matplotlib"} <= set(key["versions"])
    assert key["versions"]["numpy"] == metadata.version("numpy")


def test_unrelated_module_keeps_keys_and_an_imported_one_stales_exactly_its_experiment(root, capsys):
    pkg = make_package(root, {"alpha": _with_helper("alpha"), "beta": good("beta"),
                              "_helper": "OFFSET = 1\n"})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    before = _keys(pkg)
    rewrite(root, pkg, "_unrelated", "Y = 2\n")
    assert _keys(pkg) == before
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "alpha: up to date" in text and "beta: up to date" in text
    rewrite(root, pkg, "_helper", "OFFSET = 2\n")
    after = _keys(pkg)
    assert after["beta"] == before["beta"]
    assert key_changes(before["alpha"], after["alpha"]) == [f"source of {pkg}._helper changed"]
    capsys.readouterr()
    assert main(["--package", pkg, "list", "--out", str(out)]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[1:]}
    assert f"stale: source of {pkg}._helper changed" in lines["alpha"]
    assert "stale" not in lines["beta"]
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "beta: up to date" in text and "alpha: up to date" not in text


def _install_fake_distribution(site, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_the_data_package_enters_the_key_and_list_says_why(root, capsys, monkeypatch):
    """The README's environment built twice, without and with the optional data
    package: the keys differ and `list` names the data source that changed."""
    src = good("alpha").replace("EXPECTED_AXES = 2", 'EXPECTED_AXES = 2\nDATA_PACKAGES = ("fakedata-zz",)')
    pkg = make_package(root, {"alpha": src})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    (exp,) = discover(pkg)
    without = result_key(exp, "quick", 0)
    assert without["data_source"] == {"fakedata-zz": "not installed"}
    site = root / "site"
    _install_fake_distribution(site, "fakedata-zz", "2.5")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    with_data = result_key(exp, "quick", 0)
    assert with_data["data_source"] == {"fakedata-zz": "2.5"}
    assert with_data != without
    capsys.readouterr()
    assert main(["--package", pkg, "list", "--out", str(out)]) == 0
    assert "stale: data source fakedata-zz: not installed -> 2.5" in capsys.readouterr().out
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    assert "alpha: up to date" not in capsys.readouterr().out
    forget(root, pkg)


def test_neural_declares_scikit_learn_as_its_data_source():
    neural = {e.name: e for e in discover()}["neural"]
    try:
        expected = metadata.version("scikit-learn")
    except metadata.PackageNotFoundError:
        expected = "not installed"
    assert result_key(neural, "quick", 0)["data_source"] == {"scikit-learn": expected}


def test_key_changes_names_each_difference():
    base = {"format": "fltheory-key/2", "mode": "quick", "seed": 0, "config": {"n": 1}, "overrides": {},
            "sources": {"a": "1", "b": "2"}, "versions": {"numpy": "2.0"}, "data_source": {}}
    assert key_changes(base, base) == []
    other = {**base, "seed": 3, "config": {"n": 2}, "sources": {"a": "1", "b": "3", "c": "4"},
             "versions": {"numpy": "2.1"}}
    assert key_changes(base, other) == ["seed 0 -> 3", "config changed", "source of b, c changed",
                                        "version of numpy: 2.0 -> 2.1"]
    assert key_changes({"format": None}, base) == ["key format None (current 'fltheory-key/2')"]
    assert key_changes("garbage", base) == ["no key stored"]
