"""The history's rows and its per-key computation over Arrow.

- `change_rows`: the mirror's typed events (`fold.frames.change_events`) as rows of the
  history's append-only changes table, one named column per cell: `<col>` (the value, Delta
  representation), `<col>__cell` (the change sets the cell), `<col>__elements` (its element
  change, collections and UDTs), and `_cdc_ts`, `_cdc_rank`, `_cdc_offset`, `_cdc_op`. Named, not
  positional, so a column added by ALTER is one more column (Delta's mergeSchema) and older rows
  read it as "not touched".
- `versions_in_arrow`: the `mapInArrow` function that turns every change of each key (sorted by
  key within the partition) into its versions with the pure `history.versions.versions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import groupby, islice
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.fold.events import elements_types
from bridge.spark.fold.frames import MirrorColumns
from bridge.spark.fold.reference import FoldSpec
from bridge.spark.history.versions import Version, versions

TS, RANK, OFFSET, OP, KIND = "_cdc_ts", "_cdc_rank", "_cdc_offset", "_cdc_op", "_cdc_kind"
CELL, ELEMENTS = "__cell", "__elements"
DATA, COVERING = 0, 1  # `_cdc_kind`: a data change, a range / partition delete covering the key
START_AT, END_AT, START_OP, START_OFFSET = "__START_AT", "__END_AT", "__START_OP", "__START_OFFSET"


def _elements_type(column: Any) -> T.StructType:
    added, removed = elements_types(column)
    return T.StructType([T.StructField("added", added), T.StructField("removed", removed)])


def change_rows(events: DataFrame, columns: MirrorColumns) -> DataFrame:
    """(key columns..., x) -> the changes table's rows."""
    x = F.col("x")
    out: list[Column] = [F.col(f"`{n}`") for n in columns.key_names]
    out += [x["ts"].alias(TS), x["rank"].alias(RANK), x["off"].alias(OFFSET), x["op"].alias(OP)]
    for i, column in enumerate(columns.values):
        out += [x[f"v{i}"].alias(column.name), F.coalesce(x[f"c{i}"], F.lit(False)).alias(column.name + CELL)]
        if column.has_elements:
            elements = F.struct(x[f"a{i}"].alias("added"), x[f"r{i}"].alias("removed"))
            out.append(F.when(F.coalesce(x[f"e{i}"], F.lit(False)), elements).alias(column.name + ELEMENTS))
    return events.select(*out)


def input_type(columns: MirrorColumns) -> T.StructType:
    """The rows `versions_in_arrow` reads: changes table rows and covering deletes, one type."""
    fields = [T.StructField(c.name, c.mirror_type()) for c in columns.keys]
    fields += [T.StructField(TS, T.LongType()), T.StructField(RANK, T.IntegerType()),
               T.StructField(OFFSET, T.LongType()), T.StructField(OP, T.StringType()),
               T.StructField(KIND, T.IntegerType())]
    for column in columns.values:
        fields += [T.StructField(column.name, column.mirror_type()), T.StructField(column.name + CELL, T.BooleanType())]
        if column.has_elements:
            fields.append(T.StructField(column.name + ELEMENTS, _elements_type(column)))
    return T.StructType(fields)


def conformed(frame: DataFrame, columns: MirrorColumns, kind: int, schema: T.StructType | None = None) -> DataFrame:
    """`frame` with exactly `input_type`'s columns, or `schema`'s (one missing: null, e.g. a column
    added later)."""
    present = set(frame.columns)
    return frame.select(*[(F.col(f"`{f.name}`") if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
                          if f.name != KIND else F.lit(kind).alias(KIND)
                          for f in (schema or input_type(columns)).fields])


def covering_rows(deletes: DataFrame, columns: MirrorColumns) -> DataFrame:
    """The tombstone store's covering deletes (key columns..., x) as input rows."""
    x = F.col("x")
    frame = deletes.select(*[F.col(f"`{n}`") for n in columns.key_names], x["ts"].alias(TS),
                           x["rank"].alias(RANK), x["off"].alias(OFFSET))
    return conformed(frame, columns, COVERING)


def output_type(columns: MirrorColumns) -> T.StructType:
    """`versions_in_arrow`'s rows; `START_AT` / `END_AT` as microseconds (made timestamps after)."""
    fields = [T.StructField(c.name, c.mirror_type()) for c in columns.columns]
    return T.StructType([*fields, T.StructField(START_AT, T.LongType()), T.StructField(END_AT, T.LongType()),
                         T.StructField(START_OP, T.StringType()), T.StructField(START_OFFSET, T.LongType())])


def _to_fold(value: Any, is_map: bool) -> Any:
    # Arrow gives a map as (key, value) pairs; the fold keeps the Connect form of entry dicts.
    if is_map and value is not None:
        return [{"key": k, "value": v} for k, v in (value.items() if isinstance(value, dict) else value)]
    return value


def _from_fold(value: Any, is_map: bool) -> Any:
    if is_map and value is not None:
        return [(e["key"], e["value"]) for e in value]
    return value


class FoldInput:
    """`input_type` rows (Arrow's Python form) as the fold's events, and versions as output rows."""

    def __init__(self, columns: MirrorColumns) -> None:
        self.spec: FoldSpec = columns.fold_spec()
        self.keys = tuple(columns.key_names)
        self.maps = {c.name for c in columns.values if isinstance(c.mirror_type(), T.MapType)}
        self.lists = {c.name for c in columns.values if c.collection == "list"}
        self.elements = [c.name for c in columns.values if c.has_elements]

    def key(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[n] for n in self.keys)

    def event(self, row: dict[str, Any]) -> dict[str, Any]:
        if row[KIND] == COVERING:  # the store already matched it to this key: no bounds to test again
            return {"kind": "partition_delete", "key": {}, "ts": row[TS], "offset": row[OFFSET]}
        after: dict[str, Any] = {name: row[name] for name in self.keys}
        for column in self.spec.value_columns:
            if row[column.name + CELL]:
                after[column.name] = {"value": _to_fold(row[column.name], column.name in self.maps)}
        for name in self.elements:
            change = row[name + ELEMENTS]
            if change is not None:
                if name in self.lists:  # the fold takes appended list entries as {value}
                    change = {"added": [{"value": v} for v in change["added"] or []],
                              "removed": change["removed"]}
                after[name + ELEMENTS] = change
        return {"op": row[OP], "ts": row[TS], "offset": row[OFFSET], "after": after}

    def visible(self, row: dict[str, Any]) -> dict[str, Any]:
        """A history row's columns in the fold's form."""
        names = (*self.keys, *(c.name for c in self.spec.value_columns))
        return {name: _to_fold(row[name], name in self.maps) for name in names}

    def output(self, version: Version) -> dict[str, Any]:
        row = {name: _from_fold(value, name in self.maps) for name, value in version.row.items()}
        row.update({START_AT: version.start_us, END_AT: version.end_us, START_OP: version.op,
                    START_OFFSET: version.offset})
        return row


def arrow_rows(batches: Iterator[Any]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        yield from batch.to_pylist()


def record_batches(rows: Iterator[dict[str, Any]], spark_type: T.StructType, size: int = 10_000) -> Iterator[Any]:
    """`rows` as Arrow record batches of `spark_type`, `size` rows at most each."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(spark_type, timezone="UTC")  # Spark passes timestamps to Arrow as UTC
    while chunk := list(islice(rows, size)):
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)


def versions_in_arrow(columns: MirrorColumns,
                      tracked: frozenset[str] | None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The `mapInArrow` function: input rows of `input_type`, sorted by key within the partition
    (a key's rows are consecutive), -> `output_type` rows, every version of every key."""
    fold_input = FoldInput(columns)
    spark_type = output_type(columns)

    def compute(batches: Iterator[Any]) -> Iterator[Any]:
        rows = (fold_input.output(version) for _, same_key in groupby(arrow_rows(batches), key=fold_input.key)
                for version in versions(fold_input.spec, [fold_input.event(r) for r in same_key], tracked))
        return record_batches(rows, spark_type)

    return compute


def with_timestamps(versions_frame: DataFrame) -> DataFrame:
    """`START_AT` / `END_AT` as timestamps (microseconds, from `source.ts_us`)."""
    return versions_frame.withColumn(START_AT, F.timestamp_micros(F.col(START_AT))) \
        .withColumn(END_AT, F.timestamp_micros(F.col(END_AT)))
