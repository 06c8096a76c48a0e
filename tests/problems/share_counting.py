"""Counting the calls that reach the worker processes of ``with_processes`` (test helper)."""

from __future__ import annotations

from typing import Any

import pytest

from fltheory.problems import _process_shares as shares_module


def count_remote_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Live counts of ``RemoteShare.map`` (a whole descent of a share: "map") and
    ``RemoteShare.__call__`` (one gradient call: "step") from now on."""
    calls = {"map": 0, "step": 0}
    real_map, real_call = shares_module.RemoteShare.map, shares_module.RemoteShare.__call__

    def counting_map(self: Any, *a: Any, **k: Any) -> Any:
        calls["map"] += 1
        return real_map(self, *a, **k)

    def counting_call(self: Any, *a: Any, **k: Any) -> Any:
        calls["step"] += 1
        return real_call(self, *a, **k)
    monkeypatch.setattr(shares_module.RemoteShare, "map", counting_map)
    monkeypatch.setattr(shares_module.RemoteShare, "__call__", counting_call)
    return calls
