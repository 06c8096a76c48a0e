"""Pieces several experiments share (not an experiment: discovery skips names starting with "_").

* :func:`random_quadratic_instance`: the seeded random quadratic federation of a config and a start
  x0 = x* + ``init_distance`` u / ||u|| (u standard normal), drawn from the experiment's generator in
  a fixed order (the seed, then u), so every experiment using it draws the same numbers as before.
* :func:`ratio_check`: the verdict of a measured / bound ratio, the instance appended when it fails.
* :func:`final_gap` and :func:`distances`: F(x_R) - F* and ||x_t - x*|| of a run on a federation whose
  optimum is known (``History.loss_gap`` / ``dist2`` are None only when it is not).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fltheory.algorithms import History
from fltheory.errors import ExperimentDefinitionError
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic
from fltheory.reproduce import Check


def random_quadratic_instance(config: dict[str, Any], rng: np.random.Generator
                              ) -> tuple[int, QuadraticFederation, np.ndarray]:
    """(seed, federation, x0) from ``n_clients``, ``dim``, ``L``, ``mu``, ``heterogeneity`` and
    ``init_distance`` of ``config`` (``constants="clients"``)."""
    seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                           heterogeneity=config["heterogeneity"], seed=seed, constants="clients")
    u = rng.standard_normal(config["dim"])
    return seed, fed, fed.optimum() + config["init_distance"] * u / np.linalg.norm(u)


def ratio_check(theorem: str, ratio: float, text: str, instance: str) -> Check:
    """``holds`` when ratio <= 1, else ``violated`` with the instance after the text."""
    ok = ratio <= 1
    return Check(theorem, "holds" if ok else "violated", ratio, text if ok else f"{text}; {instance}")


def _known(values: np.ndarray | None, name: str) -> np.ndarray:
    if values is None:
        raise ExperimentDefinitionError(
            f"History.{name} is None: the run's federation has no known optimum, expected one that has")
    return values


def final_gap(history: History) -> float:
    """max(F(x_R) - F*, 0): the last loss gap, clipped at 0 (round-off can make it slightly negative)."""
    return float(max(_known(history.loss_gap, "loss_gap")[-1], 0.0))


def distances(history: History) -> np.ndarray:
    """||x_t - x*|| per round, t = 0..R (sqrt of ``dist2`` clipped at 0)."""
    return np.sqrt(np.maximum(_known(history.dist2, "dist2"), 0.0))
