"""What the REST answers are read from and written to: the status topic (what each worker has
applied, its slots and failed groups), the control topic (target state, restart requests:
bridge/control/control_topic.py), the slot group's members and the offsets topic. Each call reads
Kafka afresh (any worker answers for the connector; nothing is cached but the cluster id), on
the server's threads, never on the worker's loop."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from bridge.control.connector_state import connector_status, live_statuses
from bridge.control.control_records import RestartRequest, TargetState
from bridge.control.control_topic import ControlTopic
from bridge.control.rest.shapes import NOT_STOPPED, OffsetEdit, RequestError
from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.offsets_topic import OffsetsTopic
from bridge.kafka.status_topic import read_statuses
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position
from bridge.settings import BridgeConfig
from bridge.settings.masking import MASK, is_kafka_secret

# Kafka Connect gives a REST request 90 s; 30 s is generous on a loaded machine for answers that
# take well under a second (the offsets topic read in one round trip, issue 42).
TIMEOUT_S = 30.0


class KafkaBackend:
    def __init__(self, config: BridgeConfig, kafka: dict[str, str]) -> None:
        self.config, self.name, self.slots_count = config, config.name, config.slots_count
        self._kafka = kafka
        self._admin = AdminClient({**with_logger(kafka), "socket.timeout.ms": int(TIMEOUT_S * 1000)})
        self._control = ControlTopic(config, kafka)
        self._cluster_id: str | None = None

    def cluster_id(self) -> str:
        if self._cluster_id is None:
            try:
                self._cluster_id = str(self._admin.list_topics(timeout=TIMEOUT_S).cluster_id or "")
            except KafkaException as error:
                raise KafkaUnavailableError(error.args[0].str()) from None
        return self._cluster_id

    def masked_config(self) -> dict[str, str]:
        """The worker's settings as `cdc-bridge config describe` shows them (secrets masked);
        settings left unset are left out, as Connect shows only what a config holds."""
        shown = {key: value for key, value, _default, _meaning in self.config.describe() if value != ""}
        for key in [key for key in shown if key.startswith("kafka.")]:
            if is_kafka_secret(key.removeprefix("kafka.")):
                shown[key] = MASK
        return shown

    def topics(self) -> list[str]:
        found = [f"{self.config.topic_prefix}.{keyspace}.{table}" for keyspace, table in self.config.tables()]
        found += [topic for topic in (self.config.dead_letter_topic, self.config.dropped_changes_topic) if topic]
        return sorted(found)

    def target_state(self) -> TargetState:
        return self._control.read_target_state(TIMEOUT_S)

    def status(self) -> dict[str, Any]:
        """Connect's ConnectorStateInfo (bridge/control/connector_state.py) from what the live
        workers report."""
        target = self.target_state()
        statuses = read_statuses(self._kafka, self.config.status_topic, TIMEOUT_S)
        live = live_statuses(statuses, self._members(), int(time.time() * 1000))
        return connector_status(self.name, target, live, self.slots_count)

    def set_target(self, state: TargetState, user: str) -> None:
        self._control.set_target_state(state, user)

    def restart(self, request: RestartRequest) -> None:
        self._control.request_restart(request)

    def offsets(self) -> dict[GroupId, Position]:
        topic = OffsetsTopic(self._kafka, self.config.offsets_topic, self.name)
        try:
            topic.start(TIMEOUT_S)
            topic.catch_up(TIMEOUT_S, committed_only=True)
            return {group: position for group, position in topic.positions.items() if group not in topic.corrupt}
        finally:
            topic.close()

    def check_stopped(self) -> None:
        """Offsets may change only once the connector is STOPPED and every live worker has
        applied it (no worker reads or commits then): Connect's 400 otherwise."""
        if self.status()["connector"]["state"] not in ("STOPPED", "UNASSIGNED") or (
                self.target_state() is not TargetState.STOPPED):
            raise RequestError(400, NOT_STOPPED)

    def write_offsets(self, edits: list[OffsetEdit]) -> None:
        """The records as the workers write them (same keys, murmur2 partitions as Connect)."""
        producer = Producer({**with_logger(self._kafka), "partitioner": "murmur2_random", "enable.idempotence": True})
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failures.append(error.str())

        for edit in edits:
            value = None if edit.position is None else encode_value(edit.position)
            producer.produce(self.config.offsets_topic, value, encode_key(self.name, edit.group), on_delivery=delivered)
        if producer.flush(TIMEOUT_S):
            raise KafkaUnavailableError(f"offsets topic {self.config.offsets_topic}: not written in {TIMEOUT_S:.0f} s")
        if failures:
            raise KafkaUnavailableError(f"offsets topic {self.config.offsets_topic}: {failures[0]}")

    def _members(self) -> set[str]:
        group = f"{self.name}-workers"
        try:
            description = self._admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(
                TIMEOUT_S)
        except KafkaException as error:
            raise KafkaUnavailableError(f"cannot describe the consumer group {group}: {error.args[0].str()}") from None
        return {member.member_id for member in description.members}
