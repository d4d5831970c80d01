"""What the REST answers are read from and written to: the status topic (what each worker has
applied, its slots and failed groups), the control topic (target state, restart requests:
bridge/control/control_topic.py), the slot group's members and the offsets topic. Any worker
answers for the connector, on the server's threads, never on the worker's loop.

Kept warm rather than made per request (issue 42: a request that made its clients took 3.3-3.6 s
at p99 under CPU load): the status from a view kept in memory by its own thread
(bridge/control/status_view.py), the offsets from one reader of the offsets topic that each
request brings up to the topic's end (one ListOffsets round trip, then only the records written
since the last request)."""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from bridge.control.control_records import RestartRequest, TargetState
from bridge.control.control_topic import ControlTopic
from bridge.control.rest.shapes import NOT_STOPPED, OffsetEdit, RequestError
from bridge.control.status_view import StatusView
from bridge.kafka.client_log import with_logger
from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.offsets_topic import OffsetsTopic
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
        self._view = StatusView(kafka, config.name, config.status_topic, config.config_topic, config.slots_count)
        self._offsets_lock = threading.Lock()
        self._offsets: OffsetsTopic | None = None

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

    def status(self) -> dict[str, Any]:
        """Connect's ConnectorStateInfo (bridge/control/connector_state.py) from what the live
        workers report, as the status view holds it."""
        return self._view.status()

    def set_target(self, state: TargetState, user: str) -> None:
        self._control.set_target_state(state, user)
        self._view.sync(TIMEOUT_S)  # a status asked next shows the change asked for

    def restart(self, request: RestartRequest) -> None:
        self._control.request_restart(request)
        self._view.sync(TIMEOUT_S)

    def offsets(self) -> dict[GroupId, Position]:
        """The committed positions now, through the warm reader (a new one after any failure)."""
        with self._offsets_lock:
            try:
                if self._offsets is None:
                    topic = OffsetsTopic(self._kafka, self.config.offsets_topic, self.name, report=True)
                    self._offsets = topic
                    topic.start(TIMEOUT_S)
                else:
                    self._offsets.resume()
                self._offsets.catch_up(TIMEOUT_S, committed_only=True)
                self._offsets.pause()  # fetches nothing between requests
            except BaseException:
                if self._offsets is not None:
                    self._offsets.close()
                    self._offsets = None
                raise
            topic = self._offsets
            return {group: position for group, position in topic.positions.items() if group not in topic.corrupt}

    def check_stopped(self) -> None:
        """Offsets may change only once the connector is STOPPED and every live worker has
        applied it (no worker reads or commits then): Connect's 400 otherwise. Read exactly as
        of now, not from the view's last turn."""
        status = self._view.sync(TIMEOUT_S)
        if status["connector"]["state"] not in ("STOPPED", "UNASSIGNED") or (
                self._view.target_state() is not TargetState.STOPPED):
            raise RequestError(400, NOT_STOPPED)

    def close(self) -> None:
        self._view.close()
        with self._offsets_lock:
            if self._offsets is not None:
                self._offsets.close()
                self._offsets = None

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
