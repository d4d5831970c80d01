"""A mirror table's changelog: the typed changes not yet folded into the table (merge-on-read).

Each micro-batch appends, without reading the mirror, its changes of the table to the Delta table
`<root>/_cdc_changes/<keyspace>/<table>`: one row per data change (the key columns in the mirror's
types and `x`, the fold's event, `bridge.spark.mirror_fold.data_event`) and one row per range /
partition delete (`_cdc_drop`: the delete's key as JSON, the key columns and `x` null: a
compaction reads the stored rows of its partition back, the delete itself lives in the tombstone
store), each with `_cdc_batch`, the micro-batch's id, and `_cdc_append`, the append's own name
(`txnAppId:batch id`). The append carries Delta's idempotent-write marker (`txnAppId` = the job's
name, table and `:changes`, `txnVersion` = the batch id), so a micro-batch re-run after a crash
appends nothing twice. A compaction (`mirror_compaction`) folds what one version of the changelog
holds into the table and then deletes exactly those appends: appends committed meanwhile (a
compaction beside the streaming query, or `cdc-bridge spark compact`) stay pending.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.mirror_fold import event_type
from bridge.spark.mirror_frames import MirrorColumns

DROP = "_cdc_drop"
BATCH = "_cdc_batch"
APPEND = "_cdc_append"
CLEAR_ATTEMPTS = 20  # a streaming mirror appends every trigger (2 s); a delete takes well under that


def changes_path(root: str, keyspace: str, table: str) -> str:
    return f"{root.rstrip('/')}/_cdc_changes/{keyspace}/{table}"


def conform_event(x: Column, stored: T.DataType, columns: MirrorColumns) -> Column:
    """`x` as read from the changelog in the event type of the table's current columns: a change
    appended before a column was added lacks that column's fields (null: "not touched")."""
    have = set(stored.fieldNames()) if isinstance(stored, T.StructType) else set()
    target = event_type(columns.values)
    return F.struct(*[(x[f.name] if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
                      for f in target.fields])


@dataclass
class Pending:
    """What a changelog holds: the data changes `(key columns..., x)` (None when there are none)
    and the range / partition deletes as the fold's dicts (their `key` alone)."""

    events: DataFrame | None
    dropped: list[dict[str, Any]]
    # the changelog version read and the appends it holds (None: rows of an earlier release without
    # the column), which `clear` removes once they are folded
    version: int = -1
    appends: tuple[str | None, ...] = ()


class ChangeLog:
    def __init__(self, path: str) -> None:
        self.path = path

    def exists(self, spark: SparkSession) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(spark, self.path))

    def append(self, spark: SparkSession, columns: MirrorColumns, events: DataFrame | None,
               dropped: list[dict[str, Any]], app_id: str, batch_id: int, changes: int | None = None) -> int:
        """Append a micro-batch's changes of the table (once per batch id); returns the rows
        written. `changes`: how many `events` holds, when the caller knows (else they are counted:
        the caller caches them)."""
        keyed = [F.col(f"`{n}`") for n in columns.key_names]
        parts: list[DataFrame] = []
        written = 0
        if events is not None:
            written = events.count() if changes is None else changes
            parts.append(events.select(*keyed, "x", F.lit(None).cast("string").alias(DROP)))
        if dropped:
            texts = [(orjson.dumps(d["key"]).decode(),) for d in dropped]
            frame = spark.createDataFrame(texts, f"{DROP} string")
            nulls = [F.lit(None).cast(c.mirror_type()).alias(c.name) for c in columns.keys]
            parts.append(frame.select(*nulls, F.lit(None).cast(event_type(columns.values)).alias("x"), DROP))
            written += len(dropped)
        if not parts:
            return 0
        frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        frame = frame.withColumn(BATCH, F.lit(batch_id).cast("long")).withColumn(APPEND, F.lit(f"{app_id}:{batch_id}"))
        (frame.write.format("delta").mode("append")
         .option("mergeSchema", "true").option("txnAppId", app_id).option("txnVersion", batch_id).save(self.path))
        return written

    def version(self, spark: SparkSession) -> int | None:
        """The changelog's latest version, None when there is no changelog."""
        from delta.tables import DeltaTable

        if not self.exists(spark):
            return None
        return int(DeltaTable.forPath(spark, self.path).history(1).select("version").collect()[0][0])

    def pending(self, spark: SparkSession, columns: MirrorColumns, version: int | None = None) -> Pending | None:
        """The changes not yet folded, as of `version` (default: the latest), None when there are none."""
        if version is None:
            version = self.version(spark)
            if version is None:
                return None
        frame = spark.read.format("delta").option("versionAsOf", version).load(self.path)
        if APPEND not in frame.columns:
            frame = frame.withColumn(APPEND, F.lit(None).cast("string"))
        # one job over two small columns: the range / partition deletes' keys, and the appends held
        listed = frame.select(APPEND, DROP).distinct().collect()
        if not listed:
            return None
        dropped = [{"key": orjson.loads(r[DROP])} for r in listed if r[DROP] is not None]
        x_type = frame.schema["x"].dataType
        keyed = [F.col(f"`{n}`") for n in columns.key_names]
        events = frame.where(F.col("x").isNotNull()).select(*keyed, conform_event(F.col("x"), x_type, columns)
                                                           .alias("x"))
        return Pending(events, dropped, version, tuple(sorted({r[APPEND] for r in listed}, key=str)))

    def clear(self, spark: SparkSession, folded: Pending) -> None:
        """Remove the appends `folded` holds (after the compaction that folded them): those committed
        since its version stay pending. Delta takes an append committed while the delete ran for a
        conflict (an unpartitioned table: it cannot tell the new files do not match), so the delete
        is tried again: it is short, and nothing it removes was appended since."""
        from delta.tables import DeltaTable

        named = [a for a in folded.appends if a is not None]
        condition = F.col(APPEND).isin(named) if named else F.lit(False)
        if None in folded.appends:
            condition = condition | F.col(APPEND).isNull()
        for attempt in range(CLEAR_ATTEMPTS):
            try:
                DeltaTable.forPath(spark, self.path).delete(condition)
                return
            except Exception as error:
                if "ConcurrentAppend" not in type(error).__name__ or attempt == CLEAR_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
