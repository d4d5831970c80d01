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

from functools import reduce
from typing import Any

import orjson
import structlog
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bridge.spark.fold.events import delete_event
from bridge.spark.fold.frames import JSON_OPTIONS, MirrorColumns, from_connect

log = structlog.get_logger(__name__)
RETENTION_US = 24 * 3600 * 1_000_000
SCHEMA = "pk_names string, pk_json string, ts long, event string"


def tombstone_path(root: str, keyspace: str, table: str) -> str:
    return f"{root.rstrip('/')}/_cdc_dropped/{keyspace}/{table}"


class TombstoneStore:
    def __init__(self, path: str, retention_us: int = RETENTION_US) -> None:
        self.path = path
        self.retention_us = retention_us
        self._partition_keys: list[str] | None = None
        self._clustering: list[str] | None = None  # in the table's clustering order, from a range delete
        self._purged_below: int | None = None  # the first purge waits a tenth of the retention
        self._rows: list[tuple[str, int, str]] | None = None  # (pk_json, ts, event) as stored

    def partition_keys(self, spark: SparkSession, new: list[dict[str, Any]]) -> list[str]:
        """The table's partition key columns (the non-null fields of a delete's key), [] while the
        table never had a range / partition delete."""
        self._load(spark)
        if self._partition_keys is None and new:
            self._partition_keys = [name for name, value in new[0]["key"].items() if value is not None]
        self._learn_clustering(new)
        return self._partition_keys or []

    def _load(self, spark: SparkSession) -> list[tuple[str, int, str]]:
        """The stored deletes, read once per process (one Spark job) and kept on the driver beside
        the Delta table, so a micro-batch folds them without reading the table (and replaying its
        log) again: a day of range deletes is small."""
        if self._rows is None:
            from delta.tables import DeltaTable

            rows: list[tuple[str, int, str]] = []  # published whole: a compaction thread may ask meanwhile
            if DeltaTable.isDeltaTable(spark, self.path):
                for row in spark.read.format("delta").load(self.path).select("pk_names", "pk_json", "ts",
                                                                            "event").collect():
                    rows.append((str(row["pk_json"]), int(row["ts"]), str(row["event"])))
                    if self._partition_keys is None:
                        self._partition_keys = str(row["pk_names"]).split(",")
                self._learn_clustering([orjson.loads(e) for _, _, e in rows
                                        if '"start":{' in e or '"end":{' in e][:1])
            self._rows = rows
        return self._rows

    def _learn_clustering(self, deletes: list[dict[str, Any]]) -> None:
        """The clustering columns' order: a bound's fields are in it (the envelope's key is in name order)."""
        if self._clustering is not None:
            return
        for delete in deletes:
            for side in ("start", "end"):
                if isinstance(delete.get(side), dict):
                    self._clustering = list(delete[side])
                    return

    def clustering(self, columns: MirrorColumns, partition_keys: list[str]) -> list[str]:
        return self._clustering or [n for n in columns.key_names if n not in partition_keys]

    def add(self, spark: SparkSession, columns: MirrorColumns, partition_keys: list[str],
            new: list[dict[str, Any]], app_id: str, batch_id: int) -> None:
        """Store this micro-batch's deletes, each once: those already stored (a micro-batch re-run
        after a restart: the store was read back with them) are skipped by their text, which
        holds the delete's offset. Not Delta's idempotent-write marker: checking it rebuilds the
        table's state (a Spark job per append), and the deletes stored are on the driver already.
        A Delta append is atomic, so a crash leaves a micro-batch's deletes all stored or none."""
        known = self._load(spark)
        rows = unseen(known, [(orjson.dumps({n: d["key"].get(n) for n in partition_keys}).decode(), int(d["ts"]),
                               orjson.dumps(d).decode()) for d in new])
        if rows:
            pk_type = T.StructType([T.StructField(n, columns.column(n).spark_type) for n in partition_keys])
            frame = spark.createDataFrame(rows, "pk string, ts long, event string").select(
                F.lit(",".join(partition_keys)).alias("pk_names"),
                F.to_json(F.from_json("pk", pk_type), JSON_OPTIONS).alias("pk_json"), "ts", "event")
            frame.write.format("delta").mode("append").save(self.path)
            known.extend(rows)
        log.info("range / partition deletes stored", path=self.path, app_id=app_id, batch_id=batch_id,
                 stored=len(rows), already_stored=len(new) - len(rows))
        self._purge(spark, max(int(d["ts"]) for d in new) - self.retention_us)

    def _purge(self, spark: SparkSession, before_us: int) -> None:
        """At most once per tenth of the retention (a Delta DELETE is a few Spark jobs)."""
        if self._purged_below is None:
            self._purged_below = before_us
        if before_us - self._purged_below < self.retention_us // 10:
            return
        from delta.tables import DeltaTable

        DeltaTable.forPath(spark, self.path).delete(F.col("ts") < F.lit(before_us))
        self._rows = [row for row in self._load(spark) if row[1] >= before_us]
        self._purged_below = before_us

    def covering(self, spark: SparkSession, keys: DataFrame, columns: MirrorColumns,
                 partition_keys: list[str]) -> DataFrame | None:
        """(key columns..., x) of the stored deletes (this micro-batch's included) that cover the
        given keys (distinct key columns, Delta representation): `x` is the fold's delete event."""
        rows = self._load(spark)
        if not partition_keys or not rows:
            return None
        by_name = {c.name: c for c in columns.keys}
        clustering = [by_name[n] for n in self.clustering(columns, partition_keys)]
        pk_type = T.StructType([T.StructField(n, by_name[n].spark_type) for n in partition_keys])
        bound = T.StructType([T.StructField(c.name, c.spark_type) for c in clustering])
        event_type = T.StructType([T.StructField("kind", T.StringType()), T.StructField("ts", T.LongType()),
                                   T.StructField("offset", T.LongType()), T.StructField("start", bound),
                                   T.StructField("start_inclusive", T.BooleanType()), T.StructField("end", bound),
                                   T.StructField("end_inclusive", T.BooleanType())])
        stored = spark.createDataFrame(rows, "pk_json string, ts long, event string").select(
            F.from_json("pk_json", pk_type).alias("p"), F.from_json("event", event_type).alias("d"))
        deletes = stored.select(*[from_connect(by_name[n], F.col("p")[n]).alias(f"_p_{n}") for n in partition_keys],
                                "d")
        joined = keys.join(deletes, [keys[f"`{n}`"] == deletes[f"_p_{n}"] for n in partition_keys])
        d = F.col("d")
        values = [F.col(f"`{c.name}`") for c in clustering]
        bounds = {side: [from_connect(c, d[side][c.name]) for c in clustering] for side in ("start", "end")}
        in_range = reduce(lambda a, b: a & b, [v.isNotNull() for v in values], F.lit(True))
        if clustering:
            start, end = bounds["start"], bounds["end"]
            in_range = in_range & (start[0].isNull() | F.when(F.coalesce(d["start_inclusive"], F.lit(False)),
                                                              _compare(values, start) >= 0)
                                   .otherwise(_compare(values, start) > 0))
            in_range = in_range & (end[0].isNull() | F.when(F.coalesce(d["end_inclusive"], F.lit(False)),
                                                            _compare(values, end) <= 0)
                                   .otherwise(_compare(values, end) < 0))
        covers = (d["kind"] == "partition_delete") | in_range
        return joined.where(covers).select(*[F.col(f"`{n}`") for n in columns.key_names],
                                           delete_event(columns.values, d["ts"], d["offset"]).alias("x"))


def unseen(known: list[tuple[str, int, str]], rows: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """`rows` (pk, ts, event) whose event is neither in `known` nor earlier in `rows`."""
    seen = {event for _, _, event in known}
    found = []
    for row in rows:
        if row[2] not in seen:
            seen.add(row[2])
            found.append(row)
    return found


def _compare(values: list[Column], bound: list[Column]) -> Column:
    """-1, 0, 1: the clustering `values` against a bound's prefix (its leading non-null values),
    lexicographically, as the reference fold compares them."""
    result: Column = F.lit(0)
    for value, limit in reversed(list(zip(values, bound, strict=True))):
        result = F.when(limit.isNull(), F.lit(0)).when(value < limit, F.lit(-1)).when(value > limit, F.lit(1)) \
            .otherwise(result)
    return result
