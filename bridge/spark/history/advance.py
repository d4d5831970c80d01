"""The history's known keys in order: versions continued from the open version, not recomputed.

A key with stored changes (a known key) whose micro-batch changes, and the range / partition
deletes covering it that came with them, are all later than every stored change and covering
delete of the key (in-order changes: the common case) keeps its versions up to the open one;
only that one is ended or updated in place, and the new ones appended
(`history.versions.advance`). What the fold needs of the key's state beyond the open version's
columns is read from the changes table in the scan that finds the known keys (`stored_stats`: the
newest change's, INSERT's and delete's timestamps, which give the row marker); cell timestamps are
not needed, every stored cell being older than the micro-batch's deletes. The open versions are
read from the history table (`__END_AT` null); the caller MERGEs the result on (key columns,
`__START_AT`) with the other keys' (it matches their open versions only) and appends the new
versions. A new key (no stored change, so no `STORED` row) gets its versions from nothing in the
same job. Keys with a change or delete not later
(a late, out-of-order change, or a micro-batch re-run after its changes were stored) are returned
to the caller, which recomputes them from all their changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import reduce
from itertools import groupby
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.fold.frames import MirrorColumns, same_key
from bridge.spark.fold.tombstones import TombstoneStore
from bridge.spark.history.arrow import (
    COVERING,
    DATA,
    END_AT,
    KIND,
    OFFSET,
    OP,
    RANK,
    START_AT,
    START_OFFSET,
    START_OP,
    TS,
    FoldInput,
    arrow_rows,
    conformed,
    input_type,
    output_type,
    record_batches,
    with_timestamps,
)
from bridge.spark.history.versions import Stored, Version, advance

SEED, STORED = 2, 3  # `_cdc_kind`: the key's open version, what its stored changes leave
LAST_INSERT, LAST_DELETE, NEW, REFUSED = "_cdc_last_insert", "_cdc_last_delete", "_cdc_new", "_cdc_refused"
OPEN = "_cdc_open"  # an output row replacing the key's stored open version (ended or updated in place)


def stored_stats(changes: DataFrame, names: list[str]) -> DataFrame:
    """(key columns, `_cdc_ts`, `_cdc_op`) of stored changes -> per key: the newest change's
    timestamp (`_cdc_ts`), the newest INSERT's or snapshot row's, the newest delete's."""
    ts, op = F.col(TS), F.col(OP)
    return changes.groupBy(*[F.col(f"`{n}`") for n in names]).agg(
        F.max(ts).alias(TS), F.max(F.when(op.isin("c", "r"), ts)).alias(LAST_INSERT),
        F.max(F.when(op == "d", ts)).alias(LAST_DELETE))


def advance_input_type(columns: MirrorColumns) -> T.StructType:
    return T.StructType([*input_type(columns).fields, T.StructField(LAST_INSERT, T.LongType()),
                         T.StructField(LAST_DELETE, T.LongType()), T.StructField(NEW, T.BooleanType())])


def advance_output_type(columns: MirrorColumns) -> T.StructType:
    return T.StructType([*output_type(columns).fields, T.StructField(REFUSED, T.BooleanType()),
                         T.StructField(OPEN, T.BooleanType())])


def advance_in_arrow(columns: MirrorColumns,
                     tracked: frozenset[str] | None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The `mapInArrow` function: `advance_input_type` rows sorted by key within the partition ->
    the versions `advance` ends, updates or starts (the open version when unchanged left out;
    `_cdc_open` on the one replacing it), a new key's (no `STORED` row) from nothing, or one row
    of key columns with `_cdc_refused` for a key it leaves to the full recompute."""
    fold_input = FoldInput(columns)
    spark_type = advance_output_type(columns)

    def compute(batches: Iterator[Any]) -> Iterator[Any]:
        return record_batches(advanced_rows(batches), spark_type)

    def advanced_rows(batches: Iterator[Any]) -> Iterator[dict[str, Any]]:
        for key, same_key_rows in groupby(arrow_rows(batches), key=fold_input.key):
            current: Version | None = None
            stored: Stored | None = None
            events: list[dict[str, Any]] = []
            covering: list[tuple[dict[str, Any], bool]] = []
            for row in same_key_rows:
                if row[KIND] == SEED:
                    current = Version(row[TS], None, row[OP], row[OFFSET], fold_input.visible(row))
                elif row[KIND] == STORED:
                    stored = Stored(row[TS], row[LAST_INSERT], row[LAST_DELETE])
                elif row[KIND] == COVERING:
                    covering.append((fold_input.event(row), bool(row[NEW])))
                else:
                    events.append(fold_input.event(row))
            result = advance(fold_input.spec, current, stored, events, covering, tracked)
            if result is None:
                yield {**dict(zip(fold_input.keys, key, strict=True)), REFUSED: True, OPEN: False}
            else:
                start = current.start_us if current is not None else None
                yield from ({**fold_input.output(v), REFUSED: False, OPEN: v.start_us == start}
                            for v in result if v is not current)

    return compute


def advance_inputs(spark: SparkSession, path: str, stats: DataFrame | None, batch_keys: DataFrame | None,
                   rows: DataFrame | None, store: TombstoneStore, columns: MirrorColumns, partition_keys: list[str],
                   dropped: list[dict[str, Any]]) -> DataFrame:
    """Every affected key's rows as `advance_input_type`: the known keys' (`stats`) open versions
    and stored stats, the micro-batch's changes (`rows`, of the keys `batch_keys`, new ones
    included) and the deletes covering the keys (this micro-batch's flagged `_cdc_new`)."""
    names = columns.key_names
    keyed = [F.col(f"`{n}`") for n in names]
    schema = advance_input_type(columns)
    parts: list[DataFrame] = []
    key_sets: list[DataFrame] = []
    if stats is not None:
        known = F.broadcast(stats.select(*keyed))
        history = spark.read.format("delta").load(path).where(F.col(END_AT).isNull())
        seeds = history.join(known, same_key(history, known, names), "left_semi").withColumns(
            {TS: F.unix_micros(F.col(START_AT)), OP: F.col(START_OP), OFFSET: F.col(START_OFFSET)})
        parts += [conformed(seeds, columns, SEED, schema), conformed(stats, columns, STORED, schema)]
        key_sets.append(stats.select(*keyed))
    if rows is not None and batch_keys is not None:
        parts.append(conformed(rows, columns, DATA, schema))
        key_sets.append(batch_keys)
    keys = F.broadcast(reduce(DataFrame.unionByName, key_sets).distinct())
    deletes = store.covering(spark, keys, columns, partition_keys)
    if deletes is not None:
        marks = [f"{int(d['ts'])}:{int(d['offset'])}" for d in dropped]
        x = F.col("x")
        new = F.concat_ws(":", x["ts"], x["off"]).isin(marks) if marks else F.lit(False)
        parts.append(conformed(deletes.select(*keyed, x["ts"].alias(TS), x["rank"].alias(RANK),
                                              x["off"].alias(OFFSET), new.alias(NEW)), columns, COVERING, schema))
    return reduce(DataFrame.unionByName, parts)


def advanced_versions(result: DataFrame, open_: bool) -> DataFrame:
    """`advance_in_arrow`'s versions (refused keys' rows left out), timestamps made: those
    replacing an open version (`open_`, MERGEd) or the others (new versions, appended)."""
    chosen = ~F.col(REFUSED) & (F.col(OPEN) if open_ else ~F.col(OPEN))
    return with_timestamps(result.where(chosen).drop(REFUSED, OPEN))


def refused_keys(result: DataFrame, names: list[str]) -> DataFrame:
    keyed: list[Column] = [F.col(f"`{n}`") for n in names]
    return result.where(F.col(REFUSED)).select(*keyed)
