"""Exactly-once Kafka output produced by the Spark tasks that hold the records (executor side).

A micro-batch reaches each task as Arrow batches (`mapInArrow`), a source partition's records in
one task and in offset order: either its raw Kafka records, which the task flattens itself as it
produces them (`flatten_and_produce`, JSON with schemas and Avro), or records Spark already
flattened (`produce_partition`: output topic, key, value, headers, source topic, source partition,
source offset). Per source topic-partition the task opens one Kafka transaction with
the transactional id `cdc-bridge-spark-<job>-<topic>-<partition>`:

1. `init_transactions` fences any earlier producer of that id (a zombie or speculative attempt of
   the same task) and finishes or aborts its open transaction;
2. the committed offset of the consumer group `cdc-bridge-spark-<job>` on the source
   topic-partition is the marker: every source record below it is already in the output topic
   (read with require_stable semantics, so after step 1 it is final);
3. the records at or above it are produced, and the new marker (last offset + 1, metadata
   `batch=<id>`) is sent with `send_offsets_to_transaction`: records and marker commit together.

A retried task, a re-run micro-batch after a crash, or a speculative copy therefore writes each
source record's output once. The group's committed offsets also show the job's progress per
source partition in Kafka's own tools (`kafka-consumer-groups --describe`).

`CDC_BRIDGE_SPARK_TEST_FAULT` (tests only, read by the driver and shipped to the tasks) makes a task
fail on purpose: `batch=N,when=before-commit|after-commit,attempts=K` raises in micro-batch N's
tasks whose attempt number is below K (`TaskContext.attemptNumber()`), after producing and before
the commit, or after the commit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from bridge.spark.core.errors import KafkaSinkError
from bridge.spark.core.record_flattener import Flattener
from bridge.spark.flatten.flatten import output_topic

TIMEOUT_S = 60.0
FAULT_ENV = "CDC_BRIDGE_SPARK_TEST_FAULT"
RESULT_SCHEMA = "written long, skipped long"


@dataclass(frozen=True)
class Fault:
    """A test-only failure injected into the tasks of one micro-batch."""

    batch_id: int
    when: str  # before-commit | after-commit
    attempts: int

    @staticmethod
    def from_env() -> Fault | None:
        text = os.environ.get(FAULT_ENV)
        if not text:
            return None
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            fault = Fault(int(fields["batch"]), fields.get("when", "before-commit"), int(fields.get("attempts", "1")))
        except (KeyError, ValueError):
            raise KafkaSinkError(f"{FAULT_ENV}={text!r}: expected batch=N,when=before-commit|after-commit,"
                                 "attempts=K") from None
        if fault.when not in ("before-commit", "after-commit"):
            raise KafkaSinkError(f"{FAULT_ENV}: when={fault.when!r} is not before-commit or after-commit")
        return fault


@dataclass(frozen=True)
class TaskSink:
    """What a task needs to produce its records: pickled into the task's closure."""

    kafka: dict[str, str]
    job: str
    batch_id: int
    fault: Fault | None = None

    @property
    def group(self) -> str:
        return f"cdc-bridge-spark-{self.job}"

    def transactional_id(self, topic: str, partition: int) -> str:
        return f"cdc-bridge-spark-{self.job}-{topic}-{partition}"


class _Transaction:
    """The open transaction of one source topic-partition in one task."""

    def __init__(self, sink: TaskSink, topic: str, partition: int) -> None:
        self.sink, self.topic, self.partition = sink, topic, partition
        self.errors: list[str] = []
        self.producer = Producer({
            **sink.kafka,
            "transactional.id": sink.transactional_id(topic, partition),
            "enable.idempotence": True,
            "partitioner": "murmur2_random",  # the Java client's partitioner, like the worker's
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "transaction.timeout.ms": 300_000,
        })
        self.producer.init_transactions(TIMEOUT_S)
        self.consumer = Consumer({**sink.kafka, "group.id": sink.group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        committed = self.consumer.committed([TopicPartition(topic, partition)], timeout=TIMEOUT_S)[0]
        if committed.error is not None:
            raise KafkaSinkError(f"reading the marker of {topic}[{partition}]: {committed.error}")
        self.done_below = max(committed.offset, 0)  # negative: no marker yet
        self.next_offset = -1
        self.written = self.skipped = 0
        self.producer.begin_transaction()

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))

    def produce(self, topic: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, str | bytes | None]] | None, offset: int) -> None:
        if offset < self.done_below:
            self.skipped += 1
            return
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, headers=headers, on_delivery=self._delivered)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.written += 1
        self.next_offset = max(self.next_offset, offset + 1)

    def commit(self, fault: Fault | None, attempt: int) -> None:
        try:
            self.producer.flush(TIMEOUT_S)
            if self.errors:
                raise KafkaSinkError(f"source {self.topic}[{self.partition}] micro-batch {self.sink.batch_id}: "
                                     f"delivery failed: {self.errors[0]}")
            _maybe_fail(fault, self.sink.batch_id, attempt, "before-commit")
            if self.written:
                marker = TopicPartition(self.topic, self.partition, self.next_offset,
                                        f"batch={self.sink.batch_id}")
                self.producer.send_offsets_to_transaction([marker], self.consumer.consumer_group_metadata(),
                                                          TIMEOUT_S)
            self.producer.commit_transaction(TIMEOUT_S)
        except BaseException:
            self.abort()
            raise
        _maybe_fail(fault, self.sink.batch_id, attempt, "after-commit")

    def abort(self) -> None:
        # a fenced or broken producer: the next init_transactions of this id aborts it
        with contextlib.suppress(KafkaException):
            self.producer.abort_transaction(TIMEOUT_S)

    def close(self) -> None:
        self.consumer.close()


def _maybe_fail(fault: Fault | None, batch_id: int, attempt: int, when: str) -> None:
    if fault is not None and fault.batch_id == batch_id and fault.when == when and attempt < fault.attempts:
        raise KafkaSinkError(f"test fault ({FAULT_ENV}): micro-batch {batch_id} task attempt {attempt} {when}")


OutputRow = tuple[str, bytes | None, bytes | None, Any, str, int, int]
# output topic, key, value, headers [(key, value)], source topic, source partition, source offset
FLAT_SCHEMA = ("topic string, key binary, value binary, headers array<struct<key:string,value:binary>>, "
               "source_topic string, source_partition int, offset long")


def produce_partition(sink: TaskSink) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The `mapInArrow` function over flattened rows (`FLAT_SCHEMA`): produce a task's rows,
    yield one (written, skipped) row."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        yield _produce(sink, _flat_rows(batches))

    return run


def flatten_and_produce(sink: TaskSink, flattener: Callable[[], Flattener],
                        topic_rule: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The `mapInArrow` function over a task's raw Kafka rows (whole source partitions in offset
    order): flatten them in Python and produce them, in one pass."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        yield _produce(sink, _flattened(batches, flattener(), topic_rule))

    return run


def flatten_partition(flattener: Callable[[], Flattener],
                      topic_rule: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The `mapInArrow` function over pieces of source partitions: their flattened rows
    (`FLAT_SCHEMA`), to be brought together by source partition and produced."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        schema = pa.schema([  # FLAT_SCHEMA's types
            ("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ("source_topic", pa.string()), ("source_partition", pa.int32()), ("offset", pa.int64())])
        records = flattener()
        for batch in batches:
            rows = list(_flattened([batch], records, topic_rule))
            columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema.names)
            yield pa.RecordBatch.from_pydict({
                name: [_as_header_structs(h) for h in column] if name == "headers" else list(column)
                for name, column in zip(schema.names, columns, strict=True)}, schema=schema)

    return run


def _as_header_structs(headers: Any) -> Any:
    return None if headers is None else [{"key": k, "value": v} for k, v in headers]


def _headers(structs: Any) -> list[tuple[str, bytes | None]] | None:
    return [(h["key"], h["value"]) for h in structs] if structs else None


def _flat_rows(batches: Iterator[Any]) -> Iterator[OutputRow]:
    for batch in batches:
        columns = batch.to_pydict()
        for topic, key, value, headers, source, partition, offset in zip(
                columns["topic"], columns["key"], columns["value"], columns["headers"],
                columns["source_topic"], columns["source_partition"], columns["offset"], strict=True):
            yield topic, key, value, _headers(headers), source, partition, offset


def _flattened(batches: Iterable[Any], records: Flattener, topic_rule: str) -> Iterator[OutputRow]:
    targets: dict[str, str] = {}
    for batch in batches:
        columns = batch.to_pydict()
        for source, partition, offset, key, value, headers in zip(
                columns["topic"], columns["partition"], columns["offset"], columns["key"], columns["value"],
                columns["headers"], strict=True):
            flat = records.flatten(value, _headers(headers),
                                   lambda: f"topic {source} partition {partition} offset {offset}")  # noqa: B023
            if flat is None:
                continue
            target = targets.get(source)
            if target is None:
                target = targets[source] = output_topic(topic_rule, source)
            yield target, key, flat.value, flat.headers, source, partition, offset


def _produce(sink: TaskSink, rows: Iterator[OutputRow]) -> Any:
    """Produce rows in one transaction per source topic-partition; one (written, skipped) batch."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    open_: dict[tuple[str, int], _Transaction] = {}
    try:
        for topic, key, value, headers, source, partition, offset in rows:
            txn = open_.get((source, partition))
            if txn is None:
                txn = open_[(source, partition)] = _Transaction(sink, source, partition)
            txn.produce(topic, key, value, headers, offset)
        for txn in open_.values():
            txn.commit(sink.fault, attempt)
    except BaseException:
        for txn in open_.values():
            txn.abort()
        raise
    finally:
        for txn in open_.values():
            txn.close()
    written = sum(t.written for t in open_.values())
    skipped = sum(t.skipped for t in open_.values())
    return pa.RecordBatch.from_pydict({"written": [written], "skipped": [skipped]})
