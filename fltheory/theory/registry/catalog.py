"""The registry as one tuple of items, with selection and consistency checks."""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import InvalidHyperparameterError
from . import items_efl, items_elasticnet, items_local_adaptivity, items_scaffold, items_te_targets
from ._arguments import text
from .model import Item
from .papers import PAPERS

__all__ = ["ITEMS", "item", "items"]

ITEMS: tuple[Item, ...] = (items_efl.ITEMS + items_local_adaptivity.ITEMS + items_te_targets.ITEMS
                           + items_elasticnet.ITEMS + items_scaffold.ITEMS)


def _check_unique(all_items: Iterable[Item]) -> None:
    seen: set[str] = set()
    for it in all_items:
        if it.key in seen:
            raise InvalidHyperparameterError(f"duplicate registry key {it.key!r}")
        if it.paper not in PAPERS:
            raise InvalidHyperparameterError(f"item {it.key!r} names an unknown paper {it.paper!r}")
        seen.add(it.key)


_check_unique(ITEMS)


def items(paper: str | None = None) -> tuple[Item, ...]:
    """All items, or those of one paper key (``"efl"``, ``"scaffold-icml"``, ...).

    Raises
    ------
    InvalidHyperparameterError
        For an unknown paper key (the message lists the known ones).
    """
    if paper is None:
        return ITEMS
    if not isinstance(paper, str) or paper not in PAPERS:
        raise InvalidHyperparameterError(f"paper must be one of {sorted(PAPERS)}, got {paper!r}")
    return tuple(it for it in ITEMS if it.paper == paper)


def item(key: str) -> Item:
    """The item with this key (``"<paper>:<slug>"``); InvalidHyperparameterError if there is none
    or ``key`` is not a string."""
    text("key", key, allow_empty=False)
    for it in ITEMS:
        if it.key == key:
            return it
    raise InvalidHyperparameterError(f"key must name a registry item (see fltheory.theory.registry.items()), "
                                     f"got {key!r}")
