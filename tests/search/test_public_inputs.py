"""Bad input to the public entries of fltheory.search gives typed errors naming the argument
(issue 16, item 3), and the valid calls still do their work."""

import json

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError, ResultsFileError
from fltheory.search import (
    Real,
    Space,
    StrategySpace,
    candidate_seed,
    counterexample_snippet,
    evaluate_point,
    exploration_points,
    get_target,
    instance_document,
    read_table,
    register,
    run_tasks,
)

POINT = {"N": 3, "d": 2, "share": 1.0, "L": 2.0, "mu": 0.5, "heterogeneity": 1.0}


def _row() -> dict:
    return {"point": json.dumps(POINT), "seed": 0, "index": 0, "phase": "explore", "measured": 0.5,
            "bound": 1.0, "ratio": 0.5, "hypotheses": "[]", "fltheory_version": "0"}


def test_seeds_and_designs():
    with pytest.raises(InvalidHyperparameterError, match=r"candidate_seed: seed must be an integer, got nan"):
        candidate_seed(float("nan"), 0)
    with pytest.raises(InvalidHyperparameterError, match=r"candidate_seed: index must be an integer >= 0, got -1"):
        candidate_seed(0, -1)
    assert candidate_seed(np.int64(3), 2) == candidate_seed(3, 2)
    space = Space([Real("x", 0.0, 1.0)])
    with pytest.raises(InvalidHyperparameterError, match=r"exploration_points: space must be a Space"):
        exploration_points("box", 4, 0)
    with pytest.raises(InvalidHyperparameterError, match=r"exploration_points: n must be an integer >= 1"):
        exploration_points(space, 0, 0)
    with pytest.raises(InvalidHyperparameterError, match=r"design must be 'sobol' or 'lhs', got array"):
        exploration_points(space, 4, 0, design=np.array([]))
    pts = exploration_points(space, 4, 0, design="lhs")
    assert pts.shape == (4, 1)
    # a Latin hypercube puts exactly one point in each quarter of [0, 1)
    assert sorted(np.floor(pts[:, 0] * 4).astype(int)) == [0, 1, 2, 3]


def test_spaces_targets_and_points():
    with pytest.raises(InvalidHyperparameterError, match=r"params must be a list or tuple .* got 1.5"):
        Space(1.5)
    with pytest.raises(InvalidHyperparameterError, match=r"description must be a str, got 3"):
        StrategySpace(None, description=3)
    with pytest.raises(InvalidHyperparameterError, match=r"register: target must be a SearchTarget, got 'x'"):
        register("x")
    with pytest.raises(InvalidHyperparameterError, match=r"get_target: name must be a str"):
        get_target(np.array([]))
    with pytest.raises(InvalidHyperparameterError, match=r"evaluate_point: point is not valid JSON"):
        evaluate_point("efl_eq10_depart", "abc", 0)
    with pytest.raises(InvalidHyperparameterError, match=r"evaluate_point: point must be a mapping"):
        evaluate_point("efl_eq10_depart", [1, 2], 0)
    with pytest.raises(InvalidHyperparameterError, match=r"evaluate_point: seed must be an integer >= 0, got -1"):
        evaluate_point("efl_eq10_depart", POINT, -1)
    by_dict = evaluate_point("efl_eq10_depart", POINT, 0)
    by_text = evaluate_point("efl_eq10_depart", json.dumps(POINT), 0)
    assert by_dict.value == by_text.value and by_dict.measured == by_text.measured


def test_documents_of_a_row():
    target = get_target("efl_eq10_depart")
    with pytest.raises(InvalidHyperparameterError, match=r"instance_document: target must be a SearchTarget"):
        instance_document("efl_eq10_depart", _row())
    with pytest.raises(InvalidHyperparameterError, match=r"counterexample_snippet: row lacks the field\(s\) \['seed'"):
        counterexample_snippet(target, {k: v for k, v in _row().items() if k != "seed"})
    with pytest.raises(InvalidHyperparameterError, match=r"row\['point'\] must be JSON text"):
        instance_document(target, {**_row(), "point": 1.0})
    doc = instance_document(target, _row())
    assert doc["point"] == POINT and doc["seed"] == 0
    assert "evaluate_point" in counterexample_snippet(target, _row())


def test_tables_and_tasks(tmp_path):
    pytest.importorskip("pyarrow")
    with pytest.raises(InvalidHyperparameterError, match=r"read_table: out must be a directory path, got 1.0"):
        read_table(1.0)
    with pytest.raises(ResultsFileError, match=r"results.parquet: cannot read the search table"):
        read_table(tmp_path)
    with pytest.raises(InvalidHyperparameterError, match=r"run_tasks: tasks must be a list of zero-argument"):
        run_tasks(1.0)
    with pytest.raises(InvalidHyperparameterError, match=r"run_tasks: processes must be an integer >= 1"):
        run_tasks([], processes=0)
    with pytest.raises(InvalidHyperparameterError, match=r"run_tasks: timeout must be finite and > 0, got -1.0"):
        run_tasks([], timeout=-1.0)
    with pytest.raises(InvalidHyperparameterError, match=r"run_tasks: on_result must be None or a callable"):
        run_tasks([], on_result=3)
    seen: list[int] = []
    assert run_tasks([lambda: 1, lambda: 2], on_result=lambda i, _: seen.append(i)) == [1, 2]
    assert sorted(seen) == [0, 1]
