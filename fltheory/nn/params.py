"""Flat parameter vectors: the layout of named parameter blocks and their views,
and the initialisation schemes.

A model's parameters are one float64 vector x in R^d (or an (m, d) array, one
row per client).  :class:`ParamLayout` assigns each named block a contiguous
slice; :meth:`ParamLayout.views` reshapes the slices of an (m, d) array into
(m, *shape) arrays *without copying* (the layers read and write through them).

Initialisation (weights from the passed ``numpy.random.Generator``, biases 0):

* ``"he"`` (He et al. 2015): N(0, 2 / fan_in);
* ``"glorot"`` (Glorot & Bengio 2010): U(-a, a), a = sqrt(6 / (fan_in + fan_out));
* ``"lstm_bias"``: LSTM bias [i, f, g, o] with the forget block at 1
  (Jozefowicz et al. 2015), the rest 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from ..errors import InvalidHyperparameterError, InvalidProblemError

__all__ = ["ParamSpec", "ParamLayout", "init_weight", "INIT_SCHEMES"]

INIT_SCHEMES = ("he", "glorot", "zeros", "lstm_bias")


@dataclass(frozen=True)
class ParamSpec:
    """One parameter block: name, shape, fan-in/fan-out and init scheme."""

    name: str
    shape: tuple[int, ...]
    fan_in: int = 1
    fan_out: int = 1
    init: str = "zeros"
    fill: float = 0.0          # constant value used by the "zeros" scheme

    @property
    def size(self) -> int:
        return prod(self.shape)


def init_weight(spec: ParamSpec, rng: np.random.Generator) -> np.ndarray:
    """Draw one block with its scheme (see module docstring)."""
    if spec.init == "he":
        return rng.normal(0.0, np.sqrt(2.0 / spec.fan_in), size=spec.shape)
    if spec.init == "glorot":
        a = np.sqrt(6.0 / (spec.fan_in + spec.fan_out))
        return rng.uniform(-a, a, size=spec.shape)
    if spec.init == "zeros":
        return np.full(spec.shape, spec.fill)
    if spec.init == "lstm_bias":                 # [i, f, g, o] blocks, forget bias 1
        b = np.zeros(spec.shape)
        h = spec.shape[-1] // 4
        b[..., h:2 * h] = 1.0
        return b
    raise InvalidHyperparameterError(f"init must be one of {INIT_SCHEMES}, got {spec.init!r}")


def _sequence(name: str, value: object) -> Sequence[object]:
    if isinstance(value, (str, bytes, np.ndarray)) or not isinstance(value, Sequence):
        raise InvalidProblemError(f"{name} must be a list, got {value!r:.80} ({type(value).__name__})")
    return value


def _spec_list(i: int, block: object) -> list[ParamSpec]:
    specs: list[ParamSpec] = []
    for j, spec in enumerate(_sequence(f"blocks[{i}]", block)):
        if not isinstance(spec, ParamSpec):
            raise InvalidProblemError(f"blocks[{i}][{j}] must be a ParamSpec, got {spec!r:.80} "
                                      f"({type(spec).__name__})")
        specs.append(spec)
    return specs


class ParamLayout:
    """Offsets of the parameter blocks of a list of layers in the flat vector.

    ``blocks[l]`` lists the :class:`ParamSpec` of layer l (a list of lists;
    anything else is an :class:`~fltheory.errors.InvalidProblemError`); block
    order is layer order, then the order the layer declares.
    """

    def __init__(self, blocks: Sequence[Sequence[ParamSpec]]) -> None:
        self.blocks = [_spec_list(i, b) for i, b in enumerate(_sequence("blocks", blocks))]
        self.offsets: list[list[int]] = []
        off = 0
        for specs in self.blocks:
            row = []
            for s in specs:
                row.append(off)
                off += s.size
            self.offsets.append(row)
        self.dim = off

    def views(self, X: np.ndarray) -> list[dict[str, np.ndarray]]:
        """Per-layer dicts name -> (m, *shape) views into X (m, d).  With a
        leading extra axis X (m, n, d) the views are (m, n, *shape)."""
        if X.shape[-1] != self.dim:
            raise InvalidProblemError(
                f"parameter array must have last axis dim={self.dim}, got shape {X.shape}")
        lead = X.shape[:-1]
        out = []
        for specs, offs in zip(self.blocks, self.offsets):
            out.append({s.name: X[..., o:o + s.size].reshape(*lead, *s.shape)
                        for s, o in zip(specs, offs)})
        return out

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """A fresh flat vector (d,) drawn block by block in layout order."""
        x = np.empty(self.dim)
        for specs, offs in zip(self.blocks, self.offsets):
            for s, o in zip(specs, offs):
                x[o:o + s.size] = init_weight(s, rng).ravel()
        return x

    def names(self) -> list[tuple[int, str, slice]]:
        """(layer index, block name, slice of the flat vector) for every block."""
        return [(l, s.name, slice(o, o + s.size))
                for l, (specs, offs) in enumerate(zip(self.blocks, self.offsets))
                for s, o in zip(specs, offs)]
