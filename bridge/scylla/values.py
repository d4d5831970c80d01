"""The canonical, hashable form of a CQL value, as the driver returns it or Python code builds it.

One rule for every place that compares or hashes values: pairing image rows with their delta
row by primary key (frozen collections and UDTs can be key columns), removing the elements a
write deleted from a collection, and the emulator's own state. Equal CQL values get equal forms
whatever their Python shape:

- map (dict, the driver's `OrderedMapSerializedKey`) -> `FrozenDict`;
- set (set, frozenset, the driver's `SortedSet`) -> `frozenset`;
- list, tuple, vector, UDT (the driver's named tuples) -> `tuple`;
- everything else (text, numbers, blobs, uuids, dates, ...) stays as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

_PLAIN = frozenset({int, str, bytes, float, bool, type(None)})


class FrozenDict(dict[Any, Any]):
    """A dict that can be hashed (a frozen map); never mutate one after building it."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))


def canonical(value: Any) -> Any:
    """The canonical form of `value` (see the module docstring)."""
    if value.__class__ in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return FrozenDict((canonical(k), canonical(v)) for k, v in value.items())
    # The driver's SortedSet is no `Set` (it does not register with the ABC) but has its methods.
    if isinstance(value, Set) or hasattr(value, "isdisjoint"):
        return frozenset(canonical(v) for v in value)
    if isinstance(value, list | tuple):
        return tuple(canonical(v) for v in value)
    return value
