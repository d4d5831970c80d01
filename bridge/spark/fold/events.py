"""The mirror's fold as a DataFrame function (`fold_rows`) and the events it folds: each key's
stored row, data changes and covering deletes as structs of one type (`event_type`), built here
in Spark SQL by `stored_event`, `data_event` and `delete_event`; the fold itself runs in Python
over Arrow (`bridge.spark.fold.arrow_fold`, the semantics of the reference `bridge.spark.fold.reference`).

An event carries its position (`ts`, `rank`, `off`), `rank` ordering one timestamp's writes
(`c`, `u`), snapshot rows (`r`) and deletes (`bridge.spark.fold.reference.rank`), and its `kind`: the
stored row (-1, first), data changes (0: `op`, `m` whether it sets the row marker, and per value
column `i` the cell `v{i}` with `c{i}` telling "set" from "not touched", the element change
`a{i}` / `r{i}` with `e{i}`), the range / partition deletes that cover the key (1, coverage
decided before). A stored row also carries its marker's and cells' write timestamps (`mts`,
`t{i}`) and its position (`pts`, `prk`, `poff`); its collections' element times, when they differ
from their cell's, come beside the events, in the fold's input column `CELLS` (the stored
`_cdc_cell_ts`; null for changes), so the changelog's events do not carry them.

Values are in the Delta table's representation (Spark dates, timestamps and maps) throughout:
changes are converted when the events are built (`data_event`), so stored rows need none.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.core.shape import ColumnShape
from bridge.spark.fold.arrow_fold import DATA, DELETE, STORED, ValueRule, fold_batches
from bridge.spark.fold.reference import (
    CELL_TS,
    DELETE_RANK,
    MARKER,
    OFFSET,
    RANK,
    ROW_MARKER,
    SNAPSHOT_RANK,
    TS_US,
    WRITE_RANK,
)

FIRST = -(2**63)  # the stored row sorts before every change
ACTION = "_cdc_action"
CELLS = "_cdc_cells"  # the fold's input beside `x`: a stored row's cell timestamps, element times included


def elements_types(column: ColumnShape) -> tuple[T.DataType, T.DataType]:
    """(added, removed) of a column's element changes, in the fold's canonical form: sets their
    elements, maps `{key, value}` entries and their keys, lists the appended values (removals by
    list key are not applied), UDTs the struct of fields set and the names of fields nulled."""
    value = column.spark_type
    if column.collection == "map":
        assert isinstance(value, T.ArrayType) and isinstance(value.elementType, T.StructType)
        return value, T.ArrayType(value.elementType["key"].dataType)
    if column.collection == "udt":
        return value, T.ArrayType(T.StringType())
    assert isinstance(value, T.ArrayType), f"{column.name}: element changes of a {value.simpleString()}"
    return value, T.ArrayType(value.elementType) if column.collection == "set" else T.ArrayType(T.StringType())


def event_type(values: Sequence[ColumnShape]) -> T.StructType:
    fields = [T.StructField("ts", T.LongType()), T.StructField("rank", T.IntegerType()),
              T.StructField("off", T.LongType()), T.StructField("kind", T.IntegerType()),
              T.StructField("op", T.StringType()), T.StructField("m", T.BooleanType()),
              T.StructField("mts", T.LongType()), T.StructField("pts", T.LongType()),
              T.StructField("prk", T.IntegerType()), T.StructField("poff", T.LongType())]
    for i, column in enumerate(values):
        fields += [T.StructField(f"v{i}", column.mirror_type()), T.StructField(f"c{i}", T.BooleanType()),
                   T.StructField(f"t{i}", T.LongType())]
        if column.has_elements:
            added, removed = elements_types(column)
            fields += [T.StructField(f"e{i}", T.BooleanType()), T.StructField(f"a{i}", added),
                       T.StructField(f"r{i}", removed)]
    return T.StructType(fields)


def _event(values: Sequence[ColumnShape], given: dict[str, Column]) -> Column:
    """An event struct of `event_type` with the `given` fields, the others null."""
    return F.struct(*[(given[f.name] if f.name in given else F.lit(None)).cast(f.dataType).alias(f.name)
                      for f in event_type(values).fields])


def data_event(values: Sequence[ColumnShape], ts: Column, offset: Column, op: Column, static_row: Column,
               cells: Sequence[tuple[Column | None, Column | None, Column | None]]) -> Column:
    """A data change; `static_row`: its key's clustering columns are null; `cells[i]` = (the cell
    struct or None when the schema lacks the column, its value in the Delta representation, the
    (added, removed) element struct or None)."""
    rank = F.when(op == "d", DELETE_RANK).when(op == "r", SNAPSHOT_RANK).otherwise(WRITE_RANK)
    marks = op.isin("c", "r") & ~static_row  # CQL's static row has no row marker
    given = {"ts": ts, "rank": rank, "off": offset, "kind": F.lit(DATA), "op": op, "m": marks}
    for i, (column, (cell, value, elements)) in enumerate(zip(values, cells, strict=True)):
        if cell is not None and value is not None:
            given[f"c{i}"] = cell.isNotNull()
            given[f"v{i}"] = _normalise(value, column)
        if column.has_elements and elements is not None:
            given[f"e{i}"] = elements.isNotNull()
            given[f"a{i}"] = elements["added"]
            given[f"r{i}"] = elements["removed"]
    return _event(values, given)


def _normalise(value: Column, column: ColumnShape) -> Column:
    # CQL has no empty non-frozen collection: it reads back as null.
    if column.has_elements and isinstance(column.mirror_type(), T.ArrayType | T.MapType):
        return F.when(F.size(value) == 0, F.lit(None)).otherwise(value)
    return value


def stored_cells() -> Column:
    """The stored row's cell timestamps as the fold's `CELLS` input (beside `stored_event`)."""
    return F.col(f"`{CELL_TS}`").alias(CELLS)


def stored_event(values: Sequence[ColumnShape]) -> Column:
    """The mirror's stored row (a Delta table row) as the first event of its key."""
    cell_ts = F.col(f"`{CELL_TS}`")
    given = {"ts": F.lit(FIRST), "rank": F.lit(0), "off": F.lit(0), "kind": F.lit(STORED),
             "m": F.coalesce(F.col(MARKER), F.lit(False)), "mts": cell_ts[ROW_MARKER],
             "pts": F.col(TS_US), "prk": F.coalesce(F.col(RANK), F.lit(WRITE_RANK)), "poff": F.col(OFFSET)}
    for i, column in enumerate(values):
        given[f"v{i}"] = F.col(f"`{column.name}`")
        given[f"t{i}"] = cell_ts[column.name]
    return _event(values, given)


def delete_event(values: Sequence[ColumnShape], ts: Column, offset: Column) -> Column:
    return _event(values, {"ts": ts, "rank": F.lit(DELETE_RANK), "off": offset, "kind": F.lit(DELETE)})


def _orderable(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.MapType):
        return False
    if isinstance(data_type, T.ArrayType):
        return _orderable(data_type.elementType)
    if isinstance(data_type, T.StructType):
        return all(_orderable(f.dataType) for f in data_type.fields)
    return True


def value_rule(column: ColumnShape) -> ValueRule:
    """How the Arrow fold treats a value column; its result is canonical as the reference fold
    keeps values: sets sorted, maps ordered by key (when their elements have an order)."""
    mirror = column.mirror_type()
    collection: str | None = column.collection
    ordered = False
    if collection == "set" and isinstance(mirror, T.ArrayType):
        ordered = _orderable(mirror.elementType)
    elif collection == "map" and isinstance(mirror, T.MapType):
        ordered = _orderable(mirror.keyType) and _orderable(mirror.valueType)
    elif collection == "map":
        collection = "entries"  # a map kept as its entries (schemaless JSON without a map type)
    fields = tuple(mirror.fieldNames()) if collection == "udt" and isinstance(mirror, T.StructType) else ()
    return ValueRule(column.name, collection, column.has_elements, ordered, fields)


def result_type(parts: T.StructType, keys: Sequence[ColumnShape], values: Sequence[ColumnShape]) -> T.StructType:
    """The MERGE source's schema: key columns, values, bookkeeping, `_cdc_action`."""
    fields = [parts[c.name] for c in keys]
    fields += [T.StructField(c.name, c.mirror_type()) for c in values]
    fields += [T.StructField(MARKER, T.BooleanType()), T.StructField(TS_US, T.LongType()),
               T.StructField(OFFSET, T.LongType()), T.StructField(CELL_TS, T.MapType(T.StringType(), T.LongType())),
               T.StructField(RANK, T.IntegerType()), T.StructField(ACTION, T.StringType())]
    return T.StructType(fields)


def fold_rows(parts: DataFrame, keys: Sequence[ColumnShape], values: Sequence[ColumnShape]) -> DataFrame:
    """The MERGE source from every event of the keys to write (key columns and an `x` event:
    stored rows, changes, covering deletes, in any order; `CELLS` beside the stored rows): one row
    per key that changes, with its values, bookkeeping and `_cdc_action` ('upsert' | 'delete').
    Each key's events are brought together (a shuffle by key), sorted by position and folded in
    Python over Arrow."""
    keyed = [F.col(f"`{c.name}`") for c in keys]
    x = F.col("x")
    cells = F.col(CELLS) if CELLS in parts.columns else F.lit(None).cast(T.MapType(T.StringType(), T.LongType()))
    ordered = parts.select(*keyed, x, cells.alias(CELLS)).repartition(*keyed).sortWithinPartitions(
        *keyed, x["ts"], x["rank"], x["off"])
    run = fold_batches([c.name for c in keys], [value_rule(c) for c in values],
                       MARKER, TS_US, OFFSET, CELL_TS, RANK, ACTION, CELLS)
    return ordered.mapInArrow(run, result_type(parts.schema, keys, values))
