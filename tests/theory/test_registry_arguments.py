"""Bad arguments of the registry's public functions give typed errors naming the argument, the value
and what is expected; file arguments never lead to reading or writing outside the paths given."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError, OutputDirectoryError, ResultsFileError
from fltheory.theory.registry import (ITEMS, Item, Verdict, coverage_counts, coverage_table, item, items,
                                      read_checks, update_readme, verdict, verdicts)
from fltheory.theory.registry.table import BEGIN, END, readme_block
from fltheory.theory.registry.verdicts import item_checks

CHECKED = next(it for it in ITEMS if it.checks)
EXPERIMENT, THEOREM = CHECKED.checks[0].split(":")


def _results(tmp_path, rows):
    (tmp_path / f"{EXPERIMENT}.json").write_text(json.dumps({"checks": rows}))
    return tmp_path


@pytest.mark.parametrize(("call", "argument", "shown"), [
    (lambda: item(np.ones(3)), "key", "array"),
    (lambda: item(""), "key", "''"),
    (lambda: item("efl:no-such-item"), "key", "efl:no-such-item"),
    (lambda: items(np.ones(2)), "paper", "array"),
    (lambda: coverage_counts(3.0), "items", "3.0"),
    (lambda: coverage_counts((CHECKED, "x")), "items[1]", "'x'"),
    (lambda: coverage_counts(before="yes"), "before", "'yes'"),
    (lambda: coverage_table("abc"), "items", "'abc'"),
    (lambda: item_checks(None), "it", "None"),
    (lambda: verdict("efl:thm1"), "it", "efl:thm1"),
    (lambda: verdicts(ITEMS, results_dir=1.5), "results_dir", "1.5"),
    (lambda: read_checks("figures", "../README"), "experiment", "../README"),
    (lambda: read_checks("figures", ""), "experiment", "''"),
    (lambda: read_checks(b"figures", EXPERIMENT), "results_dir", "b'figures'"),
    (lambda: verdict(CHECKED, "figures", cache=[]), "cache", "[]"),
    (lambda: verdict(CHECKED, "figures", cache={EXPERIMENT: 3}), "cache", "3"),
    (lambda: update_readme(np.nan), "path", "nan"),
    (lambda: update_readme(""), "path", "''"),
    (lambda: Verdict("holds", float("nan"), "d", "tests"), "verdict ratio", "nan"),
    (lambda: Verdict(np.ones(2), None, "d", "tests"), "verdict status", "array"),
    (lambda: Item("efl:x", "efl", "Theorem 1", np.ones(2), "s", note="n"), "item kind", "array"),
    (lambda: Item("efl:x", "efl", "Theorem 1", "theorem", "s", tests=["t"], note="n"), "tests", "['t']"),
    (lambda: Item("efl:x", "efl", "Theorem 1", "theorem", "s", note="n", checkable=1), "checkable", "1"),
])
def test_bad_arguments_give_typed_errors_naming_argument_and_value(call, argument, shown):
    with pytest.raises(InvalidHyperparameterError) as info:
        call()
    assert argument in str(info.value) and shown in str(info.value)


def test_a_results_dir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("not a directory")
    with pytest.raises(InvalidHyperparameterError, match="results_dir must be a directory"):
        verdict(CHECKED, f)


def test_an_absent_results_dir_means_not_evaluated(tmp_path):
    assert read_checks(tmp_path / "absent", EXPERIMENT) is None
    assert verdict(CHECKED, tmp_path / "absent").status == "not evaluated"


@pytest.mark.parametrize(("row", "field"), [
    ("a string row", "must be an object"),
    ({"theorem": THEOREM, "status": "holds", "ratio": "big"}, "ratio"),
    ({"theorem": THEOREM, "status": "holds", "ratio": True}, "ratio"),
    ({"theorem": THEOREM, "status": "holds", "ratio": float("nan")}, "ratio"),
    ({"theorem": THEOREM, "status": "fine", "ratio": 0.5}, "status"),
    ({"theorem": 3, "status": "holds", "ratio": 0.5}, "theorem"),
])
def test_malformed_result_rows_are_results_file_errors(tmp_path, row, field):
    _results(tmp_path, [row])
    with pytest.raises(ResultsFileError, match=field) as info:
        verdict(CHECKED, tmp_path)
    assert f"{EXPERIMENT}.json" in str(info.value)


def test_well_formed_rows_give_the_verdict(tmp_path):
    _results(tmp_path, [{"theorem": THEOREM, "status": "violated", "ratio": 2, "detail": "instance"}])
    v = verdict(CHECKED, tmp_path)
    assert (v.status, v.ratio) == ("violated", 2.0)


def test_update_readme_writes_only_the_given_file(tmp_path):
    readme = tmp_path / "README.md"
    other = tmp_path / "other.md"
    readme.write_text(f"head\n{BEGIN}\nstale\n{END}\ntail\n")
    other.write_text("untouched")
    assert update_readme(readme) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "other.md"]
    assert other.read_text() == "untouched"
    assert readme_block(readme) == coverage_table()
    assert readme.read_text().startswith("head\n") and readme.read_text().endswith("tail\n")


@pytest.mark.parametrize("setup", ["absent", "directory", "binary", "no markers"])
def test_update_readme_bad_paths_are_typed_and_write_nothing(tmp_path, setup):
    target = tmp_path / "target"
    if setup == "directory":
        target.mkdir()
    elif setup == "binary":
        target.write_bytes(b"\xff\xfe\x00bad")
    elif setup == "no markers":
        target.write_text("no markers here")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(InvalidHyperparameterError, match="path"):
        update_readme(target)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_update_readme_unwritable_file_is_an_output_error(tmp_path, monkeypatch):
    """A failing write (read-only file, full disk: simulated, since root may write anything) is an
    OutputDirectoryError naming the file and the system error."""
    readme = tmp_path / "README.md"
    readme.write_text(f"{BEGIN}\nstale\n{END}\n")

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(readme), "write_text", refuse)
    with pytest.raises(OutputDirectoryError, match=r"README\.md.*cannot be written.*Permission denied"):
        update_readme(readme)


def test_cli_reports_a_bad_out_directory_with_exit_code_2(tmp_path, capsys):
    from fltheory.cli import main
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    assert main(["theorems", "--out", str(not_a_dir)]) == 2
    assert "results_dir must be a directory" in capsys.readouterr().err
    _results(tmp_path, [{"theorem": THEOREM, "status": "holds", "ratio": "big"}])
    assert main(["theorems", "--out", str(tmp_path)]) == 2
    assert "ratio must be null or a finite number" in capsys.readouterr().err
