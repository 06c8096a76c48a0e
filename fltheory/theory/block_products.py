"""The linear part of a round map applied to a block of vectors in one round.

A federation that offers the hook ``Federation.lifted(p)`` (quadratic clients:
``fltheory.problems.lifted``) has a twin on R^{p d} made of p independent
copies of its clients.  An algorithm that keeps the copies apart (its round
acts on coordinates only through the oracles, sums over clients and
per-client scalars) runs, on the twin, p rounds of the original problem at
once: the state of the twin holds, for every state field of shape (..., d),
the field of copy k at [..., k d:(k + 1) d].  Then, for V = [v_1 ... v_p] (n, p),

    M v_k = (Phi(S0 + s_k v_k) - Phi(S0)) / s_k,   s_k = h / ||v_k||_inf,

the same difference as one single product (``theory.matrix_free``), is read
off one round of the twin from the stacked states S0 + s_k v_k.  Each local
step then reads every client's data once for all p vectors (for quadratic
clients a (p, d) x (d, d) product per client instead of p matrix-vector
products).

Whether the algorithm really keeps the copies apart is not assumed:
:func:`block_product` compares the block product with single products at two
random vectors and returns None (single products are then used) when they
differ by more than the affinity tolerance, when a state field does not end
in the model dimension (a scalar field would be shared by the copies), or
when the round on the twin raises (e.g. a per-coordinate hyperparameter of
length d).
"""

from __future__ import annotations


import numpy as np

from ..algorithms.base import Algorithm
from ..errors import FLTheoryError
from ..problems.base import Federation
from .round_maps import RoundMap, counters_of, round_map, set_counters

__all__ = ["BlockProduct", "block_product"]



class BlockProduct:
    """M V for V (n, q), q <= ``copies``, by one round of the lifted federation."""

    def __init__(self, lifted_map: RoundMap, paths: tuple[str, ...], shapes: tuple[tuple[int, ...], ...],
                 slices: dict[str, slice], d: int, copies: int, base: np.ndarray, step: float,
                 frozen: np.ndarray) -> None:
        self.map = lifted_map
        self.paths = paths
        self.shapes = shapes
        self.slices = slices
        self.d = d
        self.copies = copies
        self.n = base.shape[0]
        self.step = step
        self.frozen = frozen
        self.rounds = 0
        self.base_lifted = self.lift(np.repeat(base[:, None], copies, axis=1))
        self.F0 = self.unlift(self.map(self.base_lifted))

    def lift(self, V: np.ndarray) -> np.ndarray:
        """(n, p) block -> the twin's state vector (copy k of each field at [..., k d:(k+1) d])."""
        p, d = self.copies, self.d
        parts = []
        for path, shape in zip(self.paths, self.shapes, strict=True):
            rows = int(np.prod(shape[:-1], dtype=np.int64))
            parts.append(V[self.slices[path]].reshape(rows, d, p).transpose(0, 2, 1).ravel())
        return np.concatenate(parts)

    def unlift(self, S: np.ndarray) -> np.ndarray:
        """The twin's state vector -> (n, p) block (inverse of :meth:`lift`)."""
        p, d = self.copies, self.d
        out = np.empty((self.n, p))
        start = 0
        for path, shape in zip(self.paths, self.shapes, strict=True):
            rows = int(np.prod(shape[:-1], dtype=np.int64))
            size = rows * d * p
            out[self.slices[path]] = S[start:start + size].reshape(rows, p, d).transpose(0, 2, 1).reshape(
                rows * d, p)
            start += size
        return out

    def __call__(self, V: np.ndarray) -> np.ndarray:
        """M V (module docstring); zero columns give zero."""
        V = np.where(self.frozen[:, None], 0.0, np.asarray(V, dtype=np.float64))
        q = V.shape[1]
        if q > self.copies:
            raise ValueError(f"block of {q} columns exceeds the {self.copies} copies")
        a = np.abs(V).max(axis=0, initial=0.0)
        s = np.where(a > 0.0, self.step / np.where(a > 0.0, a, 1.0), 0.0)
        full = np.zeros((self.n, self.copies))
        full[:, :q] = V * s
        self.rounds += 1
        out = self.unlift(self.map(self.base_lifted + self.lift(full)))[:, :q] - self.F0[:, :q]
        return np.where(s > 0.0, out / np.where(s > 0.0, s, 1.0), 0.0)


def block_product(algorithm: Algorithm, problem: Federation, rm: RoundMap, base: np.ndarray, step: float,
                  frozen: np.ndarray, copies: int, probes: np.ndarray, products: np.ndarray,
                  rtol: float) -> tuple[BlockProduct | None, str]:
    """A verified :class:`BlockProduct`, or (None, reason) (module docstring).

    ``probes`` (n, 2) and ``products`` = M probes (single rounds) are the check."""
    if copies < 2:
        return None, "block size 1"
    twin = problem.lifted(copies)
    if twin is None:
        return None, f"{type(problem).__name__} offers no lifted federation (Federation.lifted)"
    layout = rm.layout
    d = problem.dim
    if any(len(s) == 0 or s[-1] != d for s in layout.shapes):
        return None, "a state field does not end in the model dimension"
    try:
        x0 = np.tile(base[layout.x_slice], copies)
        lifted_rm = round_map(algorithm, twin, x0=x0)
        want = tuple(s[:-1] + (s[-1] * copies,) for s in layout.shapes)
        if lifted_rm.layout.paths != layout.paths or lifted_rm.layout.shapes != want:
            return None, "the lifted state has another layout"
        template = set_counters(lifted_rm.template, counters_of(rm.template))
        lifted_rm = lifted_rm.with_template(template)
        bp = BlockProduct(lifted_rm, layout.paths, layout.shapes, layout.slices, d, copies, base, step, frozen)
        got = bp(probes)
    except (FLTheoryError, ValueError, TypeError, IndexError, ArithmeticError) as exc:
        return None, f"the round on the lifted federation failed ({type(exc).__name__}: {exc})"
    scale = float(np.abs(products).max(initial=0.0)) + np.finfo(float).tiny
    err = float(np.abs(got - products).max(initial=0.0)) / scale
    if not (err <= rtol):
        return None, f"block products differ from single rounds by {err:.2e} (relative) > rtol={rtol:.1e}"
    return bp, f"{copies} vectors per round (checked against single rounds to {err:.1e})"
