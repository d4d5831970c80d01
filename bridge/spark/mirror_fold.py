"""The mirror's fold in Spark SQL: the semantics of `bridge.spark.fold` (the reference, a pure
Python model tested on its own) as one `aggregate` over each key's changes in order, so the whole
micro-batch is folded inside the JVM, with no Python per row.

Each key's **events** are collected into one array of structs (`event_type`) and sorted by
(`ts`, `rank`, `off`), `rank` ordering one timestamp's writes (`c`, `u`), snapshot rows (`r`)
and deletes (`bridge.spark.fold.rank`): the stored row (`kind` -1, first), data changes
(`kind` 0: `op`, `m` whether it sets the row marker, and per value column `i` the cell `v{i}`
with `c{i}` telling "set" from "not touched", the element change `a{i}` / `r{i}` with `e{i}`)
and the range / partition deletes that cover the key (`kind` 1, coverage decided before:
`covers`). The fold's state (`_state_fields`) holds the row: values `v{i}`, per-cell write
timestamps `t{i}`, the row marker `m` and its timestamp `mts`, the position (`pts`, `prk`,
`poff`) of the last change applied, whether a stored row existed (`st`) and whether anything
changed (`ch`). One step:

- stored row: the state becomes it;
- a data change at or before the position: skipped (a replay, or a change a snapshot row holds);
- `op = d`: every cell and the marker go; otherwise cells set (`c{i}`) take the change's value,
  element changes apply to the current value (sets: `array_except` / `array_union`; maps:
  `map_filter` / `map_concat`; lists: `concat` of the appended values; UDTs: field by field),
  `op = c` / `r` set the marker (not on the static row), and the written cells and the position
  take the change's;
- a covering delete at `ts`: cells and marker written at or before `ts` go (a tombstone wins a tie).

Values are in the Delta table's representation (Spark dates, timestamps and maps) throughout:
changes are converted when the events are built (`data_event`), so stored rows need none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.fold import (
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
from bridge.spark.shape import ColumnShape

STORED, DATA, DELETE = -1, 0, 1
FIRST = -(2**63)  # the stored row sorts before every change
ACTION = "_cdc_action"


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


def _state_fields(values: Sequence[ColumnShape]) -> list[T.StructField]:
    fields = [T.StructField("st", T.BooleanType()), T.StructField("ch", T.BooleanType()),
              T.StructField("m", T.BooleanType()), T.StructField("mts", T.LongType()),
              T.StructField("pts", T.LongType()), T.StructField("prk", T.IntegerType()),
              T.StructField("poff", T.LongType())]
    for i, column in enumerate(values):
        fields += [T.StructField(f"v{i}", column.mirror_type()), T.StructField(f"t{i}", T.LongType())]
    return fields


def _order(left: Column, right: Column) -> Column:
    compare = F.when(left["ts"] < right["ts"], -1).when(left["ts"] > right["ts"], 1)
    compare = compare.when(left["rank"] < right["rank"], -1).when(left["rank"] > right["rank"], 1)
    return compare.when(left["off"] < right["off"], -1).when(left["off"] > right["off"], 1).otherwise(0)


def _apply_elements(current: Column, added: Column, removed: Column, column: ColumnShape) -> Column:
    """`current` (Delta representation) with one element change applied; empty -> null."""
    kind = column.collection
    mirror = column.mirror_type()
    result: Column
    if kind == "set":
        empty = F.array().cast(mirror)
        result = F.array_union(F.array_except(F.coalesce(current, empty), F.coalesce(removed, empty)),
                               F.coalesce(added, empty))
    elif kind == "map" and isinstance(mirror, T.MapType):
        entries = F.coalesce(added, F.array().cast(T.ArrayType(T.StructType([
            T.StructField("key", mirror.keyType), T.StructField("value", mirror.valueType)]))))
        gone = F.concat(F.coalesce(removed, F.array().cast(T.ArrayType(mirror.keyType))),
                        F.transform(entries, lambda e: e["key"]))
        kept = F.map_filter(F.coalesce(current, _empty_map(mirror)),
                            lambda k, _v: ~F.coalesce(F.array_contains(gone, k), F.lit(False)))
        result = F.map_concat(kept, F.map_from_entries(entries))
    elif kind == "map":  # a map kept as its entries (schemaless JSON without a map type)
        entries = F.coalesce(added, F.array().cast(mirror))
        gone = F.concat(F.coalesce(removed, F.array().cast(T.ArrayType(_entry_key(mirror)))),
                        F.transform(entries, lambda e: e["key"]))
        kept = F.filter(F.coalesce(current, F.array().cast(mirror)),
                        lambda e: ~F.coalesce(F.array_contains(gone, e["key"]), F.lit(False)))
        result = F.concat(kept, entries)
    elif kind == "list":
        assert isinstance(mirror, T.ArrayType)
        empty = F.array().cast(mirror)
        result = F.concat(F.coalesce(current, empty), F.coalesce(added, empty))
    elif kind == "udt" and isinstance(mirror, T.StructType):
        names = mirror.fieldNames()
        fields = [F.when(F.coalesce(F.array_contains(removed, name), F.lit(False)), F.lit(None))
                  .when(added[name].isNotNull(), added[name]).otherwise(current[name]).alias(name)
                  for name in names]
        built = F.struct(*fields)
        return F.when(reduce(lambda a, b: a | b, [built[n].isNotNull() for n in names]), built)
    else:
        raise ValueError(f"column {column.name}: element changes on a column that is not a collection or UDT")
    return F.when(F.size(result) > 0, result)


def _empty_map(mirror: T.MapType) -> Column:
    return F.map_from_entries(F.array().cast(T.ArrayType(T.StructType([
        T.StructField("key", mirror.keyType), T.StructField("value", mirror.valueType)]))))


def _entry_key(mirror: T.DataType) -> T.DataType:
    assert isinstance(mirror, T.ArrayType) and isinstance(mirror.elementType, T.StructType)
    return mirror.elementType["key"].dataType


def _step(values: Sequence[ColumnShape]) -> Callable[[Column, Column], Column]:
    def step(s: Column, x: Column) -> Column:
        stored = x["kind"] == STORED
        # after the position (ts, rank, offset): a change of the same timestamp applies when it
        # ranks after it, or ranks the same and comes later
        applied = (x["kind"] == DATA) & (s["pts"].isNull() | (x["ts"] > s["pts"]) | (
            (x["ts"] == s["pts"]) & ((x["rank"] > s["prk"]) | ((x["rank"] == s["prk"]) & (x["off"] > s["poff"])))))
        gone = applied & (x["op"] == "d")
        write = applied & (x["op"] != "d")
        marks = write & F.coalesce(x["m"], F.lit(False))
        covering = x["kind"] == DELETE
        shadow_m = covering & F.coalesce(s["m"], F.lit(False)) & (F.coalesce(s["mts"], F.lit(0)) <= x["ts"])
        fields: list[Column] = [
            F.when(stored, x["m"]).when(gone | shadow_m, F.lit(False))
            .when(marks, F.lit(True)).otherwise(s["m"]).alias("m"),
            F.when(stored, x["mts"]).when(gone | shadow_m, F.lit(None))
            .when(marks, x["ts"]).otherwise(s["mts"]).alias("mts"),
            F.when(stored, x["pts"]).when(applied, x["ts"]).otherwise(s["pts"]).alias("pts"),
            F.when(stored, x["prk"]).when(applied, x["rank"]).otherwise(s["prk"]).alias("prk"),
            F.when(stored, x["poff"]).when(applied, x["off"]).otherwise(s["poff"]).alias("poff"),
        ]
        shadows = [shadow_m]
        for i, column in enumerate(values):
            v, t = s[f"v{i}"], s[f"t{i}"]
            shadow = covering & v.isNotNull() & (F.coalesce(t, F.lit(0)) <= x["ts"])
            shadows.append(shadow)
            base = F.when(F.coalesce(x[f"c{i}"], F.lit(False)), x[f"v{i}"]).otherwise(v)
            touched = F.coalesce(x[f"c{i}"], F.lit(False))
            if column.has_elements:
                elements = F.coalesce(x[f"e{i}"], F.lit(False))
                written = F.when(elements, _apply_elements(base, x[f"a{i}"], x[f"r{i}"], column)).otherwise(base)
                touched = touched | elements
            else:
                written = base
            fields.append(F.when(stored, x[f"v{i}"]).when(gone | shadow, F.lit(None))
                          .when(write, written).otherwise(v).alias(f"v{i}"))
            fields.append(F.when(stored, x[f"t{i}"]).when(gone | shadow, F.lit(None))
                          .when(write & touched, x["ts"]).otherwise(t).alias(f"t{i}"))
        removed = reduce(lambda a, b: a | b, shadows)
        changed = F.when(stored, F.lit(False)).otherwise(s["ch"] | applied | removed)
        return F.struct((stored | s["st"]).alias("st"), changed.alias("ch"), *fields)

    return step


def fold(values: Sequence[ColumnShape], events: Column) -> Column:
    """The folded state of a key from its (unsorted) `events` array: a struct with `action`
    ('upsert' | 'delete' | 'none'), `v{i}` (sets sorted, maps ordered by key), `m`, `pts`,
    `prk`, `poff` and `cell_ts`."""
    fields = _state_fields(values)
    initial = F.struct(*[(F.lit(False) if f.name in ("st", "ch", "m") else F.lit(None)).cast(f.dataType)
                         .alias(f.name) for f in fields])
    ordered = F.array_sort(events, _order)

    def finish(s: Column) -> Column:
        exists = reduce(lambda a, b: a | b, [s["m"], *[s[f"v{i}"].isNotNull() for i in range(len(values))]])
        action = F.when(~s["ch"], "none").when(exists, "upsert").when(s["st"], "delete").otherwise("none")
        written = [F.struct(F.lit(ROW_MARKER).alias("key"), F.when(s["m"], s["mts"]).alias("value"))]
        written += [F.struct(F.lit(c.name).alias("key"), F.when(s[f"v{i}"].isNotNull(), s[f"t{i}"]).alias("value"))
                    for i, c in enumerate(values)]
        cell_ts = F.map_from_entries(F.filter(F.array(*written), lambda e: e["value"].isNotNull()))
        out = [action.alias("action"), s["m"].alias("m"), s["pts"].alias("pts"), s["prk"].alias("prk"),
               s["poff"].alias("poff"), cell_ts.alias("cell_ts")]
        out += [_canonical(s[f"v{i}"], c).alias(f"v{i}") for i, c in enumerate(values)]
        return F.struct(*out)

    return F.aggregate(ordered, initial, _step(values), finish)


def _orderable(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.MapType):
        return False
    if isinstance(data_type, T.ArrayType):
        return _orderable(data_type.elementType)
    if isinstance(data_type, T.StructType):
        return all(_orderable(f.dataType) for f in data_type.fields)
    return True


def _canonical(value: Column, column: ColumnShape) -> Column:
    """Sets sorted, maps ordered by key (as the reference fold keeps them)."""
    mirror = column.mirror_type()
    if column.collection == "set" and isinstance(mirror, T.ArrayType) and _orderable(mirror.elementType):
        return F.array_sort(value)
    if column.collection == "map" and isinstance(mirror, T.MapType) and _orderable(mirror.keyType) \
            and _orderable(mirror.valueType):
        return F.map_from_entries(F.array_sort(F.map_entries(value)))
    return value


def result_columns(keys: Sequence[ColumnShape], values: Sequence[ColumnShape], folded: Column) -> list[Column]:
    """The MERGE source's columns from the key columns and `fold`'s result."""
    out = [F.col(f"`{c.name}`") for c in keys]
    out += [folded[f"v{i}"].alias(c.name) for i, c in enumerate(values)]
    out += [F.coalesce(folded["m"], F.lit(False)).alias(MARKER), folded["pts"].alias(TS_US),
            folded["poff"].alias(OFFSET), folded["cell_ts"].alias(CELL_TS), folded["prk"].alias(RANK),
            folded["action"].alias(ACTION)]
    return out


def fold_rows(parts: DataFrame, keys: Sequence[ColumnShape], values: Sequence[ColumnShape]) -> DataFrame:
    """The MERGE source from every event of the keys to write (key columns and an `x` event:
    stored rows, changes, covering deletes, in any order): one row per key that changes, with its
    values, bookkeeping and `_cdc_action` ('upsert' | 'delete')."""
    keyed = [F.col(f"`{c.name}`") for c in keys]
    grouped = parts.groupBy(*keyed).agg(F.collect_list("x").alias("events"))
    folded = grouped.select(*keyed, fold(values, F.col("events")).alias("f"))
    return folded.select(*result_columns(keys, values, F.col("f"))).where(F.col(ACTION) != "none")
