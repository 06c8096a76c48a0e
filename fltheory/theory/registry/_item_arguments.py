"""Checks of arguments that must be registry items (kept apart from :mod:`._arguments`, which the
records of :mod:`.model` use, so that no import cycle forms)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import InvalidHyperparameterError
from ._arguments import short
from .model import Item


def registry_item(name: str, value: Any) -> Item:
    """A registry :class:`~fltheory.theory.registry.Item`."""
    if not isinstance(value, Item):
        raise InvalidHyperparameterError(f"{name} must be a registry Item (e.g. fltheory.theory.registry.item("
                                         f"'efl:thm1')), got {short(value)} ({type(value).__name__})")
    return value


def registry_items(name: str, value: Any) -> tuple[Item, ...]:
    """A sequence (tuple or list) of registry Items, returned as a tuple."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidHyperparameterError(f"{name} must be a tuple of registry Items (e.g. "
                                         f"fltheory.theory.registry.items()), got {short(value)} "
                                         f"({type(value).__name__})")
    for i, it in enumerate(value):
        registry_item(f"{name}[{i}]", it)
    return tuple(value)
