"""Slots: the partitions of the slots topic, handed to workers by one Kafka consumer group.

A group (table x generation x vnode, or one tablet stream) maps onto a slot by a stable hash of
its offsets key, so every worker computes the same owner without talking to the others. The
topic stays empty: only its partitions matter. `cooperative-sticky` moves only the slots that
must move; with `worker.instance.id` the member is static, so a restarted pod gets its slots
back without a rebalance.

The callbacks run inside `poll()`, on the worker's main thread: on revoke the worker stops the
slots' groups and commits before returning (the cooperative protocol hands a slot on only after
that); on lost it abandons them without committing.

A member that lost its slots (its session expired, e.g. while a broker restarted) normally joins
again within seconds. librdkafka can leave such a consumer outside its group until it is made
anew (confluentinc/librdkafka#3396, #5153; seen here once after a one-broker restart: no
assignment for 90 s while the broker answered). So a member still without an assignment
`REJOIN_BOUND_S` after losing its slots, or after subscribing, is replaced by a new consumer, as
long as the broker answers (with Kafka away, waiting is right).

The map is only right while the topic has exactly `slots.count` partitions: start-up refuses a
mismatch (`topics.py`), and a running member checks again at every assignment and every
`CHECK_INTERVAL_S`; a change sets `fatal` (the worker aborts its open transaction and stops, and
its restart is refused until `slots.count` matches), so two maps never read side by side for
longer than that interval.
"""

from __future__ import annotations

import contextlib
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition

from bridge.kafka.client_log import with_logger
from bridge.kafka.offsets import encode_key
from bridge.kafka.topics import slots_mismatch
from bridge.scylla.groups import GroupId

log = structlog.get_logger(__name__)
SlotsCallback = Callable[[set[int]], None]
CHECK_INTERVAL_S = 5.0
_CHECK_TIMEOUT_S = 0.5  # on the main loop: a slow answer skips one check rather than stalling the loop
_PROBE_TIMEOUT_S = 2.0  # a new client's first answer (connect, then metadata), at most once per rejoin bound
# A healthy rejoin takes a session timeout (10 s) plus the other members' revocations (a commit,
# under 30 s): past this the member is presumed stuck.
REJOIN_BOUND_S = 45.0


def slot_of(name: str, group: GroupId, slots: int) -> int:
    return zlib.crc32(encode_key(name, group)) % slots


class SlotMembership:
    def __init__(
        self,
        client_config: dict[str, str],
        topic: str,
        group_id: str,
        instance_id: str | None,
        *,
        on_assigned: SlotsCallback,
        on_revoked: SlotsCallback,
        on_lost: SlotsCallback,
        slots: int | None = None,
        name: str = "",
        rejoin_bound_s: float = REJOIN_BOUND_S,
    ) -> None:
        config: dict[str, Any] = {
            "session.timeout.ms": 10_000,  # a dead worker's slots move after this
            "heartbeat.interval.ms": 1_000,
            **with_logger(client_config),
            "group.id": group_id,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
        if instance_id:
            config["group.instance.id"] = instance_id
        self.topic = topic
        self.owned: set[int] = set()
        self.fatal: str | None = None  # set once the topic's partitions no longer match `slots`
        self._slots = slots
        self._name = name
        self._bootstrap = client_config.get("bootstrap.servers", "?")
        self._next_check = time.monotonic() + CHECK_INTERVAL_S
        self._callbacks = (on_assigned, on_revoked, on_lost)
        self._config = config
        self._rejoin_bound_s = rejoin_bound_s
        self._unassigned_since: float | None = time.monotonic()
        self._consumer = self._subscribe(Consumer(self._config))

    def _subscribe(self, consumer: Any) -> Any:
        consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lose)
        return consumer

    def poll(self) -> None:
        """Heartbeats and rebalance callbacks; the slots topic holds no records."""
        self._consumer.poll(0)
        if self._unassigned_since is not None and time.monotonic() - self._unassigned_since >= self._rejoin_bound_s:
            self._rejoin()
        if self._slots is not None and self.fatal is None and time.monotonic() >= self._next_check:
            self._next_check = time.monotonic() + CHECK_INTERVAL_S
            self._check_partitions(_CHECK_TIMEOUT_S)

    def _rejoin(self) -> None:
        """Replace a member that has gone `rejoin_bound_s` without an assignment, unless Kafka is
        out of reach. The old consumer is closed on a daemon thread (its close may block on the
        very state that stuck it); its callbacks are ignored from now on."""
        waited = time.monotonic() - (self._unassigned_since or 0.0)
        self._unassigned_since = time.monotonic()
        # Whether Kafka answers is asked by the new client: the stuck one may have no broker
        # connection up while the broker answers (CI: no rejoin for 90 s after a broker restart,
        # each probe through the stuck member timing out, so it was never replaced).
        candidate = Consumer(self._config)
        try:
            candidate.list_topics(self.topic, timeout=_PROBE_TIMEOUT_S)
        except KafkaException:
            _close_quietly(candidate)  # never subscribed: closes at once
            return
        log.warning("slot group not joined; starting a new member", waited_s=round(waited, 1),
                    member=self.member_id())
        stuck, self._consumer = self._consumer, self._subscribe(candidate)
        threading.Thread(target=_close_quietly, args=(stuck,), name="slot-member-close", daemon=True).start()

    def _check_partitions(self, timeout_s: float) -> None:
        """Compare the topic's partition count with `slots`; an unanswered request is no news."""
        try:
            topic = self._consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
        except KafkaException:
            return
        if topic is not None and topic.partitions:
            self._mismatch(len(topic.partitions))

    def _mismatch(self, partitions: int) -> None:
        if self._slots is None or partitions == self._slots or self.fatal is not None:
            return
        self.fatal = "slots.count: " + slots_mismatch(self.topic, partitions, self._slots, self._name,
                                                      self._bootstrap)
        log.error("slots topic changed under a running worker; stopping", topic=self.topic,
                  partitions=partitions, slots_count=self._slots)

    def _assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a replaced member closing
        self._unassigned_since = None
        slots = {tp.partition for tp in partitions}
        if self._slots is not None and slots and max(slots) >= self._slots:
            self._check_partitions(5.0)
            self._mismatch(max(slots) + 1)  # (no answer: at least that many)
        self.owned |= slots
        if self.fatal is None:  # else the worker stops at once: starting these slots' groups is no use
            self._callbacks[0](slots)

    def _revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return
        slots = {tp.partition for tp in partitions}
        self._callbacks[1](slots)
        self.owned -= slots

    def _lose(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return
        self._unassigned_since = time.monotonic()
        slots = {tp.partition for tp in partitions}
        self.owned -= slots
        self._callbacks[2](slots)

    def fencing_offsets(self) -> list[TopicPartition]:
        """What every transaction commits for the group: proof of the owned slots' generation."""
        return [TopicPartition(self.topic, slot, 0) for slot in sorted(self.owned)]

    def member_id(self) -> str | None:
        """This worker's member id in the slot group (None before it joined)."""
        return str(self._consumer.memberid() or "") or None

    def group_metadata(self) -> Any:
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        _close_quietly(self._consumer)  # revokes (callback) and leaves the group


def _close_quietly(consumer: Any) -> None:
    with contextlib.suppress(KafkaException, RuntimeError):
        consumer.close()
