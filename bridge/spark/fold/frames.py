"""DataFrames the mirror folds: a table's columns as the mirror stores them, and each envelope
group's changes as the fold's events (`bridge.spark.fold.events`), typed, in the Delta table's
representation.

Every schema version of a table in one micro-batch is conformed to the table's merged columns
(a column a version lacks reads as "not touched"), so one union holds the micro-batch's changes;
the envelope's Connect representation (dates as days, timestamps as epoch ms, maps as
`{key, value}` entry arrays) is converted to the Delta table's types column by column
(`from_connect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.core.decode import Group
from bridge.spark.core.shape import ELEMENTS_SUFFIX, ColumnShape, conform
from bridge.spark.fold.events import data_event, elements_types
from bridge.spark.fold.reference import CELL_TS, MARKER, OFFSET, RANK, TS_US, FoldSpec, ValueColumn

JSON_OPTIONS = {"ignoreNullFields": "false"}
HIDDEN_FIELDS = (T.StructField(MARKER, T.BooleanType()), T.StructField(TS_US, T.LongType()),
                 T.StructField(OFFSET, T.LongType()), T.StructField(CELL_TS, T.MapType(T.StringType(), T.LongType())),
                 T.StructField(RANK, T.IntegerType()))


@dataclass(frozen=True)
class MirrorColumns:
    """A table's columns as the mirror stores them (merged over the schema versions seen)."""

    columns: tuple[ColumnShape, ...]

    @property
    def keys(self) -> tuple[ColumnShape, ...]:
        return tuple(c for c in self.columns if c.is_key)

    @property
    def values(self) -> tuple[ColumnShape, ...]:
        return tuple(c for c in self.columns if not c.is_key)

    @property
    def key_names(self) -> list[str]:
        return [c.name for c in self.keys]

    def column(self, name: str) -> ColumnShape:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    def connect_type(self) -> T.StructType:
        """Rows in the Connect representation, hidden columns included."""
        return T.StructType([T.StructField(c.name, c.spark_type) for c in self.columns] + list(HIDDEN_FIELDS))

    def delta_type(self) -> T.StructType:
        return T.StructType([T.StructField(c.name, c.mirror_type()) for c in self.columns] + list(HIDDEN_FIELDS))

    def fold_spec(self) -> FoldSpec:
        return FoldSpec(tuple(self.key_names),
                        tuple(ValueColumn(c.name, c.collection, c.has_elements) for c in self.columns if not c.is_key))

    def merged_with(self, others: Sequence[ColumnShape]) -> MirrorColumns:
        names = {c.name for c in self.columns}
        return MirrorColumns(self.columns + tuple(c for c in others if c.name not in names))


def from_connect(column: ColumnShape, value: Column) -> Column:
    if column.logical == "date":
        return F.date_from_unix_date(value)
    if column.logical == "timestamp":
        return F.timestamp_millis(value)
    if column.is_map and isinstance(column.mirror_type(), T.MapType):
        return F.map_from_entries(value)
    return value


def key_columns(columns: MirrorColumns) -> list[Column]:
    return [F.col(f"`{name}`") for name in columns.key_names]


def same_key(left: DataFrame, right: DataFrame, names: Sequence[str]) -> Column:
    """Null-safe equality of the key columns (a static row's clustering columns are null)."""
    condition = F.lit(True)
    for name in names:
        condition = condition & left[f"`{name}`"].eqNullSafe(right[f"`{name}`"])
    return condition


def _field(struct: Column, struct_type: T.DataType | None, name: str) -> tuple[Column, T.DataType] | None:
    if isinstance(struct_type, T.StructType) and name in struct_type.fieldNames():
        return struct[name], struct_type[name].dataType
    return None


def _elements(column: ColumnShape, found: tuple[Column, T.DataType] | None) -> Column | None:
    """The group's `X__elements` as the fold's (added, removed), typed canonically."""
    if found is None or not column.has_elements:
        return None
    value, source = found
    added_type, removed_type = elements_types(column)
    parts = _field(value, source, "added"), _field(value, source, "removed")
    added_part = parts[0]
    if added_part is None:
        added = F.lit(None).cast(added_type)
    elif column.collection == "list":  # appended entries {key: timeuuid, value}: their values
        values = F.transform(added_part[0], lambda e: e["value"])
        added = conform(values, T.ArrayType(_list_value(added_part)), added_type)
    else:
        added = conform(added_part[0], added_part[1], added_type)
    removed = conform(parts[1][0], parts[1][1], removed_type) if parts[1] is not None else \
        F.lit(None).cast(removed_type)
    return F.when(value.isNotNull(), F.struct(added.alias("added"), removed.alias("removed")))


def _list_value(found: tuple[Column, T.DataType]) -> T.DataType:
    source = found[1]
    if isinstance(source, T.ArrayType) and isinstance(source.elementType, T.StructType) \
            and "value" in source.elementType.fieldNames():
        return source.elementType["value"].dataType
    return T.StringType()


def change_events(group: Group, columns: MirrorColumns) -> DataFrame:
    """(key columns..., x) of each change of an envelope group: `x` is the fold's data event."""
    env = F.col("env")
    env_type = group.env_type
    assert env_type is not None
    sides = [s for s in ("after", "before") if s in env_type.fieldNames()]
    keys = []
    for column in columns.keys:
        present = [f for f in (_field(env[s], env_type[s].dataType, column.name) for s in sides) if f is not None]
        key = F.coalesce(*[conform(c, t, column.spark_type) for c, t in present]) if present else \
            F.lit(None).cast(column.spark_type)
        keys.append(from_connect(column, key))
    after_type = env_type["after"].dataType if "after" in env_type.fieldNames() else None
    after = env["after"]
    cells: list[tuple[Column | None, Column | None, Column | None]] = []
    for column in columns.values:
        found = _field(after, after_type, column.name)
        cell: Column | None = None
        value: Column | None = None
        if found is not None and isinstance(found[1], T.StructType) and "value" in found[1].fieldNames():
            cell = found[0]
            value = from_connect(column, conform(cell["value"], found[1]["value"].dataType, column.spark_type))
        elements = _elements(column, _field(after, after_type, column.name + ELEMENTS_SUFFIX))
        cells.append((cell, value, elements))
    op = env["op"]
    static_row = reduce(lambda a, b: a | b, [key.isNull() for key in keys], F.lit(False))
    event = data_event(columns.values, env["source"]["ts_us"], F.col("offset"), op, static_row, cells)
    named = [key.alias(column.name) for key, column in zip(keys, columns.keys, strict=True)]
    return group.frame.where(op.isin("c", "u", "d", "r")).select(*named, event.alias("x"))
