"""The status topic (Kafka Connect's `status.storage.topic`, compacted): each worker keeps one
record there, keyed by the worker, that lists its failed groups with their reasons and names its
member id in the slot group. `cdc-bridge status` believes only the records of current members, so
a worker that died does not leave its failures behind, and one that stops removes its record.

The record also says what the worker has applied of the control topic's target state (`state`:
RUNNING, PAUSED or STOPPED), its instance id, the slots it owns and, per failed group, the slot,
error, attempts and next retry (what a Connect task's `trace` shows). A STOPPED worker (outside
the slot group) sends it again every `HEARTBEAT_S` even when nothing changed, so it is known to be
alive by its record's age. Records written before these fields existed still read (defaults)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.watermarks import all_watermarks
from bridge.scylla.groups import GroupId

HEARTBEAT_S = 10.0
APPLIED_STATES = ("RUNNING", "PAUSED", "STOPPED")


@dataclass(frozen=True)
class GroupFailure:
    """One failed group as a worker reports it; `next_retry_ms` (epoch ms) None when its retries
    have run out."""

    slot: int | None
    error: str
    attempts: int
    next_retry_ms: int | None


@dataclass(frozen=True)
class WorkerStatus:
    worker: str
    member_id: str
    failed: dict[str, str]  # group -> reason
    state: str = "RUNNING"  # the target state applied: RUNNING, PAUSED or STOPPED
    instance: str | None = None
    slots: tuple[int, ...] = ()
    failures: dict[str, GroupFailure] = field(default_factory=dict)  # group -> details
    at_ms: int = 0


class StatusWriter:
    def __init__(self, client_config: dict[str, str], topic: str, worker: str) -> None:
        self.topic, self.worker = topic, worker
        self._producer = Producer({**with_logger(client_config), "enable.idempotence": True, "linger.ms": 0})
        self._last: dict[str, Any] | None = None
        self._sent_at = 0.0

    def publish(self, member_id: str, failed: Mapping[GroupId, str], *, state: str = "RUNNING",
                instance: str | None = None, slots: Iterable[int] = (),
                failures: Mapping[GroupId, GroupFailure] | None = None) -> None:
        """This worker's failed groups and applied state now (sent when they or the member id
        changed, and, when asked again, every HEARTBEAT_S)."""
        record: dict[str, Any] = {
            "worker": self.worker, "member_id": member_id,
            "failed": {str(group): reason for group, reason in failed.items()},
            "state": state, "instance": instance, "slots": sorted(slots),
            "failures": {str(group): asdict(failure) for group, failure in (failures or {}).items()}}
        if record == self._last and time.monotonic() - self._sent_at < HEARTBEAT_S:
            return
        self._last, self._sent_at = record, time.monotonic()
        value = {**record, "at_ms": int(time.time() * 1000)}
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
        return list(_latest(consumer, AdminClient(with_logger(client_config)), topic, timeout_s).values())
    except KafkaException as error:
        raise KafkaUnavailableError(f"status topic {topic}: {error.args[0].str()}") from None
    finally:
        consumer.close()


def _latest(consumer: Any, admin: Any, topic: str, timeout_s: float) -> dict[bytes, WorkerStatus]:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return {}  # no worker has run yet (or one older than the status topic)
    deadline = time.monotonic() + timeout_s
    ends = {p: high for p, (_low, high) in all_watermarks(admin, topic, sorted(metadata.partitions), deadline,
                                                                  committed_only=True).items()}  # as read
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p, end in ends.items() if end > 0])
    latest: dict[bytes, WorkerStatus] = {}
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
                latest[key] = parse_status(json.loads(value))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # not ours: the status topic is for reading, never for stopping
    if remaining:
        raise KafkaUnavailableError(f"status topic {topic} not read to its end in {timeout_s:.0f} s")
    return latest


def parse_status(record: dict[str, Any]) -> WorkerStatus:
    """One status record's value; fields added since the first records have defaults."""
    failures = {str(group): GroupFailure(None if f.get("slot") is None else int(f["slot"]), str(f["error"]),
                                         int(f["attempts"]),
                                         None if f.get("next_retry_ms") is None else int(f["next_retry_ms"]))
                for group, f in dict(record.get("failures") or {}).items()}
    state = str(record.get("state") or "RUNNING")
    if state not in APPLIED_STATES:
        raise ValueError(f"state {state!r}")
    instance = record.get("instance")
    return WorkerStatus(str(record["worker"]), str(record["member_id"]), dict(record["failed"]), state,
                        None if instance is None else str(instance), tuple(int(s) for s in record.get("slots") or ()),
                        failures, int(record.get("at_ms") or 0))
