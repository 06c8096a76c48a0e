"""benchmarks/blocked.py: every plain blocked numpy reference computes the algorithm it
is compared with (fltheory's rounds agree to 1e-15 after 3 rounds, in one block and in
several blocks on two threads)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import numpy as np
import pytest

from ._load import benchmark


def _blocked() -> ModuleType:
    return benchmark("blocked")


@pytest.mark.parametrize("block_bytes", [1 << 23, 8 * 10 * 10 * 7])      # one block; blocks of 7 clients
def test_references_agree_with_fltheory_rounds(block_bytes, monkeypatch):
    blocked = _blocked()
    monkeypatch.setattr(blocked, "BLOCK_BYTES", block_bytes)
    N, d, tau = 30, 10, 6
    assert (len(blocked.client_blocks(N, d)) > 1) == (block_bytes < 1 << 23)
    fed = blocked.quadratic_problem(N, d, seed=3)
    with ThreadPoolExecutor(2) as pool:
        diffs = blocked.agreement(fed, tau, 0.05, pool)
    assert set(diffs) == {"FedAvg", "SCAFFOLD", "FedProx (gd)", "FedOpt-AdaGrad"}
    assert all(0.0 <= v <= 1e-15 for v in diffs.values()), diffs


def test_scaffold_reference_keeps_the_control_invariant_and_moves_the_model():
    """c = mean c_i after every round (SCAFFOLD-v1's invariant) and the references are not
    trivial: the model leaves 0 and the proximal / AdaGrad models differ from FedAvg's."""
    blocked = _blocked()
    fed = blocked.quadratic_problem(12, 4, seed=5)
    with ThreadPoolExecutor(2) as pool:
        refs = blocked.references(fed, 5, 0.05, pool)
        step, state = refs["blocked SCAFFOLD"]
        for _ in range(3):
            state = step(state)
        x, c, C = state
        np.testing.assert_allclose(c, C.mean(axis=0), rtol=0, atol=1e-15)
        assert np.abs(x).max() > 1e-2
        models = {k: f(s) for k, (f, s) in refs.items() if k != "blocked SCAFFOLD"}
    assert np.abs(models["blocked FedProx"] - models["blocked FedAvg"]).max() > 1e-6
    assert np.abs(models["blocked AdaGrad"] - models["blocked FedAvg"]).max() > 1e-6
