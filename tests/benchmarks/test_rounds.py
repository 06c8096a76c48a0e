"""benchmarks/rounds.py: the harness times consecutive rounds on the state each round
returns (as run() does), every roofline kernel in the same interleaved trials, and derives
GFLOP/s, roofline and % roof from those medians."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from ._load import benchmark


def _rounds() -> ModuleType:
    return benchmark("rounds")


class _Chain:
    """A fake algorithm whose state is the number of rounds run so far: a round that is
    not given the state the previous round returned is caught."""

    def __init__(self) -> None:
        self.calls = 0

    def init(self, fed: Any, x0: np.ndarray, rng: np.random.Generator) -> int:
        return 0

    def round(self, state: int, fed: Any, participation: Any, rng: np.random.Generator) -> tuple[int, None]:
        assert state == self.calls, "rounds must run on the state the previous round returned"
        self.calls += 1
        return state + 1, None


class _Fed:
    dim = 3


def test_rounds_are_consecutive_and_kernels_share_the_trials(monkeypatch):
    bench = _rounds()
    algs = {"FedAvg": _Chain(), "Other": _Chain()}
    kernel_calls = {"k1": 0, "k2": 0}

    def kernel(name: str) -> Any:
        def call() -> None:
            kernel_calls[name] += 1
        return call

    trials, rounds, calls = 3, 4, 5
    rows, note = bench.measure(_Fed(), algs, 1e6, {k: kernel(k) for k in kernel_calls}, 2e5, calls,
                               trials, rounds, reference=False)
    # one warm-up trial, then ``trials`` trials, each ``rounds`` consecutive rounds
    assert all(alg.calls == (trials + 1) * rounds for alg in algs.values())
    assert kernel_calls == {k: (trials + 1) * rounds * calls for k in kernel_calls}
    assert f"{trials} interleaved trials of {rounds} rounds" in note and "BLAS threads" in note
    for r in rows:
        np.testing.assert_allclose(r["gflops"], 1e6 / r["seconds"] / 1e9)
        np.testing.assert_allclose(r["fraction"], r["gflops"] / r["roofline"])
    assert rows[0]["roofline"] is rows[1]["roofline"]          # one roofline for every algorithm


def test_auto_rounds_targets_the_trial_length(monkeypatch):
    bench = _rounds()
    monkeypatch.setattr(bench, "timed", lambda fn: (fn(), np.array([0.002, 0.002]))[1])
    assert bench.auto_rounds(_Chain(), _Fed(), target=0.05) == 25
