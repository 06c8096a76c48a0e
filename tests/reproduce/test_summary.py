"""Summaries refuse to mix results of other versions or sources; macros per mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fltheory.cli import main
from fltheory.errors import MixedResultsError
from fltheory.reproduce import discover, macro_name, reproduce
from fltheory.reproduce.summary import macro_prefix

from ..experiments.fake_package import good, make_package


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_results_of_another_library_version_are_refused_unless_allowed(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha"), "beta": good("beta")})
    out = root / "shared"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    # beta as another machine with another numpy would have left it
    path = out / "beta.json"
    doc = json.loads(path.read_text())
    doc["key"]["versions"]["numpy"] = "0.0.1"
    path.write_text(json.dumps(doc))
    summary = (out / "SUMMARY.md").read_bytes()
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "alpha", "--out", str(out), "--force"]) == 1
    text = capsys.readouterr().out
    assert "not summarising" in text and "beta: version of numpy: 0.0.1 ->" in text
    assert "--allow-mixed" in text
    assert (out / "SUMMARY.md").read_bytes() == summary
    with pytest.raises(MixedResultsError):
        reproduce(discover(pkg)[:1], out, show_progress=False, registry=discover(pkg))
    assert main(["--package", pkg, "reproduce", "alpha", "--out", str(out), "--allow-mixed"]) == 0
    assert "STALE: version of numpy: 0.0.1" in (out / "SUMMARY.md").read_text()
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0        # recomputes beta
    assert "STALE" not in (out / "SUMMARY.md").read_text()


def test_macro_names_tell_the_kind_of_run_apart():
    names = {macro_name("alpha", "ratio", macro_prefix(mode, custom))
             for mode in ("quick", "full") for custom in (False, True)}
    assert names == {r"\flAlphaRatio", r"\flFullAlphaRatio", r"\flCustomAlphaRatio",
                     r"\flCustomFullAlphaRatio"}


def test_summary_files_are_not_rewritten_when_unchanged(root):
    pkg = make_package(root, {"alpha": good("alpha")})
    out = root / "o"
    reproduce(discover(pkg), out, show_progress=False)
    stamps = [(out / n).stat().st_mtime_ns for n in ("SUMMARY.md", "macros.tex")]
    reproduce(discover(pkg), out, show_progress=False)
    assert [(out / n).stat().st_mtime_ns for n in ("SUMMARY.md", "macros.tex")] == stamps


def test_tightness_is_read_from_the_checks_behind_the_status():
    """'holds (partly not checkable)' with a not-checkable ratio of 2.3e4 printed tightness 2.3e4
    beside 'holds': the tightness is the worst ratio among the checks that give the status."""
    from fltheory.reproduce import load_experiment
    from fltheory.reproduce.store import StoredResult
    from fltheory.reproduce.summary import _theorem_line

    exp = load_experiment("fltheory_experiments.contraction")
    checks = [{"theorem": "a1-sgd", "status": "holds", "ratio": 0.93, "detail": "sgd"},
              {"theorem": "a1-sgd", "status": "not checkable", "ratio": 2.3e4, "detail": "hypotheses fail"}]
    line = _theorem_line(exp, "a1-sgd", StoredResult(Path("contraction.json"), {"checks": checks}), [])
    assert "holds (partly not checkable)" in line and "tightness (worst measured/bound) 0.93" in line
    checks[0]["status"] = "violated"
    line = _theorem_line(exp, "a1-sgd", StoredResult(Path("contraction.json"), {"checks": checks}), [])
    assert "violated" in line and "tightness (worst measured/bound) 0.93" in line
