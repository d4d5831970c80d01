"""Delta rows of cdc-log-format.md section 3.2 (basic operations), computed without Cassandra."""

from __future__ import annotations

import pytest

from tests.unit.sim.cases import BASE, BASIC_CASES, MIXED_BATCH_RECORDS, RANGE_CASES, K, mixed_batch
from tests.unit.sim.pure import T, World, rows


@pytest.fixture
def world() -> World:
    w = World()
    w.add(BASE)
    w.add(
        "CREATE TABLE m3 (pk int, ck1 int, ck2 int, ck3 int, v int, PRIMARY KEY (pk, ck1, ck2, ck3))"
        " WITH cdc = {'enabled': true}"
    )
    w.add("CREATE TABLE t3 (pk int PRIMARY KEY, m1 map<int,int>, m2 map<int,int>) WITH cdc = {'enabled': true}")
    return w


def one(world: World, cql: str, timestamp: int = T) -> list[tuple[int, int | None, dict[str, object]]]:
    """The single record a statement writes, as (op, ttl, values) rows."""
    records = world.write(cql, timestamp)
    assert len(records) == 1, records
    assert records[0].timestamp == timestamp
    return rows(records[0])


@pytest.mark.parametrize(("cql", "expected"), BASIC_CASES)
def test_basic_operations(world: World, cql: str, expected: list[tuple[int, int | None, dict[str, object]]]) -> None:
    """Each statement of section 3.2 gives one record with exactly these rows, in this order."""
    assert one(world, cql) == expected


@pytest.mark.parametrize(("where", "start", "end"), RANGE_CASES)
def test_range_deletes(world: World, where: str, start: tuple[int, int | None], end: tuple[int, int | None]) -> None:
    """A range delete is exactly a start row then an end row; an unbounded side is inclusive with null ck."""

    def row(op: int, ck: int | None) -> tuple[int, None, dict[str, object]]:
        return (op, None, {"pk": 0} if ck is None else {"pk": 0, "ck": ck})

    assert one(world, f"DELETE FROM t WHERE pk=0 AND {where}") == [row(*start), row(*end)]


def test_degenerate_range_writes_nothing(world: World) -> None:
    """An empty clustering range (ck < 1 AND ck > 2) produces no log rows at all."""
    assert world.write("DELETE FROM t WHERE pk=0 AND ck < 1 AND ck > 2") == []
    assert world.write("DELETE FROM t WHERE pk=0 AND ck > 2 AND ck < 2") == []


def test_multi_column_clustering_ranges(world: World) -> None:
    """Slices and prefix deletes over a 3-column clustering key log their prefixes only."""
    assert one(world, "DELETE FROM m3 WHERE pk=0 AND ck1=0 AND ck2>0 AND ck2<3") == [
        (6, None, {"pk": 0, "ck1": 0, "ck2": 0}),
        (8, None, {"pk": 0, "ck1": 0, "ck2": 3}),
    ]
    assert one(world, "DELETE FROM m3 WHERE pk=0 AND ck1=0") == [
        (5, None, {"pk": 0, "ck1": 0}),
        (7, None, {"pk": 0, "ck1": 0}),
    ]
    assert one(world, "DELETE FROM m3 WHERE pk=0 AND (ck1, ck2) > (1, 2) AND (ck1) <= (4)") == [
        (6, None, {"pk": 0, "ck1": 1, "ck2": 2}),
        (7, None, {"pk": 0, "ck1": 4}),
    ]


def test_batch_with_different_timestamps_gives_two_records(world: World) -> None:
    """Statements with their own timestamps in one batch are separate records, oldest first."""
    records = world.write(
        "BEGIN UNLOGGED BATCH UPDATE t USING TIMESTAMP 1584971217889332 SET v1=0 WHERE pk=0 AND ck=0;"
        " UPDATE t USING TIMESTAMP 1584971217889333 SET v2=1 WHERE pk=0 AND ck=0; APPLY BATCH"
    )
    assert [r.timestamp for r in records] == [1584971217889332, 1584971217889333]
    assert [rows(r) for r in records] == [[(1, None, {**K, "v1": 0})], [(1, None, {**K, "v2": 1})]]


def test_batch_merges_writes_of_one_cell(world: World) -> None:
    """Two writes of the same cell in one batch merge as mutations do: the newer one alone is logged."""
    records = world.write(
        f"BEGIN UNLOGGED BATCH UPDATE t USING TIMESTAMP {T + 1} SET v1=1 WHERE pk=0 AND ck=0;"
        f" UPDATE t USING TIMESTAMP {T} SET v1=0 WHERE pk=0 AND ck=0; APPLY BATCH"
    )
    assert [(r.timestamp, rows(r)) for r in records] == [(T + 1, [(1, None, {**K, "v1": 1})])]


def test_batch_with_mixed_kinds(world: World) -> None:
    """The test_change_splitting batch: one record per timestamp, markers merged (T+4 wins)."""
    records = world.write(mixed_batch(T))
    assert [r.timestamp - T for r in records] == [0, 1, 2, 3, 4, 5]
    assert [rows(r) for r in records] == MIXED_BATCH_RECORDS


def test_update_then_row_delete_same_timestamp(world: World) -> None:
    """A batch updating and deleting one row at one timestamp: op 1 then op 3 in one record."""
    assert one(
        world,
        "BEGIN UNLOGGED BATCH UPDATE t SET v1=1 WHERE pk=0 AND ck=0; DELETE FROM t WHERE pk=0 AND ck=0; APPLY BATCH",
    ) == [(1, None, {**K, "v1": 1}), (3, None, K)]


def test_batch_across_partitions_is_one_record_each(world: World) -> None:
    """Different partitions of one batch: separate records, each starting at seq 0."""
    records = world.write(
        "BEGIN BATCH UPDATE t SET v1=1 WHERE pk=0 AND ck=0; UPDATE t SET v1=2 WHERE pk=1 AND ck=0; APPLY BATCH"
    )
    assert [rows(r) for r in records] == [[(1, None, {**K, "v1": 1})], [(1, None, {"pk": 1, "ck": 0, "v1": 2})]]


def test_no_split_path_keeps_clustering_order(world: World) -> None:
    """One timestamp, one TTL, clustered rows only: inserts and updates come out in ck order."""
    assert one(
        world,
        "BEGIN UNLOGGED BATCH INSERT INTO t (pk,ck,v1) VALUES (0,2,1); UPDATE t SET v1=0 WHERE pk=0 AND ck=1;"
        " APPLY BATCH",
    ) == [(1, None, {"pk": 0, "ck": 1, "v1": 0}), (2, None, {"pk": 0, "ck": 2, "v1": 1})]


def test_collection_insert_with_ttl_has_three_rows(world: World) -> None:
    """INSERT of two maps USING TTL 5 into a table without ck: marker row, tombstones row, elements row."""
    assert one(world, "INSERT INTO t3 (pk,m1,m2) VALUES (0,{1:1},{2:2}) USING TTL 5") == [
        (2, 5, {"pk": 0}),
        (1, None, {"pk": 0, "cdc$deleted_m1": True, "cdc$deleted_m2": True}),
        (1, 5, {"pk": 0, "m1": {1: 1}, "m2": {2: 2}}),
    ]


def test_partition_delete_without_clustering_key(world: World) -> None:
    """DELETE of a whole row of a table without ck is a partition delete (op 4)."""
    assert one(world, "DELETE FROM t3 WHERE pk=3") == [(4, None, {"pk": 3})]


def test_writes_are_logged_whether_or_not_the_row_exists(world: World) -> None:
    """UPDATE SET v=null of a missing row still logs the deletion."""
    assert one(world, "UPDATE t SET v1=null WHERE pk=42 AND ck=42") == [
        (1, None, {"pk": 42, "ck": 42, "cdc$deleted_v1": True})
    ]
