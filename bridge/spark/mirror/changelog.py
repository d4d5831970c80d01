"""A mirror table's changelog: the typed changes not yet folded into the table (merge-on-read).

Each micro-batch appends, without reading the mirror, its changes of the table to the Delta table
`<root>/_cdc_changes/<keyspace>/<table>`: one row per data change (the key columns in the mirror's
types and `x`, the fold's event, `bridge.spark.fold.events.data_event`) and one row per range /
partition delete (`_cdc_drop`: the delete's key as JSON, the key columns and `x` null: a
compaction reads the stored rows of its partition back, the delete itself lives in the tombstone
store), each with `_cdc_batch`, the micro-batch's id, and `_cdc_append`, the append's own name
(`<append name>:batch id`), in a folder per batch id (the table is partitioned by `_cdc_batch`):
a compaction's clean-up then deletes whole files of the batches it folded, and Delta sees that
an append committed meanwhile, in a new batch's folder, is no conflict.

Idempotence: each append names itself in its commit (`userMetadata`, `<append name>:<batch id>`).
Only the first micro-batch of a process can be one a crash left half done (Spark runs it again
at start), so the first append of a process reads the changelog's recent commits for the last
batch id of its name and skips what was appended already; later appends in the process are new
by construction. That first append also carries Delta's idempotent-write marker (`txnAppId`,
`txnVersion`) for changelogs an earlier release wrote with it alone: Delta's check of the marker
costs a job over the table's state, which every append paid before (about 1.7 s of a
micro-batch at load 8). A compaction (`mirror.compaction`) folds what one
version of the changelog holds into the table and then deletes exactly those appends: appends
committed meanwhile (a compaction beside the streaming query, or `cdc-bridge spark compact`)
stay pending.

Checkpoints: Delta writes one of a table's log every 10 commits, in the commit that reaches it,
and an append paid it (1.3-4.4 s quiet, 5-20 s beside a compaction at load: the micro-batch's
freshness). The changelog is created with a checkpoint interval of `CHECKPOINT_INTERVAL` instead,
and the compaction, off the path of fresh data, checkpoints it once 10 commits have come since
the last checkpoint (`checkpoint`), so readers replay as few commits as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.fold.delta_tables import NO_STATISTICS, checkpoint, latest_version, log_versions
from bridge.spark.fold.events import event_type
from bridge.spark.fold.frames import MirrorColumns

DROP = "_cdc_drop"
BATCH = "_cdc_batch"
APPEND = "_cdc_append"
CLEAR_ATTEMPTS = 20  # changelogs of an earlier release are unpartitioned: an append can conflict
# The commits searched for a process's first append: only compactions commit between two appends
# of one query (one per 10 appends by default), so its last append is among the latest few.
RECENT_COMMITS = 200
CHECKPOINT_EVERY = 10  # commits, Delta's default interval, which `ChangeLog.checkpoint` keeps
# An inline checkpoint only for a changelog that no compaction checkpoints (one every 100 appends).
CHECKPOINT_INTERVAL = 100
CHANGELOG_PROPERTIES = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL), **NO_STATISTICS}  # a new changelog's


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
    changes: int = 0  # the data changes `events` holds
    appends: tuple[str | None, ...] = ()
    batches: tuple[int, ...] = ()  # the `_cdc_batch` values of those appends (empty: some unknown)


class ChangeLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self._last: dict[str, int] = {}  # per append name: the last batch id appended (this process: known)
        self.commits = 0  # appends committed by this process

    def exists(self, spark: SparkSession) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(spark, self.path))

    def append(self, spark: SparkSession, columns: MirrorColumns, events: DataFrame | None,
               dropped: list[dict[str, Any]], app_id: str, batch_id: int, changes: int | None = None, *,
               one_file: bool = False) -> int:
        """Append a micro-batch's changes of the table (once per batch id); returns the rows
        written. `changes`: how many `events` holds, when the caller knows (else the write's job
        counts them, as it writes them). `one_file`: written by one task, as one file (a small
        micro-batch)."""
        if events is None and not dropped:
            return 0
        last = self._last.get(app_id)
        first = last is None  # kept until an append of this name succeeds in this process
        exists = True
        if last is None:
            exists = self.exists(spark)
            last = self._last_appended(spark, app_id) if exists else -1
        if batch_id <= last:
            self._last[app_id] = last
            return 0  # a micro-batch run again after a crash: appended by the process before
        keyed = [F.col(f"`{n}`") for n in columns.key_names]
        parts: list[DataFrame] = []
        written = 0
        counted = None
        if events is not None:
            if changes is None:  # counted by the write's own job
                counted = Observation()
                events = events.observe(counted, F.count(F.lit(1)).alias("n"))
            parts.append(events.select(*keyed, "x", F.lit(None).cast("string").alias(DROP)))
        if dropped:
            texts = [(orjson.dumps(d["key"]).decode(),) for d in dropped]
            frame = spark.createDataFrame(texts, f"{DROP} string")
            nulls = [F.lit(None).cast(c.mirror_type()).alias(c.name) for c in columns.keys]
            parts.append(frame.select(*nulls, F.lit(None).cast(event_type(columns.values)).alias("x"), DROP))
            written += len(dropped)
        frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        if one_file:
            frame = frame.coalesce(1)
        frame = frame.withColumn(BATCH, F.lit(batch_id).cast("long")).withColumn(APPEND, F.lit(f"{app_id}:{batch_id}"))
        writer = (frame.write.format("delta").mode("append").option("mergeSchema", "true")
                  .option("userMetadata", f"{app_id}:{batch_id}"))
        if first:
            writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
            if not exists:
                writer = writer.partitionBy(BATCH).options(**CHANGELOG_PROPERTIES)
        writer.save(self.path)
        self.commits += 1
        self._last[app_id] = batch_id
        if events is not None:
            written += int(counted.get["n"]) if counted is not None else changes or 0
        return written

    def _last_appended(self, spark: SparkSession, app_id: str) -> int:
        """The last batch id an append of this name committed, by the recent commits' names (-1: none)."""
        from delta.tables import DeltaTable

        prefix = f"{app_id}:"
        named = DeltaTable.forPath(spark, self.path).history(RECENT_COMMITS).select("userMetadata").collect()
        batches = [int(row[0][len(prefix):]) for row in named if row[0] and row[0].startswith(prefix)]
        return max(batches, default=-1)

    def version(self, spark: SparkSession) -> int | None:
        """The changelog's latest version, None when there is no changelog."""
        return latest_version(spark, self.path)

    def checkpoint(self, spark: SparkSession) -> bool:
        """Checkpoint the changelog when `CHECKPOINT_EVERY` commits have come since its last
        checkpoint (a compaction's, beside the appends); returns whether it did."""
        latest, checkpointed = log_versions(spark, self.path)
        if latest is None or latest - (-1 if checkpointed is None else checkpointed) < CHECKPOINT_EVERY:
            return False
        checkpoint(spark, self.path)
        return True

    def pending(self, spark: SparkSession, columns: MirrorColumns, version: int | None = None) -> Pending | None:
        """The changes not yet folded, as of `version` (default: the latest), None when there are none."""
        if version is None:
            version = self.version(spark)
            if version is None:
                return None
        frame = spark.read.format("delta").option("versionAsOf", version).load(self.path)
        if APPEND not in frame.columns:
            frame = frame.withColumn(APPEND, F.lit(None).cast("string"))
        # one job over three small columns: the appends held, the range / partition deletes' keys,
        # and the data changes' count
        listed = frame.groupBy(APPEND, BATCH, DROP).agg(F.count(F.lit(1)).alias("rows")).collect()
        if not listed:
            return None
        dropped = [{"key": orjson.loads(r[DROP])} for r in listed if r[DROP] is not None]
        x_type = frame.schema["x"].dataType
        keyed = [F.col(f"`{n}`") for n in columns.key_names]
        events = frame.where(F.col("x").isNotNull()).select(*keyed, conform_event(F.col("x"), x_type, columns)
                                                           .alias("x"))
        return Pending(events, dropped, version, sum(r["rows"] for r in listed if r[DROP] is None),
                       tuple(sorted({r[APPEND] for r in listed}, key=str)),
                       () if any(r[BATCH] is None for r in listed) else tuple(sorted({r[BATCH] for r in listed})))

    def clear(self, spark: SparkSession, folded: Pending) -> None:
        """Remove the appends `folded` holds (after the compaction that folded them): those committed
        since its version stay pending. In a changelog of an earlier release (unpartitioned) Delta
        takes an append committed while the delete ran for a conflict, so the delete is tried
        again: it is short, and nothing it removes was appended since."""
        from delta.tables import DeltaTable

        named = [a for a in folded.appends if a is not None]
        condition = F.col(APPEND).isin(named) if named else F.lit(False)
        if None in folded.appends:
            condition = condition | F.col(APPEND).isNull()
        if folded.batches:  # their folders first: Delta then checks no other folder for a conflicting append
            condition = F.col(BATCH).isin(list(folded.batches)) & condition
        for attempt in range(CLEAR_ATTEMPTS):
            try:
                DeltaTable.forPath(spark, self.path).delete(condition)
                return
            except Exception as error:
                if "ConcurrentAppend" not in type(error).__name__ or attempt == CLEAR_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
