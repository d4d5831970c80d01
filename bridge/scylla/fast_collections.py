"""Quicker sets and maps for the CQL driver's result decoding.

The compiled decoder builds every set as `cassandra.util.sortedset(elements)` and every map as an
`OrderedMapSerializedKey` filled entry by entry. Both are pure Python: the set inserts element by
element with a Python binary search (~1 µs each), and the map's `items()` (the `Mapping` mixin)
looks each key up again through `__getitem__`, which serializes the key to find it (~1.5 µs per
entry). The realistic backlog's `wide` table has a set and a map column: its rows cost the driver
~3 µs more than the same rows without them (bench/stage_costs.py), and translation as much again.

`install` points the decoder's `util` at a copy of `cassandra.util` in which

- `sortedset(elements)` sorts the list in C and checks the result is strictly increasing (true for
  every distinct value of a CQL type but NaN floats). Then the set is exactly the one the driver
  builds, the same class with the same `_items`; otherwise it falls back to the driver's own;
- `OrderedMapSerializedKey` is `WireOrderedMap`, the driver's class with `items()`, `keys()` and
  `values()` read straight from its entries, in their order: what the mixin yields for a map
  whose keys are distinct, as a map read from the wire always is.

Elements arrive from a server distinct, so the results are equal to the driver's own (tests compare
them); nothing else of the process sees the copy. Only the compiled decoder is concerned: without
it the driver decodes through `cassandra.cqltypes`, left as it is.
"""

from __future__ import annotations

import importlib
import operator
import types
from collections.abc import Iterable
from typing import Any

from cassandra import util

_SortedSet = util.SortedSet
_new = object.__new__
_less = operator.lt


def wire_sortedset(elements: Iterable[Any] = ()) -> Any:
    """`cassandra.util.sortedset(elements)` for distinct elements, sorted in C when they have a
    total order (the driver's own class and representation)."""
    items = list(elements)
    if len(items) > 1:
        # A copy: a sort that fails half-way leaves its list in no defined order, and the
        # driver's fallback must see the elements as they came.
        try:
            ordered = sorted(items)
            in_order = all(map(_less, ordered, ordered[1:]))  # in C: no Python frame per pair
        except (TypeError, ArithmeticError):  # no order (a float NaN beside a Decimal raises InvalidOperation)
            in_order = False
        if not in_order:
            return _SortedSet(items)
        items = ordered
    result = _new(_SortedSet)
    result._items = items
    return result


class WireOrderedMap(util.OrderedMapSerializedKey):  # type: ignore[misc]
    """The driver's map of a result, with its views read from its entries (distinct keys)."""

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._items)

    def keys(self) -> list[Any]:
        return [key for key, _ in self._items]

    def values(self) -> list[Any]:
        return [value for _, value in self._items]


def install() -> None:
    """Make the compiled decoder build sets with `wire_sortedset` and maps as `WireOrderedMap`
    (idempotent; without the compiled decoder nothing changes)."""
    try:
        decoder = importlib.import_module("cassandra.deserializers")
    except ImportError:
        return
    if getattr(decoder, "util", None) is not util:
        return  # already installed, or a driver whose decoder does not look `util` up
    copy = types.ModuleType("cassandra.util", util.__doc__)
    copy.__dict__.update(util.__dict__)
    copy.__dict__["sortedset"] = wire_sortedset
    copy.__dict__["OrderedMapSerializedKey"] = WireOrderedMap
    decoder.__dict__["util"] = copy
