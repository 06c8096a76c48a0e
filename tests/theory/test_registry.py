"""The theorem registry: every entry names code, tests and experiment checks that exist; every item label
of the seed texts is covered; verdicts follow the experiments' results; the CLI prints and filters it."""

from __future__ import annotations

import ast
import importlib
import json
from functools import cache
from pathlib import Path

import pytest

from fltheory.cli import main
from fltheory.errors import InvalidHyperparameterError
from fltheory.theory.registry import ITEMS, PAPERS, Item, items, verdict, verdicts

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("registry_seed_items.txt")


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


@cache
def _test_names(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))


@cache
def _experiment_keys(name: str) -> frozenset[str]:
    module = importlib.import_module(f"experiments.{name}")
    return frozenset(t.key for t in module.THEOREMS)


@pytest.mark.parametrize("it", ITEMS, ids=lambda it: it.key)
def test_every_named_function_test_and_experiment_check_exists(it):
    for dotted in it.code:
        assert callable(_resolve(dotted)) or isinstance(_resolve(dotted), type), dotted
    for ref in it.tests:
        path, _, name = ref.partition("::")
        assert (ROOT / path).is_file(), f"{it.key}: no test file {path}"
        if name:
            assert name in _test_names(path), f"{it.key}: no test {name} in {path}"
    for ref in it.checks:
        exp, key = ref.split(":")
        assert (ROOT / "experiments" / f"{exp}.py").is_file(), f"{it.key}: no experiment {exp}"
        assert key in _experiment_keys(exp), f"{it.key}: experiment {exp} declares no theorem {key!r}"


def test_the_existence_check_catches_a_missing_function_test_and_check():
    with pytest.raises(AttributeError):
        _resolve("fltheory.theory.bounds.no_such_bound")
    assert "test_no_such_test" not in _test_names("tests/theory/test_registry.py")
    assert "no-such-key" not in _experiment_keys("contraction")


def test_every_item_label_of_the_seed_texts_is_in_the_registry():
    expected = [tuple(p.strip() for p in line.split("|")) for line in EXPECTED.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert len(expected) > 150
    labels = {(it.paper, label) for it in ITEMS for label in it.labels}
    missing = [f"{paper} | {label}" for paper, label in expected if (paper, label) not in labels]
    assert not missing, f"items missing from the registry: {missing}"
    assert {paper for paper, _ in expected} == set(PAPERS)


def test_keys_are_unique_and_every_paper_has_items():
    assert len({it.key for it in ITEMS}) == len(ITEMS)
    for key in PAPERS:
        assert items(key), key
    with pytest.raises(InvalidHyperparameterError, match="paper must be one of"):
        items("no-such-paper")


def test_imported_scaffold_results_are_entries_of_the_icml_version():
    # Theorems I-IV do not exist in arXiv v1 (seed 004): they must not be filed under it
    v1 = {label for it in items("scaffold-v1") for label in it.labels}
    assert not v1 & {"Theorem I", "Theorem II", "Theorem III", "Theorem IV"}
    icml = PAPERS["scaffold-icml"]
    assert icml.seed == "" and "ICML 2020" in icml.venue
    assert PAPERS["scaffold-v1"].version == "v1" and PAPERS["scaffold-v1"].arxiv == "1910.06378"


def test_items_validate_their_fields():
    with pytest.raises(InvalidHyperparameterError, match="kind"):
        Item(key="efl:x", paper="efl", number="eq. 1", kind="proof", statement="s", coverage="full")
    with pytest.raises(InvalidHyperparameterError, match="needs a note"):
        Item(key="efl:x", paper="efl", number="eq. 1", kind="equation", statement="s", coverage="partial")
    with pytest.raises(InvalidHyperparameterError, match="start with its paper"):
        Item(key="x", paper="efl", number="eq. 1", kind="equation", statement="s", coverage="full")


def _results(tmp_path, name, checks):
    (tmp_path / f"{name}.json").write_text(json.dumps({"checks": checks}))


def test_verdict_is_the_worst_status_with_its_largest_ratio(tmp_path):
    it = Item(key="efl:t", paper="efl", number="eq. 1", kind="equation", statement="s", coverage="full",
              checks=("exp_a:k1", "exp_b:k2"))
    _results(tmp_path, "exp_a", [{"theorem": "k1", "status": "holds", "ratio": 0.9, "detail": "a"},
                                 {"theorem": "other", "status": "violated", "ratio": 9.0, "detail": "no"}])
    _results(tmp_path, "exp_b", [{"theorem": "k2", "status": "holds", "ratio": 0.95, "detail": "b"}])
    v = verdict(it, tmp_path)
    assert (v.status, v.ratio) == ("holds", 0.95) and "exp_a.json" in v.source
    _results(tmp_path, "exp_b", [{"theorem": "k2", "status": "violated", "ratio": 1.5, "detail": "inst"},
                                 {"theorem": "k2", "status": "violated", "ratio": 2.5, "detail": "worst"}])
    v = verdict(it, tmp_path)
    assert (v.status, v.ratio) == ("violated", 2.5) and "worst" in v.detail
    _results(tmp_path, "exp_b", [{"theorem": "k2", "status": "not checkable", "ratio": None,
    "detail": "why"}])
    assert verdict(it, tmp_path).status == "not checkable"


def test_verdict_without_results_or_checks(tmp_path):
    it = Item(key="efl:t", paper="efl", number="eq. 1", kind="equation", statement="s", coverage="full",
              checks=("missing_exp:k",))
    v = verdict(it, tmp_path)
    assert v.status == "not evaluated" and "fltheory reproduce" in v.detail
    tested = Item(key="efl:u", paper="efl", number="eq. 1", kind="equation", statement="s", coverage="full",
                  tests=("tests/theory/test_registry.py",))
    assert verdict(tested, tmp_path).short() == "holds [tests]"
    nothing = Item(key="efl:v", paper="efl", number="eq. 1", kind="claim", statement="s", coverage="none",
                   note="not run")
    assert verdict(nothing, tmp_path).status == "not evaluated"
    real = Item(key="efl:w", paper="efl", number="Table 2", kind="table", statement="s", coverage="none",
                checkable=False, note="real data")
    assert verdict(real, tmp_path).status == "not checkable"


def test_committed_figures_give_every_item_a_verdict():
    v = verdicts(ITEMS, ROOT / "figures")
    assert set(v) == {it.key for it in ITEMS}
    # the known findings of the committed results appear as violations
    assert v["efl:thm2-join"].status == "violated" and v["efl:thm2-join"].ratio > 1


def test_cli_prints_and_filters(tmp_path, capsys):
    _results(tmp_path, "objective_shift", [{"theorem": "join", "status": "violated", "ratio": 3.0,
                                            "detail": "instance"}])
    assert main(["theorems", "--paper", "efl", "--status", "violated", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "efl:thm2-join" in out and "violated (3)" in out and "efl:alg1" not in out
    assert "1 item(s): 0 holds, 1 violated" in out
    assert main(["theorems", "--paper", "scaffold-icml", "--long", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Theorem II" in out and "fltheory.theory.bounds.fedavg_lower_bound" in out
    assert "[not a seed]" in out
    with pytest.raises(SystemExit):
        main(["theorems", "--status", "fine"])
