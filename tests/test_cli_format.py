"""`fltheory list` fits 100 columns, `show` prints a readable table or complete JSON, --version, -m."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import fltheory
from fltheory.cli import main
from fltheory.cli_format import WIDTH, describe_value, list_lines, show_json, show_lines

ROOT = Path(__file__).resolve().parents[1]
STORED = sorted((ROOT / "figures").glob("*.json"))


def test_list_of_the_real_registry_fits_100_columns(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 12 and max(len(line) for line in lines) <= WIDTH
    assert "fltheory show NAME" in lines[-1]


def test_list_lines_cut_only_the_title():
    rows = [("a", "violated (stale)", 3, "x" * 500), ("longer_name", "holds", 12, "short title")]
    lines = list_lines(rows, width=60)
    assert all(len(line) <= 60 for line in lines)
    assert "violated (stale)" in lines[1] and lines[1].endswith("...")
    assert lines[2].endswith("short title")


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_show_table_fits_and_json_is_complete(path, capsys):
    assert main(["show", path.stem]) == 0
    table = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in table) <= WIDTH
    assert main(["show", path.stem, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    stored = json.loads(path.read_text())
    assert shown.keys() == stored.keys()
    assert json.dumps(shown["data"], sort_keys=True) == json.dumps(stored["data"], sort_keys=True)


def test_describe_value_never_looks_like_cut_json():
    assert describe_value([1.0, 2.5]) == "[1, 2.5]"
    assert describe_value(list(range(100))) == "100 numbers in [0, 99]"
    assert describe_value([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]) == "8 numbers in [1, 8]"
    assert describe_value(["a", "b"]) == "2 items"
    assert describe_value({"a": 1}) == "1 entries"
    assert describe_value(math.pi) == "3.14159"


def test_show_lines_wrap_long_details():
    doc = {"experiment": {"name": "demo"}, "key": {"mode": "quick", "seed": 0, "config": {"n": 3}},
           "record": {}, "checks": [{"theorem": "t", "status": "holds", "ratio": 0.5, "detail": "w " * 200}],
           "macros": {"m": 1.0}, "data": {"a": {"b": [1.0, 2.0]}}}
    lines = show_lines(doc, "A title", [("t", "Theorem 1")], width=50)
    assert max(len(line) for line in lines) <= 50
    assert "  a.b = [1, 2]" in lines and "  m = 1" in lines and "  n = 3" in lines
    assert json.loads(show_json(doc)) == doc


def test_version_flag_and_python_dash_m(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"fltheory {fltheory.__version__}"
    out = subprocess.run([sys.executable, "-m", "fltheory", "--version"], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == f"fltheory {fltheory.__version__}"


def test_license_file_is_mit():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "fltheory developers" in text
