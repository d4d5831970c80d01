"""The mirror's exact current state for Spark readers: the Delta table with its pending changes
folded in (merge-on-read), `current_state(spark, root, keyspace, table)`.

The rows of the keys the pending changes touch (and of the partitions of pending range / partition
deletes) are folded as the next compaction will fold them; every other row is read as stored. A
reader outside Spark (delta-rs, DuckDB, Trino on the Delta table) sees the state at the last
compaction (docs/spark.md, "Merge-on-read").

A session that reads a table's view again while neither its changelog nor the table has a new
version (a dashboard polling faster than the mirror's micro-batches) reuses its last read's
folded rows: no listing, no fold.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bridge.spark.fold.delta_tables import columns_from_delta, latest_version
from bridge.spark.fold.events import ACTION
from bridge.spark.fold.frames import MirrorColumns, same_key
from bridge.spark.fold.tombstones import TombstoneStore, tombstone_path
from bridge.spark.mirror.changelog import ChangeLog, changes_path
from bridge.spark.mirror.compaction import BROADCAST_KEYS, merge_source

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FoldedPending:
    """A read's folded rows (`merge_source`'s, checkpointed; None: nothing pending), by the
    changelog's and the table's versions it folded."""

    changelog_version: int
    table_version: int
    source: DataFrame | None
    small: bool  # few enough pending changes to broadcast their keys


_folded: dict[tuple[str, str], FoldedPending] = {}  # per (Spark application, table path): the last read's
_folded_lock = threading.Lock()


def current_state(spark: SparkSession, root: str, keyspace: str, table: str, *,
                  bookkeeping: bool = False) -> DataFrame:
    """The table's rows as of the last micro-batch written: the table's columns, and with
    `bookkeeping` the `_cdc_*` columns too (the row marker, position and cell timestamps)."""
    root = root.rstrip("/")
    path = f"{root}/{keyspace}/{table}"
    changes = ChangeLog(changes_path(root, keyspace, table))
    # The changelog's version first, the table's after: a compaction committing meanwhile then at
    # worst leaves changes in both, which fold again to the same rows, never in neither.
    version = changes.version(spark)
    table_version = latest_version(spark, path)
    reader = spark.read.format("delta")
    stored = (reader if table_version is None else reader.option("versionAsOf", table_version)).load(path)
    columns = columns_from_delta(stored.schema)
    rows = stored
    if version is not None and table_version is not None:
        folded = _folded_pending(spark, root, (keyspace, table), stored, columns, changes, version, table_version)
        if folded.source is not None:
            names = columns.key_names
            keys = folded.source.select(*[F.col(f"`{n}`") for n in names])
            kept = stored.join(F.broadcast(keys) if folded.small else keys, same_key(stored, keys, names), "left_anti")
            rows = kept.unionByName(folded.source.where(F.col(ACTION) == "upsert").drop(ACTION))
    if bookkeeping:
        return rows
    return rows.select(*[F.col(f"`{c.name}`") for c in columns.columns])


def _folded_pending(spark: SparkSession, root: str, table: tuple[str, str], stored: DataFrame,
                    columns: MirrorColumns, changes: ChangeLog, version: int, table_version: int) -> FoldedPending:
    """The pending changes of the changelog's `version` folded onto the table's `table_version`:
    this session's last read's when it folded the same versions."""
    cache_key = (spark.sparkContext.applicationId, f"{root}/{table[0]}/{table[1]}")
    with _folded_lock:
        last = _folded.get(cache_key)
    if last is not None and (last.changelog_version, last.table_version) == (version, table_version):
        log.debug("mirror view folded", table=cache_key[1], how="unchanged", changelog_version=version)
        return last
    pending = changes.pending(spark, columns, version)
    source, small = None, True
    if pending is not None:
        store = TombstoneStore(tombstone_path(root, *table))
        partition_keys = store.partition_keys(spark, pending.dropped)
        small = pending.changes <= BROADCAST_KEYS
        source = merge_source(spark, stored, store, pending.events, pending.dropped, columns, partition_keys, small)
        if source is not None:
            source = source.localCheckpoint()  # folded once, read by both sides of the union
    folded = FoldedPending(version, table_version, source, small)
    with _folded_lock:
        _folded[cache_key] = folded
    log.debug("mirror view folded", table=cache_key[1], how="every pending change", changelog_version=version)
    return folded
