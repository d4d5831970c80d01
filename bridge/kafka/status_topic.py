"""The status topic (Kafka Connect's `status.storage.topic`, compacted): each worker keeps one
record there, keyed by the worker, that lists its failed groups with their reasons and names its
member id in the slot group. `cdc-bridge status` believes only the records of current members, so
a worker that died does not leave its failures behind, and one that stops removes its record."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.scylla.groups import GroupId


@dataclass(frozen=True)
class WorkerStatus:
    worker: str
    member_id: str
    failed: dict[str, str]  # group -> reason


class StatusWriter:
    def __init__(self, client_config: dict[str, str], topic: str, worker: str) -> None:
        self.topic, self.worker = topic, worker
        self._producer = Producer({**with_logger(client_config), "enable.idempotence": True, "linger.ms": 0})
        self._last: tuple[str, dict[str, str]] | None = None

    def publish(self, member_id: str, failed: Mapping[GroupId, str]) -> None:
        """This worker's failed groups now (sent only when they or the member id changed)."""
        state = (member_id, {str(group): reason for group, reason in failed.items()})
        if state == self._last:
            return
        self._last = state
        value = {"worker": self.worker, "member_id": member_id, "failed": state[1], "at_ms": int(time.time() * 1000)}
        self._producer.produce(self.topic, json.dumps(value).encode(), self.worker.encode())
        self._producer.poll(0)

    def close(self, timeout_s: float = 5.0) -> None:
        """Remove this worker's record (a tombstone): a stopped worker has no failed groups."""
        self._producer.produce(self.topic, None, self.worker.encode())
        self._producer.flush(timeout_s)


def read_statuses(client_config: dict[str, str], topic: str, timeout_s: float) -> list[WorkerStatus]:
    """The latest record of every worker still in the topic."""
    consumer = Consumer({**with_logger(client_config), "group.id": f"status-reader-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        return list(_latest(consumer, topic, timeout_s).values())
    except KafkaException as error:
        raise KafkaUnavailableError(f"status topic {topic}: {error.args[0].str()}") from None
    finally:
        consumer.close()


def _latest(consumer: Any, topic: str, timeout_s: float) -> dict[bytes, WorkerStatus]:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return {}  # no worker has run yet (or one older than the status topic)
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
            for p in metadata.partitions}
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p, end in ends.items() if end > 0])
    latest: dict[bytes, WorkerStatus] = {}
    deadline = time.monotonic() + timeout_s
    remaining = {p for p, end in ends.items() if end > 0}
    while remaining and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=0.2):
            if message.error() is not None:
                continue
            if message.offset() >= ends[message.partition()] - 1:
                remaining.discard(message.partition())
            key, value = message.key() or b"", message.value()
            if value is None:
                latest.pop(key, None)
                continue
            try:
                record = json.loads(value)
                latest[key] = WorkerStatus(str(record["worker"]), str(record["member_id"]), dict(record["failed"]))
            except (ValueError, KeyError, TypeError):
                continue  # not ours: the status topic is for reading, never for stopping
    if remaining:
        raise KafkaUnavailableError(f"status topic {topic} not read to its end in {timeout_s:.0f} s")
    return latest
