"""Argument contracts of the reproduce framework's public functions (issue 16, item 3):
every wrong argument is a typed error naming it, raised at the call, before any file or
global state (``sys.path``) is touched; the values of valid calls are unchanged."""

from __future__ import annotations

import hashlib
import json
import math
import sys

import numpy as np
import pytest

from fltheory.errors import ExperimentDefinitionError, InvalidHyperparameterError, InvalidProblemError
from fltheory.reproduce import (
    experiment_rng,
    format_macro_value,
    load_experiment,
    macro_name,
    overall_status,
    parse_assignments,
    result_dir,
    silent_progress,
)
from fltheory.reproduce.locks import exclusive, lock_path
from fltheory.reproduce.progress import reporting_progress
from fltheory.reproduce.store import is_disk_error, override_digest


def test_override_digest_is_the_sha256_of_the_sorted_compact_json():
    """The digest names custom result directories: it must not change for valid overrides."""
    overrides = {"n": 3, "lrs": [0.1, 0.2], "name": "x"}
    text = json.dumps(overrides, sort_keys=True, separators=(",", ":"))
    assert override_digest(overrides) == hashlib.sha256(text.encode()).hexdigest()[:12]
    with pytest.raises(InvalidProblemError, match="overrides must hold JSON values"):
        override_digest({"n": math.nan})
    with pytest.raises(InvalidProblemError, match="overrides must be a mapping with str keys"):
        override_digest({1: 2})  # type: ignore[dict-item]


def test_format_macro_value_refuses_what_is_not_a_finite_number():
    assert format_macro_value(np.int64(3)) == "3"
    assert format_macro_value(0.123456) == "0.1235"
    assert format_macro_value(2.5e-7) == "\\ensuremath{2.5\\times10^{-7}}"
    for bad in (math.nan, math.inf, np.float32("nan"), True, "1.0", np.ones(2)):
        with pytest.raises(InvalidProblemError, match="value must be a finite real number"):
            format_macro_value(bad)  # type: ignore[arg-type]


def test_macro_name_and_overall_status_check_their_arguments():
    assert macro_name("objective_shift", "max_ratio_n2", "Full") == "\\flFullObjectiveShiftMaxRatioNTwo"
    with pytest.raises(InvalidProblemError, match="key must be a non-empty str"):
        macro_name("objective_shift", 2)  # type: ignore[arg-type]
    assert overall_status([{"status": "holds"}, {"status": "not checkable"}]) == "holds (partly not checkable)"
    with pytest.raises(InvalidProblemError, match=r"checks\[1\] must be a mapping whose 'status'"):
        overall_status([{"status": "holds"}, {"status": "fine"}])
    with pytest.raises(InvalidProblemError, match="checks must be a list"):
        overall_status("holds")  # type: ignore[arg-type]


def test_progress_callbacks_check_their_arguments_at_the_call():
    assert list(silent_progress(range(3), desc="loop", total=3)) == [0, 1, 2]
    with pytest.raises(InvalidProblemError, match="iterable must be iterable"):
        silent_progress(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="total must be an integer"):
        silent_progress([1], total=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="send must be a callable"):
        reporting_progress("exp", 5)  # type: ignore[arg-type]
    events: list[object] = []
    progress = reporting_progress("exp", events.append)
    with pytest.raises(InvalidProblemError, match="desc must be a str"):
        progress([1], desc=3)  # type: ignore[arg-type]
    assert not events                       # refused before any event is sent
    assert list(progress([1, 2])) == [1, 2] and events


def test_lock_arguments_are_checked_before_the_lock_file_is_created(tmp_path):
    with pytest.raises(InvalidProblemError, match=r"poll must be a number of seconds in \(0, 60\]"):
        exclusive(tmp_path, "exp", poll=0.0)
    with pytest.raises(InvalidProblemError, match="stem must be a file-name stem"):
        lock_path(tmp_path, "a/b")
    assert not list(tmp_path.iterdir())
    with exclusive(tmp_path, "exp") as waited:
        assert waited is False and lock_path(tmp_path, "exp").exists()
    assert not list(tmp_path.iterdir())


def test_load_experiment_refuses_a_bad_sys_path_entry_without_touching_sys_path(tmp_path):
    before = list(sys.path)
    for bad in (math.nan, str(tmp_path / "missing"), np.array(["x"]), ""):
        with pytest.raises(ExperimentDefinitionError, match="sys_path_entry must be None or the path"):
            load_experiment("some_package.some_module", bad)  # type: ignore[arg-type]
    with pytest.raises(ExperimentDefinitionError, match="module_name must be a dotted module name"):
        load_experiment("not a module")
    assert sys.path == before


def test_seeds_modes_and_names_are_checked():
    a = experiment_rng(3, "exp").standard_normal(2)
    assert np.array_equal(a, experiment_rng(np.int64(3), "exp").standard_normal(2))
    for seed in (-1, 1.0, True, "3", 2**63):
        with pytest.raises(InvalidProblemError, match="seed must be an integer"):
            experiment_rng(seed, "exp")  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match="name must be a non-empty str"):
        experiment_rng(0, b"exp")  # type: ignore[arg-type]
    with pytest.raises(InvalidProblemError, match=r"mode must be one of \('quick', 'full'\)"):
        result_dir("out", "fast")
    with pytest.raises(InvalidProblemError, match="needs the experiment name"):
        result_dir("out", "quick", None, {"n": 1})
    with pytest.raises(InvalidHyperparameterError, match="--set expects key=value"):
        parse_assignments(["n=1", 2])  # type: ignore[list-item]
    with pytest.raises(InvalidProblemError, match="exc must be an exception"):
        is_disk_error("ENOSPC")  # type: ignore[arg-type]


def test_an_experiment_module_that_cannot_be_imported_is_a_definition_error():
    with pytest.raises(ExperimentDefinitionError, match=r"cannot import the experiment module 'no_such_pkg_fz\.mod'"):
        load_experiment("no_such_pkg_fz.mod")
