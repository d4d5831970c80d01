"""Section 3 of the reference against real Cassandra: CQL in, the exact log rows stored out (every
column), plus checklist items 2, 3, 4 and 11 (record shape, cdc$time, op codes, cell TTL/writetime)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bridge.scylla.cdc_time import micros_of
from bridge_devstack.sim import Emulator, canonical
from bridge_devstack.sim.render import q, qualified
from tests.integration.sim.logkit import check_records, log_column_names
from tests.unit.sim.cases import (
    BASE,
    BASIC_CASES,
    COLLECTION_CASES,
    COLLECTIONS,
    MIXED_BATCH_RECORDS,
    RANGE_CASES,
    UT_CQL,
    K,
    Rows,
    mixed_batch,
)


@pytest.fixture(scope="module", autouse=True)
def tables(emu: Emulator) -> None:
    emu.execute(BASE)
    emu.execute(UT_CQL)
    emu.execute(COLLECTIONS)
    emu.execute("CREATE TABLE t3 (pk int PRIMARY KEY, m1 map<int,int>, m2 map<int,int>) WITH cdc = {'enabled': true}")
    emu.execute(
        "CREATE TABLE m3 (pk int, ck1 int, ck2 int, ck3 int, v int, PRIMARY KEY (pk, ck1, ck2, ck3))"
        " WITH cdc = {'enabled': true, 'ttl': 0}"
    )


def now_us() -> int:
    return time.time_ns() // 1000


@pytest.mark.parametrize(("cql", "expected"), BASIC_CASES)
def test_basic_operations(emu: Emulator, cql: str, expected: Rows) -> None:
    """Each statement of section 3.2 stores one record with exactly these rows."""
    check_records(emu, emu.execute(cql), [expected])


@pytest.mark.parametrize(("where", "start", "end"), RANGE_CASES)
def test_range_deletes(emu: Emulator, where: str, start: tuple[int, int | None], end: tuple[int, int | None]) -> None:
    """Range deletes store a start row and an end row, unbounded sides inclusive with null ck."""

    def row(op: int, ck: int | None) -> tuple[int, None, dict[str, Any]]:
        return (op, None, {"pk": 0} if ck is None else {"pk": 0, "ck": ck})

    check_records(emu, emu.execute(f"DELETE FROM t WHERE pk=0 AND {where}"), [[row(*start), row(*end)]])


def test_degenerate_range_stores_nothing(emu: Emulator, sim_keyspace: str) -> None:
    """An empty range writes no log row at all (the table stays empty for this partition's stream)."""
    before = emu.session.execute(f"SELECT count(*) FROM {sim_keyspace}.m3_scylla_cdc_log").one()[0]
    assert emu.execute("DELETE FROM m3 WHERE pk=7 AND ck1 < 1 AND ck1 > 2") == []
    assert emu.session.execute(f"SELECT count(*) FROM {sim_keyspace}.m3_scylla_cdc_log").one()[0] == before


def test_multi_column_ranges_and_prefix_delete(emu: Emulator, sim_keyspace: str) -> None:
    """Multi-column clustering: slices log their bound prefixes, and the base rows really go."""
    emu.execute("INSERT INTO m3 (pk,ck1,ck2,ck3,v) VALUES (0,0,1,1,1)")
    emu.execute("INSERT INTO m3 (pk,ck1,ck2,ck3,v) VALUES (0,0,5,1,1)")
    check_records(
        emu,
        emu.execute("DELETE FROM m3 WHERE pk=0 AND ck1=0 AND ck2>0 AND ck2<3"),
        [[(6, None, {"pk": 0, "ck1": 0, "ck2": 0}), (8, None, {"pk": 0, "ck1": 0, "ck2": 3})]],
    )
    assert [tuple(r) for r in emu.session.execute(f"SELECT ck2 FROM {sim_keyspace}.m3 WHERE pk=0")] == [(5,)]
    check_records(
        emu,
        emu.execute("DELETE FROM m3 WHERE pk=0 AND ck1=0"),
        [[(5, None, {"pk": 0, "ck1": 0}), (7, None, {"pk": 0, "ck1": 0})]],
    )
    assert list(emu.session.execute(f"SELECT * FROM {sim_keyspace}.m3 WHERE pk=0")) == []


def test_mixed_batch_with_timestamps(emu: Emulator, sim_keyspace: str) -> None:
    """The test_change_splitting batch: six records at T..T+5 with ScyllaDB's rows, cdc$time µs = T+i."""
    t = now_us()
    records = emu.execute(mixed_batch(t))
    assert [micros_of(r.time) - t for r in records] == [0, 1, 2, 3, 4, 5]
    assert len({r.time for r in records}) == 6
    check_records(emu, records, MIXED_BATCH_RECORDS)
    base = [canonical(tuple(r)) for r in emu.session.execute(f"SELECT ck, v1, v2, m FROM {sim_keyspace}.t WHERE pk=1")]
    assert base == [(0, 1, 2, {3: 3}), (1, None, None, {4: 4})]


def test_batch_across_partitions_and_equal_timestamps(emu: Emulator) -> None:
    """One record per partition with its own cdc$time (same µs), its own seq and end of batch."""
    t = now_us()
    records = emu.execute(
        f"BEGIN BATCH USING TIMESTAMP {t} UPDATE t SET v1=1 WHERE pk=2 AND ck=0; UPDATE t SET v1=2 WHERE pk=3 AND ck=0;"
        " APPLY BATCH"
    )
    assert [micros_of(r.time) for r in records] == [t, t] and records[0].time != records[1].time
    check_records(emu, records, [[(1, None, {"pk": 2, "ck": 0, "v1": 1})], [(1, None, {"pk": 3, "ck": 0, "v1": 2})]])
    again = emu.execute(f"UPDATE t USING TIMESTAMP {t} SET v2=1 WHERE pk=2 AND ck=0")
    assert micros_of(again[0].time) == t and again[0].time != records[0].time


def test_table_without_clustering_key(emu: Emulator) -> None:
    """Upserts of a table without ck have no ck columns; DELETE of the row is a partition delete."""
    check_records(
        emu,
        emu.execute("INSERT INTO t3 (pk,m1,m2) VALUES (0,{1:1},{2:2}) USING TTL 5"),
        [
            [
                (2, 5, {"pk": 0}),
                (1, None, {"pk": 0, "cdc$deleted_m1": True, "cdc$deleted_m2": True}),
                (1, 5, {"pk": 0, "m1": {1: 1}, "m2": {2: 2}}),
            ]
        ],
    )
    check_records(emu, emu.execute("DELETE FROM t3 WHERE pk=0"), [[(4, None, {"pk": 0})]])


@pytest.mark.parametrize(("assignment", "values"), COLLECTION_CASES)
def test_collection_updates(emu: Emulator, assignment: str, values: dict[str, Any]) -> None:
    """Each collection/UDT update of section 3.3 stores one op-1 row with exactly these values."""
    check_records(emu, emu.execute(f"UPDATE c SET {assignment} WHERE pk=0 AND ck=0"), [[(1, None, {**K, **values})]])


def test_collection_column_delete_and_lists(emu: Emulator, sim_keyspace: str) -> None:
    """`DELETE m` lands at T+1; list keys are exposed and follow the base list in Cassandra."""
    t = now_us()
    (record,) = emu.execute(f"DELETE m FROM c USING TIMESTAMP {t} WHERE pk=5 AND ck=0")
    assert micros_of(record.time) == t + 1
    check_records(emu, [record], [[(1, None, {"pk": 5, "ck": 0, "cdc$deleted_m": True})]])
    (appended,) = emu.execute("UPDATE c SET l = l + [1, 2] WHERE pk=5 AND ck=0")
    keys = sorted(appended.rows[0].values["l"], key=lambda k: k.time)
    assert [micros_of(k) for k in keys] == [micros_of(appended.time)] * 2
    (prepended,) = emu.execute("UPDATE c SET l = [0] + l WHERE pk=5 AND ck=0")
    (first,) = prepended.rows[0].values["l"]
    (by_index,) = emu.execute("UPDATE c SET l[1] = 9 WHERE pk=5 AND ck=0")
    check_records(emu, [by_index], [[(1, None, {"pk": 5, "ck": 0, "l": {keys[0]: 9}})]])
    (removed,) = emu.execute("DELETE l[0] FROM c WHERE pk=5 AND ck=0")
    check_records(emu, [removed], [[(1, None, {"pk": 5, "ck": 0, "cdc$deleted_elements_l": {first}})]])
    assert emu.session.execute(f"SELECT l FROM {sim_keyspace}.c WHERE pk=5 AND ck=0").one().l == [9, 2]


def test_log_cells_carry_the_record_timestamp_and_cdc_ttl(emu: Emulator, sim_keyspace: str) -> None:
    """Checklist 3 and 11: cdc$time µs = USING TIMESTAMP, and every log cell has writetime = that
    timestamp and TTL = the table's cdc ttl (86400 on t, none on m3 with ttl 0)."""
    t = now_us()
    (record,) = emu.execute(f"INSERT INTO t (pk,ck,s,v1,v2) VALUES (9,9,1,2,null) USING TIMESTAMP {t}")
    assert micros_of(record.time) == t
    (unlimited,) = emu.execute(f"INSERT INTO m3 (pk,ck1,ck2,ck3,v) VALUES (9,9,9,9,9) USING TIMESTAMP {t}")
    for table, rec, expected_ttl in (("t", record, 86400), ("m3", unlimited, None)):
        schema = emu.table(sim_keyspace, table).schema
        names = [n for n in log_column_names(schema) if not n.startswith(("cdc$stream_id", "cdc$time", "cdc$batch"))]
        probes = ", ".join(f"writetime({q(n)}), ttl({q(n)}), {q(n)}" for n in names)
        rows = emu.session.execute(
            f"SELECT {probes} FROM {qualified(sim_keyspace, schema.log_table_name)}"
            ' WHERE "cdc$stream_id" = %s AND "cdc$time" = %s',
            (rec.stream_id.raw, rec.time),
        )
        cells = 0
        for row in rows:
            for i in range(len(names)):
                writetime, ttl, value = row[3 * i], row[3 * i + 1], row[3 * i + 2]
                if value is not None:
                    cells += 1
                    assert writetime == t
                    assert (ttl is None) if expected_ttl is None else (expected_ttl - 60 < ttl <= expected_ttl)
        assert cells >= 4


def test_record_shape_and_keys(emu: Emulator) -> None:
    """Checklist 2 and 10: one cdc$time per record, seq 0..n-1, eob on the last row only, pk in
    every row, 16-byte stream ids of version 1."""
    records = emu.execute(
        "BEGIN UNLOGGED BATCH UPDATE t SET s=1, v1=1 WHERE pk=4 AND ck=0; INSERT INTO t (pk,ck,v2) VALUES (4,1,2)"
        " USING TTL 100; DELETE FROM t WHERE pk=4 AND ck=2; APPLY BATCH"
    )
    (record,) = records
    assert [r.batch_seq_no for r in record.rows] == list(range(len(record.rows)))
    assert [r.end_of_batch for r in record.rows] == [False] * (len(record.rows) - 1) + [True]
    assert all(r.values["pk"] == 4 and r.time == record.time for r in record.rows)
    assert len(record.stream_id.raw) == 16 and record.stream_id.version == 1
    check_records(
        emu,
        records,
        [
            [
                (1, None, {"pk": 4, "s": 1}),
                (2, 100, {"pk": 4, "ck": 1, "v2": 2}),
                (1, None, {"pk": 4, "ck": 0, "v1": 1}),
                (3, None, {"pk": 4, "ck": 2}),
            ]
        ],
    )


def test_more_collection_examples(emu: Emulator) -> None:
    """The rest of section 3.3 on Cassandra: list removal by value and by key, list overwrite,
    one row per TTL on one map, and a tombstone at T-1 merged with additions at T."""
    k = {"pk": 6, "ck": 0}
    (first,) = emu.execute("UPDATE c SET l = l + [1, 2, 1] WHERE pk=6 AND ck=0")
    keys = sorted(first.rows[0].values["l"], key=lambda key: key.time)
    check_records(
        emu,
        emu.execute("UPDATE c SET l = l - [1] WHERE pk=6 AND ck=0"),
        [[(1, None, {**k, "cdc$deleted_elements_l": {keys[0], keys[2]}})]],
    )
    check_records(
        emu,
        emu.execute(f"UPDATE c SET l[SCYLLA_TIMEUUID_LIST_INDEX({keys[1]})] = 5 WHERE pk=6 AND ck=0"),
        [[(1, None, {**k, "l": {keys[1]: 5}})]],
    )
    (overwrite,) = emu.execute("UPDATE c SET l = [7, 8] WHERE pk=6 AND ck=0")
    new_keys = overwrite.rows[0].values["l"]
    assert list(new_keys.values()) == [7, 8]
    check_records(emu, [overwrite], [[(1, None, {**k, "l": new_keys, "cdc$deleted_l": True})]])
    check_records(
        emu,
        emu.execute(
            "BEGIN UNLOGGED BATCH UPDATE c USING TTL 9 SET m[1] = 'a' WHERE pk=6 AND ck=0;"
            " UPDATE c USING TTL 3 SET m[2] = 'b' WHERE pk=6 AND ck=0; APPLY BATCH"
        ),
        [[(1, 3, {**k, "m": {2: "b"}}), (1, 9, {**k, "m": {1: "a"}})]],
    )
    t = now_us()
    check_records(
        emu,
        emu.execute(
            f"BEGIN UNLOGGED BATCH DELETE m FROM c USING TIMESTAMP {t - 1} WHERE pk=6 AND ck=0;"
            f" UPDATE c USING TIMESTAMP {t} SET m = m + {{5: 'e'}} WHERE pk=6 AND ck=0; APPLY BATCH"
        ),
        [[(1, None, {**k, "m": {5: "e"}, "cdc$deleted_m": True})]],
    )
    row = emu.session.execute(f"SELECT l, m FROM {emu.keyspace}.c WHERE pk=6 AND ck=0").one()
    assert row.l == [7, 8] and dict(row.m) == {5: "e"}


def test_ordering_rules_of_one_record(emu: Emulator) -> None:
    """Update + row delete of one row at one timestamp: op 1 then op 3; one TTL and one kind of
    change (inserts and updates of several rows): clustering order ("no split" path)."""
    check_records(
        emu,
        emu.execute(
            "BEGIN UNLOGGED BATCH UPDATE t SET v1=1 WHERE pk=8 AND ck=0; DELETE FROM t WHERE pk=8 AND ck=0; APPLY BATCH"
        ),
        [[(1, None, {"pk": 8, "ck": 0, "v1": 1}), (3, None, {"pk": 8, "ck": 0})]],
    )
    check_records(
        emu,
        emu.execute(
            "BEGIN UNLOGGED BATCH INSERT INTO t (pk,ck,v1) VALUES (8,2,1); UPDATE t SET v1=0 WHERE pk=8 AND"
            " ck=1; APPLY BATCH"
        ),
        [[(1, None, {"pk": 8, "ck": 1, "v1": 0}), (2, None, {"pk": 8, "ck": 2, "v1": 1})]],
    )
    check_records(
        emu,
        emu.execute("DELETE FROM m3 WHERE pk=8 AND (ck1, ck2) > (1, 2) AND (ck1) <= (4)"),
        [[(6, None, {"pk": 8, "ck1": 1, "ck2": 2}), (7, None, {"pk": 8, "ck1": 4})]],
    )
