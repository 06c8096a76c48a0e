"""Pieces several experiments share (not an experiment: discovery skips names starting with "_").

* :func:`random_quadratic_instance`: the seeded random quadratic federation of a config and a start
  x0 = x* + ``init_distance`` u / ||u|| (u standard normal), drawn from the experiment's generator in
  a fixed order (the seed, then u), so every experiment using it draws the same numbers as before.
* :func:`ratio_check`: the verdict of a measured / bound ratio, the instance appended when it fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
