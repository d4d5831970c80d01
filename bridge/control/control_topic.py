"""The control topic (Kafka Connect's `config.storage.topic`, default `<name>-config`; one
partition, compacted): the connector's target state and restart requests, written by the command
line (`cdc-bridge pause|resume|stop|restart`) and the REST server, followed by every worker.

`ControlTopic` writes and reads the target state; `ControlFollower` is what a worker polls
(non-blocking) for records that arrive while it runs. A worker reads the topic to its end when it
starts (`catch_up`): the last target state holds (a worker started while PAUSED stays paused);
restart requests older than the worker are not acted on (they were for the workers of then).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from bridge.control.control_records import (
    ControlRecord,
    ControlRecordError,
    RestartRequest,
    TargetState,
    TargetStateRecord,
    decode,
    encode_restart,
    encode_target_state,
)
from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.watermarks import watermarks
from bridge.settings import BridgeConfig

log = structlog.get_logger(__name__)


class ControlTopic:
    """Writes and reads the control records of one connector (`name`)."""

    def __init__(self, config: BridgeConfig, kafka_config: dict[str, str] | None = None) -> None:
        self.name, self.topic = config.name, config.config_topic
        self._kafka = kafka_config if kafka_config is not None else config.kafka_client_config()

    def set_target_state(self, state: TargetState, requested_by: str) -> None:
        """Write the target state (every worker applies it within a turn or two); raises
        KafkaUnavailableError when the broker did not take it."""
        key, value = encode_target_state(self.name, TargetStateRecord(state, requested_by, _now_ms()))
        self._send(key, value)

    def request_restart(self, request: RestartRequest) -> None:
        key, value = encode_restart(self.name, request)
        self._send(key, value)

    def read_target_state(self, timeout_s: float) -> TargetState:
        """The target state now: STARTED when nothing was ever written."""
        follower = ControlFollower(self._kafka, self.topic, self.name)
        try:
            record = follower.catch_up(timeout_s)
        finally:
            follower.close()
        return record.state if record is not None else TargetState.STARTED

    def follower(self) -> ControlFollower:
        return ControlFollower(self._kafka, self.topic, self.name)

    def _send(self, key: bytes, value: bytes, timeout_s: float = 15.0) -> None:
        producer = Producer({**with_logger(self._kafka), "enable.idempotence": True, "linger.ms": 0})
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failures.append(error.str())

        try:
            producer.produce(self.topic, value, key, on_delivery=delivered)
        except KafkaException as error:
            raise KafkaUnavailableError(f"control topic {self.topic}: {error.args[0].str()}") from None
        if producer.flush(timeout_s) > 0:
            raise KafkaUnavailableError(f"control topic {self.topic}: not written in {timeout_s:.0f} s")
        if failures:
            raise KafkaUnavailableError(f"control topic {self.topic}: {failures[0]}")


class ControlFollower:
    """Reads the control topic from its beginning, without a consumer group (every worker reads
    every record). `poll` never blocks."""

    def __init__(self, client_config: dict[str, str], topic: str, name: str) -> None:
        self.topic, self._name = topic, name
        self._consumer: Any = Consumer({**with_logger(client_config), "group.id": f"control-{uuid.uuid4().hex[:8]}",
                                        "enable.auto.commit": False, "enable.partition.eof": False,
                                        "isolation.level": "read_committed"})
        try:
            self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        except KafkaException as error:
            raise KafkaUnavailableError(f"control topic {topic}: {error.args[0].str()}") from None

    def poll(self) -> list[ControlRecord | ControlRecordError]:
        """The records of this connector that arrived since the last poll, in order."""
        found: list[ControlRecord | ControlRecordError] = []
        for message in self._consumer.consume(1000, timeout=0):
            if message.error() is not None:
                continue
            try:
                record = decode(self._name, message.key(), message.value())
            except ControlRecordError as error:
                found.append(ControlRecordError(f"{self.topic}@{message.offset()}: {error}"))
                continue
            if record is not None:
                found.append(record)
        return found

    def catch_up(self, timeout_s: float) -> TargetStateRecord | None:
        """Read to the end the topic has now; the last target state written (None: never
        written). Restart requests read on the way are dropped: they are older than this reader."""
        try:
            start, end = watermarks(self._consumer, self.topic, 0, time.monotonic() + timeout_s, absent_ok=True)
        except KafkaException as error:
            if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None  # no worker of this name has run since the control plane came: nothing written
            raise KafkaUnavailableError(f"control topic {self.topic}: {error.args[0].str()}") from None
        latest: TargetStateRecord | None = None
        deadline = time.monotonic() + timeout_s
        while start < end:
            for record in self.poll():
                if isinstance(record, TargetStateRecord):
                    latest = record
                elif isinstance(record, ControlRecordError):
                    log.warning("control record skipped", error=str(record))
            if self._consumer.position([TopicPartition(self.topic, 0)])[0].offset >= end:
                break
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"control topic {self.topic}: not read to its end in {timeout_s:.0f} s")
            time.sleep(0.05)
        return latest

    def close(self) -> None:
        self._consumer.close()


def _now_ms() -> int:
    return int(time.time() * 1000)
