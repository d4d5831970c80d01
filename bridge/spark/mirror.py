"""The current-state mirror: one Delta table per source table, kept equal to the ScyllaDB table by a
`foreachBatch` MERGE of each micro-batch.

Per micro-batch and table: the changes are grouped by primary key (as JSON, in the Connect
representation), range / partition deletes from the dropped-changes topic by partition key; the
stored rows those touch are read back; the pure fold (`bridge.spark.fold`) computes each row's
new state; one MERGE writes upserts and deletes. Bookkeeping columns `_cdc_marker`,
`_cdc_ts_us`, `_cdc_offset` make replays idempotent (the fold skips changes at or before a row's
position), and the MERGE also carries Delta's idempotent-write marker (`txnAppId` = job name and
table, `txnVersion` = batch id), so a micro-batch re-run after a restart commits nothing twice.

Column roles are kept in the Delta schema's field metadata (`cdc.role`, `cdc.collection`,
`cdc.elements`, `cdc.logical`), so a batch holding only a range delete knows the table.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import structlog
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.decode import Group, ValueFormat, decode, prepare
from bridge.spark.errors import BadEnvelopeError
from bridge.spark.fold import HIDDEN, fold
from bridge.spark.mirror_frames import JSON_OPTIONS, MirrorColumns, change_events, from_connect, stored_rows
from bridge.spark.mirror_tombstones import TombstoneStore
from bridge.spark.shape import ColumnShape

log = structlog.get_logger(__name__)
ACTION = "_cdc_action"
FOLD_RESULT = "struct<action:string,row:string,ignored:int>"


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


def fold_udf(columns: MirrorColumns) -> Callable[..., Column]:
    spec = columns.fold_spec()

    def apply(row: str | None, events: list[str] | None, dropped: list[str] | None) -> tuple[str, str | None, int]:
        stored = orjson.loads(row) if row else None
        changes = [orjson.loads(e) for e in events or []] + [orjson.loads(d) for d in dropped or []]
        result = fold(spec, stored, changes)
        text = orjson.dumps(result.row).decode() if result.row is not None else None
        return result.action, text, result.unapplied_list_removals

    return F.udf(apply, FOLD_RESULT)


class MirrorWriter:
    """The `foreachBatch` function of `cdc-bridge spark mirror`."""

    def __init__(self, root: str, name: str, value_format: ValueFormat,
                 avro_decoder: Callable[[DataFrame], Iterator[Group]] | None = None) -> None:
        self.root = root.rstrip("/")
        self.name = name
        self.value_format = value_format
        self.avro_decoder = avro_decoder
        self._columns: dict[str, MirrorColumns] = {}  # per table path, once the Delta table exists
        self._tombstones: dict[str, TombstoneStore] = {}

    def path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/{keyspace}/{table}"

    def tombstone_path(self, keyspace: str, table: str) -> str:
        return f"{self.root}/_cdc_dropped/{keyspace}/{table}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = prepare(batch, self.value_format).persist()
        try:
            groups = decode(batch, self.value_format, self.avro_decoder)
            tables: dict[tuple[str, str], list[Group]] = defaultdict(list)
            for group in groups:
                if group.kind == "envelope":
                    tables[group.keyspace_table].append(group)
            dropped = self._dropped(groups)
            for table in sorted(set(tables) | set(dropped)):
                table_started = time.monotonic()
                changed = self.apply(batch.sparkSession, table, tables.get(table, []), dropped.get(table, []),
                                     batch_id)
                log.info("micro-batch mirrored", keyspace=table[0], table=table[1], batch_id=batch_id,
                         rows_changed=changed, seconds=round(time.monotonic() - table_started, 2))
        finally:
            batch.unpersist()
        log.info("micro-batch done", batch_id=batch_id, seconds=round(time.monotonic() - started, 2))

    def _dropped(self, groups: list[Group]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Range and partition deletes by table, as the fold's dicts (few: collected)."""
        found: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for group in groups:
            if group.kind != "dropped":
                continue
            rows = group.frame.select("key", "offset", F.to_json("env", JSON_OPTIONS).alias("env")).collect()
            for row in rows:
                env = orjson.loads(row["env"])
                key = self._key(row["key"])
                source = env["source"]
                found[(source["keyspace_name"], source["table_name"])].append({
                    "kind": env["kind"], "ts": source["ts_us"], "rank": 1, "offset": row["offset"], "key": key,
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
        if known is None and DeltaTable.isDeltaTable(spark, path):
            known = columns_from_delta(DeltaTable.forPath(spark, path).toDF().schema)
        columns = known or MirrorColumns(())
        for group in groups:
            assert group.shape is not None
            columns = columns.merged_with(group.shape.columns)
        if not columns.columns:
            return 0  # dropped changes of a table the mirror has never seen: nothing to delete
        if known is None or len(columns.columns) != len(known.columns):
            self._ensure_table(spark, path, columns, known is not None)
        self._columns[path] = columns
        app_id = f"{self.name}:{table[0]}.{table[1]}"
        store = self._tombstones.setdefault(path, TombstoneStore(self.tombstone_path(*table)))
        partition_keys = store.partition_keys(spark, dropped)
        new_dropped = store.add(spark, columns, partition_keys, dropped, f"{app_id}:dropped", batch_id) \
            if dropped else None
        target = DeltaTable.forPath(spark, path)
        changes = self._changes(groups, columns, partition_keys)
        if changes is not None:
            # Read by the stored-row lookup, the join and the deletes' partitions: each would
            # otherwise parse the micro-batch again (the optimizer prunes each use differently).
            changes = changes.persist()
        try:
            return self._fold_and_merge(spark, target, store, changes, new_dropped, columns, partition_keys,
                                        app_id, batch_id)
        finally:
            if changes is not None:
                changes.unpersist()

    def _fold_and_merge(self, spark: SparkSession, target: Any, store: TombstoneStore, changes: DataFrame | None,
                        new_dropped: DataFrame | None, columns: MirrorColumns, partition_keys: list[str],
                        app_id: str, batch_id: int) -> int:
        stored = stored_rows(target.toDF(), columns, partition_keys)
        keys = [stored.join(changes.select("key_json"), "key_json", "left_semi")] if changes is not None else []
        if new_dropped is not None:
            keys.append(stored.join(new_dropped.select("pk_json").distinct(), "pk_json", "left_semi"))
        if not keys:
            return 0
        relevant = keys[0] if len(keys) == 1 else keys[0].unionByName(keys[1]).dropDuplicates(["key_json"])
        if changes is not None:
            joined = changes.join(relevant.withColumnRenamed("pk_json", "stored_pk"), "key_json", "full_outer")
            joined = joined.select("key_json", F.coalesce("pk_json", "stored_pk").alias("pk_json"), "events", "row")
        else:
            joined = relevant.withColumn("events", F.lit(None).cast("array<string>"))
        deletes = store.for_partitions(spark, joined) if partition_keys else None
        if deletes is not None:
            joined = joined.join(deletes, "pk_json", "left")
        else:
            joined = joined.withColumn("dropped", F.lit(None).cast("array<string>"))
        folded = joined.select("key_json", fold_udf(columns)("row", "events", "dropped").alias("r"))
        # Computed once (the MERGE would evaluate its source twice: to find files, then to write).
        source = self._merge_source(folded.where(F.col("r.action") != "none"), columns).persist()
        try:
            changed = source.count()
            if changed:
                self._merge(spark, target, source, columns, app_id, batch_id)
        finally:
            source.unpersist()
        return changed

    def _changes(self, groups: list[Group], columns: MirrorColumns, partition_keys: list[str]) -> DataFrame | None:
        frames = [change_events(g, columns, partition_keys) for g in groups]
        if not frames:
            return None
        events = frames[0]
        for frame in frames[1:]:
            events = events.unionByName(frame)
        return events.groupBy("key_json").agg(F.first("pk_json").alias("pk_json"),
                                               F.collect_list("event").alias("events"))

    def _merge_source(self, folded: DataFrame, columns: MirrorColumns) -> DataFrame:
        key_type = T.StructType([T.StructField(c.name, c.spark_type) for c in columns.keys])
        parsed = folded.select(F.from_json("key_json", key_type).alias("k"),
                               F.from_json("r.row", columns.connect_type()).alias("v"),
                               F.col("r.action").alias(ACTION))
        selected = [from_connect(c, parsed["k"][c.name] if c.is_key else parsed["v"][c.name]).alias(c.name)
                    for c in columns.columns]
        selected += [parsed["v"][name].alias(name) for name in HIDDEN]
        return parsed.select(*selected, ACTION)

    def _ensure_table(self, spark: SparkSession, path: str, columns: MirrorColumns, exists: bool) -> None:
        schema = delta_schema(columns)
        if exists:
            from delta.tables import DeltaTable

            current = set(DeltaTable.forPath(spark, path).toDF().columns)
            if {f.name for f in schema.fields} <= current:
                return
        writer = spark.createDataFrame([], schema).write.format("delta").mode("append")
        writer.option("mergeSchema", "true").save(path)
        log.info("mirror table schema written", path=path, columns=[f.name for f in schema.fields])

    def _merge(self, spark: SparkSession, target: Any, source: DataFrame, columns: MirrorColumns, app_id: str,
               batch_id: int) -> None:
        names = [c.name for c in columns.columns] + list(HIDDEN)
        condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in columns.key_names)
        assignments = {f"`{n}`": f"s.`{n}`" for n in names}
        conf = spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            (target.alias("t").merge(source.alias("s"), condition)
             .whenMatchedDelete(condition=f"s.{ACTION} = 'delete'")
             .whenMatchedUpdate(condition=f"s.{ACTION} = 'upsert'", set=assignments)
             .whenNotMatchedInsert(condition=f"s.{ACTION} = 'upsert'", values=assignments)
             .execute())
        finally:
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
