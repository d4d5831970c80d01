"""The mirror's exact current state for Spark readers: the Delta table with its pending changes
folded in (merge-on-read), `current_state(spark, root, keyspace, table)`.

The rows of the keys the pending changes touch (and of the partitions of pending range / partition
deletes) are folded as the next compaction will fold them; every other row is read as stored. A
reader outside Spark (delta-rs, DuckDB, Trino on the Delta table) sees the state at the last
compaction (docs/spark.md, "Merge-on-read").

A session that reads a table's view again folds only what was appended since its last read: it
keeps the folded rows of that read (per table, until the table changes: a compaction) and folds
the new appends' changes on top of them, as a compaction at that read and another now would. So
the cost of polling the view follows the changes since the last poll, not every pending change.
A new range / partition delete, a compaction, or a changelog of an earlier release folds every
pending change again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import orjson
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bridge.spark.fold.delta_tables import columns_from_delta, latest_version
from bridge.spark.fold.events import ACTION
from bridge.spark.fold.frames import MirrorColumns, same_key
from bridge.spark.fold.tombstones import TombstoneStore, tombstone_path
from bridge.spark.mirror.changelog import ChangeLog, Pending, changes_path
from bridge.spark.mirror.compaction import BROADCAST_KEYS, merge_source

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FoldedPending:
    """A read's folded rows (`merge_source`'s, checkpointed) of the appends it held, on the table
    as of `table_version`."""

    table_version: int
    columns: MirrorColumns
    appends: frozenset[str]
    dropped: tuple[str, ...]  # the pending range / partition deletes' keys, as JSON
    source: DataFrame


_folded: dict[tuple[str, str], FoldedPending] = {}  # per (Spark application, table path)
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
    pending = None if version is None else changes.pending(spark, columns, version)
    rows = stored
    if pending is not None and table_version is not None:
        source = _folded_source(spark, root, (keyspace, table), stored, table_version, columns, changes, pending)
        if source is not None:
            names = columns.key_names
            keys = source.select(*[F.col(f"`{n}`") for n in names])
            small = pending.changes <= BROADCAST_KEYS
            kept = stored.join(F.broadcast(keys) if small else keys, same_key(stored, keys, names), "left_anti")
            rows = kept.unionByName(source.where(F.col(ACTION) == "upsert").drop(ACTION))
    if bookkeeping:
        return rows
    return rows.select(*[F.col(f"`{c.name}`") for c in columns.columns])


def _folded_source(spark: SparkSession, root: str, table: tuple[str, str], stored: DataFrame, table_version: int,
                   columns: MirrorColumns, changes: ChangeLog, pending: Pending) -> DataFrame | None:
    """The folded rows of the keys the pending changes touch (with `_cdc_action`), checkpointed:
    the changes appended since this session's last read folded onto that read's rows, else every
    pending change folded onto the stored rows."""
    path = f"{root}/{table[0]}/{table[1]}"
    cache_key = (spark.sparkContext.applicationId, path)
    appends = frozenset(a for a in pending.appends if a is not None)
    dropped = tuple(sorted(orjson.dumps(d["key"], option=orjson.OPT_SORT_KEYS).decode() for d in pending.dropped))
    with _folded_lock:
        last = _folded.get(cache_key)
    store = TombstoneStore(tombstone_path(root, *table))
    partition_keys = store.partition_keys(spark, pending.dropped)
    source: DataFrame | None
    if (last is not None and last.table_version == table_version and last.columns == columns
            and last.dropped == dropped and None not in pending.appends and last.appends <= appends):
        new = appends - last.appends
        how = "since the last read" if new else "unchanged"
        source = last.source if not new else _fold_onto(
            spark, last.source, stored, store, changes.events(spark, columns, pending.version, new), columns,
            partition_keys, pending.changes <= BROADCAST_KEYS)
    else:
        how = "every pending change"
        source = merge_source(spark, stored, store, pending.events, pending.dropped, columns, partition_keys,
                              pending.changes <= BROADCAST_KEYS)
        if source is not None:
            source = source.localCheckpoint()  # folded once, read by both sides of the union
    with _folded_lock:
        if source is None or None in pending.appends:
            _folded.pop(cache_key, None)
        else:
            _folded[cache_key] = FoldedPending(table_version, columns, appends, dropped, source)
    log.debug("mirror view folded", table=path, how=how, changelog_version=pending.version,
              table_version=table_version)
    return source


def _fold_onto(spark: SparkSession, folded: DataFrame, stored: DataFrame, store: TombstoneStore, events: DataFrame,
               columns: MirrorColumns, partition_keys: list[str], small: bool) -> DataFrame:
    """`folded` (a read's folded rows) with `events` folded onto them: each key's base is its
    folded row if it has one (a deleted row's keeps its position), else its stored row. A key
    whose new changes change nothing keeps its folded row. `small`: every pending change's key
    is broadcast (`merge_source`)."""
    names = columns.key_names
    keyed = [F.col(f"`{n}`") for n in names]

    def keys_of(frame: DataFrame) -> DataFrame:
        keys = frame.select(*keyed)
        return F.broadcast(keys) if small else keys

    event_keys, folded_keys = keys_of(events), keys_of(folded)
    # the stored rows of the new changes' keys first: the table is then scanned once, not joined whole
    touched = stored.join(event_keys, same_key(stored, event_keys, names), "left_semi")
    base = folded.drop(ACTION).unionByName(touched.join(folded_keys, same_key(touched, folded_keys, names),
                                                        "left_anti"))
    fresh = merge_source(spark, base, store, events, [], columns, partition_keys, small)
    if fresh is None:
        return folded
    fresh = fresh.localCheckpoint()
    fresh_keys = keys_of(fresh)
    kept = folded.join(fresh_keys, same_key(folded, fresh_keys, names), "left_anti")
    return kept.unionByName(fresh).localCheckpoint()
