"""Exactly-once output of micro-batches to Kafka: one transaction per micro-batch, and the batch id
committed in the same transaction.

Spark's own Kafka sink is at-least-once (a micro-batch replayed after a crash is written again).
Here the driver produces each micro-batch's records and a marker record `{"batch_id": N}` (key:
the job name) to a compacted commit topic in one Kafka transaction. On start it fences any
earlier producer with the same transactional id (`init_transactions`) and reads the last
committed batch id of its name with `read_committed`; a micro-batch whose id is not newer is a
replay of one already in Kafka and is skipped. Records go through the driver, so the output rate
is one producer's (documented in docs/spark.md); the keys' partitions follow the Java client
(murmur2), like the worker's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bridge.spark.errors import KafkaSinkError

log = structlog.get_logger(__name__)
TIMEOUT_S = 60.0


class TransactionalKafkaSink:
    def __init__(self, kafka: Mapping[str, str], name: str, commit_topic: str) -> None:
        self.kafka: dict[str, str | int | float | bool] = dict(kafka)
        self.name = name
        self.commit_topic = commit_topic
        self.admin = AdminClient(dict(self.kafka))
        self._known_topics: set[str] = set()
        self._ensure_topic(commit_topic, 1, {"cleanup.policy": "compact"})
        self.producer = Producer({
            **self.kafka,
            "transactional.id": f"cdc-bridge-spark-{name}",
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "transaction.timeout.ms": 120_000,
        })
        self.producer.init_transactions(TIMEOUT_S)
        self.last_committed = self._read_last_committed()
        log.info("kafka sink ready", name=name, commit_topic=commit_topic, last_committed_batch=self.last_committed)

    def _read_last_committed(self) -> int:
        consumer = Consumer({**self.kafka, "group.id": f"cdc-bridge-spark-probe-{uuid.uuid4().hex[:8]}",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        try:
            partition = TopicPartition(self.commit_topic, 0)
            _low, high = consumer.get_watermark_offsets(partition, timeout=TIMEOUT_S)
            last = -1
            if high <= 0:
                return last
            consumer.assign([TopicPartition(self.commit_topic, 0, 0)])
            empty_polls = 0
            while empty_polls < 3:
                message = consumer.poll(2.0)
                if message is None:
                    # read_committed may stop short of the high watermark (control records, aborts)
                    position = consumer.position([partition])[0].offset
                    empty_polls = 3 if position >= high else empty_polls + 1
                    continue
                empty_polls = 0
                if message.error() is not None:
                    raise KafkaSinkError(f"reading {self.commit_topic}: {message.error()}")
                value = message.value()
                if message.key() == self.name.encode() and value is not None:
                    last = int(json.loads(value)["batch_id"])
                if (message.offset() or 0) + 1 >= high:
                    break
            return last
        finally:
            consumer.close()

    def _ensure_topic(self, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
        if topic in self._known_topics:
            return
        metadata = self.admin.list_topics(timeout=TIMEOUT_S)
        if topic not in metadata.topics:
            futures = self.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=-1,
                                                         config=config or {})])
            try:
                futures[topic].result(timeout=TIMEOUT_S)
                log.info("topic created", topic=topic, partitions=partitions)
            except KafkaException as error:
                if "TOPIC_ALREADY_EXISTS" not in str(error):
                    raise KafkaSinkError(f"creating topic {topic}: {error}") from error
        self._known_topics.add(topic)

    def partitions_of(self, topic: str) -> int:
        metadata = self.admin.list_topics(topic, timeout=TIMEOUT_S)
        found = metadata.topics.get(topic)
        return len(found.partitions) if found is not None and found.partitions else 1

    def write(self, batch_id: int, rows: Iterable[Any], source_partitions: Mapping[str, int]) -> int:
        """Produce `rows` (topic, key, value, headers) and the marker in one transaction; returns the
        number of records, or -1 when `batch_id` was committed before (a replay)."""
        if batch_id <= self.last_committed:
            log.info("micro-batch already in kafka, skipped", batch_id=batch_id, last=self.last_committed)
            return -1
        errors: list[str] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                errors.append(str(error))

        producer = self.producer
        producer.begin_transaction()
        count = 0
        try:
            for row in rows:
                topic = row["topic"]
                if topic not in self._known_topics:
                    self._ensure_topic(topic, source_partitions.get(topic, 1))
                headers: list[tuple[str, str | bytes | None]] = [(h["key"], h["value"]) for h in row["headers"] or []]
                value = row["value"]
                self._produce(topic, row["key"], value.encode() if isinstance(value, str) else value, headers,
                              delivered)
                count += 1
            marker = json.dumps({"batch_id": batch_id, "records": count}).encode()
            self._produce(self.commit_topic, self.name.encode(), marker, [], delivered)
            producer.flush(TIMEOUT_S)
            if errors:
                raise KafkaSinkError(f"micro-batch {batch_id}: delivery failed: {errors[0]}")
            producer.commit_transaction(TIMEOUT_S)
        except BaseException:
            try:
                producer.abort_transaction(TIMEOUT_S)
            except KafkaException as abort_error:
                log.warning("abort failed", batch_id=batch_id, error=str(abort_error))
            raise
        self.last_committed = batch_id
        return count

    def _produce(self, topic: str, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, str | bytes | None]],
                 delivered: Any) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, headers=headers or None, on_delivery=delivered)
                break
            except BufferError:
                self.producer.poll(0.1)
        self.producer.poll(0)

    def close(self) -> None:
        self.producer.flush(TIMEOUT_S)
