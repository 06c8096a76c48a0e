"""Run the same rounds with every client in one block and in many small blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fltheory.algorithms.local import blocking


def one_batch_and_blocked(monkeypatch: pytest.MonkeyPatch, fed: Any, threads: int,
                          rounds: Callable[[], list[Any]]) -> tuple[list[Any], list[Any]]:
    """``rounds()`` with all clients in one block, then with blocks of four clients' Hessians
    (at least six blocks) on ``threads`` local-step threads; the thread count is restored."""
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 62)
    one = rounds()
    monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * fed.dim * fed.dim * 4)
    blocking.set_num_threads(threads)
    try:
        assert len(blocking.row_blocks(fed, fed.n_clients, fed.dim)) >= 6
        many = rounds()
    finally:
        blocking.set_num_threads(2)
    return one, many


def three_rounds(alg: Any, fed: Any, part: Any, seed: int,
                 record: Callable[[Any, Any], Any]) -> list[Any]:
    """``record(state, info)`` after each of three rounds from x0 = linspace(-1, 1, d)."""
    rng = np.random.default_rng(seed)
    state = alg.init(fed, np.linspace(-1, 1, fed.dim), rng)
    out = []
    for _ in range(3):
        state, info = alg.round(state, fed, part, rng)
        out.append(record(state, info))
    return out
