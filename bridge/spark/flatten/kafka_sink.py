"""Driver side of the exactly-once Kafka output: output topics, and the job's last written
micro-batch in the compacted commit topic.

The records themselves are produced by the tasks (`bridge.spark.flatten.kafka_tasks`: one transaction
per source topic-partition with its own marker); the driver only creates the output topics (as
many partitions as the source topic, so a key lands where the worker would put it) and, after
every task of a micro-batch committed, records `{"batch_id": N, "records": n}` under the job's
name and its checkpoint's query id (`session.query_scoped`) in `--commit-topic`. A restarted job
reads that marker first and skips a re-run micro-batch that is not newer without starting its
tasks (the tasks' own markers would skip it too; this spares their transactions). Under the name
alone, a new checkpoint's micro-batches (numbered from 0 again) were skipped unwritten.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

import structlog
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bridge.spark.core.errors import KafkaSinkError

log = structlog.get_logger(__name__)
TIMEOUT_S = 60.0


class KafkaOutput:
    def __init__(self, kafka: Mapping[str, str], commit_topic: str) -> None:
        self.kafka: dict[str, str] = dict(kafka)
        self.commit_topic = commit_topic
        self.admin = AdminClient(dict(self.kafka))
        self._known_topics: set[str] = set()
        self.ensure_topic(commit_topic, 1, {"cleanup.policy": "compact"})
        self.producer = Producer({**self.kafka, "enable.idempotence": True})
        self.marker_key: bytes | None = None
        self.last_committed = -1

    def bind(self, scoped_name: str) -> None:
        """Read the last written micro-batch of the query `scoped_name` (`<name>:<query id>`), once."""
        if self.marker_key is not None:
            return
        self.marker_key = scoped_name.encode()
        self.last_committed = self._read_last_committed()
        log.info("kafka output ready", name=scoped_name, commit_topic=self.commit_topic,
                 last_committed_batch=self.last_committed)

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
                if message.key() == self.marker_key and value is not None:
                    last = int(json.loads(value)["batch_id"])
                if (message.offset() or 0) + 1 >= high:
                    break
            return last
        finally:
            consumer.close()

    def ensure_topic(self, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
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

    def ensure_output_topic(self, target: str, source: str) -> None:
        """The output topic `target` of `source`, with as many partitions (a key lands where the
        worker put it); asked of Kafka once per target."""
        if target not in self._known_topics:
            self.ensure_topic(target, self.partitions_of(source))

    def partitions_of(self, topic: str) -> int:
        metadata = self.admin.list_topics(topic, timeout=TIMEOUT_S)
        found = metadata.topics.get(topic)
        return len(found.partitions) if found is not None and found.partitions else 1

    def mark(self, batch_id: int, records: int) -> None:
        """Record that every task of `batch_id` committed (after they all did)."""
        assert self.marker_key is not None, "bind() first"
        errors: list[str] = []
        self.producer.produce(self.commit_topic, key=self.marker_key,
                              value=json.dumps({"batch_id": batch_id, "records": records}).encode(),
                              on_delivery=lambda error, _m: errors.append(str(error)) if error else None)
        self.producer.flush(TIMEOUT_S)
        if errors:
            raise KafkaSinkError(f"micro-batch {batch_id}: writing its marker to {self.commit_topic}: {errors[0]}")
        self.last_committed = batch_id

    def close(self) -> None:
        self.producer.flush(TIMEOUT_S)
