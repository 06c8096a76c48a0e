"""The counterexample search's checks join the registry verdicts of the bounds it searches: every mapped
item and target exists, the committed bound_search results hold every mapped target, and an item's verdict
carries the search's worst ratio and instance when it is the worst check."""

from __future__ import annotations

import json
from pathlib import Path

from fltheory.search import registered_targets
from fltheory.theory.registry import ITEMS, Item, verdict, verdicts
from fltheory.theory.registry.verdicts import SEARCH_EXPERIMENT, SEARCHED_BOUNDS, item_checks, read_checks

ROOT = Path(__file__).resolve().parents[2]


def test_every_mapped_item_and_search_target_exists():
    keys = {it.key for it in ITEMS}
    assert set(SEARCHED_BOUNDS) <= keys
    targets = set(registered_targets())
    mapped = {k for ks in SEARCHED_BOUNDS.values() for k in ks}
    assert mapped <= targets, mapped - targets
    assert mapped == targets, "a registered search target is mapped to no registry item"
    committed = read_checks(ROOT / "figures", SEARCH_EXPERIMENT)
    assert committed is not None and mapped <= {c["theorem"] for c in committed}


def test_item_checks_append_the_searched_targets():
    it = next(i for i in ITEMS if i.key == "efl:thm2-join")
    assert item_checks(it)[: len(it.checks)] == it.checks
    assert item_checks(it)[len(it.checks):] == ("bound_search:efl_eq11_join", "bound_search:efl_eq11_join_derived")


def test_the_search_worst_ratio_and_instance_reach_the_verdict(tmp_path):
    it = Item(key="local-adaptivity:thm1", paper="local-adaptivity", number="Theorem 1", kind="theorem",
              statement="s", coverage="full", checks=("exp_a:k",))
    (tmp_path / "exp_a.json").write_text(json.dumps({"checks": [
        {"theorem": "k", "status": "holds", "ratio": 0.5, "detail": "a"}]}))
    (tmp_path / "bound_search.json").write_text(json.dumps({"checks": [
        {"theorem": "fedopt_theorem1", "status": "violated", "ratio": 7.0, "detail": "point {...}, seed 5"}]}))
    v = verdict(it, tmp_path)
    assert (v.status, v.ratio) == ("violated", 7.0) and "seed 5" in v.detail
    assert "bound_search.json" in v.source


def test_committed_search_results_show_in_the_verdicts():
    v = verdicts(ITEMS, ROOT / "figures")
    for key in SEARCHED_BOUNDS:
        assert "bound_search.json" in v[key].source, (key, v[key])
    assert v["efl:thm2-join"].ratio >= 2550.0 and "evaluate_point" in v["efl:thm2-join"].detail
