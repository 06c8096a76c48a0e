"""`fltheory reproduce / list / show` on throw-away experiment packages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from fltheory.cli import main

from .experiments.fake_package import failing, good, make_package, rewrite

NUMBERS = ("data", "checks", "macros", "key", "experiment")


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def numbers(path: Path) -> dict:
    doc = json.loads(path.read_text())
    return {k: doc[k] for k in NUMBERS}


def test_reproduce_with_empty_registry_prints_it_and_exits_zero(root, capsys):
    pkg = make_package(root, {})
    assert main(["--package", pkg, "reproduce", "--out", str(root / "out")]) == 0
    out = capsys.readouterr().out
    assert f"registry ({pkg}): 0 experiment(s)" in out


def test_reproduce_writes_every_output(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha"), "beta": good("beta", axes=3)})
    out = root / "figs" / "seeds" / "5"          # a master seed other than 0 has its own directory
    assert main(["--package", pkg, "reproduce", "--out", str(root / "figs"), "--seed", "5"]) == 0
    for name, axes in (("alpha", 2), ("beta", 3)):
        for suffix in (".pdf", ".png", ".json"):
            assert (out / f"{name}{suffix}").stat().st_size > 0
        assert (out / f"{name}.pdf").read_bytes().startswith(b"%PDF")
        img = imread(out / f"{name}.png")
        assert img.ndim == 3 and float(np.var(img[..., :3])) > 0.0        # not blank
        doc = json.loads((out / f"{name}.json").read_text())
        assert doc["experiment"]["expected_axes"] == axes
        assert doc["key"]["mode"] == "quick" and doc["key"]["seed"] == 5
        assert doc["key"]["config"] == {"n": 200, "reps": 3}
        assert len(doc["data"]["means"]) == 3
        rec = doc["record"]
        assert rec["seed"] == 5 and rec["config"] == {"n": 200, "reps": 3}
        assert {"numpy", "scipy", "sympy", "cvxpy", "matplotlib", "fltheory"} <= set(rec["versions"])
        assert rec["overrides"] == {} and rec["data_source"] == {} and rec["wall_seconds"] > 0
        statuses = {c["theorem"]: c["status"] for c in doc["checks"]}
        assert statuses["never"] == "not checkable"
        # the check's ratio is recomputable from the stored numbers
        clt = next(c for c in doc["checks"] if c["theorem"] == "clt")
        expected = np.max(np.abs(doc["data"]["means"])) / (4.0 / np.sqrt(200))
        assert clt["ratio"] == pytest.approx(expected, rel=1e-12)
        assert clt["status"] == ("holds" if expected <= 1 else "violated")
    # macros.tex: one valid \newcommand per headline number, unique names
    lines = [ln for ln in (out / "macros.tex").read_text().splitlines() if not ln.startswith("%")]
    names = []
    for ln in lines:
        m = re.fullmatch(r"\\newcommand\{(\\[A-Za-z]+)\}\{(.+)\}", ln)
        assert m, ln
        names.append(m.group(1))
        float(m.group(2))  # plain numbers at this scale
    assert len(names) == len(set(names)) == 4
    assert r"\flSeedFiveAlphaNTwo" in names and r"\flSeedFiveBetaWorstRatio" in names
    # SUMMARY.md: one line per declared theorem
    summary = [ln for ln in (out / "SUMMARY.md").read_text().splitlines() if ln.startswith("- ")]
    assert len(summary) == 4
    never = [ln for ln in summary if "Unmeasurable statement" in ln]
    assert len(never) == 2 and all("**not checkable**" in ln and "no bound to evaluate" in ln for ln in never)
    clt_lines = [ln for ln in summary if "Fake theorem, eq. 1" in ln]
    assert all(re.search(r"tightness \(worst measured/bound\) [0-9.e+-]+", ln) for ln in clt_lines)


def test_same_seed_same_numbers_and_stale_detection(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha"), "gamma": good("gamma")})
    out = root / "o"
    args = ["--package", pkg, "reproduce", "--out", str(out)]
    assert main([*args, "alpha", "gamma"]) == 0
    args = [*args, "alpha"]
    first = numbers(out / "alpha.json")
    stamp = (out / "alpha.json").stat().st_mtime_ns
    capsys.readouterr()
    # unchanged -> skipped, file untouched
    assert main(args) == 0
    assert "alpha: up to date" in capsys.readouterr().out
    assert (out / "alpha.json").stat().st_mtime_ns == stamp
    # --force recomputes, same seed -> identical numbers
    assert main([*args, "--force"]) == 0
    assert (out / "alpha.json").stat().st_mtime_ns != stamp
    assert numbers(out / "alpha.json") == first
    # another seed -> its own directory, different numbers; seed 0 untouched
    assert main([*args, "--seed", "1"]) == 0
    assert numbers(out / "seeds" / "1" / "alpha.json")["data"]["means"] != first["data"]["means"]
    capsys.readouterr()
    assert main(args) == 0
    assert "alpha: up to date" in capsys.readouterr().out
    assert numbers(out / "alpha.json") == first
    # changed config -> recomputed with the new config
    rewrite(root, pkg, "alpha", good("alpha", n=300))
    capsys.readouterr()
    assert main(args) == 0
    assert "alpha: up to date" not in capsys.readouterr().out
    assert numbers(out / "alpha.json")["key"]["config"]["n"] == 300
    # code-only change (a comment) -> stale by code hash
    rewrite(root, pkg, "alpha", good("alpha", n=300) + "\n# touched\n")
    capsys.readouterr()
    assert main(args) == 0
    assert "alpha: up to date" not in capsys.readouterr().out
    # missing figure -> redone
    (out / "alpha.png").unlink()
    assert main(args) == 0
    assert (out / "alpha.png").exists()
    # running one experiment keeps the others in SUMMARY.md and macros.tex
    assert main([*args, "--force"]) == 0
    assert "`gamma`" in (out / "SUMMARY.md").read_text()
    assert r"\flGammaWorstRatio" in (out / "macros.tex").read_text()
    # --full is another mode, in its own directory with its own summary and macro names
    capsys.readouterr()
    assert main([*args, "--full"]) == 0
    assert json.loads((out / "full" / "alpha.json").read_text())["key"]["mode"] == "full"
    assert json.loads((out / "alpha.json").read_text())["key"]["mode"] == "quick"
    assert r"\flFullAlphaWorstRatio" in (out / "full" / "macros.tex").read_text()
    assert "full mode" in (out / "full" / "SUMMARY.md").read_text()
    assert "(quick mode" in (out / "SUMMARY.md").read_text()


def test_config_with_tuples_is_fresh_after_a_json_round_trip(root, capsys):
    src = good("alpha").replace('QUICK = {"n": 200, "reps": 3}', 'QUICK = {"n": 200, "reps": 3, "grid": (1, 2.5)}')
    pkg = make_package(root, {"alpha": src})
    args = ["--package", pkg, "reproduce", "--out", str(root / "o")]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0
    assert "alpha: up to date" in capsys.readouterr().out


def test_failure_is_reported_and_others_complete_in_parallel(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha"), "broken": failing("broken"),
                              "gamma": good("gamma")})
    out = root / "par"
    code = main(["--package", pkg, "reproduce", "--out", str(out), "--jobs", "2"])
    assert code == 1
    text = capsys.readouterr().out
    assert "broken: FAILED" in text and "boom from broken" in text
    assert (out / "alpha.json").exists() and (out / "gamma.json").exists()
    log = (out / "broken.error.log").read_text()
    assert "Traceback" in log and "RuntimeError: boom from broken" in log
    assert not (out / "broken.json").exists()
    # parallel results equal serial ones (per-experiment generators)
    serial = root / "ser"
    assert main(["--package", pkg, "reproduce", "alpha", "gamma", "--out", str(serial)]) == 0
    for name in ("alpha", "gamma"):
        assert numbers(out / f"{name}.json") == numbers(serial / f"{name}.json")
    # list shows the last result of each
    capsys.readouterr()
    assert main(["--package", pkg, "list", "--out", str(out)]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"broken\s+quick: failed", listing)
    assert re.search(r"alpha\s+quick: (holds|violated).*, [0-9.]+ s \| full: not run", listing)
    assert main(["--package", pkg, "list", "--out", str(root / "nothing")]) == 0
    assert re.search(r"alpha\s+quick: not run \| full: not run", capsys.readouterr().out)
    rewrite(root, pkg, "alpha", good("alpha", n=201))
    assert main(["--package", pkg, "list", "--out", str(out)]) == 0
    listing = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in listing.splitlines()[1:]}
    assert "(stale: config changed; source of" in lines["alpha"] and "stale" not in lines["gamma"]
    assert re.match(r"gamma\s+quick: (holds|violated)", lines["gamma"])


def test_wrong_axes_count_fails_that_experiment(root, capsys):
    src = good("alpha").replace("EXPECTED_AXES = 2", "EXPECTED_AXES = 5")
    pkg = make_package(root, {"alpha": src})
    assert main(["--package", pkg, "reproduce", "--out", str(root / "o")]) == 1
    assert "drew 2 axes, EXPECTED_AXES declares 5" in (root / "o" / "alpha.error.log").read_text()


def test_show_prints_the_numbers(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha")})
    out = root / "o"
    assert main(["--package", pkg, "show", "alpha", "--out", str(out)]) == 0
    assert "not run" in capsys.readouterr().out
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["--package", pkg, "show", "alpha", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads((out / "alpha.json").read_text())
    assert "never: not checkable" in text
    assert f"worst_ratio = {doc['macros']['worst_ratio']:.6g}" in text
    assert f"means = [{', '.join(f'{m:.6g}' for m in doc['data']['means'])}]" in text
    assert main(["--package", pkg, "show", "nope", "--out", str(out)]) == 2


def test_usage_errors_exit_two(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha")})
    assert main(["--package", pkg, "reproduce", "nope", "--out", str(root / "o")]) == 2
    assert "unknown experiment(s) ['nope']" in capsys.readouterr().out
    assert main(["--package", pkg, "reproduce", "--jobs", "0", "--out", str(root / "o")]) == 2
    assert main(["--package", pkg, "reproduce", "--seed", "-1", "--out", str(root / "o")]) == 2
    assert "seed must be an int >= 0, got -1" in capsys.readouterr().out
    broken = make_package(root, {"a": good("a").replace('NAME = "a"', 'NAME = "b"')})
    assert main(["--package", broken, "list"]) == 2
    assert "NAME is 'b'" in capsys.readouterr().out


def test_macro_name_collision_is_an_error(root, capsys):
    src = good("alpha").replace('"n_2": results["n"]}', '"n_2": results["n"], "n2": 1.0}')
    assert '"n2": 1.0' in src
    pkg = make_package(root, {"alpha": src})
    assert main(["--package", pkg, "reproduce", "--out", str(root / "o")]) == 2
    assert r"both map to the macro \flAlphaNTwo" in capsys.readouterr().out
