"""One worker process: slots -> group readers -> translate -> serialize -> one Kafka transaction.

The main thread runs everything but Cassandra and Kafka I/O (the reader's and librdkafka's own
threads): it turns the slot consumer's callbacks, follows the offsets topic, takes the reader's
events, translates and produces records, and commits. A transaction holds the records of every
owned group plus the offset record of each group it advanced; an aborted one is re-read from
the last committed positions. docs/worker.md has the design and the failure cases.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import structlog

from bridge.envelope import (
    EnvelopeError,
    RecordSerializer,
    TranslationError,
    Translator,
    UnknownColumnError,
    build_record_serializer,
)
from bridge.kafka.errors import KafkaUnavailableError, ProducerFencedError, TransactionAbortedError
from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.offsets_topic import OffsetsTopic
from bridge.kafka.registry import registry_client
from bridge.kafka.slots import SlotMembership
from bridge.kafka.transactions import TransactionalProducer
from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.errors import SchemaError
from bridge.scylla.events import (
    GroupDiscovered,
    GroupEndKnown,
    GroupFinished,
    GroupProgress,
    GroupRetrying,
    PossibleGap,
    ReaderFailed,
    RecordRead,
    SourceEvent,
)
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position
from bridge.scylla.reader import SourceReader
from bridge.scylla.table_schema import TableSchemas
from bridge.settings import BridgeConfig
from bridge.worker.ownership import GroupBook

log = structlog.get_logger(__name__)
# Each waits up to 30 s for Kafka: about five minutes before the worker gives up and exits.
_PRODUCER_ATTEMPTS = 10


@dataclass
class Stats:
    records_produced: int = 0
    transactions: int = 0
    aborts: int = 0


class Worker:
    def __init__(self, config: BridgeConfig, session: Any, kafka_config: dict[str, str],
                 telemetry: WorkerTelemetry) -> None:
        self.config = config
        self.stats = Stats()
        self._session = session
        self._kafka = kafka_config
        self._telemetry = telemetry
        # The clients polled every turn also report whether Kafka is reachable (readiness).
        self._watched_kafka = {**kafka_config, **telemetry.kafka_client_settings()}
        self._book = GroupBook(config.name, config.slots_count)
        self._schemas = TableSchemas(session)
        envelope_settings = config.envelope_settings()
        self._serializer: RecordSerializer = build_record_serializer(envelope_settings, registry_client)
        # Avro schemas are registered when a plan is built, never inside a transaction's serialize.
        self._translator = Translator(envelope_settings, on_new_plan=self._serializer.prepare)
        self._pending: dict[GroupId, Position] = {}
        self._committed: dict[GroupId, Position] = {}  # ours, authoritative over the follower's view
        self._urgent = False
        self._changed = True
        self._txn_started = 0.0
        self._last_commit = time.monotonic()
        self._fatal: str | None = None
        self._fencings: list[float] = []
        self._stale_batch = False
        instance = config.worker_instance_id
        self._offsets = OffsetsTopic(kafka_config, config.offsets_topic, config.name)
        self._producer: TransactionalProducer | None = None
        # One transactional id for the life of the process: a replacement producer then fences
        # the one it replaces (whose last commit may still be in flight) instead of racing it.
        self._transactional_id = f"{config.name}-{instance or uuid.uuid4().hex[:12]}"
        self._reader: SourceReader | None = None
        self._membership: SlotMembership | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for keyspace, table in self.config.tables():
            # A missing table, or a schema the registry refuses, stops start-up here.
            self._translator.plan(self._schemas.get(keyspace, table))
        self._offsets.start()
        self._offsets.catch_up(timeout_s=60)
        self._producer = self._new_producer()
        self._reader = SourceReader(self._session, self.config.reader_settings(),
                                    on_query=self._telemetry.query_answered)
        for keyspace, table in self.config.tables():
            self._reader.watch_table(keyspace, table, self._oldest_saved_us(keyspace, table))
        self._membership = SlotMembership(
            self._watched_kafka, self.config.slots_topic_name, f"{self.config.name}-workers",
            self.config.worker_instance_id,
            on_assigned=self._assigned, on_revoked=self._revoked, on_lost=self._lost,
        )

    def _oldest_saved_us(self, keyspace: str, table: str) -> int | None:
        """Discovery starts at the generation holding the oldest saved position of the table (or
        at the default start when there is none): with `scylla.initial.lookback.ms` shorter than
        a stop, the groups of a generation that ended meanwhile would otherwise never be found,
        and the rest of their changes never read."""
        saved = [position.window_start_us for group, position in self._offsets.positions.items()
                 if (group.keyspace, group.table) == (keyspace, table)]
        return min(saved) if saved else None

    def _new_producer(self) -> TransactionalProducer:
        producer = TransactionalProducer(self._watched_kafka, self._transactional_id)
        self._telemetry.producer_ready(True)
        return producer

    def run(self, stop: threading.Event) -> int:
        """Until `stop` is set (SIGTERM) or a fatal error; returns the exit code."""
        assert self._reader is not None and self._membership is not None
        while not stop.is_set() and self._fatal is None:
            self._membership.poll()
            if self._offsets.poll():
                self._changed = True
            self._stale_batch = False
            for event in self._reader.poll(timeout_s=0.02):
                self._handle(event)
            if self._changed:
                self._start_ready()
            self._maybe_commit()
            self._telemetry.turn(self._reading_positions, len(self._book.owned), self._queue_length)
        return self.shutdown()

    def _reading_positions(self) -> dict[GroupId, Position]:
        view = {**self._committed_view(), **self._pending}
        return {group: view[group] for group in self._book.active if group in view}

    def _queue_length(self) -> int:
        return 0 if self._producer is None else self._producer.queue_length()

    def shutdown(self) -> int:
        log.info("worker stopping", pending_groups=len(self._pending))
        self._commit_quietly()
        if self._membership is not None:
            self._membership.close()  # revokes our slots (stop + commit) and leaves the group
        if self._reader is not None:
            self._reader.close()
        if self._producer is not None:
            self._producer.close()
        self._offsets.close()
        if self._fatal is not None:
            log.error("worker failed", error=self._fatal)
            return 1
        log.info("worker stopped", records=self.stats.records_produced, transactions=self.stats.transactions)
        return 0

    # ------------------------------------------------------------------ slots

    def _assigned(self, slots: set[int]) -> None:
        self._telemetry.group_joined(True)
        if not slots:
            return
        self._offsets.catch_up(timeout_s=60)  # waits out the previous owner's open transaction
        self._forget(slots)  # the offsets topic, just read to its end, knows these slots best
        self._book.owned |= slots
        self._changed = True
        log.info("slots assigned", slots=sorted(slots), owned=len(self._book.owned))

    def _revoked(self, slots: set[int]) -> None:
        if not slots:
            return
        groups = self._book.active_in(slots)
        self._stop_groups(groups)
        self._commit_quietly()
        self._book.active.difference_update(groups)
        self._forget(slots)
        self._book.owned -= slots
        log.info("slots revoked", slots=sorted(slots), groups=len(groups))

    def _lost(self, slots: set[int]) -> None:
        if not slots:
            return
        groups = self._book.active_in(slots)
        self._stop_groups(groups)
        self._book.active.difference_update(groups)
        self._forget(slots)
        self._book.owned -= slots
        log.warning("slots lost", slots=sorted(slots), groups=len(groups))
        self._telemetry.group_joined(False, "slots lost: rejoining the group")
        self._restart_from_commit()  # the open transaction may hold their records: abort it

    def _forget(self, slots: set[int]) -> None:
        """Drop what this worker remembers of the slots' positions: once a slot leaves us, only
        the offsets topic is authoritative for it (another owner may have moved it on)."""
        for group in [g for g in self._committed if self._book.slots.get(g) in slots]:
            del self._committed[group]
        for group in [g for g in self._pending if self._book.slots.get(g) in slots]:
            del self._pending[group]

    # ------------------------------------------------------------------ groups

    def _start_ready(self) -> None:
        assert self._reader is not None
        self._changed = False
        committed = self._committed_view()
        for group in self._book.to_start(committed):
            self._book.active.add(group)
            position = committed.get(group)
            if position is None and self._book.groups[group].predecessors:
                # A successor carries on where its predecessors ended: from its own start, never
                # from the lookback/TTL default meant for a first read (that would skip the
                # changes between the switch and `now - lookback`).
                position = Position.at(self._book.groups[group].start_us)
            self._reader.start_group(group, position)
            log.info("group started", keyspace=group.keyspace, table=group.table, group=str(group),
                     position=None if position is None else position.to_offsets_value())

    def _committed_view(self) -> dict[GroupId, Position]:
        return {**self._offsets.positions, **self._committed}

    def _stop_groups(self, groups: list[GroupId]) -> None:
        assert self._reader is not None
        for group in groups:
            self._reader.stop_group(group)

    def _handle(self, event: SourceEvent) -> None:
        if self._stale_batch and isinstance(event, RecordRead | GroupProgress | GroupFinished):
            return  # polled before a restart from the last commit: the restarted readings bring it again
        if isinstance(event, RecordRead):
            if event.group in self._book.active:
                self._produce(event)
        elif isinstance(event, GroupProgress):
            if event.group in self._book.active:
                self._pending[event.group] = event.position
        elif isinstance(event, GroupFinished):
            if event.group in self._book.active:
                self._pending[event.group] = event.position
                self._urgent = True  # successors, maybe on other workers, wait for this commit
                log.info("group finished", keyspace=event.group.keyspace, table=event.group.table,
                         group=str(event.group))
        elif isinstance(event, GroupDiscovered):
            self._book.discovered(event.group)
            self._changed = True
        elif isinstance(event, GroupEndKnown):
            self._book.end_known(event.group, event.end_us)
            self._changed = True
        else:
            self._report(event)

    def _report(self, event: PossibleGap | GroupRetrying | ReaderFailed) -> None:
        if isinstance(event, PossibleGap):
            self._telemetry.possible_gap(event.group.keyspace, event.group.table)
            log.error("possible gap: saved position older than the log TTL", keyspace=event.group.keyspace,
                      table=event.group.table, group=str(event.group), oldest_us=event.oldest_us)
        elif isinstance(event, GroupRetrying):
            log.warning("group retrying", keyspace=event.group.keyspace, table=event.group.table,
                        group=str(event.group), error=event.error, delay_ms=round(event.delay_ms))
        elif event.group is not None:
            self._fail_group(event.group, event.message)
        else:
            self._fatal = f"{event.table}: {event.message}"

    def _fail_group(self, group: GroupId, message: str) -> None:
        """A group that cannot go on stops loudly; its position stays before the bad record."""
        assert self._reader is not None
        self._telemetry.group_failed(group.keyspace, group.table)
        self._reader.stop_group(group)
        self._book.active.discard(group)
        self._book.failed.add(group)
        log.error("group failed", keyspace=group.keyspace, table=group.table, group=str(group), error=message)

    def _produce(self, event: RecordRead) -> None:
        assert self._producer is not None
        record = event.record
        try:
            try:
                translation = self._translator.translate(record, self._schemas.get(record.keyspace, record.table))
            except UnknownColumnError:  # written after an ALTER TABLE ... ADD: translate with the new schema
                translation = self._translator.translate(record, self._schemas.reload(record.keyspace, record.table))
            encoded = [(r.topic, *self._serializer.serialize(r)) for r in translation.records]
        except (TranslationError, SchemaError) as error:  # their messages name the table and position
            self._fail_group(event.group, str(error))
            return
        except EnvelopeError as error:  # e.g. the registry refused a new schema after an ALTER TABLE
            self._fail_group(event.group, f"{record.keyspace}.{record.table}, cdc$time {record.time}: {error}")
            return
        if not self._producer.is_open:
            self._txn_started = time.monotonic()
        try:
            for topic, key, value in encoded:
                self._producer.produce(topic, key, value)
        except TransactionAbortedError as error:
            self._transaction_failed(error)
            return
        self.stats.records_produced += len(encoded)
        self._telemetry.rows_read(record.keyspace, record.table, len(record.rows))
        self._telemetry.translated(record.keyspace, record.table, translation)
        self._pending[event.group] = event.position

    # ------------------------------------------------------------------ transactions

    def _maybe_commit(self) -> None:
        assert self._producer is not None
        self._producer.serve()
        now = time.monotonic()
        records = self._producer.records_in_transaction
        due = records >= self.config.commit_max_records or (
            records > 0 and now - self._txn_started >= self.config.commit_interval_ms / 1000
        )
        if not due and self._pending:
            since = now - self._last_commit
            due = since >= self.config.heartbeat_interval_ms / 1000 or (
                self._urgent and since >= self.config.commit_interval_ms / 1000)
        if due:
            self._commit()

    def _commit(self) -> None:
        assert self._producer is not None and self._membership is not None
        started = time.monotonic()
        try:
            for group, position in self._pending.items():
                self._producer.produce(self.config.offsets_topic, encode_key(self.config.name, group),
                                       encode_value(position))
            self._producer.commit(self._membership.fencing_offsets(), self._membership.group_metadata())
        except TransactionAbortedError as error:
            self._transaction_failed(error)
            return
        self._telemetry.committed(time.monotonic() - started)
        self._committed.update(self._pending)
        if any(self._book.finished(g, self._committed) for g in self._pending):
            self._changed = True
        for group in [g for g in self._book.active if self._book.finished(g, self._committed)]:
            self._book.active.discard(group)
        self._pending.clear()
        self._urgent = False
        self._last_commit = time.monotonic()
        self.stats.transactions += 1

    def _transaction_failed(self, error: TransactionAbortedError) -> None:
        fenced = isinstance(error, ProducerFencedError)
        self._telemetry.aborted(fenced=fenced)
        if fenced:
            self._replace_producer(str(error))
        else:
            log.warning("transaction aborted; re-reading from the last commit", error=str(error))
        self._restart_from_commit(reload=fenced)

    def _commit_quietly(self) -> None:
        if self._producer is not None and (self._pending or self._producer.is_open):
            self._commit()

    def _replace_producer(self, reason: str) -> None:
        """A fenced producer is dead. A new one continues (a worker that was paused past its
        transaction timeout is fenced once and carries on), but fencing again and again means
        another process runs with this worker's identity: stop rather than fence each other."""
        now = time.monotonic()
        self._fencings = [t for t in self._fencings if now - t < 60.0] + [now]
        if len(self._fencings) >= 3:
            self._fatal = (f"the transactional producer was fenced {len(self._fencings)} times within a minute "
                           f"(last: {reason}); does another worker run with worker.instance.id="
                           f"{self.config.worker_instance_id}?")
        log.warning("producer unusable; starting a new one", error=reason)
        self._telemetry.producer_ready(False, f"producer: being replaced ({reason})")
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.close(1.0)
        for attempt in range(1, _PRODUCER_ATTEMPTS + 1):
            try:
                self._producer = self._new_producer()
                return
            except KafkaUnavailableError as error:  # Kafka still away: init_transactions timed out
                log.warning("new producer could not start, retrying", attempt=attempt, error=str(error))
        self._fatal = f"no transactional producer could start in {_PRODUCER_ATTEMPTS} attempts"

    def _restart_from_commit(self, reload: bool = False) -> None:
        """Abort what is open and read every active group again from its last commit. With
        `reload` (a commit whose outcome is unknown), the committed positions are read again from
        the offsets topic, which shows that commit's outcome once caught up."""
        assert self._producer is not None
        self.stats.aborts += 1
        try:
            self._producer.abort()
        except ProducerFencedError as error:
            self._replace_producer(str(error))
            reload = True
        if reload:
            self._committed.clear()
            self._offsets.catch_up(timeout_s=60)
        self._pending.clear()
        self._stale_batch = True
        groups = sorted(self._book.active, key=str)
        self._stop_groups(groups)
        self._book.active.clear()
        self._changed = True  # `_start_ready` starts them again from the committed positions
