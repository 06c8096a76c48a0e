"""Argument checks of the registry's public functions: each bad argument gives a typed
:mod:`fltheory.errors` exception naming the argument, the value and what is expected."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import InvalidHyperparameterError


def short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def text(name: str, value: Any, *, allow_empty: bool = True) -> str:
    """A ``str`` (non-empty unless ``allow_empty``)."""
    if not isinstance(value, str):
        raise InvalidHyperparameterError(f"{name} must be a string, got {short(value)} ({type(value).__name__})")
    if not allow_empty and not value:
        raise InvalidHyperparameterError(f"{name} must be a non-empty string, got ''")
    return value


def path(name: str, value: Any) -> Path:
    """A file-system path given as a non-empty ``str`` or ``os.PathLike`` of ``str`` (no NUL byte)."""
    raw = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(raw, str):
        raise InvalidHyperparameterError(f"{name} must be a path (str or os.PathLike), got {short(value)} "
                                         f"({type(value).__name__})")
    if not raw or "\x00" in raw:
        raise InvalidHyperparameterError(f"{name} must be a non-empty path without NUL bytes, got {raw!r}")
    return Path(raw)


def file_stem(name: str, value: Any) -> str:
    """A bare file name without directory parts (so that it cannot leave the directory it is joined to)."""
    stem = text(name, value, allow_empty=False)
    if "\x00" in stem or "/" in stem or "\\" in stem or os.sep in stem or stem in (".", ".."):
        raise InvalidHyperparameterError(f"{name} must be a bare name without directory parts, got {stem!r}")
    return stem


def strings(name: str, value: Any) -> tuple[str, ...]:
    """A tuple of strings."""
    if not isinstance(value, tuple):
        raise InvalidHyperparameterError(f"{name} must be a tuple of strings, got {short(value)} "
                                         f"({type(value).__name__})")
    for i, v in enumerate(value):
        text(f"{name}[{i}]", v)
    return value
