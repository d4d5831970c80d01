"""The current-state mirror: one Delta table per source table, kept equal to the ScyllaDB table by
merge-on-read.

Each micro-batch (`foreachBatch`) turns its changes into typed events (`fold.frames`) and
appends them, with its range / partition deletes, to each table's changelog (`mirror.changelog`)
without reading the mirror, so its cost follows the micro-batch, not the table. Every
`compact_every_batches` micro-batches, or once `compact_every_changes` changes are pending, or
(running continuously) once changes have been pending `compact_after_s` seconds, and at the end
of an `--available-now` run, a compaction (`mirror.compaction`; in a continuously
running query in a thread beside the appends, `mirror.compactor`) folds each table's
pending changes with the stored rows they touch and the stored deletes covering them
(`fold.tombstones`; the fold is `fold.events`'s, the semantics of the reference
`bridge.spark.fold.reference`) and writes them with one MERGE on the key columns into a table with deletion
vectors. `mirror.view.current_state` gives Spark readers the exact state in between.

Bookkeeping columns `_cdc_marker`, `_cdc_ts_us`, `_cdc_rank`, `_cdc_offset` make replays
idempotent (the fold skips changes at or before a row's position); the changelog's append and the
MERGE carry Delta's idempotent-write marker, so a micro-batch re-run after a restart appends or
commits nothing twice. Column roles are kept in the Delta schema's field metadata (`cdc.role`,
`cdc.collection`, `cdc.elements`, `cdc.logical`), so a batch holding only a range delete knows the
table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from functools import reduce
from typing import Any

import structlog
from pyspark.sql import DataFrame, SparkSession

from bridge.spark.core.batch_offsets import batch_ranges, offsets_in
from bridge.spark.core.cdc_format import CdcFormat
from bridge.spark.core.decode import Group, ValueFormat, counted, prepare
from bridge.spark.core.kafka_ranges import KafkaRanges, Ranges
from bridge.spark.core.progress import count_records
from bridge.spark.core.session import query_scoped, side_by_side
from bridge.spark.fold.batch_reader import BatchReader
from bridge.spark.fold.delta_tables import columns_from_delta, delta_schema, list_folder, write_schema
from bridge.spark.fold.frames import MirrorColumns
from bridge.spark.fold.reference import HIDDEN
from bridge.spark.fold.tombstones import TombstoneStore, tombstone_path
from bridge.spark.mirror.changelog import ChangeLog, changes_path
from bridge.spark.mirror.compaction import compact as compact_table
from bridge.spark.mirror.compactor import BackgroundCompaction

log = structlog.get_logger(__name__)
# Compaction defaults (docs/spark.md, "Merge-on-read"): the Delta table read outside Spark is at
# most this many micro-batches, or about this many changes, behind the topics.
COMPACT_EVERY_BATCHES = 10
COMPACT_EVERY_CHANGES = 500_000
# ... and, running continuously, at most this many seconds behind once changes are pending, when
# micro-batches come too seldom for the counts above (Spark runs none without new input).
COMPACT_AFTER_SECONDS = 60.0
# The Spark scheduler pool of the compaction beside the appends (core.session runs FAIR scheduling)
COMPACTION_POOL = "compaction"
# A micro-batch of at most this many records appends each table's changes as one file, by one
# task: a task's fixed cost (its Kafka fetch, a Parquet file opened, written and committed)
# outweighs its share of so few records, and every later read of the changelog (each view read,
# the compaction) opens fewer files (docs/spark.md, "What a micro-batch costs").
ONE_FILE_RECORDS = 10_000


def _job_ids(spark: SparkSession) -> list[int]:
    """Ids of the Spark jobs the status tracker still holds (`spark.ui.retainedJobs`, the newest)
    in this thread's job group (the streaming query's)."""
    context = spark.sparkContext
    return list(context.statusTracker().getJobIdsForGroup(context.getLocalProperty("spark.jobGroup.id")))


class MirrorWriter:
    """The `foreachBatch` function of `cdc-bridge spark mirror`."""

    def __init__(self, root: str, name: str, value_format: ValueFormat,
                 avro_decoder: Callable[[DataFrame], Iterator[Group]] | None = None, cdc: CdcFormat | None = None,
                 registry_url: str | None = None, compact_every_batches: int = COMPACT_EVERY_BATCHES,
                 compact_every_changes: int = COMPACT_EVERY_CHANGES, reread: KafkaRanges | None = None,
                 spark: SparkSession | None = None, compact_after_s: float = COMPACT_AFTER_SECONDS) -> None:
        """`spark`: compact in a thread beside the appends with that session (a continuously
        running query), also once changes have been pending `compact_after_s` seconds; else
        inline, between two micro-batches."""
        self.root = root.rstrip("/")
        self.compact_every_batches = compact_every_batches
        self.compact_every_changes = compact_every_changes
        self.compact_after_s = compact_after_s
        self._changelogs: dict[str, ChangeLog] = {}
        # what this process appended since its last compaction began: changes, micro-batches, and
        # when the first append was (the query's thread counts, the compaction clock's resets)
        self._counts = threading.Lock()
        self._since = 0
        self._pending_batches = 0
        self._pending_since: float | None = None
        self.name = name
        self.value_format = value_format
        self.avro_decoder = avro_decoder
        self._columns: dict[str, MirrorColumns] = {}  # per table path, once the Delta table exists
        self._tombstones: dict[str, TombstoneStore] = {}
        self.cdc = cdc or CdcFormat()
        # `reread`: the source's options, so that each table's changes of a micro-batch of JSON with
        # schemas are read from Kafka by their topic's offsets, not with every topic's records.
        self._reader = BatchReader(value_format, avro_decoder, self.cdc, registry_url, reread)
        self.background = None if spark is None else BackgroundCompaction(lambda: self._compact_beside(spark))
        if self.background is not None:
            self.background.tick(min(1.0, compact_after_s), self._compact_if_pending_too_long)
        self.commits = 0  # Delta commits of the appends (tables, changelogs, tombstones) so far

    def path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/{keyspace}/{table}"

    def tombstone_path(self, keyspace: str, table: str) -> str:
        return tombstone_path(self.root, keyspace, table)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch.sparkSession
        if self.background is not None:
            self.background.raise_failure()
        last_job = max(_job_ids(spark), default=-1)
        ranges = batch_ranges(batch)  # from the plan, no job (None: not known, the work spread as read)
        one_file = ranges is not None and offsets_in(ranges) <= ONE_FILE_RECORDS
        spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # a map put twice in one change: the last
        # The MERGE keeps its folded source (about the batch's keys' rows) in memory, spilling to
        # disk, instead of Delta's default of writing it to disk first.
        spark.conf.set("spark.databricks.delta.merge.materializeSource.rddStorageLevel", "MEMORY_AND_DISK")
        # JSON with schemas is not persisted: each topic's records are read once, by the job that
        # appends them (`core.known_schemas`); caching cost more than the reads (docs/spark.md).
        cached = self.value_format is not ValueFormat.JSON_SCHEMAS
        if cached:
            batch = prepare(batch, self.value_format).persist()
        try:
            commits = self._reader.known.retried(lambda: self._append_tables(spark, batch, batch_id, ranges, one_file))
        finally:
            if cached:
                batch.unpersist()
        with self._counts:
            self._pending_batches += 1
            if commits and self._pending_since is None:
                self._pending_since = time.monotonic()
            due = self._pending_batches >= self.compact_every_batches or self._since >= self.compact_every_changes
        if due:
            if self.background is None:
                self.compact(spark)
            else:
                self._start_background()
        log.info("micro-batch done", batch_id=batch_id, seconds=round(time.monotonic() - started, 2),
                 spark_jobs=sum(1 for job in _job_ids(spark) if job > last_job), delta_commits=commits,
                 compacting=self.background is not None and self.background.running)

    def _compact_beside(self, spark: SparkSession) -> int:
        """The background compaction, its jobs in their own pool: the query's jobs share the cores
        with it task by task instead of waiting for its queued tasks."""
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", COMPACTION_POOL)
        return self.compact(spark, latest=True)

    def _start_background(self) -> bool:
        with self._counts:
            if self.background is None or not self.background.start():
                return False
            # counted again from what the compaction leaves
            self._since = self._pending_batches = 0
            self._pending_since = None
            return True

    def _compact_if_pending_too_long(self) -> None:
        """The compaction clock's check: changes pending `compact_after_s` seconds are compacted."""
        since = self._pending_since
        if since is not None and time.monotonic() - since >= self.compact_after_s and self._start_background():
            log.info("compaction started: changes pending", seconds=round(time.monotonic() - since, 1))

    def _append_tables(self, spark: SparkSession, batch: DataFrame, batch_id: int, ranges: dict[str, Ranges] | None,
                       one_file: bool) -> int:
        """Append each table's changes of the micro-batch (`ranges`: its offsets, when known;
        `one_file`: each table's as one file); returns the Delta commits made."""
        tables, dropped = self._reader.tables(batch, ranges)
        records, first_commit = 0, self.commits
        for table in sorted(set(tables) | set(dropped)):
            started, last_job, before = time.monotonic(), max(_job_ids(spark), default=-1), self.commits
            appended = self.append(spark, table, tables.get(table, []), dropped.get(table, []), batch_id,
                                   one_file=one_file)
            with self._counts:
                self._since += appended
            records += appended
            log.info("micro-batch mirrored", keyspace=table[0], table=table[1], batch_id=batch_id,
                     changes_appended=appended, spark_jobs=sum(1 for job in _job_ids(spark) if job > last_job),
                     delta_commits=self.commits - before, seconds=round(time.monotonic() - started, 2))
        if self.value_format is ValueFormat.JSON_SCHEMAS:  # Spark's numInputRows counts no re-read topic
            count_records(self.name, batch_id, records if self._reader.records is None else self._reader.records)
        return self.commits - first_commit

    def apply(self, spark: SparkSession, table: tuple[str, str], groups: list[Group],
              dropped: list[dict[str, Any]], batch_id: int) -> int:
        """Mirror one table's changes of a micro-batch at once (append, then compact the table);
        returns the rows upserted or deleted."""
        self.append(spark, table, groups, dropped, batch_id)
        return self.compact(spark, [table])

    def append(self, spark: SparkSession, table: tuple[str, str], groups: list[Group],
               dropped: list[dict[str, Any]], batch_id: int, *, one_file: bool = False) -> int:
        """Append one table's changes of the micro-batch to its changelog (the mirror is not read),
        `one_file`: as one file; returns the changes appended."""
        from delta.tables import DeltaTable

        path = self.path(*table)
        known = self._columns.get(path)
        outdated = False  # a table of an earlier version, without a bookkeeping column added since (`_cdc_rank`)
        if known is None and DeltaTable.isDeltaTable(spark, path):
            schema = DeltaTable.forPath(spark, path).toDF().schema
            known = columns_from_delta(schema)
            outdated = not set(HIDDEN) <= set(schema.fieldNames())
        columns = known or MirrorColumns(())
        for group in groups:
            columns = columns.merged_with(self._reader.columns_of(group))
        if not columns.columns:
            return 0  # dropped changes of a table the mirror has never seen: nothing to delete
        # The table holds every column before a change of it is pending, so a reader (the view, the
        # compaction) knows the columns from the table alone.
        if known is None or outdated or len(columns.columns) != len(known.columns):
            self._ensure_table(spark, path, columns, known is not None)
        self._columns[path] = columns
        app_id = f"{query_scoped(spark, self.name)}:{table[0]}.{table[1]}"
        store = self._store(table)
        partition_keys = store.partition_keys(spark, dropped)
        if dropped:
            store.add(spark, columns, partition_keys, dropped, f"{app_id}:dropped", batch_id)
            self.commits += 1
        events = reduce(DataFrame.unionByName, [self._reader.events(g, columns) for g in groups]) if groups else None
        changelog = self._changes(table)
        before = changelog.commits
        # counted by the decoding (`json_groups`), else by the append's own job
        appended = changelog.append(spark, columns, events, dropped, f"{app_id}:changes", batch_id, counted(groups),
                                    one_file=one_file)
        self.commits += changelog.commits - before
        return appended

    def compact(self, spark: SparkSession, tables: list[tuple[str, str]] | None = None, *,
                latest: bool = False) -> int:
        """Fold the pending changes of `tables` (default: every table with a changelog under the
        root) into the mirror, one MERGE per table (`mirror.compaction`), tables side by side
        (`core.session.side_by_side`); returns the rows upserted or deleted. `latest`: beside
        appends (or another process's), each changelog's version is taken first and the columns
        then read from the table, which holds every column before a change of it is appended (this
        process's columns may be behind)."""
        chosen = self.changelog_tables(spark) if tables is None else tables
        total = sum(side_by_side(spark, lambda table: self._compact_table(spark, table, latest), chosen))
        if tables is None and not latest:  # inline: in the query's thread, the counters are this one's
            with self._counts:
                self._since = self._pending_batches = 0
                self._pending_since = None
        return total

    def _compact_table(self, spark: SparkSession, table: tuple[str, str], latest: bool) -> int:
        from delta.tables import DeltaTable

        started = time.monotonic()
        path = self.path(*table)
        changes = self._changes(table)
        version = changes.version(spark) if latest else None
        columns = None if latest else self._columns.get(path)
        if columns is None:
            columns = columns_from_delta(DeltaTable.forPath(spark, path).toDF().schema)
        changed = compact_table(spark, path, columns, changes, self._store(table), version)
        log.info("mirror compacted", keyspace=table[0], table=table[1], rows_changed=changed,
                 seconds=round(time.monotonic() - started, 2))
        return changed

    def changelog_tables(self, spark: SparkSession) -> list[tuple[str, str]]:
        """(keyspace, table) of every changelog under the root (a listing of its folders)."""
        base = f"{self.root}/_cdc_changes"
        found = []
        for keyspace, is_folder in list_folder(spark, base) or []:
            if is_folder:
                found += [(keyspace, table) for table, folder in list_folder(spark, f"{base}/{keyspace}") or []
                          if folder and not table.startswith("_")]
        return sorted(found)

    def _store(self, table: tuple[str, str]) -> TombstoneStore:
        path = self.tombstone_path(*table)
        return self._tombstones.setdefault(path, TombstoneStore(path))

    def _changes(self, table: tuple[str, str]) -> ChangeLog:
        path = changes_path(self.root, *table)
        return self._changelogs.setdefault(path, ChangeLog(path))

    def _ensure_table(self, spark: SparkSession, path: str, columns: MirrorColumns, exists: bool) -> None:
        schema = delta_schema(columns)
        if exists:
            from delta.tables import DeltaTable

            if {f.name for f in schema.fields} <= set(DeltaTable.forPath(spark, path).toDF().columns):
                return
        write_schema(spark, path, schema, exists)
        self.commits += 1
        log.info("mirror table schema written", path=path, columns=[f.name for f in schema.fields])


class MirrorQuery:
    """The mirror's streaming query; with `compact_at_end` (an `--available-now` run), once the
    query has ended without failure `awaitTermination` compacts every table, so the Delta table
    read outside Spark is current when the run ends. Everything else is the query's."""

    def __init__(self, query: Any, writer: MirrorWriter, spark: SparkSession, *, compact_at_end: bool) -> None:
        self._query = query
        self._writer = writer
        self._spark = spark
        self._compact_at_end = compact_at_end

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        ended = self._query.awaitTermination() if timeout is None else self._query.awaitTermination(timeout)
        if ended is not False and self._writer.background is not None:
            self._writer.background.stop()
            self._writer.background.wait()  # a compaction begun meanwhile ends before the process does
        if ended is not False and self._compact_at_end and self._query.exception() is None:
            self._compact_at_end = False
            self._writer.compact(self._spark)
        return ended  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self._writer.background is not None:
            self._writer.background.stop()
        self._query.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._query, name)

