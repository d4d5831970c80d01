"""Slots: the partitions of the slots topic, handed to workers by one Kafka consumer group.

A group (table x generation x vnode, or one tablet stream) maps onto a slot by a stable hash of
its offsets key, so every worker computes the same owner without talking to the others. The
topic stays empty: only its partitions matter. `cooperative-sticky` moves only the slots that
must move; with `worker.instance.id` the member is static, so a restarted pod gets its slots
back without a rebalance.

The callbacks run inside `poll()`, on the worker's main thread: on revoke the worker stops the
slots' groups and commits before returning (the cooperative protocol hands a slot on only after
that); on lost it abandons them without committing.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bridge.kafka.client_log import with_logger
from bridge.kafka.offsets import encode_key
from bridge.scylla.groups import GroupId

SlotsCallback = Callable[[set[int]], None]


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
        self._callbacks = (on_assigned, on_revoked, on_lost)
        self._consumer = Consumer(config)
        self._consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lose)

    def poll(self) -> None:
        """Heartbeats and rebalance callbacks; the slots topic holds no records."""
        self._consumer.poll(0)

    def _assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        slots = {tp.partition for tp in partitions}
        self.owned |= slots
        self._callbacks[0](slots)

    def _revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        slots = {tp.partition for tp in partitions}
        self._callbacks[1](slots)
        self.owned -= slots

    def _lose(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        slots = {tp.partition for tp in partitions}
        self.owned -= slots
        self._callbacks[2](slots)

    def fencing_offsets(self) -> list[TopicPartition]:
        """What every transaction commits for the group: proof of the owned slots' generation."""
        return [TopicPartition(self.topic, slot, 0) for slot in sorted(self.owned)]

    def group_metadata(self) -> Any:
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        with contextlib.suppress(KafkaException):
            self._consumer.close()  # revokes (callback) and leaves the group
