"""The mirror's exact current state for Spark readers: the Delta table with its pending changes
folded in (merge-on-read), `current_state(spark, root, keyspace, table)`.

The rows of the keys the pending changes touch (and of the partitions of pending range / partition
deletes) are folded as the next compaction will fold them; every other row is read as stored. A
reader outside Spark (delta-rs, DuckDB, Trino on the Delta table) sees the state at the last
compaction (docs/spark.md, "Merge-on-read").
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bridge.spark.fold.delta_tables import columns_from_delta
from bridge.spark.fold.events import ACTION
from bridge.spark.fold.frames import same_key
from bridge.spark.fold.tombstones import TombstoneStore, tombstone_path
from bridge.spark.mirror.changelog import ChangeLog, changes_path
from bridge.spark.mirror.compaction import BROADCAST_KEYS, merge_source


def current_state(spark: SparkSession, root: str, keyspace: str, table: str, *,
                  bookkeeping: bool = False) -> DataFrame:
    """The table's rows as of the last micro-batch written: the table's columns, and with
    `bookkeeping` the `_cdc_*` columns too (the row marker, position and cell timestamps)."""
    root = root.rstrip("/")
    changes = ChangeLog(changes_path(root, keyspace, table))
    # The changelog's version first, the table's after: a compaction committing meanwhile then at
    # worst leaves changes in both, which fold again to the same rows, never in neither.
    version = changes.version(spark)
    stored = spark.read.format("delta").load(f"{root}/{keyspace}/{table}")
    columns = columns_from_delta(stored.schema)
    pending = None if version is None else changes.pending(spark, columns, version)
    rows = stored
    if pending is not None:
        store = TombstoneStore(tombstone_path(root, keyspace, table))
        partition_keys = store.partition_keys(spark, pending.dropped)
        events = pending.events
        small = events is not None and pending.changes <= BROADCAST_KEYS
        source = merge_source(spark, stored, store, events, pending.dropped, columns, partition_keys, small)
        if source is not None:
            source = source.localCheckpoint()  # folded once, read by both sides of the union
            names = columns.key_names
            keys = source.select(*[F.col(f"`{n}`") for n in names])
            kept = stored.join(F.broadcast(keys) if small else keys, same_key(stored, keys, names), "left_anti")
            rows = kept.unionByName(source.where(F.col(ACTION) == "upsert").drop(ACTION))
    if bookkeeping:
        return rows
    return rows.select(*[F.col(f"`{c.name}`") for c in columns.columns])
