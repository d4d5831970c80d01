"""Debezium's Kafka signal channel (`signal.enabled.channels=kafka`, `signal.kafka.topic`).

A signal record's key is the connector's `topic.prefix`; its value is Debezium's signal:

    {"id": "...", "type": "execute-snapshot",
     "data": {"data-collections": ["ks.t"], "type": "incremental"}}
    {"id": "...", "type": "stop-snapshot", "data": {"data-collections": ["ks.t"]}}

Every worker follows the whole topic (one partition, from its beginning, no consumer group) and
acts on the groups it reads; which signals a group has taken in is kept in the group's offsets
value (`signal_offset`), so a signal is acted on once per group, whoever reads the group.
`parse_signal` is pure; `SignalFollower` only reads.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.watermarks import watermarks

EXECUTE, STOP = "execute-snapshot", "stop-snapshot"


@dataclass(frozen=True)
class Signal:
    offset: int
    id: str
    type: str  # EXECUTE or STOP
    tables: tuple[tuple[str, str], ...]  # empty for a stop: every table


class SignalError(ValueError):
    """A record of the signals topic that is no signal this bridge acts on; the message says why."""


def _table(name: object) -> tuple[str, str]:
    keyspace, dot, table = str(name).partition(".")
    if not (dot and keyspace and table):
        raise SignalError(f"data-collection {name!r} is not keyspace.table")
    return keyspace, table


def parse_signal(offset: int, value: bytes | None) -> Signal:
    """One signal record's value; raises SignalError naming what is wrong."""
    try:
        signal = json.loads(value or b"")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SignalError(f"not JSON: {error}") from None
    if not isinstance(signal, dict):
        raise SignalError("not a JSON object")
    kind, data = signal.get("type"), signal.get("data") or {}
    if kind not in (EXECUTE, STOP) or not isinstance(data, dict):
        raise SignalError(f"type {kind!r} is not {EXECUTE} or {STOP}")
    collections = data.get("data-collections") or []
    if not isinstance(collections, list):
        raise SignalError("data-collections is not a list")
    if kind == EXECUTE:
        if data.get("type", "incremental") != "incremental":
            raise SignalError(f"snapshot type {data.get('type')!r}: only incremental snapshots are signalled")
        if data.get("additional-conditions"):
            raise SignalError("additional-conditions are not supported: a snapshot reads whole token ranges")
        if not collections:
            raise SignalError("execute-snapshot names no data-collections")
    return Signal(offset, str(signal.get("id", "")), kind, tuple(_table(c) for c in collections))


def signal_value(kind: str, tables: list[str], signal_id: str | None = None) -> bytes:
    """A signal's value as `cdc-bridge snapshot start|stop` writes it."""
    data: dict[str, object] = {"data-collections": tables}
    if kind == EXECUTE:
        data["type"] = "incremental"
    return json.dumps({"id": signal_id or uuid.uuid4().hex, "type": kind, "data": data}).encode()


class SignalFollower:
    """Reads the signals topic from its beginning; `poll` returns what arrived since, as
    (offset, Signal or SignalError) for records keyed by our `topic.prefix` (others ignored)."""

    def __init__(self, client_config: dict[str, str], topic: str, prefix: str) -> None:
        self.topic, self._prefix = topic, prefix.encode()
        self._consumer = Consumer({**with_logger(client_config), "group.id": f"signals-{uuid.uuid4().hex[:8]}",
                                   "enable.auto.commit": False, "enable.partition.eof": False})
        try:
            self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        except KafkaException as error:
            raise KafkaUnavailableError(f"signals topic {topic}: {error.args[0].str()}") from None

    def poll(self) -> list[Signal | SignalError]:
        found: list[Signal | SignalError] = []
        for message in self._consumer.consume(1000, timeout=0):
            if message.error() is not None or message.key() != self._prefix:
                continue
            try:
                found.append(parse_signal(message.offset() or 0, message.value()))
            except SignalError as error:
                found.append(SignalError(f"{self.topic}@{message.offset()}: {error}"))
        return found

    def catch_up(self, timeout_s: float) -> list[Signal | SignalError]:
        """Everything up to the end the topic has now (groups start knowing every signal so far)."""
        try:
            start, end = watermarks(self._consumer, self.topic, 0, time.monotonic() + timeout_s)
        except KafkaException as error:
            raise KafkaUnavailableError(f"signals topic {self.topic}: {error.args[0].str()}") from None
        found: list[Signal | SignalError] = []
        deadline = time.monotonic() + timeout_s
        while start < end and time.monotonic() < deadline:
            found += self.poll()
            position = self._consumer.position([TopicPartition(self.topic, 0)])[0].offset
            if position >= end:
                return found
            time.sleep(0.05)
        if start >= end:
            return found
        raise KafkaUnavailableError(f"signals topic {self.topic}: not read to its end in {timeout_s} s")

    def close(self) -> None:
        self._consumer.close()
