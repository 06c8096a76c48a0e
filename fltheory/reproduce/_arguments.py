"""Checked arguments of the reproduce framework's public functions.

Each helper returns the value (converted where stated) or raises a typed
:class:`~fltheory.errors.FLTheoryError` naming the argument, the value given
and what is expected, so that a wrong argument never surfaces as a raw
``AttributeError`` / ``TypeError`` from deep inside.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fltheory._validate import flag, integer
from fltheory.errors import InvalidProblemError
from fltheory.results import path_argument

if TYPE_CHECKING:
    from .protocol import Experiment

__all__: list[str] = []

#: The run modes (re-exported by :mod:`fltheory.reproduce.store`).
MODES: tuple[str, ...] = ("quick", "full")

#: Largest master seed accepted (numpy's SeedSequence takes any int >= 0; beyond 2**63 it is a mistake).
MAX_SEED = 2**63 - 1


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def text(name: str, value: Any, *, allow_empty: bool = False) -> str:
    """A ``str`` (non-empty unless ``allow_empty``)."""
    if not isinstance(value, str) or (not value and not allow_empty):
        expected = "a str" if allow_empty else "a non-empty str"
        raise InvalidProblemError(f"{name} must be {expected}, got {short(value)} ({type(value).__name__})")
    return value


def path(name: str, value: Any) -> Path:
    """A file-system path (see :func:`fltheory.results.path_argument`)."""
    return path_argument(name, value)


def directory(name: str, value: Any) -> Path:
    """A path that is a directory or does not exist yet (an existing file is refused)."""
    target = path_argument(name, value)
    if target.exists() and not target.is_dir():
        raise InvalidProblemError(f"{name} must be a directory (existing or to be created), "
                                  f"got {str(target)!r}, which is a file")
    return target


def experiment(name: str, value: Any) -> Experiment:
    from .protocol import Experiment
    if not isinstance(value, Experiment):
        raise InvalidProblemError(f"{name} must be an Experiment (from discover / validate_module), "
                                  f"got {short(value)} ({type(value).__name__})")
    return value


def experiments(name: str, value: Any) -> list[Experiment]:
    """A list or tuple of :class:`Experiment`."""
    if not isinstance(value, (list, tuple)):
        raise InvalidProblemError(f"{name} must be a list of Experiment, got {short(value)} "
                                  f"({type(value).__name__})")
    return [experiment(f"{name}[{i}]", e) for i, e in enumerate(value)]


def mode(value: Any, name: str = "mode") -> str:
    if not isinstance(value, str) or value not in MODES:
        raise InvalidProblemError(f"{name} must be one of {MODES}, got {short(value)}")
    return value


def seed(value: Any, name: str = "seed") -> int:
    """A master seed: an int in [0, 2**63) (not a bool, not a float)."""
    return integer(name, value, minimum=0, maximum=MAX_SEED, error=InvalidProblemError)


def mapping(name: str, value: Any, *, optional: bool = False) -> Mapping[str, Any]:
    """A mapping with str keys (``None`` gives ``{}`` when ``optional``)."""
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        expected = "a mapping with str keys" + (" or None" if optional else "")
        raise InvalidProblemError(f"{name} must be {expected}, got {short(value)} ({type(value).__name__})")
    return value


def boolean(name: str, value: Any) -> bool:
    return flag(name, value, error=InvalidProblemError)
