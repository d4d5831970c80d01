"""The compacted offsets topic, followed by every worker.

Each worker reads the whole topic with `read_committed` and keeps the latest committed position
of every group of its connector `name`. A new owner of a slot first catches up to the end of the
topic, where "the end" is the high watermark, which counts the records of transactions still
open. The read_committed position cannot pass an open transaction's first record, so the new
owner waits for the previous owner's last transaction (its offsets records were flushed before
its group check, see `transactions.py`) to commit or abort, and never starts from a position
older than the last committed one, nor from an aborted one. (The watermark a read_committed
consumer reports is the last stable offset, which stops *before* such a transaction: catching up
to it would not wait.) Successor groups learn from the same map that predecessors read by other
workers are finished.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.offsets import decode_key, decode_value
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position

log = structlog.get_logger(__name__)


class OffsetsTopic:
    """Latest committed position per group of `name`, from the offsets topic."""

    def __init__(self, client_config: dict[str, str], topic: str, name: str) -> None:
        self.topic = topic
        self.name = name
        self.positions: dict[GroupId, Position] = {}
        self._consumer = Consumer({
            **with_logger(client_config),
            "group.id": f"{name}-offsets-reader-{uuid.uuid4().hex[:8]}",  # never joins or commits
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
        })
        # Asks for high watermarks only (read_uncommitted: records of open transactions count).
        self._watermarks = Consumer({
            **with_logger(client_config),
            "group.id": f"{name}-offsets-watermarks-{uuid.uuid4().hex[:8]}",  # never joins or commits
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        })
        self._partitions: list[int] = []

    def start(self, timeout_s: float = 30.0) -> None:
        """Assign every partition of the topic; a topic created a moment ago may have no leader
        yet (LEADER_NOT_AVAILABLE in its metadata), so its metadata is asked again until it has."""
        deadline = time.monotonic() + timeout_s
        while True:
            metadata = self._consumer.list_topics(self.topic, timeout=max(1.0, deadline - time.monotonic()))
            topic = metadata.topics.get(self.topic)
            if topic is not None and topic.error is None and topic.partitions:
                break
            if time.monotonic() > deadline:
                reason = "no such topic" if topic is None else str(topic.error or "no partitions")
                raise KafkaUnavailableError(f"offsets topic {self.topic} is not available: {reason}")
            time.sleep(0.2)
        self._partitions = sorted(topic.partitions)
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._partitions])

    def poll(self, max_messages: int = 10_000) -> int:
        """Apply what has arrived, without waiting; returns how many records were read."""
        messages = self._consumer.consume(max_messages, timeout=0)
        for message in messages:
            self._apply(message)
        return len(messages)

    def catch_up(self, timeout_s: float) -> None:
        """Read up to the end every partition had when called (waiting for open transactions)."""
        deadline = time.monotonic() + timeout_s
        ends = {p: self._end_of(p, deadline) for p in self._partitions}
        while True:
            for message in self._consumer.consume(10_000, timeout=0.1):
                self._apply(message)
            positions = self._consumer.position([TopicPartition(self.topic, p) for p in self._partitions])
            behind = [tp.partition for tp in positions if _behind(tp.offset, *ends[tp.partition])]
            if not behind:
                return
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"offsets topic {self.topic} not read to its end in {timeout_s:.0f} s (partitions {behind})"
                )

    def _end_of(self, partition: int, deadline: float) -> tuple[int, int]:
        """The (low, high) watermarks, open transactions included; retried while a new topic's
        leader is being elected."""
        while True:
            try:
                low, high = self._watermarks.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=5)
                return int(low), int(high)
            except KafkaException as error:
                if time.monotonic() > deadline or (not error.args[0].retriable() and not _electing(error)):
                    raise KafkaUnavailableError(f"offsets topic {self.topic}: {error.args[0].str()}") from None
                time.sleep(0.2)

    def _apply(self, message: Any) -> None:
        if message.error() is not None:
            if message.error().code() != KafkaError._PARTITION_EOF:
                log.warning("offsets topic read error", topic=self.topic, error=str(message.error()))
            return
        decoded = decode_key(message.key() or b"")
        if decoded is None or decoded[0] != self.name:
            return
        group = decoded[1]
        if message.value() is None:
            self.positions.pop(group, None)
            return
        try:
            self.positions[group] = decode_value(message.value())
        except ValueError as error:
            log.error("unreadable offsets value", group=str(group), offset=message.offset(), error=str(error))

    def close(self) -> None:
        self._consumer.close()
        self._watermarks.close()


def _electing(error: KafkaException) -> bool:
    return bool(error.args[0].code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                                         KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT))


def _behind(position: int, low: int, high: int) -> bool:
    """Whether records before `high` are still unread (a negative position: nothing read yet)."""
    return high > low and position < high
