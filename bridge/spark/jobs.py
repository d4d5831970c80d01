"""The two streaming queries: stream I/O and `foreachBatch` wiring only (logic lives in decode,
flatten, mirror).

The source is Spark's Kafka source on the envelope topics with `kafka.isolation.level=read_committed`
(Spark's consumer defaults to read_uncommitted, which would show records of aborted worker
transactions) and headers included. The checkpoint location holds the source offsets of every
micro-batch: a restarted query resumes there and re-runs an unfinished micro-batch with the same
batch id and the same offsets, which the outputs use to stay exactly-once (kafka_tasks, mirror).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bridge.spark.core.cdc_format import CdcFormat
from bridge.spark.core.decode import Group, ValueFormat, decode, prepare
from bridge.spark.core.errors import SparkJobError
from bridge.spark.core.kafka_ranges import KafkaRanges
from bridge.spark.core.record_flattener import Flattener, RecordFlattener
from bridge.spark.core.session import query_scoped
from bridge.spark.core.smt_options import SmtOptions
from bridge.spark.flatten.flatten import flatten, output_topic
from bridge.spark.flatten.kafka_sink import KafkaOutput
from bridge.spark.flatten.kafka_tasks import (
    FLAT_SCHEMA,
    RESULT_SCHEMA,
    Fault,
    TaskSink,
    flatten_and_produce,
    flatten_partition,
    produce_partition,
)
from bridge.spark.mirror.writer import (
    COMPACT_AFTER_SECONDS,
    COMPACT_EVERY_BATCHES,
    COMPACT_EVERY_CHANGES,
    MirrorQuery,
    MirrorWriter,
)

log = structlog.get_logger(__name__)
DEFAULT_COMMIT_TOPIC = "cdc-bridge-spark-commits"


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    value_format: ValueFormat = ValueFormat.JSON_SCHEMAS
    registry_url: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None  # None: the job's default cap (below); 0: no cap
    kafka: dict[str, str] = field(default_factory=dict)  # more Kafka client settings (SASL, TLS, ...)
    # Spark partitions at least, splitting big Kafka partitions' offset ranges (Spark's
    # `minPartitions`): the read and the flattening of one source partition then use every core.
    min_partitions: int | None = None
    cdc: CdcFormat = field(default_factory=CdcFormat)  # the envelopes' format: legacy or advanced (+ modes)

    def __post_init__(self) -> None:
        if bool(self.topics) == bool(self.pattern):
            raise SparkJobError("--topics / --topic-pattern: give exactly one of them")
        if self.value_format is ValueFormat.AVRO and not self.registry_url:
            raise SparkJobError("--registry-url: required with --format avro")


@dataclass(frozen=True)
class RunOptions:
    checkpoint: str
    name: str | None = None
    trigger_interval: str = "2 seconds"
    available_now: bool = False

    def job_name(self, kind: str) -> str:
        if self.name:
            return self.name
        digest = hashlib.sha1(str(Path(self.checkpoint).absolute()).encode()).hexdigest()[:10]
        return f"{kind}-{digest}"


# Records per micro-batch unless told (docs/spark.md, "Bounded micro-batches"). A micro-batch
# parsed by Spark is persisted whole (memory, spilling to disk) while its outputs are written, so
# the cap bounds what it needs; flatten's tasks that flatten JSON with schemas or Avro in Python stream
# their records through, so their cap only spreads the fixed cost of a micro-batch (about 1 s).
BATCH_CAP = 50_000
BATCH_CAP_STREAMED = 200_000
# The mirror caches each record's payload alone (about a fifth of a JSON-with-schemas record), so
# twice the records fit in what 50,000 took, and the per-micro-batch cost of each table (Delta's
# snapshot, file search and commit, the driver's planning) is spread over twice the rows: 845
# rows per CPU-second against 599 with 50,000, JVM peak RSS 1,610 against 1,671 MB (bench/README.md).
MIRROR_BATCH_CAP = 100_000

# The mirror's default `min_partitions`, per core of the default parallelism (docs/spark.md,
# "Mirror over a big backlog").
MIRROR_SPLIT = 2

# The Kafka consumer's fetch sizes: its 1 MB per partition is 150-200 records of a JSON-with-schemas
# envelope (5-7 KB), one round trip each; 16 MB read 40,000 of them in 1.8 s instead of 4.5 s
# (bench topic, local[2]). `--kafka` overrides them.
SOURCE_FETCH = {"max.partition.fetch.bytes": str(16 << 20), "fetch.max.bytes": str(64 << 20)}


def kafka_options(source: SourceOptions) -> dict[str, str]:
    """The Kafka source's options but the offsets and topics: the stream's, and the mirror's
    re-reads of a topic's offsets in a micro-batch (`core.kafka_ranges`)."""
    options = {"kafka.bootstrap.servers": source.bootstrap_servers, "kafka.isolation.level": "read_committed",
               "includeHeaders": "true", "failOnDataLoss": "true"}
    options.update({f"kafka.{key}": value for key, value in {**SOURCE_FETCH, **source.kafka}.items()})
    if source.min_partitions:
        options["minPartitions"] = str(source.min_partitions)
    return options


def read_stream(spark: SparkSession, source: SourceOptions) -> DataFrame:
    reader = (spark.readStream.format("kafka").options(**kafka_options(source))
              .option("startingOffsets", source.starting_offsets))
    if source.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(source.max_offsets_per_trigger))
    if source.topics:
        reader = reader.option("subscribe", ",".join(source.topics))
    else:
        reader = reader.option("subscribePattern", str(source.pattern))
    return reader.load()


def avro_decoder(source: SourceOptions) -> Callable[[DataFrame], Iterator[Group]] | None:
    if source.value_format is not ValueFormat.AVRO:
        return None
    from bridge.spark.core.avro import AvroDecoder

    assert source.registry_url is not None
    return AvroDecoder(source.registry_url, advanced=source.cdc.advanced)


class FlattenWriter:
    """The `foreachBatch` function of `cdc-bridge spark flatten`."""

    def __init__(self, source: SourceOptions, smt: SmtOptions, name: str, topic_rule: str | None,
                 delta_root: str | None, schemas_out: bool, commit_topic: str = DEFAULT_COMMIT_TOPIC) -> None:
        if topic_rule is None and delta_root is None:
            raise SparkJobError("--output-topic / --output-delta: give at least one output")
        self.source, self.smt, self.name = source, smt, name
        self.topic_rule, self.delta_root, self.schemas_out = topic_rule, delta_root, schemas_out
        self.decoder = avro_decoder(source)
        self.sink = (KafkaOutput({"bootstrap.servers": source.bootstrap_servers, **source.kafka}, commit_topic)
                     if topic_rule is not None else None)
        self.fault = Fault.from_env()
        # JSON with schemas (the documented default) or Avro into Kafka only: the tasks flatten
        # each record in Python as they produce it (bridge.spark.core.record_flattener), in one Spark job.
        self.flattens_in_tasks = (source.value_format in (ValueFormat.JSON_SCHEMAS, ValueFormat.AVRO)
                                  and delta_root is None and topic_rule is not None)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.sink is not None:
            self.sink.bind(query_scoped(batch.sparkSession, self.name))
        if self.flattens_in_tasks:
            self._flatten_in_tasks(batch, batch_id)
            return
        batch = prepare(batch, self.source.value_format).persist()
        try:
            groups = decode(batch, self.source.value_format, self.decoder, advanced=self.source.cdc.advanced)
            outputs = [(group, flatten(group, self.smt, self.schemas_out)) for group in groups]
            if self.sink is not None and self.topic_rule is not None:
                self._to_kafka(outputs, batch_id, batch.rdd.getNumPartitions())
            if self.delta_root is not None:
                self._to_delta(outputs, batch_id)
        finally:
            batch.unpersist()

    def _to_kafka(self, outputs: list[tuple[Group, DataFrame]], batch_id: int, source_partitions: int) -> None:
        assert self.sink is not None and self.topic_rule is not None
        if batch_id <= self.sink.last_committed:
            log.info("micro-batch already in kafka, skipped", batch_id=batch_id, last=self.sink.last_committed)
            return
        frames: list[DataFrame] = []
        counts: list[Any] = []
        per_topic: dict[str, int] = {}
        for group, frame in outputs:
            if group.kind == "tombstone" and not self.smt.keep_tombstones:
                continue  # flattened to nothing: leaving it out keeps the topic's records in one group
            target = output_topic(self.topic_rule, group.topic)
            self.sink.ensure_output_topic(target, group.topic)
            per_topic[group.topic] = per_topic.get(group.topic, 0) + 1
            frames.append(frame.select(F.lit(target).alias("topic"), "key", F.col("value").cast("binary"), "headers",
                                       F.col("topic").alias("source_topic"),
                                       F.col("partition").alias("source_partition"), "offset"))
        if frames:
            union = frames[0]
            for frame in frames[1:]:
                union = union.unionByName(frame)
            # Each task holds whole source partitions, in offset order (a key's records are in one
            # source partition, so they keep their order). Without `min_partitions` a group's
            # frame has one partition per source partition: when a topic has one group, whole
            # partitions are merged (coalesce, no shuffle). With several groups (a schema change
            # inside the micro-batch, kept tombstones) or source partitions read in pieces, the
            # flattened records are brought together and sorted by offset (a shuffle of the
            # output, smaller than the input: no schema text).
            parts = max(1, source_partitions)
            if self.source.min_partitions or any(count > 1 for count in per_topic.values()):
                union = (union.repartition(parts, "source_topic", "source_partition")
                         .sortWithinPartitions("source_topic", "source_partition", "offset"))
            else:
                union = union.coalesce(parts)
            sink = TaskSink(self.sink.kafka, self.name, batch_id, self.fault)
            counts = union.mapInArrow(produce_partition(sink), RESULT_SCHEMA).collect()  # one row per task
        self._finish(batch_id, counts)

    def _flatten_in_tasks(self, batch: DataFrame, batch_id: int) -> None:
        assert self.sink is not None and self.topic_rule is not None
        if batch_id <= self.sink.last_committed:
            log.info("micro-batch already in kafka, skipped", batch_id=batch_id, last=self.sink.last_committed)
            return
        self._ensure_output_topics()
        sink = TaskSink(self.sink.kafka, self.name, batch_id, self.fault)
        smt, schemas_out, rule = self.smt, self.schemas_out, self.topic_rule
        registry = self.source.registry_url if self.source.value_format is ValueFormat.AVRO else None

        def flattener() -> Flattener:  # runs in the task
            if registry is None:
                return RecordFlattener(smt, schemas_out)
            from bridge.spark.core.avro import AvroDecoder, AvroRecordFlattener

            return AvroRecordFlattener(smt, schemas_out, AvroDecoder(registry))

        rows = batch.select("topic", "partition", "offset", "key", "value", "headers")
        if self.source.min_partitions:
            # Source partitions read in pieces are flattened piece by piece on every core, then
            # brought together by source partition, in offset order, for their transactions.
            parts = max(1, batch.rdd.getNumPartitions())
            flat = (rows.mapInArrow(flatten_partition(flattener, rule), FLAT_SCHEMA)
                    .repartition(parts, "source_topic", "source_partition")
                    .sortWithinPartitions("source_topic", "source_partition", "offset"))
            counts = flat.mapInArrow(produce_partition(sink), RESULT_SCHEMA).collect()
        else:
            counts = rows.mapInArrow(flatten_and_produce(sink, flattener, rule), RESULT_SCHEMA).collect()
        self._finish(batch_id, counts)

    def _ensure_output_topics(self) -> None:
        """The output topic of every source topic, with as many partitions (a key lands where the
        worker put it). A pattern's topics are listed from Kafka as Spark's source does, leaving
        out this job's own outputs (a pattern may match them: no `t.flat.flat`)."""
        assert self.sink is not None and self.topic_rule is not None
        sources = list(self.source.topics)
        if self.source.pattern is not None:
            pattern = re.compile(self.source.pattern)
            matched = {t for t in self.sink.admin.list_topics(timeout=60).topics if pattern.fullmatch(t)}
            sources = sorted(matched - {output_topic(self.topic_rule, t) for t in matched})
        for topic in sources:
            self.sink.ensure_output_topic(output_topic(self.topic_rule, topic), topic)

    def _finish(self, batch_id: int, counts: list[Any]) -> None:
        assert self.sink is not None
        written = sum(int(row["written"]) for row in counts)
        skipped = sum(int(row["skipped"]) for row in counts)
        if skipped:
            log.info("records already in kafka, skipped", batch_id=batch_id, records=skipped)
        self.sink.mark(batch_id, written)
        log.debug("micro-batch flattened to kafka", batch_id=batch_id, records=written)

    def _to_delta(self, outputs: list[tuple[Group, DataFrame]], batch_id: int) -> None:
        assert self.delta_root is not None
        for group, frame in outputs:
            if group.kind != "envelope":
                continue
            keyspace, table = group.keyspace_table
            rows = frame.select("flat.*", F.col("key").cast("string").alias("__key"),
                                F.col("value").isNull().alias("__tombstone"),
                                F.col("topic").alias("__kafka_topic"), F.col("partition").alias("__kafka_partition"),
                                F.col("offset").alias("__kafka_offset"))
            (rows.write.format("delta").mode("append").option("mergeSchema", "true")
             .option("txnAppId", f"{query_scoped(rows.sparkSession, self.name)}:{keyspace}.{table}")
             .option("txnVersion", batch_id)
             .save(f"{self.delta_root.rstrip('/')}/{keyspace}/{table}"))


def start(spark: SparkSession, stream: DataFrame, writer: Callable[[DataFrame, int], None], run: RunOptions,
          name: str) -> Any:
    query = stream.writeStream.foreachBatch(writer).option("checkpointLocation", run.checkpoint).queryName(name)
    query = query.trigger(availableNow=True) if run.available_now else query.trigger(
        processingTime=run.trigger_interval)
    return query.start()


def start_flatten(spark: SparkSession, source: SourceOptions, smt: SmtOptions, run: RunOptions, *,
                  topic_rule: str | None, delta_root: str | None, schemas_out: bool | None = None,
                  commit_topic: str = DEFAULT_COMMIT_TOPIC) -> Any:
    name = run.job_name("flatten")
    if source.min_partitions is None:
        source = dataclasses.replace(source, min_partitions=_split_for(source, spark.sparkContext.defaultParallelism))
    elif source.min_partitions <= 0:
        source = dataclasses.replace(source, min_partitions=None)
    if schemas_out is None:
        schemas_out = source.value_format is ValueFormat.JSON_SCHEMAS
    writer = FlattenWriter(source, smt, name, topic_rule, delta_root, schemas_out, commit_topic)
    if source.max_offsets_per_trigger is None:
        cap = BATCH_CAP_STREAMED if writer.flattens_in_tasks else BATCH_CAP
        source = dataclasses.replace(source, max_offsets_per_trigger=cap)
    return start(spark, read_stream(spark, source), writer, run, name)


def _split_for(source: SourceOptions, parallelism: int) -> int | None:
    """Flatten's default `min_partitions`: the parallelism when the source topics have fewer
    partitions than that (a one-partition topic would keep one core busy and the other idle;
    split, its pieces are re-grouped by a shuffle of the flattened records, about 12% more CPU
    in bench/spark_flatten_backlog.py), else none (no split, no shuffle). A topic pattern is not
    split (its topics are not known here)."""
    if not source.topics:
        return None
    admin = AdminClient({"bootstrap.servers": source.bootstrap_servers, **source.kafka})
    try:
        metadata = admin.list_topics(timeout=60)
    except KafkaException as error:
        raise SparkJobError(f"--bootstrap-servers: listing the source topics: {error}") from error
    partitions = sum(len(metadata.topics[t].partitions) if t in metadata.topics else 1 for t in source.topics)
    return parallelism if partitions < parallelism else None


def folding_source(spark: SparkSession, source: SourceOptions) -> SourceOptions:
    """The source with the defaults of the jobs that fold each key's changes (mirror, history):
    read in pieces, and at most `MIRROR_BATCH_CAP` records per micro-batch."""
    if source.min_partitions is None:
        # Read in pieces: the fold orders each key's changes by their position, not by the order
        # of the read, so unlike flatten's pieces these need no shuffle to be regrouped, and the
        # biggest topic's parse is spread over every core (flatten's rule would not split a topic
        # holding most of the records beside two others).
        source = dataclasses.replace(source, min_partitions=MIRROR_SPLIT * spark.sparkContext.defaultParallelism)
    elif source.min_partitions <= 0:
        source = dataclasses.replace(source, min_partitions=None)
    if source.max_offsets_per_trigger is None:
        source = dataclasses.replace(source, max_offsets_per_trigger=MIRROR_BATCH_CAP)
    return source


def start_mirror(spark: SparkSession, source: SourceOptions, run: RunOptions, *, delta_root: str,
                 compact_every_batches: int = COMPACT_EVERY_BATCHES,
                 compact_every_changes: int = COMPACT_EVERY_CHANGES,
                 compact_after_s: float = COMPACT_AFTER_SECONDS) -> Any:
    """The mirror's query; with `available_now`, its `awaitTermination` compacts every table at
    the end of the run (`MirrorQuery`)."""
    problem = source.cdc.mirror_problem()
    if problem is not None:
        raise SparkJobError(problem)
    if compact_every_batches < 1 or compact_every_changes < 1:
        raise SparkJobError("--compact-every-batches / --compact-every-changes: must be at least 1")
    if not compact_after_s > 0:
        raise SparkJobError(f"--compact-after-seconds: must be more than 0, not {compact_after_s}")
    name = run.job_name("mirror")
    source = folding_source(spark, source)
    writer = MirrorWriter(delta_root, name, source.value_format, avro_decoder(source), source.cdc,
                          source.registry_url, compact_every_batches, compact_every_changes,
                          KafkaRanges(kafka_options(source)), None if run.available_now else spark,
                          compact_after_s)
    return MirrorQuery(start(spark, read_stream(spark, source), writer, run, name), writer, spark,
                       compact_at_end=run.available_now)
