"""Golden tests of whole records in the advanced format: composite keys, several rows of one
record, the deletes that give no event, headers of every key type, snapshot rows."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from bridge.envelope import connect_schema as cs
from bridge.envelope.java_string import java_string
from bridge.envelope.records import DropReason
from bridge.envelope.settings import EnvelopeSettings, OutputFormat
from bridge.envelope.translator import Translator
from bridge.scylla.model import Operation as Op
from bridge.scylla.model import SnapshotRow
from tests.unit.envelope.advanced_support import ALL_PLACEMENTS, advanced_plan, data, events, run_advanced
from tests.unit.envelope.support import Wire, make_table, plan_for, row, row_with

PK3 = uuid.UUID("11111111-1111-1111-1111-111111111111")
COMPOSITE = make_table([("pk1", "int"), ("pk2", "text")], clustering=[("pk3", "uuid"), ("pk4", "int")],
                       regular=[("value_text", "text"), ("value_int", "int")])
KEY = {"pk1": 1, "pk2": "alpha", "pk3": str(PK3), "pk4": 10}


def composite(**values: Any) -> dict[str, Any]:
    return {"pk1": 1, "pk2": "alpha", "pk3": PK3, "pk4": 10, **values}


def test_composite_key_update_and_delete() -> None:
    """ScyllaCompositePkPlainConnectorIT / ScyllaCompositePkAvroConnectorIT (74d336e; v2.0.0 the
    same): `PRIMARY KEY ((pk1, pk2), pk3, pk4)`, before/after full, key placed everywhere. Key
    `{"pk1":1,"pk2":"alpha","pk3":"1111…","pk4":10}` (expectedCompositeKey); the update has
    before = pre-image, after = post-image with every key column; the row delete has before =
    the whole pre-image, after null, then a tombstone. Headers `pk.pk1`, `pk.pk2`, `ck.pk3`,
    `ck.pk4` (buildPkHeaders)."""
    plan = advanced_plan(COMPOSITE, "full", "full", ALL_PLACEMENTS)
    [upd] = events(plan, row(Op.PRE_IMAGE, **composite(value_text="first", value_int=100)),
                   row(Op.UPDATE, **composite(value_text="second", value_int=200)),
                   row(Op.POST_IMAGE, **composite(value_text="second", value_int=200)))
    assert upd["key"] == KEY and list(upd["key"]) == ["pk1", "pk2", "pk3", "pk4"]
    assert data(upd)["before"] == {**KEY, "value_int": 100, "value_text": "first"}
    assert data(upd)["after"] == {**KEY, "value_int": 200, "value_text": "second"}
    assert data(upd)["key"] == KEY
    assert upd["headers"] == {"pk.pk1": b"1", "pk.pk2": b"alpha", "ck.pk3": str(PK3).encode(), "ck.pk4": b"10"}
    dele, tomb = events(plan, row(Op.PRE_IMAGE, **composite(value_text="first", value_int=100)),
                        row(Op.ROW_DELETE, **composite()))
    assert data(dele)["before"] == {**KEY, "value_int": 100, "value_text": "first"}
    assert data(dele)["after"] is None and tomb == {"key": KEY, "value": None, "headers": upd["headers"]}


def test_key_order_is_partition_then_clustering() -> None:
    """ScyllaSchema.computeKeySchema: partition key columns first, then clustering columns (each
    in the log's column order); legacy keeps the log's order for all (`ScyllaSchemaLegacy`)."""
    table = make_table([("b", "int")], clustering=[("a", "int")], regular=[("v", "text")])
    assert advanced_plan(table).struct_key_schema.field_names == ("b", "a")
    assert plan_for(table).key_schema.field_names == ("a", "b")
    assert advanced_plan(table).after_schema.field_names == ("a", "b", "v")  # rows keep the log's order


def test_batch_pre_image_misalignment() -> None:
    """CdcBatchPreimageMisalignmentIT (74d336e, phase 3): an UNLOGGED BATCH updating two rows of
    one partition gives PRE(ck=1), PRE(ck=2), UPDATE(ck=1), UPDATE(ck=2), POST(ck=1), POST(ck=2);
    each update gets its own row's images. At v2.0.0 the connector keyed its waiting changes by
    task only (no RowKey) and misaligned them; this is HEAD's behaviour."""
    table = make_table([("pk", "int")], clustering=[("ck", "int")], regular=[("v", "text")])
    plan = advanced_plan(table, "full", "full")
    first, second = events(plan, row(Op.PRE_IMAGE, pk=1, ck=1, v="original_A"),
                           row(Op.PRE_IMAGE, pk=1, ck=2, v="original_B"),
                           row(Op.UPDATE, pk=1, ck=1, v="updated_A"), row(Op.UPDATE, pk=1, ck=2, v="updated_B"),
                           row(Op.POST_IMAGE, pk=1, ck=1, v="updated_A"), row(Op.POST_IMAGE, pk=1, ck=2, v="updated_B"))
    assert (data(first)["before"], data(first)["after"]) == ({"ck": 1, "pk": 1, "v": "original_A"},
                                                             {"ck": 1, "pk": 1, "v": "updated_A"})
    assert (data(second)["before"], data(second)["after"]) == ({"ck": 2, "pk": 1, "v": "original_B"},
                                                               {"ck": 2, "pk": 1, "v": "updated_B"})


def test_several_changes_of_one_row_in_one_record() -> None:
    """Not covered by the connector's tests. Its RowKey accumulator completes on the first change
    of a row and leaves the second waiting for images Scylla never writes (dropped after the
    timeout). A record has one pre-image (state before it) and one post-image (state after it)
    per row: the pre-image goes with the row's first change, the post-image with its last
    insert/update; the image another change lacks is null and counted."""
    table = make_table([("pk", "int")], clustering=[("ck", "int")], regular=[("v", "text")])
    plan = advanced_plan(table, "full", "full")
    rows = (row(Op.PRE_IMAGE, pk=1, ck=1, v="old"), row(Op.ROW_DELETE, pk=1, ck=1),
            row(Op.INSERT, pk=1, ck=1, v="new"), row(Op.POST_IMAGE, pk=1, ck=1, v="new"))
    dele, tomb, ins = events(plan, *rows)
    assert data(dele)["before"] == {"ck": 1, "pk": 1, "v": "old"} and tomb["value"] is None
    assert data(ins)["before"] is None and data(ins)["after"] == {"ck": 1, "pk": 1, "v": "new"}
    assert dict(run_advanced(plan, *rows).missing_images) == {}


def test_dropped_deletes_as_legacy() -> None:
    """A partition delete of a table with clustering key and range deletes give no event
    (ScyllaChangesConsumer: isSinglePartitionDelete, default branch) and are counted as in
    legacy; with dropped.changes.topic they go to that topic keyed by the `P.Key` struct."""
    plan = advanced_plan(COMPOSITE, "full", "full")
    rows = (row(Op.PARTITION_DELETE, pk1=1, pk2="alpha"),
            row(Op.RANGE_DELETE_START_INCLUSIVE, pk1=1, pk2="alpha", pk3=PK3),
            row(Op.RANGE_DELETE_END_EXCLUSIVE, pk1=1, pk2="alpha", pk3=PK3, pk4=20))
    translation = run_advanced(plan, *rows)
    assert translation.records == ()
    assert dict(translation.dropped) == {DropReason.CLUSTERED_PARTITION_DELETE: 1, DropReason.RANGE_DELETE: 1}
    side = advanced_plan(COMPOSITE, dropped_changes_topic="dropped")
    out = run_advanced(side, *rows).records
    assert [(r.topic, r.value["kind"] if r.value else None) for r in out] == [
        ("dropped", "partition_delete"), ("dropped", "range_delete")]
    wire = Wire()
    key, value = wire.check(out[1])
    assert key == {"pk1": 1, "pk2": "alpha", "pk3": None, "pk4": None}
    assert value["start"] == {"pk3": str(PK3), "pk4": None} and value["end_inclusive"] is False


def test_header_values_are_java_strings() -> None:
    """buildPkHeaders: `String.valueOf` of the converted value (java_string's docstring), for
    each key type; blob is the one we cannot match (a ByteBuffer's toString) and write as base64."""
    table = make_table([("i", "int"), ("t", "text"), ("u", "uuid"), ("dt", "date")],
                       clustering=[("ts", "timestamp"), ("db", "double"), ("f", "float"), ("b", "boolean"),
                                   ("bl", "blob"), ("fl", "frozen<list<int>>"), ("tu", "frozen<tuple<int, text>>")])
    plan = advanced_plan(table, placement="kafka-key,kafka-headers")
    values = {"i": -5, "t": "héllo", "u": PK3, "dt": datetime.date(2024, 6, 10),
              "ts": datetime.datetime(2024, 6, 10, 12, 34, 56, 789000), "db": 1e10, "f": 2.5, "b": True,
              "bl": b"\xca\xfe\xba\xbe", "fl": [1, 2], "tu": (1, None)}
    [event] = events(plan, row_with(Op.UPDATE, values))
    assert event["headers"] == {
        "ck.b": b"true", "ck.bl": b"yv66vg==", "ck.db": b"1.0E10", "pk.dt": b"Mon Jun 10 00:00:00 UTC 2024",
        "ck.f": b"2.5", "ck.fl": b"[1, 2]", "pk.i": b"-5", "pk.t": "héllo".encode(),
        "ck.ts": b"Mon Jun 10 12:34:56 UTC 2024", "ck.tu": b"Struct{field_0=1}", "pk.u": str(PK3).encode(),
    }
    assert list(event["headers"]) == ["ck.b", "ck.bl", "ck.db", "pk.dt", "ck.f", "ck.fl", "pk.i", "pk.t", "ck.ts",
                                      "ck.tu", "pk.u"]  # the log's column order
    # nested structs of key columns are named without the table prefix (computeColumnSchema(type))
    assert plan.struct_key_schema.field("tu").schema.name == "Tuple_INT_VARCHAR"
    assert java_string([{"key": 1, "value": None}], cs.array(cs.struct("E", [
        cs.ConnectField("key", cs.primitive(cs.INT32)), cs.ConnectField("value", cs.primitive(cs.STRING))], False))
    ) == "[Struct{key=1}]"


def test_snapshot_rows_in_advanced() -> None:
    """No connector test: its snapshot source does nothing. A snapshot row is `op=r`, `before`
    null, `after` the row in plain values (key columns with payload-after), whatever
    cdc.include.after says; key, payload key and headers per the placement; a static row holds
    only the static columns."""
    table = make_table([("pk", "int")], clustering=[("ck", "int")], regular=[("v", "text")], static=[("s", "text")])
    settings = EnvelopeSettings("P", cdc_output_format=OutputFormat.ADVANCED)
    translator = Translator(settings, clock_micros=lambda: 1_000_000)
    rows = [SnapshotRow({"pk": 1, "ck": None, "s": "static", "v": None}, True, 5_000_000),
            SnapshotRow({"pk": 1, "ck": 2, "s": "static", "v": "x"}, False, 5_000_000)]
    records = translator.translate_snapshot(rows, "true", table).records
    wire = Wire()
    (k1, v1), (_, v2) = (wire.check(r) for r in records)
    assert k1 == {"pk": 1, "ck": None} and v1["after"] == {"ck": None, "pk": 1, "s": "static", "v": None}
    assert v2["after"] == {"ck": 2, "pk": 1, "s": None, "v": "x"}
    assert v2["op"] == "r" and v2["before"] is None and v2["source"]["snapshot"] == "true"
    assert v2["source"]["ts_us"] == 5_000_000 and v2["ts_us"] is None
