"""`wire_sortedset` and `WireOrderedMap` give what the driver's own set and map give for values
read from the wire (distinct elements and keys), and `install` hands them to the compiled decoder
only. End to end, the golden and oracle envelope tests read sets and maps through them."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

import pytest
from cassandra import util
from hypothesis import given
from hypothesis import strategies as st

from bridge.scylla import fast_collections

pytestmark = pytest.mark.unit

# Element types of CQL sets and map keys as the driver returns them, floats with NaN and
# infinities included, and frozen collections (lists, tuples) as elements.
_SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
    st.uuids(),
    st.datetimes(min_value=datetime.datetime(1900, 1, 1)),
    st.booleans(),
)
_ELEMENTS = st.one_of(_SCALARS, st.lists(st.integers(), max_size=3), st.tuples(st.integers(), st.text(max_size=3)))


def _distinct(values: list[Any]) -> list[Any]:
    kept: list[Any] = []
    for value in values:
        if all(value is not seen and value != seen for seen in kept):
            kept.append(value)
    return kept


@given(st.one_of(*(st.lists(s, max_size=12) for s in (
    st.integers(), st.text(max_size=6), st.floats(), st.uuids(), st.binary(max_size=6),
    st.lists(st.integers(), max_size=3), _ELEMENTS))))
def test_a_set_is_the_drivers_own(elements: list[Any]) -> None:
    elements = _distinct(elements)
    try:
        expected = util.sortedset(elements)
    except (TypeError, ArithmeticError) as error:  # mixed types no CQL set holds: fail as the driver fails
        with pytest.raises(type(error)):
            fast_collections.wire_sortedset(elements)
        return
    made = fast_collections.wire_sortedset(elements)
    assert made.__class__ is util.sortedset
    assert repr(made._items) == repr(expected._items)  # same order, NaN included


def test_a_set_of_values_without_an_order_falls_back_to_the_drivers_grouping() -> None:
    elements = [3, "a", 1, decimal.Decimal("2.5"), None, uuid.UUID(int=1)]
    assert fast_collections.wire_sortedset(elements)._items == util.sortedset(elements)._items


@given(st.lists(st.tuples(_SCALARS, st.one_of(st.none(), st.integers(), st.text(max_size=4))), max_size=10))
def test_a_maps_views_are_the_mapping_mixins(entries: list[tuple[Any, Any]]) -> None:
    made = fast_collections.WireOrderedMap(None, 4)
    expected = util.OrderedMap()
    keys: list[Any] = []
    for key, value in entries:
        if any(key is k or key == k for k in keys):
            continue  # a map read from the wire has distinct keys
        keys.append(key)
        made._insert_unchecked(key, repr(key).encode(), value)
        expected._items.append((key, value))
    assert isinstance(made, util.OrderedMapSerializedKey)
    assert repr(made.items()) == repr(list(zip(keys, [v for _, v in expected._items], strict=True)))
    assert repr(made.keys()) == repr(keys) == repr(list(made))
    assert repr(made.values()) == repr([v for _, v in expected._items])


def test_install_gives_the_copy_to_the_compiled_decoder_only() -> None:
    deserializers = pytest.importorskip("cassandra.deserializers")  # installed wheels are compiled
    fast_collections.install()
    fast_collections.install()  # idempotent
    copy = deserializers.util
    assert copy is not util
    assert copy.sortedset is fast_collections.wire_sortedset
    assert copy.OrderedMapSerializedKey is fast_collections.WireOrderedMap
    assert copy.Date is util.Date and copy.inet_ntop is util.inet_ntop  # the rest as it was
    assert util.sortedset is util.SortedSet  # the driver's module itself unchanged
