"""History tables (SCD type 2): one Delta table per source table holding every version of every
row, `__START_AT` / `__END_AT` from the changes' `source.ts_us` (docs/spark.md, "History").

The micro-batch is read and decoded as the mirror's (`batch_reader`: decode, typed events,
range / partition deletes); per table:
1. its changes are appended to the history's own append-only table
   `<root>/_cdc_changes/<ks>/<t>` (Delta's idempotent `txnAppId` / `txnVersion`: a re-run
   micro-batch appends nothing), its range / partition deletes to `<root>/_cdc_dropped/<ks>/<t>`
   (kept forever: a key's versions are recomputed from all its deletes);
2. the affected keys are the micro-batch's keys and every key stored in a partition one of its
   range / partition deletes hits; all their changes and covering deletes are read back;
3. their versions are computed per key in Python over Arrow (`mapInArrow` after a repartition and
   sort by key; the pure `history_versions.versions`), so a late change rewrites the versions
   after it;
4. one MERGE on (key columns, `__START_AT`) writes them and deletes the affected keys' versions
   no longer in the set (idempotent as well: `txnAppId` / `txnVersion`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import reduce
from typing import Any

import structlog
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.batch_reader import BatchReader
from bridge.spark.cdc_format import CdcFormat
from bridge.spark.decode import Group, ValueFormat, prepare
from bridge.spark.fold import HIDDEN
from bridge.spark.history_arrow import (
    DATA,
    END_AT,
    START_AT,
    START_OFFSET,
    START_OP,
    change_rows,
    conformed,
    covering_rows,
    output_type,
    versions_in_arrow,
    with_timestamps,
)
from bridge.spark.mirror import TABLE_PROPERTIES, columns_from_delta, delta_schema
from bridge.spark.mirror_compaction import merge_actions, partitions
from bridge.spark.mirror_frames import MirrorColumns, same_key
from bridge.spark.mirror_tombstones import TombstoneStore

log = structlog.get_logger(__name__)
KEEP_FOREVER = 2**62  # the history's range / partition deletes are never purged
ACTION = "_cdc_action"
BOOKKEEPING = (T.StructField(START_AT, T.TimestampType()), T.StructField(END_AT, T.TimestampType()),
               T.StructField(START_OP, T.StringType()), T.StructField(START_OFFSET, T.LongType()))


def history_schema(columns: MirrorColumns) -> T.StructType:
    """The table's columns (with the mirror's role metadata) and the version bookkeeping."""
    fields = [f for f in delta_schema(columns).fields if f.name not in HIDDEN]
    return T.StructType(fields + list(BOOKKEEPING))


def tracked_columns(table: tuple[str, str], on: tuple[str, ...], except_: tuple[str, ...],
                    columns: MirrorColumns) -> frozenset[str] | None:
    """`TRACK HISTORY ON` / `EXCEPT` for one table: names given as `col` or `ks.table.col`."""
    def mine(names: tuple[str, ...]) -> set[str]:
        prefix = f"{table[0]}.{table[1]}."
        return {n[len(prefix):] if n.startswith(prefix) else n for n in names if "." not in n or n.startswith(prefix)}

    values = {c.name for c in columns.values}
    if on:
        return frozenset(values & mine(on))
    if except_:
        return frozenset(values - mine(except_))
    return None


class HistoryWriter:
    """The `foreachBatch` function of `cdc-bridge spark history`."""

    def __init__(self, root: str, name: str, value_format: ValueFormat,
                 avro_decoder: Callable[[DataFrame], Iterator[Group]] | None = None, cdc: CdcFormat | None = None,
                 registry_url: str | None = None, track_on: tuple[str, ...] = (),
                 track_except: tuple[str, ...] = ()) -> None:
        self.root = root.rstrip("/")
        self.name = name
        self.value_format = value_format
        self.reader = BatchReader(value_format, avro_decoder, cdc or CdcFormat(), registry_url)
        self.track_on, self.track_except = track_on, track_except
        self._columns: dict[str, MirrorColumns] = {}  # per table path, once the Delta table exists
        self._tombstones: dict[str, TombstoneStore] = {}

    def path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/{keyspace}/{table}"

    def tombstone_path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/_cdc_dropped/{keyspace}/{table}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch.sparkSession
        spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # a map put twice in one change: the last
        batch = prepare(batch, self.value_format, payload_only=True).persist()
        try:
            tables, dropped = self.reader.tables(batch)
            for table in sorted(set(tables) | set(dropped)):
                table_started = time.monotonic()
                written = self.apply(spark, table, tables.get(table, []), dropped.get(table, []), batch_id)
                log.info("micro-batch history written", keyspace=table[0], table=table[1], batch_id=batch_id,
                         version_rows_written=written, seconds=round(time.monotonic() - table_started, 2))
        finally:
            batch.unpersist()
        log.info("micro-batch done", batch_id=batch_id, seconds=round(time.monotonic() - started, 2))

    def changes_path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/_cdc_changes/{keyspace}/{table}"

    def apply(self, spark: SparkSession, table: tuple[str, str], groups: list[Group],
              dropped: list[dict[str, Any]], batch_id: int) -> int:
        """Record one table's changes of the micro-batch and rewrite the affected keys' versions;
        returns the version rows written or deleted."""
        from delta.tables import DeltaTable

        path = self.path(*table)
        known = self._columns.get(path)
        if known is None and DeltaTable.isDeltaTable(spark, path):
            known = columns_from_delta(DeltaTable.forPath(spark, path).toDF().schema)
        columns = known or MirrorColumns(())
        for group in groups:
            columns = columns.merged_with(self.reader.columns_of(group))
        if not columns.columns:
            return 0  # dropped changes of a table never seen: no key to end
        if known is None or len(columns.columns) != len(known.columns):
            self._ensure_history(spark, path, columns, known is not None)
        self._columns[path] = columns
        app_id = f"{self.name}:{table[0]}.{table[1]}"
        store = self._tombstones.setdefault(path, TombstoneStore(self.tombstone_path(*table), KEEP_FOREVER))
        partition_keys = store.partition_keys(spark, dropped)
        if dropped:
            store.add(spark, columns, partition_keys, dropped, f"{app_id}:dropped", batch_id)
        changes_path = self.changes_path(*table)
        events = reduce(DataFrame.unionByName, [self.reader.events(g, columns) for g in groups]) if groups else None
        if events is not None:
            (change_rows(events, columns).write.format("delta").mode("append").option("mergeSchema", "true")
             .option("txnAppId", f"{app_id}:changes").option("txnVersion", batch_id).save(changes_path))
        if not DeltaTable.isDeltaTable(spark, changes_path):
            return 0
        stored = spark.read.format("delta").load(changes_path)
        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        parts = [events.select(*keyed)] if events is not None else []
        if dropped and partition_keys:
            hit = partitions(spark, columns, partition_keys, dropped)
            parts.append(stored.join(hit, partition_keys, "left_semi").select(*keyed))
        if not parts:
            return 0
        affected = reduce(DataFrame.unionByName, parts).distinct().persist()
        try:
            return self._rewrite(spark, path, stored, F.broadcast(affected), store, columns, partition_keys, table,
                                 app_id, batch_id)
        finally:
            affected.unpersist()

    def _rewrite(self, spark: SparkSession, path: str, stored: DataFrame, affected: DataFrame,
                 store: TombstoneStore, columns: MirrorColumns, partition_keys: list[str],
                 table: tuple[str, str], app_id: str, batch_id: int) -> int:

        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        # the affected keys renamed: they may come from `stored` itself (a self-join's columns are ambiguous)
        renamed = affected.select(*[F.col(f"`{n}`").alias(f"_a_{n}") for n in names])
        inputs = [conformed(stored.join(renamed, _same_key(stored, renamed, names), "left_semi"), columns, DATA)]
        deletes = store.covering(spark, affected, columns, partition_keys)
        if deletes is not None:
            inputs.append(covering_rows(deletes, columns))
        tracked = tracked_columns(table, self.track_on, self.track_except, columns)
        compute = versions_in_arrow(columns, tracked)
        parallelism = spark.sparkContext.defaultParallelism
        fresh = with_timestamps(reduce(DataFrame.unionByName, inputs).repartition(parallelism, *keyed)
                                .sortWithinPartitions(*keyed).mapInArrow(compute, output_type(columns)))
        fresh = fresh.withColumn(ACTION, F.lit("upsert")).persist()  # read by the MERGE and the stale versions' search
        try:
            return self._merge_versions(spark, path, fresh, renamed, columns, app_id, batch_id)
        finally:
            fresh.unpersist()

    def _merge_versions(self, spark: SparkSession, path: str, fresh: DataFrame, renamed: DataFrame,
                        columns: MirrorColumns, app_id: str, batch_id: int) -> int:
        """One MERGE on (key columns, `__START_AT`): the keys' versions written, those of theirs
        no longer in the set deleted."""
        from delta.tables import DeltaTable

        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        target = DeltaTable.forPath(spark, path)
        current = target.toDF()
        current = current.join(renamed, _same_key(current, renamed, names), "left_semi")
        on = same_key(current, fresh, names) & (current[START_AT] == fresh[START_AT])
        stale = current.join(fresh, on, "left_anti").select(*keyed, START_AT).withColumn(ACTION, F.lit("delete"))
        source = fresh.unionByName(stale, allowMissingColumns=True)
        condition = " AND ".join([f"t.`{k}` <=> s.`{k}`" for k in names] + [f"t.`{START_AT}` = s.`{START_AT}`"])
        assignments: dict[str, str | Column] = {f"`{f.name}`": f"s.`{f.name}`" for f in history_schema(columns).fields}
        return merge_actions(spark, target, source, condition, assignments, app_id, batch_id)

    def _ensure_history(self, spark: SparkSession, path: str, columns: MirrorColumns, exists: bool) -> None:
        schema = history_schema(columns)
        writer = spark.createDataFrame([], schema).write.format("delta").mode("append")
        if exists:
            writer = writer.option("mergeSchema", "true")
        else:
            for key, value in TABLE_PROPERTIES.items():
                writer = writer.option(key, value)
        writer.save(path)
        log.info("history table schema written", path=path, columns=[f.name for f in schema.fields])


def _same_key(left: DataFrame, renamed: DataFrame, names: list[str]) -> Column:
    return reduce(lambda a, b: a & b, [left[f"`{n}`"].eqNullSafe(renamed[f"_a_{n}"]) for n in names])


def as_of(spark: SparkSession, path: str, timestamp: str | int) -> DataFrame:
    """The state of a history table at `timestamp` (microseconds since the epoch, as `source.ts_us`,
    or a Spark timestamp literal, e.g. '2026-03-03 12:00:00.123456' in the session's time zone):
    the version holding then of every row, bookkeeping dropped."""
    at = F.timestamp_micros(F.lit(timestamp)) if isinstance(timestamp, int) else F.lit(timestamp).cast("timestamp")
    frame = spark.read.format("delta").load(path)
    holding = frame.where((F.col(START_AT) <= at) & (F.col(END_AT).isNull() | (F.col(END_AT) > at)))
    return holding.drop(START_AT, END_AT, START_OP, START_OFFSET)
