"""The Delta tables the mirror and the history write: their schema (column roles kept in the
field metadata, `cdc.role`, `cdc.collection`, `cdc.elements`, `cdc.logical`), table properties,
the partitions of range / partition deletes, and the MERGE of folded rows (moved here from
`mirror.writer` and `mirror.compaction`, which the history shares)."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.core.shape import ColumnShape
from bridge.spark.fold.events import ACTION
from bridge.spark.fold.frames import MirrorColumns, from_connect
from bridge.spark.fold.reference import HIDDEN

# Deletion vectors: a MERGE marks the rows it replaces or deletes in a small file beside the data
# file instead of rewriting that file, so a micro-batch writes about its own rows (docs/spark.md).
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "true"}
# The properties of a job's own append-only table of changes (the mirror's changelog, the
# history's changes), given on its creation: no column statistics. Nothing reads those tables by a
# column's bounds (they are read whole, or joined with a micro-batch's keys, and cleaned up by
# partition), and collecting them for the event struct's leaves cost up to a tenth of an append's
# write (docs/spark.md, "Where an append's time goes").
NO_STATISTICS = {"delta.dataSkippingNumIndexedCols": "0"}
COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(\..+)?\.parquet$")  # single-part, multi-part or v2
_MARKED_MERGE = threading.Lock()  # one MERGE with an idempotent-write marker at a time (`merge_actions`)


def list_folder(spark: SparkSession, path: str) -> list[tuple[str, bool]] | None:
    """(name, is a folder) of each entry of the folder `path`, None when there is no such folder:
    through Hadoop's file system, so any URI Spark writes to (PySpark has no listing API)."""
    context: Any = spark.sparkContext
    folder = context._jvm.org.apache.hadoop.fs.Path(path)  # noqa: SLF001
    fs = folder.getFileSystem(context._jsc.hadoopConfiguration())  # noqa: SLF001
    if not fs.exists(folder):
        return None
    return [(str(status.getPath().getName()), bool(status.isDirectory())) for status in fs.listStatus(folder)]


def latest_version(spark: SparkSession, path: str) -> int | None:
    """The Delta table's latest version, None when there is no table: the highest commit file in
    its log, by a listing of that folder, where `DeltaTable.history` runs a Spark job."""
    return log_versions(spark, path)[0]


def log_versions(spark: SparkSession, path: str) -> tuple[int | None, int | None]:
    """The Delta table's latest version and that of its latest checkpoint (None: none), by one
    listing of its log."""
    names = [name for name, _ in list_folder(spark, f"{path.rstrip('/')}/_delta_log") or []]
    return (max((int(m.group(1)) for name in names if (m := COMMIT_FILE.match(name))), default=None),
            max((int(m.group(1)) for name in names if (m := CHECKPOINT_FILE.match(name))), default=None))


def checkpoint(spark: SparkSession, path: str) -> None:
    """Write a checkpoint of the Delta table's latest version (Delta's API has none in Python)."""
    jvm: Any = spark.sparkContext._jvm  # noqa: SLF001
    none = jvm.scala.Option.empty()
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)  # noqa: SLF001
    delta_log.checkpoint(delta_log.update(False, none, none), none)


def write_schema(spark: SparkSession, path: str, schema: T.StructType, exists: bool) -> None:
    """Create the Delta table with `schema` and `TABLE_PROPERTIES` (a commit alone: an empty
    DataFrame's write ran a Spark job too), or, `exists`, add the columns of `schema` it lacks."""
    if exists:
        spark.createDataFrame([], schema).write.format("delta").mode("append").option("mergeSchema", "true").save(path)
        return
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    for key, value in TABLE_PROPERTIES.items():
        builder = builder.property(key, value)
    builder.execute()


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


def partitions(spark: SparkSession, columns: MirrorColumns, partition_keys: list[str],
               dropped: list[dict[str, Any]]) -> DataFrame:
    """The partitions of the deletes (a few: built on the driver), Delta types."""
    pk_type = T.StructType([T.StructField(n, columns.column(n).spark_type) for n in partition_keys])
    texts = sorted({orjson.dumps({n: d["key"].get(n) for n in partition_keys}).decode() for d in dropped})
    parsed = spark.createDataFrame([(t,) for t in texts], "pk string").select(F.from_json("pk", pk_type).alias("p"))
    return parsed.select(*[from_connect(columns.column(n), F.col("p")[n]).alias(n) for n in partition_keys])


def merge_actions(spark: SparkSession, target: Any, source: DataFrame, condition: str | Column,
                  assignments: Mapping[str, str | Column], app_id: str | None, version: int | None) -> int:
    """MERGE `source` (`s`, with `_cdc_action` 'upsert' | 'delete') into `target` (`t`) on
    `condition`, carrying Delta's idempotent-write marker (`txnAppId`, `txnVersion`) when
    `app_id` is given: a version re-run after a restart commits nothing. Returns the rows
    updated, inserted or deleted."""
    merge = (target.alias("t").merge(source.alias("s"), condition)
             .whenMatchedDelete(condition=f"s.{ACTION} = 'delete'")
             .whenMatchedUpdate(condition=f"s.{ACTION} = 'upsert'", set=dict(assignments))
             .whenNotMatchedInsert(condition=f"s.{ACTION} = 'upsert'", values=dict(assignments)))
    if app_id is None:
        metrics = merge.execute()
    else:
        # A MERGE takes the marker from the session's conf, which every thread of the session
        # shares: tables merged side by side would commit each other's marker.
        conf = spark.conf
        with _MARKED_MERGE:
            conf.set("spark.databricks.delta.write.txnAppId", app_id)
            conf.set("spark.databricks.delta.write.txnVersion", str(version))
            try:
                metrics = merge.execute()
            finally:
                conf.unset("spark.databricks.delta.write.txnAppId")
                conf.unset("spark.databricks.delta.write.txnVersion")
    row = metrics.first() if metrics is not None else None
    return int(row["num_affected_rows"]) if row is not None else 0
