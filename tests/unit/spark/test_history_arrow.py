"""The history's `mapInArrow` function on Arrow batches, without a Spark session: list appends,
map puts and removals, UDT fields, covering deletes, keys split across batches, date keys."""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from bridge.spark.core.shape import ColumnShape
from bridge.spark.fold.frames import MirrorColumns
from bridge.spark.history.advance import SEED, STORED, advance_in_arrow, advance_input_type
from bridge.spark.history.arrow import COVERING, DATA, input_type, versions_in_arrow

ENTRY = T.StructType([T.StructField("key", T.IntegerType()), T.StructField("value", T.StringType())])
UDT = T.StructType([T.StructField("a", T.IntegerType()), T.StructField("b", T.StringType())])
COLUMNS = MirrorColumns((
    ColumnShape("pk", True, T.IntegerType(), "date"),
    ColumnShape("l", False, T.ArrayType(T.IntegerType()), None, "list", True),
    ColumnShape("m", False, T.ArrayType(ENTRY), None, "map", True),
    ColumnShape("u", False, UDT, None, "udt", True),
    ColumnShape("at", False, T.LongType(), "timestamp"),
))
DAY = datetime.date(2026, 3, 3)


def change(ts: int, offset: int, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {f.name: None for f in input_type(COLUMNS).fields}
    row.update({"pk": DAY, "_cdc_ts": ts, "_cdc_rank": 0, "_cdc_offset": offset, "_cdc_op": "u", "_cdc_kind": DATA,
                "l__cell": False, "m__cell": False, "u__cell": False, "at__cell": False})
    row.update(fields)
    return row


def run(batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    schema = to_arrow_schema(input_type(COLUMNS), timezone="UTC")
    compute = versions_in_arrow(COLUMNS, None)
    out = compute(iter([pa.RecordBatch.from_pylist(rows, schema=schema) for rows in batches]))
    return [row for batch in out for row in batch.to_pylist()]


def test_element_changes_of_lists_maps_and_udts_over_arrow() -> None:
    rows = run([
        [change(10, 1, l__elements={"added": [1, 2], "removed": None}),
         change(20, 2, m__elements={"added": [{"key": 1, "value": "x"}, {"key": 2, "value": "y"}], "removed": None})],
        [change(30, 3, m__elements={"added": None, "removed": [1]}, u__elements={"added": {"a": 5, "b": None},
                                                                                 "removed": None}),
         change(40, 4, _cdc_op="c", m__cell=True, m=[(7, "z")], u__elements={"added": None, "removed": ["a"]})],
        [{**change(50, 9), "_cdc_kind": COVERING, "_cdc_op": None}],
    ])
    got = [(r["__START_AT"], r["__END_AT"], r["__START_OP"], r["l"], r["m"], r["u"]) for r in rows]
    assert got == [
        (10, 20, "u", [1, 2], None, None),
        (20, 30, "u", [1, 2], [(1, "x"), (2, "y")], None),
        (30, 40, "u", [1, 2], [(2, "y")], {"a": 5, "b": None}),
        (40, 50, "c", [1, 2], [(7, "z")], None),
    ]
    assert all(r["pk"] == DAY for r in rows)


def test_a_timestamp_column_passes_through() -> None:
    at = datetime.datetime(2026, 3, 3, 12, 0, 0, 123456, tzinfo=datetime.UTC)
    rows = run([[change(10, 1, _cdc_op="c", at__cell=True, at=at)]])
    assert [(r["__START_AT"], r["at"]) for r in rows] == [(10, at)]


def test_each_key_gets_its_own_versions_when_its_rows_span_batches() -> None:
    other = datetime.date(2026, 3, 4)
    rows = run([[change(10, 1, l__elements={"added": [1], "removed": None})],
                [change(20, 2, l__elements={"added": [2], "removed": None}),
                 change(15, 3, pk=other, l__elements={"added": [9], "removed": None})]])
    assert [(r["pk"], r["__START_AT"], r["l"]) for r in rows] == [(DAY, 10, [1]), (DAY, 20, [1, 2]), (other, 15, [9])]


def advance_run(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    schema = to_arrow_schema(advance_input_type(COLUMNS), timezone="UTC")
    full = [{**{f.name: None for f in advance_input_type(COLUMNS).fields}, **row} for row in rows]
    out = advance_in_arrow(COLUMNS, None)(iter([pa.RecordBatch.from_pylist(full, schema=schema)]))
    return [row for batch in out for row in batch.to_pylist()]


def test_advancing_over_arrow_ends_the_open_version_keeps_its_map_and_refuses_a_late_change() -> None:
    seed = {"pk": DAY, "_cdc_kind": SEED, "_cdc_ts": 10, "_cdc_op": "c", "_cdc_offset": 1, "l": [1],
            "m": [(1, "x")], "u": {"a": 5, "b": None}}
    stored = {"pk": DAY, "_cdc_kind": STORED, "_cdc_ts": 10, "_cdc_last_insert": 10}
    rows = advance_run([seed, stored, {**change(20, 2, l__elements={"added": [2], "removed": None}),
                                       "_cdc_kind": DATA}])
    got = [(r["__START_AT"], r["__END_AT"], r["__START_OP"], r["l"], r["m"], r["u"], r["_cdc_refused"]) for r in rows]
    assert got == [(10, 20, "c", [1], [(1, "x")], {"a": 5, "b": None}, False),
                   (20, None, "u", [1, 2], [(1, "x")], {"a": 5, "b": None}, False)]
    unchanged = advance_run([seed, stored, {**change(20, 2, m__cell=True, m=[(1, "x")]), "_cdc_kind": DATA}])
    assert unchanged == [], "the same map written again: the open version stays as it is, not rewritten"
    late = advance_run([seed, stored, {**change(5, 2, l__elements={"added": [2], "removed": None}),
                                       "_cdc_kind": DATA}])
    assert [(r["pk"], r["_cdc_refused"], r["__START_AT"]) for r in late] == [(DAY, True, None)]
    new_delete = advance_run([seed, stored, {**change(30, 7), "_cdc_kind": COVERING, "_cdc_new": True}])
    assert [(r["__START_AT"], r["__END_AT"]) for r in new_delete] == [(10, 30)]


def test_a_new_key_advances_from_nothing_as_the_full_computation_and_its_versions_are_not_open_ones() -> None:
    other = datetime.date(2026, 3, 4)
    inserted = {**change(10, 1, l__cell=True, l=[1]), "_cdc_op": "c"}
    updated = change(20, 2, at__cell=True, at=7)
    dropped = {**change(15, 3), "_cdc_kind": COVERING, "_cdc_new": False}
    rows = advance_run([inserted, dropped, updated, {**change(30, 4, at__cell=True, at=8), "pk": other}])
    full = run([[inserted, {**dropped, "_cdc_kind": COVERING}, updated, {**change(30, 4, at__cell=True, at=8),
                                                                          "pk": other}]])
    assert [{k: v for k, v in r.items() if k not in ("_cdc_refused", "_cdc_open")} for r in rows] == full
    assert [(r["pk"], r["__START_AT"], r["__END_AT"], r["_cdc_open"], r["_cdc_refused"]) for r in rows] == [
        (DAY, 10, 15, False, False), (DAY, 20, None, False, False), (other, 30, None, False, False)]
    seed = {"pk": DAY, "_cdc_kind": SEED, "_cdc_ts": 10, "_cdc_op": "c", "_cdc_offset": 1, "l": [1]}
    assert [r["_cdc_refused"] for r in advance_run([seed, updated])] == [True], "an open version, nothing stored"
    stored = {"pk": DAY, "_cdc_kind": STORED, "_cdc_ts": 10, "_cdc_last_insert": 10}
    assert [(r["__START_AT"], r["__END_AT"], r["_cdc_open"]) for r in advance_run([seed, stored, updated])] == [
        (10, 20, True), (20, None, False)], "the open version ended (MERGEd), the new one appended"
