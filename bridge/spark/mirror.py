"""The current-state mirror: one Delta table per source table, kept equal to the ScyllaDB table by a
`foreachBatch` MERGE of each micro-batch.

Per micro-batch and table, in Spark SQL only (no Python per row): the changes become typed events
(`mirror_frames`), the stored rows they touch (and those of partitions with new range /
partition deletes) are read back, the stored deletes covering those keys are joined in
(`mirror_tombstones`), each key's events are folded by one `aggregate` (`mirror_fold`, the
semantics of the reference `bridge.spark.fold`), and one MERGE on the key columns writes upserts
and deletes into a table with deletion vectors (a small batch marks the rows it replaces instead
of rewriting their files). Bookkeeping columns `_cdc_marker`,
`_cdc_ts_us`, `_cdc_rank`, `_cdc_offset` make replays idempotent (the fold skips changes at or
before a row's position), and the MERGE also carries Delta's idempotent-write marker (`txnAppId`
= job name and table, `txnVersion` = batch id), so a micro-batch re-run after a restart commits
nothing twice.

Column roles are kept in the Delta schema's field metadata (`cdc.role`, `cdc.collection`,
`cdc.elements`, `cdc.logical`), so a batch holding only a range delete knows the table.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from functools import reduce
from typing import Any

import orjson
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.cdc_format import CdcFormat
from bridge.spark.decode import Group, ValueFormat, decode, prepare
from bridge.spark.errors import BadEnvelopeError
from bridge.spark.fold import HIDDEN
from bridge.spark.mirror_advanced import AdvancedEvents, GroupKey
from bridge.spark.mirror_fold import ACTION, fold_rows, stored_event
from bridge.spark.mirror_frames import JSON_OPTIONS, MirrorColumns, change_events, from_connect, same_key
from bridge.spark.mirror_tombstones import TombstoneStore
from bridge.spark.shape import ColumnShape

log = structlog.get_logger(__name__)
# Deletion vectors: a MERGE marks the rows it replaces or deletes in a small file beside the data
# file instead of rewriting that file, so a micro-batch writes about its own rows (docs/spark.md).
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "true"}
# Changes of a table in one micro-batch up to which their keys are broadcast (a few MB; the
# default cap is 100,000 records per micro-batch over all tables).
BROADCAST_KEYS = 200_000


def _metadata(column: ColumnShape) -> dict[str, Any]:
    return {"cdc.role": "key" if column.is_key else "value", "cdc.collection": column.collection or "",
            "cdc.elements": column.has_elements, "cdc.logical": column.logical or ""}


def delta_schema(columns: MirrorColumns) -> T.StructType:
    fields = [T.StructField(c.name, c.mirror_type(), True, _metadata(c)) for c in columns.columns]
    fields += [T.StructField(f.name, f.dataType, True) for f in columns.delta_type().fields if f.name in HIDDEN]
    return T.StructType(fields)


def columns_from_delta(schema: T.StructType) -> MirrorColumns:
    found = []
    for field in schema.fields:
        meta = field.metadata or {}
        if field.name in HIDDEN or "cdc.role" not in meta:
            continue
        data_type = field.dataType
        logical = meta.get("cdc.logical") or None
        if logical == "date":
            data_type = T.IntegerType()
        elif logical == "timestamp":
            data_type = T.LongType()
        elif isinstance(data_type, T.MapType):
            data_type = T.ArrayType(T.StructType([T.StructField("key", data_type.keyType),
                                                  T.StructField("value", data_type.valueType)]))
        found.append(ColumnShape(field.name, meta["cdc.role"] == "key", data_type, logical,
                                 meta.get("cdc.collection") or None, bool(meta.get("cdc.elements"))))
    return MirrorColumns(tuple(found))


def _job_ids(spark: SparkSession) -> list[int]:
    """Ids of the Spark jobs the status tracker still holds (`spark.ui.retainedJobs`, the newest)
    in this thread's job group (the streaming query's)."""
    context = spark.sparkContext
    return list(context.statusTracker().getJobIdsForGroup(context.getLocalProperty("spark.jobGroup.id")))


class MirrorWriter:
    """The `foreachBatch` function of `cdc-bridge spark mirror`."""

    def __init__(self, root: str, name: str, value_format: ValueFormat,
                 avro_decoder: Callable[[DataFrame], Iterator[Group]] | None = None, cdc: CdcFormat | None = None,
                 registry_url: str | None = None) -> None:
        self.root = root.rstrip("/")
        self.name = name
        self.value_format = value_format
        self.avro_decoder = avro_decoder
        self._columns: dict[str, MirrorColumns] = {}  # per table path, once the Delta table exists
        self._tombstones: dict[str, TombstoneStore] = {}
        self.cdc = cdc or CdcFormat()
        # advanced-format envelopes (plain values, after = the post-image): their key and events
        self._advanced = AdvancedEvents(self.cdc, value_format, registry_url) if self.cdc.advanced else None
        self._keys: dict[int, GroupKey] = {}  # per group of the micro-batch (id), advanced only

    def path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/{keyspace}/{table}"

    def tombstone_path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/_cdc_dropped/{keyspace}/{table}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch.sparkSession
        last_job = max(_job_ids(spark), default=-1)
        spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # a map put twice in one change: the last
        # The MERGE keeps its folded source (about the batch's keys' rows) in memory, spilling to
        # disk, instead of Delta's default of writing it to disk first.
        spark.conf.set("spark.databricks.delta.merge.materializeSource.rddStorageLevel", "MEMORY_AND_DISK")
        batch = prepare(batch, self.value_format, payload_only=True).persist()
        try:
            groups = decode(batch, self.value_format, self.avro_decoder, advanced=self.cdc.advanced)
            tables: dict[tuple[str, str], list[Group]] = defaultdict(list)
            for group in groups:
                if group.kind == "envelope":
                    tables[group.keyspace_table].append(group)
            dropped = self._dropped(groups)
            for table in sorted(set(tables) | set(dropped)):
                table_started = time.monotonic()
                changed = self.apply(spark, table, tables.get(table, []), dropped.get(table, []),
                                     batch_id)
                log.info("micro-batch mirrored", keyspace=table[0], table=table[1], batch_id=batch_id,
                         rows_changed=changed, seconds=round(time.monotonic() - table_started, 2))
        finally:
            self._keys.clear()
            batch.unpersist()
        log.info("micro-batch done", batch_id=batch_id, seconds=round(time.monotonic() - started, 2),
                 spark_jobs=sum(1 for job in _job_ids(spark) if job > last_job))

    def _dropped(self, groups: list[Group]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Range and partition deletes by table, as the fold's dicts (few: collected)."""
        found: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        frames = [g.frame.select("key", "offset", F.to_json("env", JSON_OPTIONS).alias("env"))
                  for g in groups if g.kind == "dropped"]
        if not frames:
            return found
        for row in reduce(DataFrame.unionByName, frames).collect():  # one job for every table's
            env = orjson.loads(row["env"])
            key = self._key(row["key"])
            source = env["source"]
            found[(source["keyspace_name"], source["table_name"])].append({
                "kind": env["kind"], "ts": source["ts_us"], "offset": row["offset"], "key": key,
                "start": env.get("start"), "start_inclusive": env.get("start_inclusive"),
                "end": env.get("end"), "end_inclusive": env.get("end_inclusive")})
        return found

    def _key(self, raw: bytes | None) -> dict[str, Any]:
        if not raw:
            return {}
        if self.value_format is ValueFormat.AVRO:
            decode_key = getattr(self.avro_decoder, "decode_key", None)
            key = decode_key(raw) if decode_key is not None else None
        else:
            key = orjson.loads(bytes(raw))
            if isinstance(key, dict) and set(key) == {"schema", "payload"}:
                key = key["payload"]
        if not isinstance(key, dict):
            raise BadEnvelopeError(f"dropped change with a key that is not a struct: {raw!r}")
        return key

    def apply(self, spark: SparkSession, table: tuple[str, str], groups: list[Group],
              dropped: list[dict[str, Any]], batch_id: int) -> int:
        """Mirror one table's changes of the micro-batch; returns the rows upserted or deleted."""
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
            columns = columns.merged_with(self._columns_of(group))
        if not columns.columns:
            return 0  # dropped changes of a table the mirror has never seen: nothing to delete
        if known is None or outdated or len(columns.columns) != len(known.columns):
            self._ensure_table(spark, path, columns, known is not None)
        self._columns[path] = columns
        app_id = f"{self.name}:{table[0]}.{table[1]}"
        store = self._tombstones.setdefault(path, TombstoneStore(self.tombstone_path(*table)))
        partition_keys = store.partition_keys(spark, dropped)
        if dropped:
            store.add(spark, columns, partition_keys, dropped, f"{app_id}:dropped", batch_id)
        target = DeltaTable.forPath(spark, path)
        # The events are read by the stored-row lookup, the union and the deletes' keys: cached (as
        # the MERGE's first job computes them), so the micro-batch's JSON is parsed once.
        events = reduce(DataFrame.unionByName, [self._events(g, columns) for g in groups]).persist() \
            if groups else None
        try:
            # Counting fills the cache (the next jobs read it) and says whether the batch's keys
            # can be broadcast to the stored-row lookup (below).
            small = events is not None and events.count() <= BROADCAST_KEYS
            source = self._merge_source(spark, target.toDF(), store, events, dropped, columns, partition_keys,
                                        small)
            return self._merge(spark, target, source, columns, app_id, batch_id) if source is not None else 0
        finally:
            if events is not None:
                events.unpersist()

    def _columns_of(self, group: Group) -> tuple[ColumnShape, ...]:
        assert group.shape is not None
        if self._advanced is None:
            return group.shape.columns
        key = self._keys.get(id(group))
        if key is None:
            key = self._keys[id(group)] = self._advanced.key_of(group)
        return self._advanced.columns_of(group, key)

    def _events(self, group: Group, columns: MirrorColumns) -> DataFrame:
        if self._advanced is None:
            return change_events(group, columns)
        return self._advanced.events(group, columns, self._keys[id(group)])

    def _merge_source(self, spark: SparkSession, stored: DataFrame, store: TombstoneStore, events: DataFrame | None,
                      dropped: list[dict[str, Any]], columns: MirrorColumns,
                      partition_keys: list[str], small: bool) -> DataFrame | None:
        """The folded rows to write: key columns, values, bookkeeping and `_cdc_action`. `small`:
        the micro-batch's keys are broadcast to the lookups of the stored rows, which then scan
        the mirror once instead of shuffling and sorting all of it (Spark cannot size the
        not-yet-cached events and would pick a sort-merge join: a cost that grows with the table)."""
        names = columns.key_names
        keyed = [F.col(f"`{n}`") for n in names]
        touched: list[DataFrame] = []
        event_keys = events.select(*keyed) if events is not None else None
        if event_keys is not None and small:
            event_keys = F.broadcast(event_keys)
        if event_keys is not None:
            touched.append(stored.join(event_keys, same_key(stored, event_keys, names), "left_semi"))
        if dropped and partition_keys:  # every stored row of their partitions, but those just read
            partitions = self._partitions(spark, columns, partition_keys, dropped)
            rows = stored.join(partitions, partition_keys, "left_semi")
            if event_keys is not None:
                rows = rows.join(event_keys, same_key(rows, event_keys, names), "left_anti")
            touched.append(rows)
        if not touched:
            return None
        initial = reduce(DataFrame.unionByName, touched).select(*keyed, stored_event(columns.values).alias("x"))
        parts = [initial] if events is None else [events, initial]
        deletes = store.covering(spark, reduce(DataFrame.unionByName, [p.select(*keyed) for p in parts]).distinct(),
                                 columns, partition_keys)
        if deletes is not None:
            parts.append(deletes)
        return fold_rows(reduce(DataFrame.unionByName, parts), columns.keys, columns.values)

    def _partitions(self, spark: SparkSession, columns: MirrorColumns, partition_keys: list[str],
                    dropped: list[dict[str, Any]]) -> DataFrame:
        """The partitions of this micro-batch's deletes (a few: built on the driver), Delta types."""
        pk_type = T.StructType([T.StructField(n, columns.column(n).spark_type) for n in partition_keys])
        texts = sorted({orjson.dumps({n: d["key"].get(n) for n in partition_keys}).decode() for d in dropped})
        parsed = spark.createDataFrame([(t,) for t in texts], "pk string").select(
            F.from_json("pk", pk_type).alias("p"))
        return parsed.select(*[from_connect(columns.column(n), F.col("p")[n]).alias(n) for n in partition_keys])

    def _ensure_table(self, spark: SparkSession, path: str, columns: MirrorColumns, exists: bool) -> None:
        schema = delta_schema(columns)
        if exists:
            from delta.tables import DeltaTable

            current = set(DeltaTable.forPath(spark, path).toDF().columns)
            if {f.name for f in schema.fields} <= current:
                return
            writer = spark.createDataFrame([], schema).write.format("delta").mode("append")
            writer.option("mergeSchema", "true").save(path)
        else:
            writer = spark.createDataFrame([], schema).write.format("delta").mode("append")
            for key, value in TABLE_PROPERTIES.items():
                writer = writer.option(key, value)
            writer.save(path)
        log.info("mirror table schema written", path=path, columns=[f.name for f in schema.fields])

    def _merge(self, spark: SparkSession, target: Any, source: DataFrame, columns: MirrorColumns, app_id: str,
               batch_id: int) -> int:
        """One MERGE on the key columns; returns the rows it updated, inserted or deleted. Delta
        materializes the source once (its `merge.materializeSource=auto`: the source is not a
        Delta table alone), so the fold runs once although the MERGE reads its source twice."""
        names = [c.name for c in columns.columns] + list(HIDDEN)
        condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in columns.key_names)
        assignments = {f"`{n}`": f"s.`{n}`" for n in names}
        conf = spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            metrics = (target.alias("t").merge(source.alias("s"), condition)
                       .whenMatchedDelete(condition=f"s.{ACTION} = 'delete'")
                       .whenMatchedUpdate(condition=f"s.{ACTION} = 'upsert'", set=assignments)
                       .whenNotMatchedInsert(condition=f"s.{ACTION} = 'upsert'", values=assignments)
                       .execute())
        finally:
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
        row = metrics.first() if metrics is not None else None
        return int(row["num_affected_rows"]) if row is not None else 0
