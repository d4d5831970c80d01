"""Keeping a transactional producer alive across fencing.

One transactional id serves the life of the process: a replacement producer then fences the one
it replaces (whose last commit may still be in flight) instead of racing it. A fenced producer
is dead; a new one continues (a worker paused past its transaction timeout is fenced once and
carries on), but fencing again and again means another process runs with this worker's
identity: the worker stops rather than fence each other. What is re-read after an abort is the
loop's business (`Worker._restart_from_commit`); docs/worker.md has the failure cases.
"""

from __future__ import annotations

import contextlib
import time

import structlog

from bridge.kafka.errors import KafkaUnavailableError
from bridge.kafka.transactions import TransactionalProducer
from bridge.observability.telemetry import WorkerTelemetry

log = structlog.get_logger(__name__)
# Each waits up to 30 s for Kafka: about five minutes before the worker gives up and exits.
PRODUCER_ATTEMPTS = 10
FENCINGS_TOLERATED = 3  # within FENCING_WINDOW_S
FENCING_WINDOW_S = 60.0


class ProducerKeeper:
    """Makes the worker's producer and replaces it when fenced; `fatal` says why the worker must
    stop (set once, never cleared)."""

    def __init__(self, kafka_settings: dict[str, str], transactional_id: str, instance_id: str | None,
                 telemetry: WorkerTelemetry) -> None:
        self._kafka = kafka_settings
        self._transactional_id = transactional_id
        self._instance_id = instance_id
        self._telemetry = telemetry
        self._fencings: list[float] = []
        self.fatal: str | None = None

    def new(self) -> TransactionalProducer:
        producer = TransactionalProducer(self._kafka, self._transactional_id)
        self._telemetry.producer_ready(True)
        return producer

    def replace(self, old: TransactionalProducer | None, reason: str) -> TransactionalProducer | None:
        """A new producer in place of a fenced or unusable `old` one (None when none could start)."""
        now = time.monotonic()
        self._fencings = [t for t in self._fencings if now - t < FENCING_WINDOW_S] + [now]
        if len(self._fencings) >= FENCINGS_TOLERATED:
            self.fatal = (f"the transactional producer was fenced {len(self._fencings)} times within a minute "
                          f"(last: {reason}); does another worker run with worker.instance.id="
                          f"{self._instance_id}?")
        log.warning("producer unusable; starting a new one", error=reason)
        self._telemetry.producer_ready(False, f"kafka producer: being replaced ({reason})")
        if old is not None:
            with contextlib.suppress(Exception):
                old.close(1.0)
        for attempt in range(1, PRODUCER_ATTEMPTS + 1):
            try:
                return self.new()
            except KafkaUnavailableError as error:  # Kafka still away: init_transactions timed out
                log.warning("new producer could not start, retrying", attempt=attempt, error=str(error))
        self.fatal = f"no transactional producer could start in {PRODUCER_ATTEMPTS} attempts"
        return None
