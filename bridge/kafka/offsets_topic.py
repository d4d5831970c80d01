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

A record that cannot be read is never skipped in silence: each is logged (topic, partition,
offset, reason) and handed to `on_corrupt` (a metric). What follows depends on whose it is:
- a key that is no Connect offsets key at all (owner unknown) is reported and ignored, like the
  keys of other connectors sharing `connect-offsets`, which are ignored without a word;
- a key naming this connector with a partition that is no group, or a group's value that is no
  position: that group's last position is unknown, and starting it from the default start would
  replay or skip changes. Such records stay in `corrupt` / `unreadable_keys` until a later
  record of the same key replaces them (the owner's next commit, or a tombstone);
  `refuse_corrupt` ends start-up on them, and the worker fails such a group instead of starting
  it (`corrupt`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaSettingError, KafkaUnavailableError
from bridge.kafka.offsets import UnreadableKey, decode_value, group_of_key
from bridge.kafka.watermarks import all_watermarks
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position

log = structlog.get_logger(__name__)
_CATCH_UP_REPORT_S = 10.0  # how often a catch-up still behind says where it stands
CORRUPT_KINDS = ("key", "group_key", "value")
# A report's reader (`offsets show`, `status`, the REST offsets): how long the broker may hold a
# fetch that finds no new records. The default 500 ms is a fetch's long poll, right for a worker
# that follows the topic; a reader that reads to the end once waited it out in every report (the
# partitions of the 25 that hold nothing new held the fetch: 0.5 s of `offsets show`).
REPORT_FETCH_WAIT_MS = 20


@dataclass(frozen=True)
class CorruptRecord:
    """An offsets record that cannot be read. kind `key`: no Connect offsets key (owner unknown,
    ignored); `group_key`: names this connector but no group; `value`: a group's value is no
    position."""

    kind: str
    topic: str
    partition: int
    offset: int
    reason: str
    key: bytes
    group: GroupId | None = None

    def describe(self) -> str:
        whose = f"of group {self.group} " if self.group is not None else ""
        return f"unreadable offsets record {whose}at {self.topic}/{self.partition}@{self.offset}: {self.reason}"


class CorruptOffsetsError(KafkaSettingError):
    """Records of this connector in the offsets topic that cannot be read: start-up stops."""


class OffsetsTopic:
    """Latest committed position per group of `name`, from the offsets topic."""

    def __init__(self, client_config: dict[str, str], topic: str, name: str,
                 on_corrupt: Callable[[CorruptRecord], None] | None = None, *, report: bool = False) -> None:
        self.topic = topic
        self.name = name
        self.positions: dict[GroupId, Position] = {}
        # Groups whose latest record is unreadable (their last good position, if any, stays in
        # `positions` but must not be trusted), and keys of ours that name no group.
        self.corrupt: dict[GroupId, CorruptRecord] = {}
        self.unreadable_keys: dict[bytes, CorruptRecord] = {}
        self._on_corrupt = on_corrupt
        self._consumer = Consumer({
            **with_logger(client_config),
            "group.id": f"{name}-offsets-reader-{uuid.uuid4().hex[:8]}",  # never joins or commits
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
            **({"fetch.wait.max.ms": REPORT_FETCH_WAIT_MS} if report else {}),
        })
        self._client_config = client_config
        self._admin = self._admin_client()
        self._partitions: list[int] = []

    def _admin_client(self) -> Any:
        """Asks for the watermarks of every partition at once (bridge/kafka/watermarks.py)."""
        return AdminClient(with_logger(self._client_config))

    def start(self, timeout_s: float = 30.0) -> None:
        """Assign every partition of the topic; a topic created a moment ago may have no leader
        yet (LEADER_NOT_AVAILABLE in its metadata), so its metadata is asked again until it has."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                metadata = self._consumer.list_topics(self.topic, timeout=max(1.0, deadline - time.monotonic()))
            except KafkaException as error:
                raise KafkaUnavailableError(f"offsets topic {self.topic}: {error.args[0].str()}") from None
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

    def catch_up(self, timeout_s: float, committed_only: bool = False) -> None:
        """Read up to the end every partition had when called, waiting for open transactions: a
        worker must, since an open transaction of the slot's previous owner may still commit.
        `committed_only`: up to what is committed now (the last stable offset), for a report
        (`cdc-bridge status`, `offsets show`, `snapshot status`): a worker SIGKILLed a moment ago
        leaves its transaction open until its successor fences it or the broker aborts it, 10-20 s
        later, and a report need not wait for that."""
        started = time.monotonic()
        deadline = started + timeout_s
        ends = self._ends(deadline, committed_only)
        next_report = started + _CATCH_UP_REPORT_S
        while True:
            # Where the reader stands first: a reader already at the end (one kept warm between
            # reports, bridge/control/rest/backend.py) does not wait out a consume's timeout.
            positions = self._consumer.position([TopicPartition(self.topic, p) for p in self._partitions])
            behind = [tp.partition for tp in positions if _behind(tp.offset, *ends[tp.partition])]
            if not behind:
                return
            now = time.monotonic()
            if now > deadline:
                raise KafkaUnavailableError(
                    f"offsets topic {self.topic} not read to its end in {timeout_s:.0f} s (partitions {behind})"
                )
            if now >= next_report:  # a long wait (an open transaction, a leader not yet known) shows
                next_report = now + _CATCH_UP_REPORT_S
                log.info("reading the offsets topic to its end", topic=self.topic, waited_s=round(now - started),
                         behind={tp.partition: [tp.offset, ends[tp.partition][1]] for tp in positions
                                 if tp.partition in behind})
            # consume() returns at 10,000 records or its timeout, whichever is first: a short one,
            # so a report's few records are not held for it
            for message in self._consumer.consume(10_000, timeout=0.02):
                self._apply(message)

    def pause(self) -> None:
        """Stop fetching until `resume` (a reader kept between reports holds no records it was
        not asked for); where it stands is kept."""
        self._consumer.pause([TopicPartition(self.topic, p) for p in self._partitions])

    def resume(self) -> None:
        self._consumer.resume([TopicPartition(self.topic, p) for p in self._partitions])

    def _ends(self, deadline: float, committed_only: bool) -> dict[int, tuple[int, int]]:
        """The (low, high) watermarks of every partition, open transactions included (or,
        `committed_only`, high is the last stable offset), asked for in one round trip; retried
        while a new topic's leader is being elected."""
        try:
            return all_watermarks(self._admin, self.topic, self._partitions, deadline, committed_only=committed_only)
        except KafkaException as error:
            # Whatever the error, the next try asks with a new client: an AdminClient whose metadata
            # went stale while a broker was paused kept answering 'Leader epoch is older than broker
            # epoch' for minutes (tests/faults: the coordinator paused past the session timeout).
            self._renew_admin()
            raise KafkaUnavailableError(
                f"offsets topic {self.topic}: Kafka did not answer for the watermarks of its {len(self._partitions)} "
                f"partitions: {error.args[0].str()}") from None

    def _renew_admin(self) -> None:
        """A client can keep 'Unknown partition' or a fenced leader epoch for minutes after its
        leader's broker was killed or paused and came back (fault tests saw a worker's groups wait
        3+ minutes with every broker up): the next try starts with a new client and fresh metadata."""
        self._admin = self._admin_client()

    def _apply(self, message: Any) -> None:
        if message.error() is not None:
            if message.error().code() != KafkaError._PARTITION_EOF:
                log.warning("offsets topic read error", topic=self.topic, error=str(message.error()))
            return
        self.apply(message.partition(), message.offset(), message.key(), message.value())

    def apply(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        """One record of the topic, in the topic's order."""
        try:
            group = group_of_key(key, self.name)
        except UnreadableKey as error:
            if error.ours and value is None:
                self.unreadable_keys.pop(key or b"", None)  # tombstoned: cleaned up
            elif error.ours:
                self._report(CorruptRecord("group_key", self.topic, partition, offset, str(error), key or b""))
            elif value is not None:
                self._report(CorruptRecord("key", self.topic, partition, offset, str(error), key or b""))
            return
        if group is None:
            return  # another connector's key
        if value is None:
            self.positions.pop(group, None)
            self.corrupt.pop(group, None)
            return
        try:
            self.positions[group] = decode_value(value)
        except ValueError as error:
            self._report(CorruptRecord("value", self.topic, partition, offset, str(error), key or b"", group))
            return
        self.corrupt.pop(group, None)

    def _report(self, record: CorruptRecord) -> None:
        group = record.group
        if record.kind == "value" and group is not None:
            self.corrupt[group] = record
        elif record.kind == "group_key":
            self.unreadable_keys[record.key] = record
        if record.kind == "key":
            log.warning("unreadable offsets record ignored: its key names no connector", topic=self.topic,
                        partition=record.partition, offset=record.offset, reason=record.reason)
        else:
            log.error("unreadable offsets record of this connector", topic=self.topic, partition=record.partition,
                      offset=record.offset, reason=record.reason, group=None if group is None else str(group),
                      keyspace=None if group is None else group.keyspace,
                      table=None if group is None else group.table)
        if self._on_corrupt is not None:
            self._on_corrupt(record)

    def corrupt_records(self) -> list[CorruptRecord]:
        """The unreadable records of this connector still in force (not replaced since)."""
        return [*self.corrupt.values(), *self.unreadable_keys.values()]

    def refuse_corrupt(self) -> None:
        """Raise CorruptOffsetsError when a record of this connector cannot be read: the position
        of some group is unknown, and no default start would be right for it."""
        found = self.corrupt_records()
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise CorruptOffsetsError(
                "offset.storage.topic",
                f"{found[0].describe()}{more}; that group's last position is unknown. `cdc-bridge offsets "
                f"show` lists them; write the group's position again, or remove them with `cdc-bridge offsets "
                f"reset --corrupt` (those groups then start from the default start, scylla.initial.lookback.ms)")

    def close(self) -> None:
        self._consumer.close()


def _behind(position: int, low: int, high: int) -> bool:
    """Whether records before `high` are still unread (a negative position: nothing read yet)."""
    return high > low and position < high
