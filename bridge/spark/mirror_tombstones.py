"""Range and partition deletes the mirror remembers, like Cassandra's range tombstones.

The dropped-changes topic and the data topics are read side by side, and a micro-batch can hold a
range delete while data changes of the same partition that are older than it only arrive in a
later micro-batch (`maxOffsetsPerTrigger` cuts each topic at its own offset; transaction
markers become visible per partition). Applied once and forgotten, the delete would let those
older writes bring deleted rows back. So each table's range / partition deletes are kept in a
small Delta table `<root>/_cdc_dropped/<keyspace>/<table>` (`pk_json`, `ts`, `event`) and
every micro-batch folds, with each row's changes, the deletes of that row's partition: the fold
orders everything by timestamp, so an older write is shadowed and a newer one survives.

Deletes older than the newest timestamp seen minus the retention (24 h by default) are purged:
by then every topic has been read past them.
"""

from __future__ import annotations

from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.mirror_frames import JSON_OPTIONS, MirrorColumns

RETENTION_US = 24 * 3600 * 1_000_000
SCHEMA = "pk_names string, pk_json string, ts long, event string"


class TombstoneStore:
    def __init__(self, path: str, retention_us: int = RETENTION_US) -> None:
        self.path = path
        self.retention_us = retention_us
        self._partition_keys: list[str] | None = None
        self._purged_below: int | None = None  # the first purge waits a tenth of the retention

    def partition_keys(self, spark: SparkSession, new: list[dict[str, Any]]) -> list[str]:
        """The table's partition key columns (the non-null fields of a delete's key), [] while the
        table never had a range / partition delete."""
        if self._partition_keys is None and new:
            self._partition_keys = [name for name, value in new[0]["key"].items() if value is not None]
        if self._partition_keys is None:
            from delta.tables import DeltaTable

            if DeltaTable.isDeltaTable(spark, self.path):
                row = spark.read.format("delta").load(self.path).select("pk_names").first()
                if row is not None:
                    self._partition_keys = str(row["pk_names"]).split(",")
        return self._partition_keys or []

    def add(self, spark: SparkSession, columns: MirrorColumns, partition_keys: list[str],
            new: list[dict[str, Any]], app_id: str, batch_id: int) -> DataFrame:
        """Store this micro-batch's deletes (once per batch id); returns them as (pk_json, event)."""
        pk_type = T.StructType([T.StructField(n, columns.column(n).spark_type) for n in partition_keys])
        rows = [(orjson.dumps({n: d["key"].get(n) for n in partition_keys}).decode(), int(d["ts"]),
                 orjson.dumps(d).decode()) for d in new]
        frame = spark.createDataFrame(rows, "pk string, ts long, event string").select(
            F.lit(",".join(partition_keys)).alias("pk_names"),
            F.to_json(F.from_json("pk", pk_type), JSON_OPTIONS).alias("pk_json"), "ts", "event")
        (frame.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", batch_id)
         .save(self.path))
        self._purge(spark, max(int(d["ts"]) for d in new) - self.retention_us)
        return frame.select("pk_json", "event")

    def _purge(self, spark: SparkSession, before_us: int) -> None:
        """At most once per tenth of the retention (a Delta DELETE is a few Spark jobs)."""
        if self._purged_below is None:
            self._purged_below = before_us
        if before_us - self._purged_below < self.retention_us // 10:
            return
        from delta.tables import DeltaTable

        DeltaTable.forPath(spark, self.path).delete(F.col("ts") < F.lit(before_us))
        self._purged_below = before_us

    def for_partitions(self, spark: SparkSession, partitions: DataFrame) -> DataFrame | None:
        """(pk_json, dropped: array of events) of the stored deletes of the given partitions."""
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(spark, self.path):
            return None
        stored = spark.read.format("delta").load(self.path).select("pk_json", "event")
        touched = stored.join(partitions.select("pk_json").distinct(), "pk_json", "left_semi")
        return touched.groupBy("pk_json").agg(F.collect_list("event").alias("dropped"))
