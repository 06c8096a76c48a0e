"""Timing helpers shared by the benchmark scripts: interleaved trials, the load
average, bare rounds of an algorithm.  Every figure the scripts print is a ratio
of these medians measured in one process."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def load() -> str:
    """The 1, 5 and 15 minute load averages, as printed next to every figure."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def interleaved_samples(runs: dict[str, Callable[[], Any]], trials: int, rounds: int
                        ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds per round of every candidate, per trial: each call of a
    candidate runs ``rounds`` rounds; trial 1 of every candidate, then trial 2, ...
    (after one warm-up call each: pools, caches, imports), so that load from other
    processes hits all alike.  Within a trial the candidates run in a new seeded random
    order (the same orders in every run): on this machine a two-thread candidate that
    runs right after a one-thread one was measured up to 1.2-1.3x slower in wall time
    (same CPU time; the idle core wakes late), which a fixed order would charge to
    whichever candidate comes next.  CPU time (``time.process_time``, all threads of the
    process) counts only the work done, not the time spent waiting for a core."""
    for fn in runs.values():
        fn()
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    order = np.random.default_rng(0)
    for _ in range(trials):
        for j in order.permutation(len(names)):
            name = names[j]
            fn = runs[name]
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[name].append((time.perf_counter() - t) / rounds)
            cpu[name].append((time.process_time() - c) / rounds)
    return wall, cpu


def interleaved(runs: dict[str, Callable[[], Any]], trials: int, rounds: int
                ) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU seconds per round of every candidate (:func:`interleaved_samples`)."""
    wall, cpu = interleaved_samples(runs, trials, rounds)
    return ({k: float(np.median(v)) for k, v in wall.items()},
            {k: float(np.median(v)) for k, v in cpu.items()})


def rounds_of(alg: Any, fed: Any, x0: np.ndarray, rounds: int) -> Callable[[], None]:
    """A function running the next ``rounds`` bare rounds of ``alg`` (state kept
    between calls; ``init`` is not timed)."""
    rng = np.random.default_rng(0)
    box = [alg.init(fed, x0, rng)]

    def go() -> None:
        state = box[0]
        for _ in range(rounds):
            state, _ = alg.round(state, fed, None, rng)
        box[0] = state
    return go
