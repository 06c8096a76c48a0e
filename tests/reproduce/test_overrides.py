"""Config overrides: parsing, checking against the declared fields, and where the results go."""

from __future__ import annotations

import json

import pytest

from fltheory.cli import main
from fltheory.errors import InvalidHyperparameterError
from fltheory.reproduce import apply_overrides, load_config_file, parse_assignments, result_dir

from ..experiments.fake_package import good, make_package

BASE = {"n": 200, "lr": 0.5, "flag": False, "name": "a", "grid": [1, 2.5], "rounds": {"MLP": 40, "CNN": 10}}


def test_parse_assignments_reads_json_values_and_plain_strings():
    assert parse_assignments(["n=3", "lr=1e-3", "flag=true", "grid=[1, 2]", "name=abc", "rounds.MLP=7"]) == \
        {"n": 3, "lr": 1e-3, "flag": True, "grid": [1, 2], "name": "abc", "rounds.MLP": 7}
    with pytest.raises(InvalidHyperparameterError, match="--set expects key=value, got 'n'"):
        parse_assignments(["n"])


def test_apply_checks_types_and_merges_dict_fields():
    cfg = apply_overrides("x", BASE, {"n": 3, "lr": 1, "rounds.MLP": 7, "grid": [3]})
    assert cfg == {**BASE, "n": 3, "lr": 1.0, "grid": [3], "rounds": {"MLP": 7, "CNN": 10}}
    assert isinstance(cfg["lr"], float)
    assert BASE["rounds"]["MLP"] == 40                            # the declared config is untouched
    assert apply_overrides("x", BASE, {"rounds": {"CNN": 2}})["rounds"] == {"MLP": 40, "CNN": 2}


@pytest.mark.parametrize("overrides, message", [
    ({"nn": 3},
     "unknown config field 'nn'; valid fields: n, lr, flag, name, grid, rounds, rounds.MLP, rounds.CNN"),
    ({"rounds.RNN": 3}, "unknown config field 'rounds.RNN'"),
    ({"n": 2.5}, "--set n=2.5 is not an int"),
    ({"n": True}, "--set n=true is not an int"),
    ({"lr": "fast"}, "--set lr=\"fast\" is not a number"),
    ({"flag": 1}, "--set flag=1 is not a bool"),
    ({"name": 3}, "--set name=3 is not a str"),
    ({"grid": 3}, "--set grid=3 is not a list"),
    ({"grid": ["a"]}, "is not a list of numbers"),
    ({"rounds": 5}, "--set rounds=5 is not an object"),
    ({"lr": float("inf")}, "is not a finite value"),
])
def test_bad_overrides_are_refused_with_a_typed_error(overrides, message):
    with pytest.raises(InvalidHyperparameterError) as info:
        apply_overrides("x", BASE, overrides)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_config_files_json_and_toml(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"n": 5, "rounds": {"MLP": 3}}))
    (tmp_path / "c.toml").write_text("n = 5\n[rounds]\nMLP = 3\n")
    assert load_config_file(tmp_path / "c.json") == load_config_file(tmp_path / "c.toml") == \
        {"n": 5, "rounds": {"MLP": 3}}
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InvalidHyperparameterError, match=r"bad\.json: not valid JSON"):
        load_config_file(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(InvalidHyperparameterError, match="expected an object of config fields"):
        load_config_file(tmp_path / "list.json")
    with pytest.raises(InvalidHyperparameterError, match="cannot be read"):
        load_config_file(tmp_path / "missing.json")


def test_cli_set_and_config_write_their_own_directory_and_key(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = make_package(tmp_path, {"alpha": good("alpha"), "beta": good("beta")})
    out = tmp_path / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    default = json.loads((out / "alpha.json").read_text())
    assert main(["--package", pkg, "reproduce", "alpha", "--out", str(out), "--set", "n=50"]) == 0
    custom_dir = result_dir(out, "quick", "alpha", {"n": 50})
    assert custom_dir.parent == out / "custom" and custom_dir.name.startswith("alpha-quick-")
    doc = json.loads((custom_dir / "alpha.json").read_text())
    assert doc["key"]["config"]["n"] == 50 and doc["key"]["overrides"] == {"n": 50}
    assert doc["record"]["overrides"] == {"n": 50} and doc["record"]["config"]["n"] == 50
    assert len(doc["data"]["first"]) == 50
    assert json.loads((out / "alpha.json").read_text()) == default         # the default run is untouched
    assert r"\flCustomAlphaWorstRatio" in (custom_dir / "macros.tex").read_text()
    assert "overrides {'n': 50}" in (custom_dir / "SUMMARY.md").read_text()
    assert "`beta`" not in (custom_dir / "SUMMARY.md").read_text()
    # the same override from a file lands in the same place and is up to date
    (tmp_path / "o.json").write_text('{"n": 50}')
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "alpha", "--out", str(out),
                 "--config", str(tmp_path / "o.json")]) == 0
    assert "alpha: up to date" in capsys.readouterr().out
    # refused: unknown key (with the valid ones), no or several experiment names
    assert main(["--package", pkg, "reproduce", "alpha", "--out", str(out), "--set", "m=1"]) == 2
    assert "unknown config field 'm'; valid fields: n, reps" in capsys.readouterr().out
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--set", "n=1"]) == 2
    assert "name exactly one experiment" in capsys.readouterr().out
    assert main(["--package", pkg, "reproduce", "alpha", "beta", "--out", str(out), "--set", "n=1"]) == 2
