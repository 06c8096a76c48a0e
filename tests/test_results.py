"""fltheory.results: JSON conversion, atomic writes, NPZ side files, provenance."""

from __future__ import annotations

import datetime as dt
import json
import platform
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fltheory.results as results_mod
from fltheory.errors import DivergenceError, InvalidProblemError
from fltheory.results import (
    RunRecord,
    atomic_write,
    git_commit,
    load_json,
    load_results,
    package_versions,
    save_json,
    save_results,
    to_jsonable,
)


def record(config: dict[str, Any] | None = None, seed: int = 0) -> RunRecord:
    return RunRecord.capture(config or {"n": 3}, seed)


def test_to_jsonable_converts_numpy_types():
    out = to_jsonable({"a": np.float32(0.5), "b": np.int64(3), "c": np.bool_(True),
                       "d": np.arange(4).reshape(2, 2), "e": (1, 2.5), "f": None, "g": "s"})
    assert out == {"a": 0.5, "b": 3, "c": True, "d": [[0, 1], [2, 3]], "e": [1, 2.5], "f": None, "g": "s"}
    assert type(out["a"]) is float and type(out["b"]) is int and type(out["c"]) is bool
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("bad, where", [
    ({"x": float("nan")}, "value['x']"),
    ({"x": [1.0, float("inf")]}, "value['x'][1]"),
    ({"x": np.array([0.0, np.nan, 1.0])}, "value['x'][1]"),
    ({"x": np.float64(-np.inf)}, "value['x']"),
])
def test_non_finite_numbers_are_refused_with_their_location(bad, where):
    with pytest.raises(DivergenceError) as info:
        to_jsonable(bad)
    assert where in str(info.value)


@pytest.mark.parametrize("bad, message", [
    ({1: 2}, "JSON keys must be str"),
    ({"x": object()}, "cannot be saved as JSON"),
    ({"x": np.array(["a"])}, "dtype"),
    ({"x": 1 + 2j}, "cannot be saved"),
])
def test_unsupported_values_are_refused(bad, message):
    with pytest.raises(InvalidProblemError, match=message):
        to_jsonable(bad)


def test_save_refuses_nan_and_keeps_old_file(tmp_path):
    path = tmp_path / "r.json"
    save_results(path, {"x": 1.0}, record())
    before = path.read_bytes()
    with pytest.raises(DivergenceError, match=r"data\['x'\]"):
        save_results(path, {"x": float("nan")}, record())
    assert path.read_bytes() == before
    assert "NaN" not in before.decode()


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), finite,
                 st.text(max_size=5))
tree = st.recursive(leaf, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                  st.dictionaries(st.text(max_size=4).filter(lambda k: k != "$npz"),
                                                                  kids, max_size=3)),
                    max_leaves=12)


@given(data=st.dictionaries(st.text(min_size=1, max_size=6), tree, max_size=4))
def test_round_trip_plain_values(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("rt") / "r.json"
    rec = record({"k": 1})
    save_results(path, data, rec, extra={"checks": [{"status": "holds"}]})
    loaded, rec2, extra = load_results(path)
    assert loaded == data
    assert rec2 == rec
    assert extra == {"checks": [{"status": "holds"}]}


@given(arr=hnp.arrays(dtype=st.sampled_from([np.float64, np.float32, np.int32, np.bool_]),
                      shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
                      elements={"allow_nan": False, "allow_infinity": False}),
       limit=st.integers(0, 50))
def test_round_trip_arrays_inline_or_npz(tmp_path_factory, arr, limit):
    path = tmp_path_factory.mktemp("arr") / "res.json"
    save_results(path, {"a": arr, "small": np.arange(3)}, record(), inline_limit=limit)
    loaded, _, _ = load_results(path)
    doc = load_json(path)
    if arr.size > limit:
        # stored beside the JSON with dtype and shape preserved
        assert isinstance(loaded["a"], np.ndarray)
        assert loaded["a"].dtype == arr.dtype and loaded["a"].shape == arr.shape
        np.testing.assert_array_equal(loaded["a"], arr)
        assert re.fullmatch(r"res\.[0-9a-f]{16}\.npz", doc["arrays_file"])
        assert (path.parent / doc["arrays_file"]).exists()
    else:
        assert doc["arrays_file"] is None
        np.testing.assert_array_equal(np.asarray(loaded["a"], dtype=arr.dtype), arr)
    small_inline = 3 <= limit
    assert isinstance(loaded["small"], list) == small_inline


def test_old_npz_is_removed_after_the_new_pair_is_written(tmp_path):
    path = tmp_path / "res.json"
    save_results(path, {"a": np.ones(20)}, record(), inline_limit=5)
    first = load_json(path)["arrays_file"]
    save_results(path, {"a": np.zeros(20)}, record(), inline_limit=5)
    second = load_json(path)["arrays_file"]
    assert first != second
    assert sorted(p.name for p in tmp_path.glob("res.*.npz")) == [second]
    save_results(path, {"a": np.zeros(2)}, record(), inline_limit=5)
    assert list(tmp_path.glob("res.*.npz")) == []


def test_crash_mid_write_leaves_the_old_file_intact(tmp_path):
    path = tmp_path / "f.json"
    save_json(path, {"v": 1})
    with pytest.raises(RuntimeError, match="power cut"):
        with atomic_write(path, "w") as handle:
            handle.write('{"v": 2, "trunc')
            raise RuntimeError("power cut")
    assert load_json(path) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]     # no temp file left


def test_crash_between_npz_and_json_keeps_the_old_pair(tmp_path, monkeypatch):
    path = tmp_path / "res.json"
    save_results(path, {"a": np.arange(10.0)}, record(), inline_limit=0)
    real = results_mod.atomic_write
    calls = []

    def flaky(target, mode="w"):
        calls.append(Path(target).name)
        if Path(target).suffix == ".json":
            raise OSError("disk full")
        return real(target, mode)

    monkeypatch.setattr(results_mod, "atomic_write", flaky)
    with pytest.raises(OSError, match="disk full"):
        save_results(path, {"a": np.arange(10.0) + 1}, record(), inline_limit=0)
    monkeypatch.setattr(results_mod, "atomic_write", real)
    assert calls[0].endswith(".npz") and calls[1] == "res.json"
    loaded, _, _ = load_results(path)
    np.testing.assert_array_equal(loaded["a"], np.arange(10.0))


def test_atomic_write_replaces_content_and_binary_mode(tmp_path):
    path = tmp_path / "sub" / "b.bin"
    with atomic_write(path, "wb") as handle:
        handle.write(b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    with pytest.raises(InvalidProblemError, match="mode must be"):
        with atomic_write(path, "a"):
            pass


def test_reserved_key_is_refused(tmp_path):
    with pytest.raises(InvalidProblemError, match=r"data\['x'\]\[0\] uses the reserved key"):
        save_results(tmp_path / "r.json", {"x": [{"$npz": "a0"}]}, record())


def test_load_rejects_nan_tokens_and_foreign_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"v": NaN}')
    with pytest.raises(InvalidProblemError, match="non-finite JSON token NaN"):
        load_json(p)
    p.write_text('{"format": "other"}')
    with pytest.raises(InvalidProblemError, match="not an fltheory results file"):
        load_results(p)
    with pytest.raises(InvalidProblemError, match=r"must end in .json"):
        save_results(tmp_path / "x.txt", {}, record())


def test_provenance_fields():
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    rec = RunRecord.capture({"lr": np.float64(0.1), "steps": np.int64(3)}, seed=np.int64(7))
    after = dt.datetime.now(dt.timezone.utc)
    assert rec.config == {"lr": 0.1, "steps": 3} and type(rec.config["steps"]) is int
    assert rec.seed == 7
    assert rec.python == platform.python_version()
    stamp = dt.datetime.fromisoformat(rec.timestamp)
    assert stamp.utcoffset() == dt.timedelta(0) and before <= stamp <= after
    assert set(rec.versions) == {"numpy", "scipy", "sympy", "cvxpy", "matplotlib", "fltheory"}
    assert rec.versions["numpy"] == np.__version__
    import fltheory
    assert rec.versions["fltheory"] == fltheory.__version__
    assert rec.git_commit == "unknown" or re.fullmatch(r"[0-9a-f]{40}", rec.git_commit)
    assert RunRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    with pytest.raises(InvalidProblemError, match="missing"):
        RunRecord.from_dict({"seed": 1})


def test_git_commit_never_fails(tmp_path, monkeypatch):
    assert git_commit(tmp_path) == ("unknown", None)          # not a repository
    monkeypatch.setenv("PATH", str(tmp_path))                  # no git at all
    assert git_commit() == ("unknown", None)


def test_git_commit_reads_this_checkout():
    repo = Path(results_mod.__file__).resolve().parent.parent
    if not (repo / ".git").exists():
        pytest.skip("not a git checkout")
    commit, dirty = git_commit()
    assert re.fullmatch(r"[0-9a-f]{40}", commit) and dirty in (True, False)


def test_package_versions_reports_missing_packages():
    assert package_versions(("surely_not_installed_pkg_zz",)) == {"surely_not_installed_pkg_zz": "not installed"}


# --------------------------------------------------------------------------- loading faults, provenance

def _saved(tmp_path):
    path = tmp_path / "r.json"
    save_results(path, {"big": np.arange(20.0), "x": 1}, record(), inline_limit=5)
    return path


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.unlink(), "r.json: no such file"),
    (lambda p: p.write_text(""), "r.json: not valid JSON"),
    (lambda p: p.write_text(p.read_text()[:40]), "r.json: not valid JSON"),
    (lambda p: p.write_bytes(b"\xff\xfe\x00binary"), "r.json: not UTF-8 text"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "data": None})),
     "field 'data' must be an object"),
    (lambda p: p.write_text(json.dumps({k: v for k, v in json.loads(p.read_text()).items()
                                        if k != "record"})),
     "field 'record' must be an object"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()),
                                        "record": {**json.loads(p.read_text())["record"], "seed": "abc"}})),
     "field 'record': RunRecord field 'seed' must be an int or null, got 'abc'"),
    (lambda p: [q.unlink() for q in p.parent.glob("*.npz")], "field 'arrays_file': "),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "arrays_file": "../evil.npz"})),
     "field 'arrays_file' '../evil.npz' leaves the results directory"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "arrays_file": "/etc/passwd"})),
     "leaves the results directory"),
])
def test_loading_a_damaged_results_file_is_a_typed_error_naming_file_and_field(tmp_path, damage, message):
    from fltheory.errors import ResultsFileError
    path = _saved(tmp_path)
    damage(path)
    with pytest.raises(ResultsFileError) as info:
        load_results(path)
    assert message in str(info.value) and str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_record_carries_overrides_data_source_and_wall_time():
    rec = RunRecord.capture({"n": 1}, 0, overrides={"n": 1}, data_source={"scikit-learn": "1.0"},
                            wall_seconds=1.23456)
    assert (rec.overrides, rec.data_source, rec.wall_seconds) == ({"n": 1}, {"scikit-learn": "1.0"}, 1.235)
    old = {k: v for k, v in rec.to_dict().items() if k not in ("overrides", "data_source", "wall_seconds")}
    assert RunRecord.from_dict(old).overrides == {}          # records written before these fields load
    with pytest.raises(InvalidProblemError, match="seed must be an int or None, got 'abc'"):
        RunRecord.capture({}, "abc")  # type: ignore[arg-type]


def test_git_dirty_ignores_the_excluded_output_directory(tmp_path):
    import shutil
    import subprocess
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.json").write_text("1")
    (tmp_path / "code.py").write_text("x = 1")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    (tmp_path / "figures" / "a.json").write_text("2")            # the run's own output changed
    assert git_commit(tmp_path)[1] is True
    assert git_commit(tmp_path, exclude=[tmp_path / "figures"])[1] is False
    (tmp_path / "code.py").write_text("x = 2")                     # the code changed: dirty
    assert git_commit(tmp_path, exclude=[tmp_path / "figures"])[1] is True
    assert git_commit(tmp_path, exclude=[tmp_path.parent / "elsewhere"])[1] is True   # outside the tree


# ------------------------------------------------------------- argument contracts (issue 16, item 3)
@pytest.mark.parametrize("bad", [True, 0, 1, 3.5, b"x.json", "", "a\0b", np.array(["x.json"]), None])
def test_a_path_that_is_not_a_path_is_refused_before_any_file_is_opened(tmp_path, bad):
    """An int or a bool would be taken by ``open`` for a file descriptor (``load_json(True)``
    used to read and close stdout); bytes, floats, arrays, "" and NUL are refused likewise."""
    for call in (lambda: load_json(bad), lambda: load_results(bad), lambda: save_json(bad, {"a": 1}),
                 lambda: atomic_write(bad)):
        with pytest.raises(InvalidProblemError, match=r"path must be a file-system path"):
            call()
    assert not list(tmp_path.iterdir())


def test_atomic_write_checks_its_arguments_at_the_call(tmp_path):
    """The checks run when atomic_write is called, not when the ``with`` block is entered."""
    with pytest.raises(InvalidProblemError, match="mode must be 'w' or 'wb', got 'a'"):
        atomic_write(tmp_path / "x.txt", "a")
    manager = atomic_write(tmp_path / "x.txt")
    assert not list(tmp_path.iterdir())             # nothing happens before ``with``
    with manager as handle:
        handle.write("ok")
    assert (tmp_path / "x.txt").read_text() == "ok"


def test_save_results_refuses_a_record_or_data_of_the_wrong_type(tmp_path):
    record = RunRecord.capture({"n": 1}, 0)
    with pytest.raises(InvalidProblemError, match="record must be a RunRecord"):
        save_results(tmp_path / "r.json", {"x": 1}, record.to_dict())  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="data must be a mapping"):
        save_results(tmp_path / "r.json", [1, 2], record)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="extra must be a mapping"):
        save_results(tmp_path / "r.json", {"x": 1}, record, extra=[("a", 1)])  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_to_jsonable_contract_for_arbitrary_objects():
    """Any object gives plain JSON or a typed error: a self-containing list, a complex number,
    an object array, a non-str ``where`` or a non-callable hook."""
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidProblemError, match="nested too deeply"):
        to_jsonable(loop)
    with pytest.raises(InvalidProblemError, match="type complex"):
        to_jsonable({"z": 1j})
    with pytest.raises(InvalidProblemError, match="dtype object"):
        to_jsonable(np.array([1, "a"], dtype=object))
    with pytest.raises(InvalidProblemError, match="where must be a str"):
        to_jsonable(1.0, where=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="array_hook must be a callable"):
        to_jsonable(np.ones(2), array_hook="x")  # type: ignore[arg-type]
    assert to_jsonable({"a": (np.int64(2), np.float32(0.5), np.bool_(True))}) == {"a": [2, 0.5, True]}


def test_git_commit_and_package_versions_refuse_non_paths_and_non_names():
    with pytest.raises(InvalidProblemError, match="path must be a file-system path"):
        git_commit(1)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="exclude must be a tuple or list of paths"):
        git_commit(None, exclude="figures")
    with pytest.raises(InvalidProblemError, match=r"exclude\[0\] must be a file-system path"):
        git_commit(None, exclude=[2.0])  # type: ignore[list-item]
    with pytest.raises(InvalidProblemError, match="packages must be a tuple"):
        package_versions("numpy")  # type: ignore[arg-type]
