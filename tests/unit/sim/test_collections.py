"""Delta rows of non-frozen collections and UDTs (cdc-log-format.md section 3.3), without Cassandra."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.scylla.cdc_time import timeuuid_sort_key
from bridge_devstack.sim.collections import PREPEND_REFERENCE_US, SUBMICRO_LIMIT, ListKeys
from bridge_devstack.sim.errors import InvalidRequestError
from tests.unit.sim.cases import COLLECTION_CASES, COLLECTIONS, K
from tests.unit.sim.pure import LIST_LOW_BITS, UT, T, World, rows


@pytest.fixture
def world() -> World:
    w = World()
    w.add(COLLECTIONS, {"ut": UT})
    return w


def delta(world: World, cql: str, timestamp: int = T) -> tuple[int, int, dict[str, Any]]:
    """(record timestamp offset from T, op, values) of a statement writing exactly one row."""
    records = world.write(cql, timestamp)
    assert len(records) == 1 and len(records[0].rows) == 1, records
    ((op, ttl, values),) = rows(records[0])
    assert ttl is None
    return records[0].timestamp - timestamp, op, values


@pytest.mark.parametrize(("assignment", "values"), COLLECTION_CASES)
def test_update_of_collections(world: World, assignment: str, values: dict[str, Any]) -> None:
    """Each UPDATE of the section 3.3 table logs one op-1 row at T with exactly these columns."""
    assert delta(world, f"UPDATE c SET {assignment} WHERE pk=0 AND ck=0") == (0, 1, {**K, **values})


def test_column_delete_of_a_collection_is_logged_at_t_plus_one(world: World) -> None:
    """`DELETE m` writes its tombstone at T, which CDC logs in a record at T+1."""
    assert delta(world, "DELETE m FROM c WHERE pk=0 AND ck=0") == (1, 1, {**K, "cdc$deleted_m": True})
    assert delta(world, "DELETE m[5] FROM c WHERE pk=0 AND ck=0") == (0, 1, {**K, "cdc$deleted_elements_m": {5}})


def test_insert_of_a_collection(world: World) -> None:
    """INSERT overwrites: marker, tombstone and elements share one op-2 row."""
    assert delta(world, "INSERT INTO c (pk,ck,m) VALUES (0,0,{1:'a'})") == (
        0,
        2,
        {**K, "m": {1: "a"}, "cdc$deleted_m": True},
    )


def test_list_keys(world: World) -> None:
    """Lists expose their timeuuid keys: appends at T, prepends mirrored, positions resolved by reading."""
    keys = ListKeys(LIST_LOW_BITS)
    k1, k2 = keys.append(T, 2)
    assert delta(world, "UPDATE c SET l = l + [1,2] WHERE pk=0 AND ck=0") == (0, 1, {**K, "l": {k1: 1, k2: 2}})
    later = ListKeys(LIST_LOW_BITS)
    (kp,) = later.prepend(T + 10, 1)
    assert kp.time < k1.time and kp.time == (2 * PREPEND_REFERENCE_US - (T + 10)) * 10 + 0x01B21DD213814000
    assert delta(world, "UPDATE c SET l = [0] + l WHERE pk=0 AND ck=0", T + 10) == (0, 1, {**K, "l": {kp: 0}})
    # The list is now [0, 1, 2] under keys kp, k1, k2.
    assert delta(world, "UPDATE c SET l[1] = 9 WHERE pk=0 AND ck=0", T + 20) == (0, 1, {**K, "l": {k1: 9}})
    assert delta(world, f"UPDATE c SET l[SCYLLA_TIMEUUID_LIST_INDEX({k2})] = 7 WHERE pk=0 AND ck=0", T + 30) == (
        0,
        1,
        {**K, "l": {k2: 7}},
    )
    assert delta(world, "DELETE l[0] FROM c WHERE pk=0 AND ck=0", T + 40) == (
        0,
        1,
        {**K, "cdc$deleted_elements_l": {kp}},
    )
    assert delta(world, "UPDATE c SET l = l - [7] WHERE pk=0 AND ck=0", T + 50) == (
        0,
        1,
        {**K, "cdc$deleted_elements_l": {k2}},
    )
    overwrite = ListKeys(LIST_LOW_BITS).append(T + 60, 2)
    assert delta(world, "UPDATE c SET l = [1,2] WHERE pk=0 AND ck=0", T + 60) == (
        0,
        1,
        {**K, "l": dict(zip(overwrite, [1, 2], strict=True)), "cdc$deleted_l": True},
    )


def test_append_keys_are_laid_out_as_current_scylladb_lays_them_out() -> None:
    """Every key of one statement has the write's time; the statement's sequence number is in
    the clock sequence (sign bit of its low byte flipped), past 16383 also in the 100-ns digits;
    keys sort in append order; the node stays the coordinator's."""
    keys = ListKeys(LIST_LOW_BITS).append(T, 20000)
    t60 = T * 10 + 0x01B21DD213814000
    assert {k.time for k in keys[:16384]} == {t60} and keys[16384].time == t60 + 1
    assert [k.clock_seq for k in keys[:3]] == [0x80, 0x81, 0x82] and keys[0x80].clock_seq == 0
    assert all(k.version == 1 and k.node == LIST_LOW_BITS & 0xFFFF_FFFF_FFFF for k in keys)
    assert sorted(keys, key=timeuuid_sort_key) == keys
    assert keys[1].hex[16:20] == "8081"  # the bytes ScyllaDB writes: variant bit, flipped sign bit, sequence
    with pytest.raises(InvalidRequestError, match=r"^Too many list values per single CQL statement or batch$"):
        ListKeys(LIST_LOW_BITS).append(T, SUBMICRO_LIMIT + 1)


def test_list_index_out_of_bounds_is_an_error(world: World) -> None:
    """Setting a list element by a position the list does not have fails, naming the size."""
    with pytest.raises(InvalidRequestError, match="out of bound, list has size 0"):
        world.write("UPDATE c SET l[3] = 1 WHERE pk=0 AND ck=0")


def test_collection_tombstone_and_add_in_one_batch(world: World) -> None:
    """`DELETE v USING TIMESTAMP T-1` + `v = v + {...}` at T: one row with both, at T."""
    assert delta(
        world,
        f"BEGIN UNLOGGED BATCH DELETE m FROM c USING TIMESTAMP {T - 1} WHERE pk=0 AND ck=0;"
        f" UPDATE c USING TIMESTAMP {T} SET m = m + {{1:'a'}} WHERE pk=0 AND ck=0; APPLY BATCH",
    ) == (0, 1, {**K, "m": {1: "a"}, "cdc$deleted_m": True})


def test_collection_overwrite_with_ttl_splits(world: World) -> None:
    """`USING TTL 5 SET m = {..}`: the tombstone row (no TTL) first, then the elements with TTL 5."""
    (record,) = world.write("UPDATE c USING TTL 5 SET m = {1:'a'} WHERE pk=0 AND ck=0")
    assert rows(record) == [(1, None, {**K, "cdc$deleted_m": True}), (1, 5, {**K, "m": {1: "a"}})]


def test_different_ttls_on_one_collection_give_one_row_each(world: World) -> None:
    """Two TTLs on one map in one batch: one update row per TTL, ascending."""
    (record,) = world.write(
        "BEGIN UNLOGGED BATCH UPDATE c USING TTL 9 SET m[1] = 'a' WHERE pk=0 AND ck=0;"
        " UPDATE c USING TTL 3 SET m[2] = 'b' WHERE pk=0 AND ck=0; APPLY BATCH"
    )
    assert rows(record) == [(1, 3, {**K, "m": {2: "b"}}), (1, 9, {**K, "m": {1: "a"}})]
