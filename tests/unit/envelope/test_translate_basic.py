"""Golden tests for the basic operations of cdc-log-format.md section 3.2 (table `ks.t (pk int,
ck int, s int static, v1 int, v2 int, PRIMARY KEY (pk, ck))`), written with every serializer."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.envelope.records import DropReason, Translation
from bridge.scylla.model import Operation
from tests.unit.envelope.support import (
    ENVELOPE_FIELDS,
    NOW_MICROS,
    WRITE_MICROS,
    Wire,
    d,
    make_table,
    plan_for,
    row,
    row_with,
    run,
)

TABLE = make_table(
    partition=[("pk", "int")],
    clustering=[("ck", "int")],
    static=[("s", "int")],
    regular=[("v1", "int"), ("v2", "int")],
)
PLAN = plan_for(TABLE)
NULL_ROW = {"ck": 0, "pk": 0, "s": None, "v1": None, "v2": None}


def events(translation: Translation) -> list[Any]:
    """(key, op, before, after) per record; tombstones as (key, "T", None, None)."""
    wire = Wire()
    out = []
    for record in translation.records:
        key, value = wire.check(record)
        if value is None:
            out.append((key, "T", None, None))
        else:
            out.append((key, value["op"], value["before"], value["after"]))
    return out


def test_insert_is_c_with_touched_cells_and_untouched_nulls() -> None:
    """INSERT (pk,ck,v1) VALUES (0,0,1): op c, v1 a cell, the rest null (not touched)."""
    out = events(run(PLAN, row(Operation.INSERT, pk=0, ck=0, v1=1)))
    assert out == [({"ck": 0, "pk": 0}, "c", None, {**NULL_ROW, "v1": {"value": 1}})]


def test_insert_with_explicit_null_gives_value_null_cell() -> None:
    """INSERT ... v2 = null: `cdc$deleted_v2` gives {"value": null}, distinct from untouched."""
    out = events(run(PLAN, row_with(Operation.INSERT, {"pk": 0, "ck": 0, "v1": 1, d("v2"): True})))
    assert out[0][3] == {**NULL_ROW, "v1": {"value": 1}, "v2": {"value": None}}


def test_insert_of_keys_only() -> None:
    out = events(run(PLAN, row(Operation.INSERT, pk=0, ck=0)))
    assert out == [({"ck": 0, "pk": 0}, "c", None, NULL_ROW)]


def test_update_is_u() -> None:
    out = events(run(PLAN, row(Operation.UPDATE, pk=0, ck=0, v1=5, v2=6)))
    assert out == [({"ck": 0, "pk": 0}, "u", None, {**NULL_ROW, "v1": {"value": 5}, "v2": {"value": 6}})]


def test_set_null_and_column_delete_are_u_with_value_null() -> None:
    """UPDATE SET v2 = null and DELETE v2 log the same row: u with v2 {"value": null}."""
    out = events(run(PLAN, row_with(Operation.UPDATE, {"pk": 0, "ck": 0, d("v2"): True})))
    assert out == [({"ck": 0, "pk": 0}, "u", None, {**NULL_ROW, "v2": {"value": None}})]


def test_row_delete_is_d_then_tombstone() -> None:
    """Row DELETE: op d, before = key + delta cells (all null), after null, then a tombstone."""
    out = events(run(PLAN, row(Operation.ROW_DELETE, pk=0, ck=0)))
    assert out == [
        ({"ck": 0, "pk": 0}, "d", NULL_ROW, None),
        ({"ck": 0, "pk": 0}, "T", None, None),
    ]


def test_tombstones_on_delete_false_drops_only_the_tombstone() -> None:
    plan = plan_for(TABLE, tombstones_on_delete=False)
    out = events(run(plan, row(Operation.ROW_DELETE, pk=0, ck=0)))
    assert [e[1] for e in out] == ["d"]


def test_delete_of_two_rows_in_one_record() -> None:
    """DELETE ... ck IN (1, 2): one record, two row deletes, each with its tombstone."""
    out = events(run(PLAN, row(Operation.ROW_DELETE, pk=0, ck=1), row(Operation.ROW_DELETE, pk=0, ck=2)))
    assert [(e[0]["ck"], e[1]) for e in out] == [(1, "d"), (1, "T"), (2, "d"), (2, "T")]


def test_partition_delete_on_clustered_table_is_counted_not_emitted() -> None:
    translation = run(PLAN, row(Operation.PARTITION_DELETE, pk=0))
    assert translation.records == ()
    assert translation.dropped == {DropReason.CLUSTERED_PARTITION_DELETE: 1}


@pytest.mark.parametrize(
    ("start", "start_ck", "end", "end_ck"),
    [
        (Operation.RANGE_DELETE_START_EXCLUSIVE, 0, Operation.RANGE_DELETE_END_EXCLUSIVE, 5),  # ck > 0 AND ck < 5
        (Operation.RANGE_DELETE_START_INCLUSIVE, 0, Operation.RANGE_DELETE_END_INCLUSIVE, 5),  # ck >= 0 AND ck <= 5
        (Operation.RANGE_DELETE_START_EXCLUSIVE, 0, Operation.RANGE_DELETE_END_INCLUSIVE, 2),  # ck <= 2 AND ck > 0
        (Operation.RANGE_DELETE_START_INCLUSIVE, None, Operation.RANGE_DELETE_END_EXCLUSIVE, 3),  # ck < 3
        (Operation.RANGE_DELETE_START_EXCLUSIVE, 3, Operation.RANGE_DELETE_END_INCLUSIVE, None),  # ck > 3
    ],
)
def test_range_deletes_are_counted_once_and_not_emitted(
    start: Operation, start_ck: int | None, end: Operation, end_ck: int | None
) -> None:
    translation = run(PLAN, row(start, pk=0, ck=start_ck), row(end, pk=0, ck=end_ck))
    assert translation.records == ()
    assert translation.dropped == {DropReason.RANGE_DELETE: 1}


def test_dropped_changes_go_to_the_opt_in_side_topic() -> None:
    """With dropped.changes.topic, a range delete and a clustered partition delete each give a
    record there: key = partition key, bounds as clustering structs with their inclusiveness."""
    plan = plan_for(TABLE, dropped_changes_topic="P.dropped")
    wire = Wire()
    ranged = run(
        plan,
        row(Operation.RANGE_DELETE_START_INCLUSIVE, pk=0, ck=None),
        row(Operation.RANGE_DELETE_END_EXCLUSIVE, pk=0, ck=3),
    )
    assert ranged.dropped == {DropReason.RANGE_DELETE: 1}
    [side] = ranged.records
    assert side.topic == "P.dropped"
    key, value = wire.check(side)
    assert key == {"ck": None, "pk": 0}
    assert {k: value[k] for k in ("kind", "start", "start_inclusive", "end", "end_inclusive")} == {
        "kind": "range_delete",
        "start": {"ck": None},
        "start_inclusive": True,
        "end": {"ck": 3},
        "end_inclusive": False,
    }
    assert value["source"]["ts_us"] == WRITE_MICROS
    partition = run(plan, row(Operation.PARTITION_DELETE, pk=0))
    _, value = wire.check(partition.records[0])
    assert (value["kind"], value["start"], value["end"]) == ("partition_delete", None, None)


def test_multi_column_range_delete_bounds() -> None:
    table = make_table(partition=[("pk", "int")], clustering=[("ck1", "int"), ("ck2", "int"), ("ck3", "int")])
    plan = plan_for(table, dropped_changes_topic="side")
    translation = run(
        plan,
        row(Operation.RANGE_DELETE_START_EXCLUSIVE, pk=0, ck1=0, ck2=0),
        row(Operation.RANGE_DELETE_END_EXCLUSIVE, pk=0, ck1=0, ck2=3),
    )
    _, value = Wire().check(translation.records[0])
    assert value["start"] == {"ck1": 0, "ck2": 0, "ck3": None}
    assert value["end"] == {"ck1": 0, "ck2": 3, "ck3": None}


def test_insert_with_ttl_is_an_ordinary_insert() -> None:
    """INSERT ... USING TTL 10: the TTL is not part of the legacy envelope."""
    out = events(run(PLAN, row(Operation.INSERT, ttl=10, pk=0, ck=0, v1=1)))
    assert out == [({"ck": 0, "pk": 0}, "c", None, {**NULL_ROW, "v1": {"value": 1}})]


def test_insert_with_ttl_and_a_null_gives_c_then_u() -> None:
    """The dead cell is split into its own (ttl null) row: two events, in seq order."""
    out = events(
        run(
            PLAN,
            row(Operation.INSERT, ttl=10, pk=0, ck=0, v1=1),
            row_with(Operation.UPDATE, {"pk": 0, "ck": 0, d("v2"): True}),
        )
    )
    assert [(e[1], e[3]) for e in out] == [
        ("c", {**NULL_ROW, "v1": {"value": 1}}),
        ("u", {**NULL_ROW, "v2": {"value": None}}),
    ]


def test_update_using_ttl_with_a_null() -> None:
    out = events(
        run(
            PLAN,
            row_with(Operation.UPDATE, {"pk": 0, "ck": 0, d("v2"): True}),
            row(Operation.UPDATE, ttl=5, pk=0, ck=0, v1=0),
        )
    )
    assert [(e[1], e[3]["v1"], e[3]["v2"]) for e in out] == [("u", None, {"value": None}), ("u", {"value": 0}, None)]


def test_static_row_update_is_u_with_null_clustering_key() -> None:
    """UPDATE SET s = 7 WHERE pk = 0 (and INSERT (pk, s)): op 1 with ck null."""
    out = events(run(PLAN, row(Operation.UPDATE, pk=0, s=7)))
    assert out == [({"ck": None, "pk": 0}, "u", None, {**NULL_ROW, "ck": None, "s": {"value": 7}})]


def test_insert_touching_static_and_clustered_row() -> None:
    """INSERT (pk,ck,s,v1) VALUES (0,0,0,0): static update first (u), then the clustered insert (c)."""
    out = events(run(PLAN, row(Operation.UPDATE, pk=0, s=0), row(Operation.INSERT, pk=0, ck=0, v1=0)))
    assert [(e[0], e[1]) for e in out] == [({"ck": None, "pk": 0}, "u"), ({"ck": 0, "pk": 0}, "c")]


def test_batch_over_two_rows_of_one_partition() -> None:
    out = events(run(PLAN, row(Operation.UPDATE, pk=0, ck=0, v1=0), row(Operation.UPDATE, pk=0, ck=1, v1=0)))
    assert [(e[0]["ck"], e[1]) for e in out] == [(0, "u"), (1, "u")]


def test_update_then_row_delete_in_one_record() -> None:
    out = events(run(PLAN, row(Operation.UPDATE, pk=0, ck=0, v1=1), row(Operation.ROW_DELETE, pk=0, ck=0)))
    assert [e[1] for e in out] == ["u", "d", "T"]


def test_per_row_ttl_expiry_is_a_delete() -> None:
    """Operation -3 (row expired by per-row TTL) is a row delete."""
    out = events(run(PLAN, row(Operation.SERVICE_ROW_DELETE, pk=0, ck=0)))
    assert [e[1] for e in out] == ["d", "T"]


PK_ONLY = make_table(partition=[("pk", "int")], regular=[("v", "int")])


def test_partition_delete_without_clustering_key_is_a_row_delete() -> None:
    """DELETE FROM t WHERE pk = 0 on a PK-only table: op 4, emitted as d + tombstone."""
    plan = plan_for(PK_ONLY)
    for op in (Operation.PARTITION_DELETE, Operation.SERVICE_PARTITION_DELETE):
        translation = run(plan, row(op, pk=0))
        assert events(translation) == [({"pk": 0}, "d", {"pk": 0, "v": None}, None), ({"pk": 0}, "T", None, None)]
        assert translation.dropped == {}


def test_service_partition_delete_on_clustered_table_is_dropped() -> None:
    translation = run(PLAN, row(Operation.SERVICE_PARTITION_DELETE, pk=0))
    assert translation.records == ()
    assert translation.dropped == {DropReason.CLUSTERED_PARTITION_DELETE: 1}


def test_delta_keys_rows_carry_only_keys() -> None:
    """With `delta: 'keys'` a delta row has keys only: every cell is null (nothing known)."""
    out = events(run(PLAN, row(Operation.INSERT, ttl=2222, pk=2, ck=22)))
    assert out == [({"ck": 22, "pk": 2}, "c", None, {**NULL_ROW, "ck": 22, "pk": 2})]


def test_full_envelope_bytes_without_schemas() -> None:
    """The whole value, byte for byte: source block from cdc$time, processing time in ts_*."""
    translation = run(PLAN, row(Operation.INSERT, pk=0, ck=0, v1=1))
    value = Wire().json_off.serialize("t", PLAN.value_schema, translation.records[0].value)
    from bridge import __version__

    assert value == (
        b'{"source":{"version":"' + __version__.encode() + b'","connector":"scylla","name":"P",'
        b'"ts_ms":1718022896789,"snapshot":"false","db":"ks","sequence":null,"ts_us":1718022896789123,'
        b'"ts_ns":1718022896789123000,"keyspace_name":"ks","table_name":"t"},"before":null,'
        b'"after":{"ck":0,"pk":0,"s":null,"v1":{"value":1},"v2":null},"op":"c","ts_ms":1718022902001,'
        b'"transaction":null,"ts_us":1718022902001000,"ts_ns":1718022902001000000}'
    )
    assert NOW_MICROS == 1718022902001000


def test_topic_and_schema_names() -> None:
    assert PLAN.topic == "P.ks.t"
    assert PLAN.key_schema.name == "P.ks.t.Key"
    assert PLAN.value_schema.name == "P.ks.t.Envelope"
    assert list(PLAN.value_schema.field_names) == ENVELOPE_FIELDS
    assert PLAN.after_schema.name == "P.ks.t.After" and PLAN.before_schema.name == "P.ks.t.Before"
    assert PLAN.after_schema.field("v1").schema.name == "P.ks.t.v1.Cell"


def test_a_column_the_plan_does_not_know_is_refused_by_name() -> None:
    """A value of a column added after the plan was built is never dropped silently."""
    from bridge.envelope.errors import UnknownColumnError

    with pytest.raises(UnknownColumnError, match=r"ks\.t stream .* batch_seq_no 0 .*column 'v3' is not in") as error:
        run(PLAN, row(Operation.UPDATE, pk=0, ck=0, v1=1, v3=5))
    assert error.value.column == "v3"
    wider = plan_for(make_table(partition=[("pk", "int")], clustering=[("ck", "int")], static=[("s", "int")],
                                regular=[("v1", "int"), ("v2", "int"), ("v3", "int")]))
    assert events(run(wider, row(Operation.UPDATE, pk=0, ck=0, v1=1, v3=5)))[0][3]["v3"] == {"value": 5}
