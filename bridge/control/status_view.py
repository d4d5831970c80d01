"""The connector's status as the REST API serves it, kept in memory (issue 42: under CPU load
`GET /connectors/{name}/status` took 3.6 s at p99 when each request made two consumers and an
admin client, read the control and status topics from their beginning and described the slot
group, 6+ round trips and three clients' start-up and close on a starved machine).

One thread tails the status topic (every worker's latest record) and the control topic (the
last target state) with one consumer that is never closed, and describes the slot group every
`MEMBERS_EVERY_S`; a request reads what it holds, without asking Kafka. How current that is: a
record is applied within a fetch's wait (`fetch.wait.max.ms` 100) of being written, membership
within `MEMBERS_EVERY_S`; the status was always a moment's picture (a worker applies a target
state within a turn or two). A request that needs the state exactly as of now (before offsets
are changed, after a change asked through this API) calls `sync`: the topics' ends in one
ListOffsets round trip and the group described, then it waits until the thread has read that far.
A view whose membership could not be refreshed for `STALE_AFTER_S` answers KafkaUnavailableError
rather than an old picture."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from bridge.control.connector_state import connector_status, live_statuses
from bridge.control.control_records import ControlRecordError, TargetState, TargetStateRecord, decode
from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.status_topic import WorkerStatus, parse_status
from bridge.kafka.watermarks import all_watermarks

log = structlog.get_logger(__name__)
MEMBERS_EVERY_S = 1.0
STALE_AFTER_S = 15.0
POLL_S = 0.1


class StatusView:
    """Connect's ConnectorStateInfo of connector `name`, from memory (see the module's text)."""

    def __init__(self, kafka: dict[str, str], name: str, status_topic: str, control_topic: str,
                 slots_count: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self.slots_count = name, slots_count
        self._topics = (status_topic, control_topic)
        self._group = f"{name}-workers"
        self._clock = clock
        self._consumer: Any = Consumer({
            **with_logger(kafka), "group.id": f"status-view-{uuid.uuid4().hex[:8]}",  # never joins or commits
            "enable.auto.commit": False, "enable.partition.eof": False, "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100})
        self._admin = AdminClient(with_logger(kafka))
        self._changed = threading.Condition()
        self._statuses: dict[bytes, WorkerStatus] = {}
        self._target = TargetState.STARTED
        self._members: set[str] = set()
        self._members_at: float | None = None  # when last described (clock); None: never
        self._error = "not read yet"
        self._assigning = threading.Lock()
        self._assigned: dict[str, list[int]] = {}  # topic -> partitions
        self._positions: dict[tuple[str, int], int] = {}
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rest-status-view", daemon=True)
        self._thread.start()

    def status(self) -> dict[str, Any]:
        """The status now, as held; the first call waits for the view to have read the topics."""
        with self._changed:
            fresh = self._members_at is not None and self._clock() - self._members_at <= STALE_AFTER_S
        if not fresh:
            self.sync(STALE_AFTER_S)
        with self._changed:
            return self._answer()

    def target_state(self) -> TargetState:
        with self._changed:
            return self._target

    def sync(self, timeout_s: float) -> dict[str, Any]:
        """The status exactly as of this call: every record written before it read, the slot
        group described after it. Raises KafkaUnavailableError when Kafka does not answer."""
        deadline = self._clock() + timeout_s
        try:
            self._assign(timeout_s)
            ends = {(topic, p): end for topic, partitions in self._assigned.items()
                    for p, end in all_watermarks(self._admin, topic, partitions, time.monotonic() + timeout_s,
                                                 committed_only=True).items()}
            members = self._describe(timeout_s)
        except KafkaException as error:
            raise KafkaUnavailableError(f"status of {self.name}: {error.args[0].str()}") from None
        with self._changed:
            self._members, self._members_at = members, self._clock()
            if not self._changed.wait_for(lambda: all(not _behind(self._positions.get(tp, -1), *end)
                                                      for tp, end in ends.items()),
                                          max(0.0, deadline - self._clock())):
                raise KafkaUnavailableError(f"status of {self.name}: the status and control topics not read to "
                                            f"their end in {timeout_s:.0f} s")
            return self._answer()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        with contextlib.suppress(Exception):
            self._consumer.close()

    def _answer(self) -> dict[str, Any]:
        live = live_statuses(self._statuses.values(), self._members, int(time.time() * 1000))
        return connector_status(self.name, self._target, live, self.slots_count)

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                if len(self._assigned) < len(self._topics):
                    self._assign(5.0)
                if not self._assigned:
                    self._closed.wait(POLL_S)
                messages = self._consumer.consume(1000, timeout=POLL_S) if self._assigned else []
                positions = self._consumer.position([TopicPartition(topic, p) for topic, partitions
                                                     in self._assigned.items() for p in partitions])
                with self._changed:
                    for message in messages:
                        self._apply(message)
                    self._positions.update({(tp.topic, tp.partition): tp.offset for tp in positions})
                    self._changed.notify_all()
                due = self._members_at is None or self._clock() - self._members_at >= MEMBERS_EVERY_S
                if due:
                    members = self._describe(5.0)
                    with self._changed:
                        self._members, self._members_at = members, self._clock()
            except KafkaException as error:
                self._error = error.args[0].str()
                log.debug("status view: Kafka did not answer", error=self._error)
                self._closed.wait(1.0)
            except Exception as error:  # never the thread's end: the next turn tries again
                self._error = str(error)
                log.warning("status view turn failed", error=self._error)
                self._closed.wait(1.0)

    def _assign(self, timeout_s: float) -> None:
        """Every partition of the topics that exist, from their beginning (a topic absent now is
        looked for again on the next turn: no worker of this name has created it yet)."""
        with self._assigning:
            if len(self._assigned) < len(self._topics):
                self._assign_found(timeout_s)

    def _assign_found(self, timeout_s: float) -> None:
        found = dict(self._assigned)
        for topic in self._topics:
            if topic in found:
                continue
            metadata = self._consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if metadata is not None and metadata.error is None and metadata.partitions:
                found[topic] = sorted(metadata.partitions)
        if found != self._assigned:
            self._consumer.incremental_assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                                               for topic, partitions in found.items()
                                               if topic not in self._assigned for p in partitions])
            self._assigned = found

    def _describe(self, timeout_s: float) -> set[str]:
        description = self._admin.describe_consumer_groups([self._group], request_timeout=timeout_s)[
            self._group].result(timeout_s)
        return {member.member_id for member in description.members}

    def _apply(self, message: Any) -> None:
        if message.error() is not None:
            return  # a fetch error: librdkafka retries it, and `sync` times out if it lasts
        if message.topic() == self._topics[1]:
            try:
                record = decode(self.name, message.key(), message.value())
            except ControlRecordError:
                return  # the workers log it
            if isinstance(record, TargetStateRecord):
                self._target = record.state
            return
        key, value = message.key() or b"", message.value()
        if value is None:
            self._statuses.pop(key, None)
            return
        try:
            self._statuses[key] = parse_status(json.loads(value))
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # not ours: the status topic is for reading, never for stopping


def _behind(position: int, low: int, high: int) -> bool:
    return high > low and position < high
