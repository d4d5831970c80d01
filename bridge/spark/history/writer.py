"""History tables (SCD type 2): one Delta table per source table holding every version of every
row, `__START_AT` / `__END_AT` from the changes' `source.ts_us` (docs/spark.md, "History").

The micro-batch is read and decoded as the mirror's (`fold.batch_reader`: decode, typed events,
range / partition deletes); per table:
1. the affected keys are split, before its changes are appended, into known keys (a change of theirs
   is stored: a scan of the changes table's key columns, semi-joined with the micro-batch's keys;
   and every stored key of a partition one of its range / partition deletes hits) and new keys;
2. its changes are appended to the history's own append-only table
   `<root>/_cdc_changes/<ks>/<t>` (Delta's idempotent `txnAppId` / `txnVersion`: a re-run
   micro-batch appends nothing), its range / partition deletes to `<root>/_cdc_dropped/<ks>/<t>`
   (kept forever: a key's versions are recomputed from all its deletes);
3. every affected key goes through one `mapInArrow` job (`history.advance`): a new key's versions
   from the micro-batch's changes and the stored deletes covering it (it has no earlier change);
   a known key whose micro-batch changes (and covering deletes) are all later than its stored
   ones (in order, the common case) has its versions continued from its open version, read from
   the history table, with what the scan of step 1 read of its stored changes; the other known
   keys (a late change; every key of a re-run micro-batch) are refused;
4. the new versions (a new key's, an in-order key's after its open one) are appended: no version
   of theirs exists at their start;
5. the refused keys have all their changes and covering deletes read back and their versions
   recomputed, so a late change rewrites the versions after it; one MERGE on (key columns,
   `__START_AT`) writes them and the in-order keys' open versions ended or updated in place, and
   deletes the recomputed keys' versions no longer in the set. It is the micro-batch's last write.
Versions are computed per key in Python over Arrow (`mapInArrow` after a repartition and sort by
key; the pure `history.versions.versions`). Both writes are idempotent (`txnAppId` /
`txnVersion`); a micro-batch re-run after its changes were appended finds all its keys known and
not later than their stored changes, and MERGEs the same versions (on versions already appended:
the same rows) in step 5.
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

from bridge.spark.core.batch_offsets import batch_ranges
from bridge.spark.core.cdc_format import CdcFormat
from bridge.spark.core.decode import Group, ValueFormat, prepare
from bridge.spark.core.kafka_ranges import KafkaRanges, Ranges
from bridge.spark.core.progress import count_records
from bridge.spark.core.session import query_scoped, side_by_side
from bridge.spark.fold.batch_reader import BatchReader, Table
from bridge.spark.fold.delta_tables import (
    NO_STATISTICS,
    columns_from_delta,
    delta_schema,
    merge_actions,
    partitions,
    write_schema,
)
from bridge.spark.fold.frames import MirrorColumns, same_key
from bridge.spark.fold.reference import HIDDEN
from bridge.spark.fold.tombstones import TombstoneStore
from bridge.spark.history.advance import (
    OPEN,
    REFUSED,
    advance_in_arrow,
    advance_inputs,
    advance_output_type,
    advanced_versions,
    refused_keys,
    stored_stats,
)
from bridge.spark.history.arrow import (
    DATA,
    END_AT,
    OP,
    START_AT,
    START_OFFSET,
    START_OP,
    TS,
    change_rows,
    conformed,
    covering_rows,
    output_type,
    versions_in_arrow,
    with_timestamps,
)

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
                 track_except: tuple[str, ...] = (), reread: KafkaRanges | None = None) -> None:
        self.root = root.rstrip("/")
        self.name = name
        self.value_format = value_format
        # `reread`: each table's changes of JSON with schemas read their topic's offsets alone (the mirror's)
        self.reader = BatchReader(value_format, avro_decoder, cdc or CdcFormat(), registry_url, reread)
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
        # JSON with schemas is read from the source by each table's changes (persisted once there,
        # `change_rows`), as the mirror reads it (`core.known_schemas`): persisting the micro-batch
        # first cost more than the reads (bench/README.md, the history's sections).
        ranges = batch_ranges(batch)  # from the plan, no job (None: not known)
        cached = self.value_format is not ValueFormat.JSON_SCHEMAS
        if cached:
            batch = prepare(batch, self.value_format, payload_only=True).persist()
        try:
            self.reader.known.retried(lambda: self._write_batch(spark, batch, batch_id, ranges))
        finally:
            if cached:
                batch.unpersist()
        log.info("micro-batch done", batch_id=batch_id, seconds=round(time.monotonic() - started, 2))

    def _write_batch(self, spark: SparkSession, batch: DataFrame, batch_id: int,
                     ranges: dict[str, Ranges] | None) -> None:
        tables, dropped = self.reader.tables(batch, ranges)
        if self.reader.records is not None:  # Spark's numInputRows would count every read
            count_records(self.name, batch_id, self.reader.records)
        self._write_tables(spark, sorted(set(tables) | set(dropped)), tables, dropped, batch_id)

    def _write_tables(self, spark: SparkSession, order: list[Table], tables: dict[Table, list[Group]],
                      dropped: dict[Table, list[dict[str, Any]]], batch_id: int) -> None:
        """Each table's micro-batch, tables side by side (`core.session.side_by_side`); the first
        failure fails the micro-batch, whose re-run rewrites nothing twice."""
        def write(table: Table) -> None:
            started = time.monotonic()
            written = self.apply(spark, table, tables.get(table, []), dropped.get(table, []), batch_id)
            log.info("micro-batch history written", keyspace=table[0], table=table[1], batch_id=batch_id,
                     version_rows_written=written, seconds=round(time.monotonic() - started, 2))

        side_by_side(spark, write, order)

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
        store = self._tombstones.setdefault(path, TombstoneStore(self.tombstone_path(*table), KEEP_FOREVER))
        partition_keys = store.partition_keys(spark, dropped)
        if dropped:
            store.add(spark, columns, partition_keys, dropped, f"{self.name}:{table[0]}.{table[1]}:dropped", batch_id)
        events = reduce(DataFrame.unionByName, [self.reader.events(g, columns) for g in groups]) if groups else None
        # appended, and every key's input to the versions
        rows = change_rows(events, columns).persist() if events is not None else None
        try:
            return self._record(spark, table, columns, store, partition_keys, dropped, rows, batch_id)
        finally:
            if rows is not None:
                rows.unpersist()

    def _record(self, spark: SparkSession, table: tuple[str, str], columns: MirrorColumns, store: TombstoneStore,
                partition_keys: list[str], dropped: list[dict[str, Any]], rows: DataFrame | None,
                batch_id: int) -> int:
        """Find the known keys (a change stored before this micro-batch), append the changes, then
        compute the new keys' versions and continue the in-order known keys' in one job, append
        the new versions, and MERGE the ended open versions with the other known keys' versions
        recomputed from all their changes."""
        from delta.tables import DeltaTable

        stages = _Stages()
        app_id = f"{query_scoped(spark, self.name)}:{table[0]}.{table[1]}"
        changes_path = self.changes_path(*table)
        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        batch_keys = rows.select(*keyed).distinct().persist() if rows is not None else None
        known_parts: list[DataFrame] = []
        exists = DeltaTable.isDeltaTable(spark, changes_path)
        if exists:  # read before the append: the keys changed before
            before = spark.read.format("delta").load(changes_path).select(*keyed, TS, OP)
            if batch_keys is not None:
                small = F.broadcast(batch_keys)
                known_parts.append(before.join(small, same_key(before, small, names), "left_semi"))
            if dropped and partition_keys:  # every key stored in a partition one of its deletes hits
                hit = partitions(spark, columns, partition_keys, dropped)
                known_parts.append(before.join(hit, partition_keys, "left_semi").select(*keyed, TS, OP))
        # The known keys, with what their stored changes leave (a key in both parts: max is
        # idempotent), checkpointed: once the changes are appended a recomputation would find
        # every key of the micro-batch known, and a persisted frame was found recomputed then.
        known = (stored_stats(reduce(DataFrame.unionByName, known_parts), names).localCheckpoint(eager=True)
                 if known_parts else None)
        refused_count = 0
        try:
            known_count = known.count() if known is not None else 0
            stages.done("keys_split")
            if rows is not None:
                (rows.write.format("delta").mode("append").option("mergeSchema", "true")
                 .options(**({} if exists else NO_STATISTICS))
                 .option("txnAppId", f"{app_id}:changes").option("txnVersion", batch_id).save(changes_path))
                stages.done("changes_appended")
            written = 0
            if batch_keys is not None or known_count:
                # New and in-order known keys in one job: their new versions appended, the open
                # versions they end or update and the other known keys' recomputed ones in one
                # MERGE, the micro-batch's last write: a re-run (every key refused then: its
                # changes are stored) ends with the one write covering them all.
                result, new_count, open_count, refused_count = self._advance(
                    spark, table, columns, store, partition_keys, dropped, rows, batch_keys,
                    known if known_count else None, stages)
                if new_count:
                    (advanced_versions(result, open_=False).write.format("delta").mode("append")
                     .option("txnAppId", f"{app_id}:new").option("txnVersion", batch_id).save(self.path(*table)))
                    written += new_count
                    stages.done("versions_appended")
                ended = advanced_versions(result, open_=True).withColumn(ACTION, F.lit("upsert"))
                if refused_count:
                    stored = spark.read.format("delta").load(changes_path)
                    refused = F.broadcast(refused_keys(result, names))
                    written += self._rewrite(spark, self.path(*table), stored, refused, store,
                                             columns, partition_keys, table, app_id, batch_id, stages, ended)
                elif open_count:
                    written += self._merge_versions(spark, self.path(*table), ended, None, columns, app_id,
                                                    batch_id)
                    stages.done("known_keys_merged")
        finally:  # `known` and `result` are local checkpoints: Spark's cleaner drops them with their references
            if batch_keys is not None:
                batch_keys.unpersist()
        log.info("micro-batch history stages", keyspace=table[0], table=table[1], batch_id=batch_id,
                 known_keys=known_count, recomputed_keys=refused_count, **stages.seconds)
        return written

    def _advance(self, spark: SparkSession, table: tuple[str, str], columns: MirrorColumns, store: TombstoneStore,
                 partition_keys: list[str], dropped: list[dict[str, Any]], rows: DataFrame | None,
                 batch_keys: DataFrame | None, known: DataFrame | None,
                 stages: _Stages) -> tuple[DataFrame, int, int, int]:
        """Every affected key through `advance_in_arrow` (`history.advance`): new keys' versions
        from nothing, in-order known keys' continued from the open one, the others refused, for
        the full recompute. Returns its rows (a local checkpoint: the writes change its input)
        and the counts of new versions, of rows replacing open versions, of refused keys."""
        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        compute = advance_in_arrow(columns, tracked_columns(table, self.track_on, self.track_except, columns))
        inputs = advance_inputs(spark, self.path(*table), known, batch_keys, rows, store, columns, partition_keys,
                                dropped)
        result = (inputs.repartition(spark.sparkContext.defaultParallelism, *keyed).sortWithinPartitions(*keyed)
                  .mapInArrow(compute, advance_output_type(columns)).localCheckpoint(eager=True))
        refused, is_open = F.col(REFUSED), F.col(OPEN)
        counts = result.agg(F.count(F.when(~refused & ~is_open, 1)).alias("new"),
                            F.count(F.when(~refused & is_open, 1)).alias("open"),
                            F.count(F.when(refused, 1)).alias("refused")).first()
        stages.done("versions_advanced")
        assert counts is not None
        return result, int(counts["new"]), int(counts["open"]), int(counts["refused"])

    def _versions(self, spark: SparkSession, table: tuple[str, str], columns: MirrorColumns, inputs: list[DataFrame],
                  keyed: list[Column]) -> DataFrame:
        """The versions of every key of `inputs` (changes and covering deletes, `input_type` rows)."""
        tracked = tracked_columns(table, self.track_on, self.track_except, columns)
        compute = versions_in_arrow(columns, tracked)
        parallelism = spark.sparkContext.defaultParallelism
        return with_timestamps(reduce(DataFrame.unionByName, inputs).repartition(parallelism, *keyed)
                               .sortWithinPartitions(*keyed).mapInArrow(compute, output_type(columns)))

    def _rewrite(self, spark: SparkSession, path: str, stored: DataFrame, affected: DataFrame,
                 store: TombstoneStore, columns: MirrorColumns, partition_keys: list[str],
                 table: tuple[str, str], app_id: str, batch_id: int, stages: _Stages,
                 advanced: DataFrame) -> int:
        """The known keys' versions recomputed from all their changes and covering deletes, MERGEd
        with the in-order keys' (`advanced`)."""
        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        # the affected keys renamed: they may come from `stored` itself (a self-join's columns are ambiguous)
        renamed = affected.select(*[F.col(f"`{n}`").alias(f"_a_{n}") for n in names])
        inputs = [conformed(stored.join(renamed, _same_key(stored, renamed, names), "left_semi"), columns, DATA)]
        deletes = store.covering(spark, affected, columns, partition_keys)
        if deletes is not None:
            inputs.append(covering_rows(deletes, columns))
        fresh = self._versions(spark, table, columns, inputs, keyed)
        fresh = fresh.withColumn(ACTION, F.lit("upsert")).persist()  # read by the MERGE and the stale versions' search
        try:
            fresh.count()
            stages.done("known_versions_computed")
            merged = self._merge_versions(spark, path, fresh.unionByName(advanced), renamed, columns, app_id,
                                          batch_id)
            stages.done("known_keys_merged")
            return merged
        finally:
            fresh.unpersist()

    def _merge_versions(self, spark: SparkSession, path: str, fresh: DataFrame, renamed: DataFrame | None,
                        columns: MirrorColumns, app_id: str, batch_id: int) -> int:
        """One MERGE on (key columns, `__START_AT`): the versions written, those of the recomputed
        keys (`renamed`) no longer in the set deleted (an in-order key's are all kept)."""
        from delta.tables import DeltaTable

        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        target = DeltaTable.forPath(spark, path)
        source = fresh
        if renamed is not None:
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
        write_schema(spark, path, schema, exists)
        log.info("history table schema written", path=path, columns=[f.name for f in schema.fields])


class _Stages:
    """Seconds per stage of one table's micro-batch (each stage ends with a Spark action)."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.seconds: dict[str, float] = {}

    def done(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[f"{stage}_s"] = round(now - self._last, 2)
        self._last = now


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
