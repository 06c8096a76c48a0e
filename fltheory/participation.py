"""Who takes part in a round and how many local steps each completes.

A participation model answers ``draw(rng, t, local_steps) -> Participants``:
``local_steps`` is the (N,) array of nominal local steps E_i; the result lists
the participating clients (sorted ascending) and the number of local steps
s_k in {0, ..., E_k} each completes (0 = inactive, < E_k = incomplete; seed 000
section 4).  Models that draw nothing (``FullParticipation``) leave the
generator untouched, so deterministic runs consume no randomness.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["Participants", "Participation", "FullParticipation"]


@dataclass(frozen=True)
class Participants:
    """clients: (m,) sorted int64 indices; steps: (m,) int64 completed steps."""

    clients: np.ndarray
    steps: np.ndarray

    @property
    def m(self) -> int:
        return int(self.clients.shape[0])


class Participation(ABC):
    """Base class: subclasses implement :meth:`draw`."""

    @abstractmethod
    def draw(self, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
        """The participants of round t and their completed local steps."""

    def available(self, t: int, n_clients: int) -> np.ndarray:
        """Indices of the clients present in round t (all, unless a schedule says otherwise)."""
        return np.arange(n_clients)


class FullParticipation(Participation):
    """Every client, every round, all E_i local steps.  Draws nothing."""

    def draw(self, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
        E = np.asarray(local_steps, dtype=np.int64)
        return Participants(np.arange(E.shape[0], dtype=np.int64), E.copy())
