"""Declared spaces: decoding, encoding, conditions, neighbourhoods, bad input."""

import json
import math

import numpy as np
import pytest
from hypothesis import strategies as st

from fltheory.errors import InvalidHyperparameterError
from fltheory.search import Categorical, Integer, Real, Space, StrategySpace, space_from_dict


def test_real_linear_and_log_decode_are_the_stated_maps():
    lin, log = Real("a", -1.0, 3.0), Real("b", 0.01, 100.0, log=True)
    for u in (0.0, 0.25, 0.5, 1.0):
        assert lin.decode(u) == pytest.approx(-1.0 + 4.0 * u, rel=1e-15, abs=1e-15)
        assert log.decode(u) == pytest.approx(0.01 * 1e4 ** u, rel=1e-13)
        assert lin.encode(lin.decode(u)) == pytest.approx(u, abs=1e-15)
        assert log.encode(log.decode(u)) == pytest.approx(u, abs=1e-13)
    assert log.decode(0.5) == pytest.approx(1.0, rel=1e-13)      # geometric midpoint


def test_integer_cells_are_equal_and_cover_every_value():
    p = Integer("n", 1, 6)
    u = (np.arange(6000) + 0.5) / 6000
    counts = np.bincount([p.decode(x) for x in u], minlength=7)[1:]
    assert np.all(counts == 1000)
    assert all(p.decode(p.encode(v)) == v for v in range(1, 7))
    q = Integer("m", 1, 1000, log=True)
    values = [q.decode(x) for x in u]
    assert min(values) == 1 and max(values) == 1000
    assert all(q.decode(q.encode(v)) == v for v in (1, 10, 999))


def test_categorical_and_condition():
    space = Space([Categorical("kind", ["join", "depart"]),
                   Real("share", 0.1, 10.0, log=True, when={"kind": ["join"]}),
                   Integer("a", 0, 3, when={"kind": ["depart"]})])
    join = space.decode([0.1, 0.5, 0.9])
    depart = space.decode([0.9, 0.5, 0.9])
    assert join == {"kind": "join", "share": pytest.approx(1.0)}
    assert depart == {"kind": "depart", "a": 3}


def test_neighbours_move_one_discrete_coordinate_and_keep_exact_reals():
    space = Space([Integer("N", 1, 3), Categorical("c", ["x", "y", "z"]), Real("r", 0.0, 1.0)])
    point = {"N": 1, "c": "y", "r": 0.123456789}
    nbs = space.neighbours(point)
    assert {(n["N"], n["c"]) for n in nbs} == {(2, "y"), (1, "x"), (1, "z")}
    assert all(n["r"] == 0.123456789 for n in nbs)


@pytest.mark.parametrize("make, text", [
    (lambda: Real("a", 2.0, 1.0), "inverted range"),
    (lambda: Integer("n", 5, 1), "inverted range"),
    (lambda: Real("a", 0.0, 1.0, log=True), "low > 0"),
    (lambda: Real("a", 0.0, math.inf), "finite"),
    (lambda: Categorical("c", []), "empty"),
    (lambda: Integer("n", 1.5, 3), "integer"),
    (lambda: Space([]), "at least one"),
    (lambda: Space([Real("a", 0, 1), Real("a", 0, 2)]), "twice"),
    (lambda: Space([Real("a", 0, 1, when={"k": ["x"]})]), "not a Categorical"),
    (lambda: space_from_dict({"params": [{"type": "complex", "name": "z"}]}), "type must be"),
])
def test_bad_spaces_raise_typed_errors_naming_the_problem(make, text):
    with pytest.raises(InvalidHyperparameterError, match=text):
        make()


def test_json_round_trip():
    space = Space([Categorical("kind", ["a", "b"]), Real("x", 1e-3, 1.0, log=True, when={"kind": ["a"]}),
                   Integer("N", 1, 6, shrink=True)])
    again = space_from_dict(json.loads(space.to_json()))
    assert again == space
    u = np.array([0.3, 0.7, 0.9])
    assert again.decode(u) == space.decode(u)


def test_strategy_space_is_deterministic_per_seed_and_distinct():
    strat = st.fixed_dictionaries({"n": st.integers(1, 50), "x": st.floats(0.0, 1.0)})
    space = StrategySpace(strat)
    a, b = space.sample(20, seed=3), space.sample(20, seed=3)
    assert a == b and len(a) == 20
    assert len({json.dumps(p, sort_keys=True) for p in a}) == 20
