"""Folding a table's pending changes into the mirror (merge-on-read's compaction), and the fold of
pending changes with the stored rows they touch, which the compaction writes and the current-state
view (`mirror.view`) reads.

The fold's input per key: the stored row (if any), the pending changes, and the stored range /
partition deletes covering the key (`fold.tombstones`); the stored rows of the partitions of
pending range / partition deletes are read back too. One MERGE on the key columns writes the
upserts and deletes.

A compaction interrupted between the MERGE and the changelog's removal is safe to repeat: folded
again, every change it already applied is at or before its row's stored position and is skipped,
and a row it deleted comes back from no stored row to the same end (what followed the last row
delete is in the changelog again, what preceded it is shadowed by that delete again). So the
MERGE carries no idempotent-write marker: with one (`txnVersion` = the last batch id folded) a
job of another name (a new checkpoint) folding changes another job left pending committed a
version above its own batch ids, and Delta then skipped its later MERGEs as already written
while their changes were removed from the changelog.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from bridge.spark.fold.delta_tables import merge_actions, partitions
from bridge.spark.fold.events import fold_rows, stored_cells, stored_event
from bridge.spark.fold.frames import MirrorColumns, same_key
from bridge.spark.fold.reference import HIDDEN
from bridge.spark.fold.tombstones import TombstoneStore
from bridge.spark.mirror.changelog import ChangeLog
from bridge.spark.mirror.keys import Bound, any_of, key_bounds

# Pending changes of a table up to which their keys are broadcast to the stored-row lookup (a few
# MB): the lookup then scans the mirror once instead of shuffling and sorting all of it.
BROADCAST_KEYS = 200_000


def merge_source(spark: SparkSession, stored: DataFrame, store: TombstoneStore, events: DataFrame | None,
                 dropped: list[dict[str, Any]], columns: MirrorColumns, partition_keys: list[str],
                 small: bool, scope: Column | None = None) -> DataFrame | None:
    """The folded rows of the keys that change: key columns, values, bookkeeping and `_cdc_action`
    ('upsert' | 'delete'); None when nothing is touched. `small`: the changes' keys are broadcast
    (Spark cannot size the not-yet-cached events and would pick a sort-merge join of the whole
    mirror: a cost that grows with the table). `scope`: a filter on the stored rows that holds
    every touched key (`touched_bounds`), so that Delta skips the files outside it."""
    names = columns.key_names
    if scope is not None:
        stored = stored.where(scope)
    keyed = [F.col(f"`{n}`") for n in names]
    touched: list[DataFrame] = []
    event_keys = events.select(*keyed) if events is not None else None
    if event_keys is not None and small:
        event_keys = F.broadcast(event_keys)
    if event_keys is not None:
        touched.append(stored.join(event_keys, same_key(stored, event_keys, names), "left_semi"))
    if dropped and partition_keys:  # every stored row of their partitions, but those just read
        rows = stored.join(partitions(spark, columns, partition_keys, dropped), partition_keys, "left_semi")
        if event_keys is not None:
            rows = rows.join(event_keys, same_key(rows, event_keys, names), "left_anti")
        touched.append(rows)
    if not touched:
        return None
    initial = reduce(DataFrame.unionByName, touched).select(*keyed, stored_event(columns.values).alias("x"),
                                                            stored_cells())
    parts = [initial] if events is None else [events, initial]
    deletes = store.covering(spark, reduce(DataFrame.unionByName, [p.select(*keyed) for p in parts]).distinct(),
                             columns, partition_keys)
    if deletes is not None:
        parts.append(deletes)
    return fold_rows(reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts),
                     columns.keys, columns.values)


def compact(spark: SparkSession, path: str, columns: MirrorColumns, changes: ChangeLog,
            store: TombstoneStore, version: int | None = None) -> int:
    """Fold the table's pending changes as of the changelog's `version` (default: the latest) into
    it with one MERGE, then remove the appends folded; returns the rows upserted or deleted."""
    from delta.tables import DeltaTable

    pending = changes.pending(spark, columns, version)
    if pending is None:
        return 0
    partition_keys = store.partition_keys(spark, pending.dropped)
    # On disk: the pending changes of a long backlog are hundreds of MB deserialized, and held in
    # the 1 GB default heap beside the MERGE's work they ran it out of memory (bench/README.md).
    events = pending.events.persist(StorageLevel.DISK_ONLY) if pending.events is not None else None
    try:
        count = events.count() if events is not None else 0
        bounds = touched_bounds(spark, events, count, pending.dropped, columns, partition_keys)
        target = DeltaTable.forPath(spark, path)
        source = merge_source(spark, target.toDF(), store, events, pending.dropped, columns, partition_keys,
                              events is not None and count <= BROADCAST_KEYS, any_of(bounds))
        changed = (merge(spark, target, source, columns, any_of(bounds, "t."))
                   if source is not None else 0)
    finally:
        if events is not None:
            events.unpersist()
    changes.clear(spark, pending)
    changes.checkpoint(spark)
    return changed


def touched_bounds(spark: SparkSession, events: DataFrame | None, count: int, dropped: list[dict[str, Any]],
                   columns: MirrorColumns, partition_keys: list[str]) -> list[list[Bound]]:
    """The bounds (`mirror.keys`) of the keys a compaction touches: those of the pending changes
    (`count` of them), and the partitions of the pending range / partition deletes."""
    found = []
    if events is not None:
        found.append(key_bounds(events.select(*[F.col(f"`{n}`") for n in columns.key_names]), count))
    if dropped and partition_keys:
        found.append(key_bounds(partitions(spark, columns, partition_keys, dropped), len(dropped)))
    return found


def merge(spark: SparkSession, target: Any, source: DataFrame, columns: MirrorColumns,
          scope: Column | None = None) -> int:
    """One MERGE on the key columns (null-safe: a static row's clustering columns are null);
    returns the rows it updated, inserted or deleted. Delta materializes the source once, so the
    fold runs once although the MERGE reads its source twice. `scope`: a filter on the target
    (`t.`) that every source key meets, with which Delta skips files in its search of the rows to
    rewrite."""
    names = [c.name for c in columns.columns] + list(HIDDEN)
    condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in columns.key_names)
    on = condition if scope is None else F.expr(condition) & scope
    return merge_actions(spark, target, source, on, {f"`{n}`": f"s.`{n}`" for n in names}, None, None)
