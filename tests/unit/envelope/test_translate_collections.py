"""Golden tests for collections and UDTs (cdc-log-format.md section 3.3): table `ks.c (pk int,
ck int, m map<int,text>, st set<int>, l list<int>, u ut, fm frozen<map<int,int>>)`, `ut (a int,
b int, c int)`. Overwrites are cells with the full value; element-level changes leave the cell
null and fill `<column>__elements`."""

from __future__ import annotations

import uuid
from collections import namedtuple
from typing import Any

import pytest
from cassandra.util import OrderedMap, SortedSet

from bridge.envelope.errors import PlanError, TranslationError
from bridge.scylla.cdc_time import timeuuid_for
from bridge.scylla.model import Operation
from bridge.scylla.schema import scalar, udt
from tests.unit.envelope.support import Wire, d, de, make_table, plan_for, row_with, run

UT = udt("ut", [("a", scalar("int")), ("b", scalar("int")), ("c", scalar("int"))])
UtValue = namedtuple("UtValue", "a b c")  # the driver returns UDT values as namedtuples
TABLE = make_table(
    partition=[("pk", "int")],
    clustering=[("ck", "int")],
    regular=[
        ("m", "map<int, text>"),
        ("st", "set<int>"),
        ("l", "list<int>"),
        ("u", "ut"),
        ("fm", "frozen<map<int,int>>"),
    ],
    udts={"ut": UT},
    name="c",
)
PLAN = plan_for(TABLE)
UNTOUCHED = {
    "ck": 0,
    "fm": None,
    "l": None,
    "l__elements": None,
    "m": None,
    "m__elements": None,
    "pk": 0,
    "st": None,
    "st__elements": None,
    "u": None,
    "u__elements": None,
}

# List cell keys: timeuuids in list order (an append after a prepend).
K_PREPEND = timeuuid_for(1_262_304_000_000_000 - 5, low=0x8000000000000001)
K1 = timeuuid_for(1_718_022_896_789_123, low=0x8000000000000001)
K2 = timeuuid_for(1_718_022_896_789_124, low=0x8000000000000001)


def after(values: dict[str, Any], op: Operation = Operation.UPDATE) -> dict[str, Any]:
    translation = run(PLAN, row_with(op, {"pk": 0, "ck": 0, **values}))
    [value] = Wire().values(translation)
    assert value["op"] == ("c" if op is Operation.INSERT else "u")
    return value["after"]  # type: ignore[no-any-return]


def changed(values: dict[str, Any]) -> dict[str, Any]:
    """Only the fields that differ from an untouched row."""
    return {k: v for k, v in after(values).items() if UNTOUCHED.get(k) != v}


def test_row_struct_field_order_puts_companions_after_their_column() -> None:
    assert PLAN.after_schema.field_names == tuple(UNTOUCHED)


def test_map_add_entries() -> None:
    """SET m = m + {1:'a', 2:'b'}"""
    assert changed({"m": OrderedMap([(1, "a"), (2, "b")])}) == {
        "m__elements": {"added": [{"key": 1, "value": "a"}, {"key": 2, "value": "b"}], "removed": None}
    }


def test_map_put_one_entry() -> None:
    """SET m[5] = 'x'"""
    assert changed({"m": OrderedMap([(5, "x")])}) == {
        "m__elements": {"added": [{"key": 5, "value": "x"}], "removed": None}
    }


def test_map_remove_keys() -> None:
    """SET m = m - {1, 3}; also SET m[5] = null / DELETE m[5] with one key."""
    assert changed({de("m"): SortedSet([1, 3])}) == {"m__elements": {"added": None, "removed": [1, 3]}}
    assert changed({de("m"): SortedSet([5])}) == {"m__elements": {"added": None, "removed": [5]}}


def test_map_overwrite_is_a_cell_with_the_full_value() -> None:
    """SET m = {1:'a'}: the collection tombstone plus the new elements."""
    assert changed({"m": OrderedMap([(1, "a")]), d("m"): True}) == {"m": {"value": [{"key": 1, "value": "a"}]}}


def test_map_set_to_null_or_empty_or_column_delete() -> None:
    """SET m = null, SET m = {} and DELETE m all log only the tombstone."""
    assert changed({d("m"): True}) == {"m": {"value": None}}


def test_insert_of_a_map_is_an_overwrite() -> None:
    """INSERT (pk, ck, m) VALUES (0, 0, {1:'a'}): op 2 with the tombstone."""
    assert after({"m": OrderedMap([(1, "a")]), d("m"): True}, Operation.INSERT)["m"] == {
        "value": [{"key": 1, "value": "a"}]
    }


def test_map_add_and_remove_in_one_statement() -> None:
    """SET m = m + {3:'c'}, m = m - {2}"""
    assert changed({"m": OrderedMap([(3, "c")]), de("m"): SortedSet([2])}) == {
        "m__elements": {"added": [{"key": 3, "value": "c"}], "removed": [2]}
    }


def test_overwrite_with_removed_elements_in_the_same_write_leaves_them_out() -> None:
    """Tombstone + elements + element deletions at one timestamp: the post-image rule (clear, add,
    remove) gives the full value."""
    assert changed({"m": OrderedMap([(1, "a"), (2, "b")]), d("m"): True, de("m"): SortedSet([2])}) == {
        "m": {"value": [{"key": 1, "value": "a"}]}
    }
    assert changed({"st": SortedSet([1]), d("st"): True, de("st"): SortedSet([1])}) == {"st": {"value": None}}


def test_set_add_remove_overwrite() -> None:
    assert changed({"st": SortedSet([1, 2])}) == {"st__elements": {"added": [1, 2], "removed": None}}
    assert changed({de("st"): SortedSet([1, 2, 3])}) == {"st__elements": {"added": None, "removed": [1, 2, 3]}}
    assert changed({"st": SortedSet([1, 2]), d("st"): True}) == {"st": {"value": [1, 2]}}


def test_list_append_carries_cells_with_their_keys_in_list_order() -> None:
    """SET l = l + [1, 2] (and prepends): the log shows map<timeuuid, int>; added cells keep
    their keys, ordered as the list orders them (timeuuid order)."""
    logged = {K2: 2, K1: 1, K_PREPEND: 0}  # any map order in, list order out
    assert changed({"l": logged}) == {
        "l__elements": {
            "added": [
                {"key": str(K_PREPEND), "value": 0},
                {"key": str(K1), "value": 1},
                {"key": str(K2), "value": 2},
            ],
            "removed": None,
        }
    }


def test_list_element_delete_names_its_key() -> None:
    """DELETE l[1] / SET l[1] = null / SET l = l - [1]: the removed cells' keys."""
    assert changed({de("l"): SortedSet([K2, K1])}) == {"l__elements": {"added": None, "removed": [str(K1), str(K2)]}}


def test_list_overwrite_is_the_values_in_key_order() -> None:
    """SET l = [1, 2]"""
    assert changed({"l": {K2: 2, K1: 1}, d("l"): True}) == {"l": {"value": [1, 2]}}


def test_udt_field_updates() -> None:
    """SET u.a = 0, u.b = 1: the UDT value has the assigned fields, the others null."""
    assert changed({"u": UtValue(0, 1, None)}) == {
        "u__elements": {"added": {"a": 0, "b": 1, "c": None}, "removed": None}
    }


def test_udt_fields_set_to_null_are_named() -> None:
    """SET u.a = null, u.b = null: all fields null in `u` (the UDT quirk), indices 0 and 1 deleted."""
    assert changed({"u": UtValue(None, None, None), de("u"): SortedSet([0, 1])}) == {
        "u__elements": {"added": None, "removed": ["a", "b"]}
    }


def test_udt_field_update_and_field_delete() -> None:
    """SET u.a = 42, u.c = null"""
    assert changed({"u": UtValue(42, None, None), de("u"): SortedSet([2])}) == {
        "u__elements": {"added": {"a": 42, "b": None, "c": None}, "removed": ["c"]}
    }


def test_udt_overwrite_and_null() -> None:
    """SET u = {a: 1, b: 2} is a full value; SET u = null logs all-null fields plus the tombstone."""
    assert changed({"u": UtValue(1, 2, None), d("u"): True}) == {"u": {"value": {"a": 1, "b": 2, "c": None}}}
    assert changed({"u": UtValue(None, None, None), d("u"): True}) == {"u": {"value": None}}


def test_frozen_map_is_atomic() -> None:
    """SET fm = {1: 1} / SET fm = null: an ordinary cell, no element changes."""
    assert changed({"fm": OrderedMap([(1, 1)])}) == {"fm": {"value": [{"key": 1, "value": 1}]}}
    assert changed({d("fm"): True}) == {"fm": {"value": None}}


def test_collection_delete_then_add_in_a_batch_is_an_overwrite() -> None:
    """DELETE st USING TIMESTAMP T-1; UPDATE ... SET st = st + {7}: one row with the tombstone."""
    assert changed({"st": SortedSet([7]), d("st"): True}) == {"st": {"value": [7]}}


def test_insert_with_ttl_of_collections_gives_marker_tombstone_and_elements_rows() -> None:
    """INSERT (pk, ck, m, st) VALUES (...) USING TTL 5: marker row (c), tombstones (u, cells null),
    then the elements under the TTL (u, element changes) - in that order they rebuild the value."""
    translation = run(
        PLAN,
        row_with(Operation.INSERT, {"pk": 0, "ck": 0}, ttl=5),
        row_with(Operation.UPDATE, {"pk": 0, "ck": 0, d("m"): True, d("st"): True}),
        row_with(Operation.UPDATE, {"pk": 0, "ck": 0, "m": OrderedMap([(1, "a")]), "st": SortedSet([2])}, ttl=5),
    )
    values = Wire().values(translation)
    assert [v["op"] for v in values] == ["c", "u", "u"]
    assert (values[1]["after"]["m"], values[1]["after"]["st"]) == ({"value": None}, {"value": None})
    assert values[2]["after"]["m__elements"] == {"added": [{"key": 1, "value": "a"}], "removed": None}
    assert values[2]["after"]["st__elements"] == {"added": [2], "removed": None}


def test_nested_frozen_types_inside_collections() -> None:
    table = make_table(
        partition=[("pk", "int")],
        regular=[("lm", "list<frozen<map<text, int>>>"), ("tu", "tuple<int, text, frozen<set<int>>>")],
    )
    plan = plan_for(table)
    translation = run(
        plan,
        row_with(
            Operation.UPDATE,
            {"pk": 1, "lm": {K1: OrderedMap([("x", 1)])}, d("lm"): True, "tu": (1, None, SortedSet([3]))},
        ),
    )
    [value] = Wire().values(translation)
    assert value["after"]["lm"] == {"value": [[{"key": "x", "value": 1}]]}
    assert value["after"]["tu"] == {"value": {"field_0": 1, "field_1": None, "field_2": [3]}}
    assert plan.after_schema.field("lm").schema.field("value").schema.items.items.name == (  # type: ignore[union-attr]
        "P.ks.t.MapEntry_VARCHAR_INT"
    )


def test_a_column_named_like_a_companion_field_is_refused() -> None:
    table = make_table(partition=[("pk", "int")], regular=[("m", "set<int>"), ("m__elements", "int")])
    with pytest.raises(PlanError, match="m__elements"):
        plan_for(table)


def test_bad_udt_field_index_names_the_place() -> None:
    with pytest.raises(TranslationError, match=r"ks\.c .*batch_seq_no 0.*column 'u'.*no field index 7"):
        run(PLAN, row_with(Operation.UPDATE, {"pk": 0, "ck": 0, "u": UtValue(1, 2, 3), de("u"): SortedSet([7])}))


def test_udt_values_given_as_mappings_or_objects() -> None:
    """Registered UDT classes (attributes) and dict-like values work as well as namedtuples."""

    class Registered:
        def __init__(self) -> None:
            self.a, self.b, self.c = 1, None, 3

    assert changed({"u": Registered(), d("u"): True}) == {"u": {"value": {"a": 1, "b": None, "c": 3}}}
    assert changed({"u": {"a": 5}, d("u"): True}) == {"u": {"value": {"a": 5, "b": None, "c": None}}}


def test_uuid_list_keys_need_timeuuids() -> None:
    """A non-frozen list is logged as map<timeuuid, V>: a plain list, or keys that are not
    timeuuids (version 1), are refused naming the column, never placed somewhere in the list."""
    with pytest.raises(TranslationError, match="column 'l'"):
        run(PLAN, row_with(Operation.UPDATE, {"pk": 0, "ck": 0, "l": [1, 2]}))
    random_key = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0, version=4)
    for change in ({"l": {K1: 1, random_key: 2}}, {de("l"): SortedSet([random_key])},
                   {"l": {random_key: 1}, d("l"): True}):
        with pytest.raises(TranslationError, match=r"column 'l': list key UUID\('.*'\) is not a timeuuid"):
            run(PLAN, row_with(Operation.UPDATE, {"pk": 0, "ck": 0, **change}))
    assert Wire().values(run(PLAN, row_with(Operation.UPDATE, {"pk": 0, "ck": 0, "l": {K2: 2, K1: 1}})))[0][
        "after"]["l__elements"]["added"] == [{"key": str(K1), "value": 1}, {"key": str(K2), "value": 2}]


class _BrokenMap(dict[Any, Any]):
    """A driver map object that breaks when read (a shape no converter expects)."""

    def items(self) -> Any:
        raise AttributeError("no items today")


def test_driver_objects_of_the_wrong_shape_give_the_same_clear_error() -> None:
    """A log value that breaks a converter with a plain Python error (here an AttributeError)
    still becomes one TranslationError naming the column."""
    with pytest.raises(TranslationError, match=r"column 'm': AttributeError: no items today"):
        run(PLAN, row_with(Operation.UPDATE, {"pk": 0, "ck": 0, "m": _BrokenMap({1: "a"}), d("m"): True}))
