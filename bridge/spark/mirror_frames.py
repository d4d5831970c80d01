"""DataFrames the mirror folds: changes and dropped changes as JSON text, stored rows in the
Connect representation, and the conversions between the mirror's Delta columns and that form.

The fold (`bridge.spark.fold`) works on JSON, so every schema version of a table in one
micro-batch, and the stored rows, meet in one representation: the envelope's (dates as days,
timestamps as epoch ms, maps as `{key, value}` entry arrays). Only the Delta table uses Spark's
date, timestamp and map types; `to_connect` / `from_connect` convert top-level columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.decode import Group
from bridge.spark.fold import CELL_TS, MARKER, OFFSET, TS_US, FoldSpec, ValueColumn
from bridge.spark.shape import ColumnShape

JSON_OPTIONS = {"ignoreNullFields": "false"}
HIDDEN_FIELDS = (T.StructField(MARKER, T.BooleanType()), T.StructField(TS_US, T.LongType()),
                 T.StructField(OFFSET, T.LongType()), T.StructField(CELL_TS, T.MapType(T.StringType(), T.LongType())))


@dataclass(frozen=True)
class MirrorColumns:
    """A table's columns as the mirror stores them (merged over the schema versions seen)."""

    columns: tuple[ColumnShape, ...]

    @property
    def keys(self) -> tuple[ColumnShape, ...]:
        return tuple(c for c in self.columns if c.is_key)

    @property
    def key_names(self) -> list[str]:
        return [c.name for c in self.keys]

    def column(self, name: str) -> ColumnShape:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    def connect_type(self) -> T.StructType:
        """Stored rows (and fold results) in the Connect representation, hidden columns included."""
        return T.StructType([T.StructField(c.name, c.spark_type) for c in self.columns] + list(HIDDEN_FIELDS))

    def delta_type(self) -> T.StructType:
        return T.StructType([T.StructField(c.name, c.mirror_type()) for c in self.columns] + list(HIDDEN_FIELDS))

    def fold_spec(self) -> FoldSpec:
        return FoldSpec(tuple(self.key_names),
                        tuple(ValueColumn(c.name, c.collection, c.has_elements) for c in self.columns if not c.is_key))

    def merged_with(self, others: Sequence[ColumnShape]) -> MirrorColumns:
        names = {c.name for c in self.columns}
        return MirrorColumns(self.columns + tuple(c for c in others if c.name not in names))


def to_connect(column: ColumnShape, value: Column) -> Column:
    if column.logical == "date":
        return F.unix_date(value)
    if column.logical == "timestamp":
        return F.unix_millis(value)
    if column.is_map and isinstance(column.mirror_type(), T.MapType):
        return F.map_entries(value)
    return value


def from_connect(column: ColumnShape, value: Column) -> Column:
    if column.logical == "date":
        return F.date_from_unix_date(value)
    if column.logical == "timestamp":
        return F.timestamp_millis(value)
    if column.is_map and isinstance(column.mirror_type(), T.MapType):
        return F.map_from_entries(value)
    return value


def key_json(columns: MirrorColumns, values: dict[str, Column]) -> Column:
    return F.to_json(F.struct(*[values[c.name].cast(c.spark_type).alias(c.name) for c in columns.keys]),
                     JSON_OPTIONS)


def change_events(group: Group, columns: MirrorColumns, partition_keys: Sequence[str]) -> DataFrame:
    """(key_json, pk_json, event) of each change of an envelope group: `event` is the JSON the
    fold reads: op, ts (source.ts_us), rank (1 for deletes), offset, after."""
    env = F.col("env")
    env_type = group.env_type
    assert env_type is not None
    sides = [s for s in ("after", "before") if s in env_type.fieldNames()]
    key_values = {c.name: F.coalesce(*[env[s][c.name] for s in sides]) for c in columns.keys}
    op = env["op"]
    after = env["after"] if "after" in env_type.fieldNames() else F.lit(None)
    event = F.to_json(F.struct(op.alias("op"), env["source"]["ts_us"].alias("ts"),
                               F.when(op == "d", 1).otherwise(0).alias("rank"), F.col("offset").alias("offset"),
                               after.alias("after")), JSON_OPTIONS)
    pk = F.to_json(F.struct(*[key_values[name].cast(columns.column(name).spark_type).alias(name)
                              for name in partition_keys]), JSON_OPTIONS) if partition_keys else F.lit(None)
    return group.frame.where(op.isin("c", "u", "d")).select(
        key_json(columns, key_values).alias("key_json"), pk.cast("string").alias("pk_json"), event.alias("event"))


def stored_rows(table: DataFrame, columns: MirrorColumns, partition_keys: Sequence[str]) -> DataFrame:
    """(key_json, pk_json, row) of the mirror's rows, `row` as JSON in the Connect representation."""
    values = {c.name: to_connect(c, F.col(f"`{c.name}`")) for c in columns.columns}
    row = F.to_json(F.struct(*[values[c.name].alias(c.name) for c in columns.columns],
                             *[F.col(f.name) for f in HIDDEN_FIELDS]), JSON_OPTIONS)
    pk = F.to_json(F.struct(*[values[name].cast(columns.column(name).spark_type).alias(name)
                              for name in partition_keys]), JSON_OPTIONS) if partition_keys else F.lit(None)
    return table.select(key_json(columns, values).alias("key_json"), pk.cast("string").alias("pk_json"),
                        row.alias("row"))
