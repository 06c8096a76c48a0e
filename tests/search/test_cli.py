"""``fltheory falsify`` end to end (in-process) and its error exits."""

import json

import pyarrow.parquet as pq

from fltheory.cli import main


def test_falsify_writes_table_and_counterexample(tmp_path, capsys):
    out = tmp_path / "eq11"
    assert main(["falsify", "efl_eq11_join", "--budget", "200", "--seed", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "COUNTEREXAMPLE" in text
    assert pq.read_table(out / "results.parquet").num_rows <= 200
    doc = json.loads((out / "counterexample.json").read_text())
    assert doc["ratio"] > 1 and doc["point"]["N"] == 1


def test_falsify_with_a_space_file_on_a_holding_bound(tmp_path, capsys):
    space = {"params": [{"type": "integer", "name": "N", "low": 2, "high": 3, "shrink": True},
                        {"type": "integer", "name": "d", "low": 1, "high": 2},
                        {"type": "real", "name": "share", "low": 0.1, "high": 10, "log": True},
                        {"type": "real", "name": "L", "low": 1, "high": 10, "log": True},
                        {"type": "real", "name": "mu", "low": 0.1, "high": 1},
                        {"type": "real", "name": "heterogeneity", "low": 0.1, "high": 1}]}
    path = tmp_path / "space.json"
    path.write_text(json.dumps(space))
    out = tmp_path / "eq10"
    argv = ["falsify", "efl_eq10_depart", "--space", str(path), "--budget", "60", "--out", str(out)]
    assert main(argv) == 0
    assert "no counterexample found" in capsys.readouterr().out
    table = pq.read_table(out / "results.parquet").to_pandas()
    assert table["p_N"].between(2, 3).all() and table["p_share"].between(0.1, 10).all()


def test_falsify_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["falsify", "no_such_bound", "--out", str(out)]) == 2
    assert "unknown bound name" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"params": [{"type": "real", "name": "x", "low": 2, "high": 1}]}))
    assert main(["falsify", "efl_eq11_join", "--space", str(bad), "--out", str(out)]) == 2
    assert "inverted range" in capsys.readouterr().out
    assert main(["falsify", "efl_eq11_join", "--budget", "0", "--out", str(out)]) == 2
    assert not out.exists()
    assert main(["falsify", "--list"]) == 0
    assert "efl_eq11_join" in capsys.readouterr().out
