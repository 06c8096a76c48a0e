"""benchmarks/run_overhead.py: the statistic over the trials is the one asked for (median or
minimum of the same interleaved samples), and per call is seconds per round times R."""

from __future__ import annotations

import numpy as np
import pytest

from ._load import benchmark


@pytest.mark.parametrize("statistic", ["median", "min"])
def test_measure_reduces_the_interleaved_samples_by_the_statistic(statistic, monkeypatch, capsys):
    bench = benchmark("run_overhead")
    samples = [0.5, 0.2, 0.9]                 # CPU seconds per round of every candidate, per trial

    def fake_samples(runs, trials, rounds):
        assert trials == 3 and rounds == 2
        return ({k: [2 * s for s in samples] for k in runs}, {k: list(samples) for k in runs})

    monkeypatch.setattr(bench, "interleaved_samples", fake_samples)
    monkeypatch.setattr(bench, "quadratic_problem", lambda N, d: bench.QuadraticFederation(
        np.stack([np.eye(d)] * N), np.zeros((N, d))))
    per_call = bench.measure(2, 3, 1, 3, 2, statistic)
    want = 0.5 if statistic == "median" else 0.2
    assert per_call == pytest.approx(dict.fromkeys(per_call, 2 * want))
    assert "run() default" in per_call and "bare rounds" in per_call
    assert f"{statistic}s" in capsys.readouterr().out
