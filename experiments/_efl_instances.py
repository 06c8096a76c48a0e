"""Shared pieces of the EFL experiments (Ma et al., arXiv:2106.09433): the random quadratic instance, its
one-line description, and the ratio-to-verdict rule of their checks.

Not an experiment (the leading underscore keeps it out of the reproduce registry).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fltheory.problems.generators import random_quadratic
from fltheory.reproduce import Check

PAPER = "EFL (EFL, Ma et al.)"


def quadratic_instance(config: dict[str, Any], rng: np.random.Generator) -> tuple[int, Any, np.ndarray]:
    """(seed, federation, x0) of one EFL experiment.

    Draw order on ``rng`` (kept fixed so that every recorded number is reproducible): one integer seed for
    ``random_quadratic`` (every client exactly ``L``-smooth and ``mu``-strongly convex, ``constants="clients"``),
    then a standard normal direction u of length ``dim``; x0 = x* + ``init_distance`` u / ||u||.
    """
    seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(config["n_clients"], config["dim"], L=config["L"], mu=config["mu"],
                           heterogeneity=config["heterogeneity"], seed=seed, constants="clients")
    u = rng.standard_normal(config["dim"])
    x0 = fed.optimum() + config["init_distance"] * u / np.linalg.norm(u)
    return seed, fed, x0


def instance_text(seed: int, N: int, d: int, E: int, *details: str) -> str:
    """"random_quadratic seed S, N = .., d = .., E = .." followed by ``details`` (comma-separated)."""
    return ", ".join([f"random_quadratic seed {seed}, N = {N}, d = {d}, E = {E}", *details])


def ratio_check(key: str, ratio: float, text: str, instance: str) -> Check:
    """A check that holds when ``ratio <= 1``; a violated one names its instance after ``text``."""
    holds = ratio <= 1
    return Check(key, "holds" if holds else "violated", ratio, text if holds else f"{text}; {instance}")
