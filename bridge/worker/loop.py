"""One worker process's loop: slots -> group readers -> encode -> the transaction cycle.

The main thread runs everything but Cassandra and Kafka I/O (the reader's and librdkafka's own
threads): it turns the slot consumer's callbacks, follows the offsets topic, takes the reader's
events, hands each record to the encoder and its Kafka records to the transaction cycle, and
commits when the cycle says so. An aborted transaction is re-read from the last committed
positions. The parts: `ownership.py` (which groups run here), `staging.py` (a read record into
the open transaction, through `encoding.py`), `snapshot_signals.py` (snapshot signals),
`transaction_cycle.py` (produce and commit), `recovery.py` (fencing), `steering.py` (the control
topic: pause, stop, resume, restart), `status_report.py` (failed groups and the status topic's
record), `source_reports.py` (the reader's reports without records). docs/worker.md has the
design and the failure cases; docs/architecture.md follows one log row through these files.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import structlog

from bridge.control.control_records import TargetState
from bridge.control.control_topic import ControlTopic
from bridge.kafka.errors import KafkaUnavailableError, ProducerFencedError, TransactionAbortedError
from bridge.kafka.offsets_topic import OffsetsTopic
from bridge.kafka.slots import SlotMembership
from bridge.kafka.status_topic import StatusWriter
from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.events import (
    GroupDiscovered,
    GroupEndKnown,
    GroupFinished,
    GroupProgress,
    RecordRead,
    SnapshotRead,
    SourceEvent,
)
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position, discovery_start_us
from bridge.scylla.reader import SourceReader
from bridge.scylla.table_schema import TableSchemas
from bridge.settings import BridgeConfig
from bridge.worker.encoding import RecordEncoder
from bridge.worker.ownership import GroupBook, RetryPolicy
from bridge.worker.recovery import ProducerKeeper
from bridge.worker.snapshot_signals import SnapshotSignals
from bridge.worker.snapshots import SnapshotReporter
from bridge.worker.source_reports import report
from bridge.worker.staging import RecordStager
from bridge.worker.status_report import StatusReport
from bridge.worker.steering import Steering
from bridge.worker.transaction_cycle import Stats, TransactionCycle
from bridge.worker.tuning import Pace

log = structlog.get_logger(__name__)


class Worker:
    def __init__(self, config: BridgeConfig, session: Any, kafka_config: dict[str, str],
                 telemetry: WorkerTelemetry, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._session = session
        self._clock = clock  # the cluster's: the confidence window is measured in its time
        self._telemetry = telemetry
        # The clients polled every turn also report whether Kafka is reachable (readiness).
        self._watched_kafka = {**kafka_config, **telemetry.kafka_client_settings()}
        self._book = GroupBook(config.name, config.slots_count)
        self._retry = RetryPolicy(config.errors_retry_timeout / 1000, config.errors_retry_delay_max_ms / 1000)
        self._encoder = RecordEncoder(config.envelope_settings(), TableSchemas(session), config.registry_client_config)
        self._changed = True
        self._fatal: str | None = None
        self._stale_batch = False
        self._unsettled: set[int] = set()  # slots assigned whose positions are not read to the end yet
        self._reload_due = False  # a commit's outcome unknown: positions to be read again
        self._settle_after = 0.0
        instance = config.worker_instance_id
        self._offsets = OffsetsTopic(kafka_config, config.offsets_topic, config.name,
                                     on_corrupt=lambda record: telemetry.offsets_record_corrupt(record.kind))
        worker_id = f"{config.name}-{instance or uuid.uuid4().hex[:12]}"
        self._keeper = ProducerKeeper(self._watched_kafka, worker_id, instance, telemetry)
        self._cycle = TransactionCycle(config, self._keeper, telemetry)
        self._pace = Pace()
        self._snapshots = SnapshotReporter(telemetry.metrics, config.name, config.notifications_topic)
        self._staging = RecordStager(config, self._encoder, self._cycle, telemetry, self._snapshots,
                                     fail_group=self._fail_group, transaction_failed=self._transaction_failed)
        self._signals = SnapshotSignals(config, kafka_config, telemetry, self._book, self._cycle)
        self._steering = Steering(ControlTopic(config, kafka_config).follower(), apply=self._apply_state,
                                  restart=lambda request: self._book.retry_now(request.covers, time.monotonic()))
        self._held: set[GroupId] = set()  # the groups stopped by a pause: their lag is still reported
        self._status = StatusReport(StatusWriter(kafka_config, config.status_topic, worker_id), telemetry,
                                    self._book, instance or worker_id, self._steering)
        self._reader: SourceReader | None = None
        self._membership: SlotMembership | None = None

    @property
    def stats(self) -> Stats:
        return self._cycle.stats

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for keyspace, table in self.config.tables():
            self._encoder.plan_table(keyspace, table)
        self._offsets.start()
        self._offsets.catch_up(timeout_s=60)
        self._offsets.refuse_corrupt()  # a group whose position is unreadable has no right start
        self._cycle.start()
        self._signals.catch_up()
        self._reader = SourceReader(self._session, self.config.reader_settings(), clock=self._clock,
                                    on_query=self._telemetry.query_answered)
        for keyspace, table in self.config.tables():
            since_us = discovery_start_us((group, position) for group, position in self._offsets.positions.items()
                                          if (group.keyspace, group.table) == (keyspace, table))
            if since_us is None and self.config.snapshot_mode != "no_data":
                # The snapshot holds everything older: only the groups live now are read.
                since_us = int(self._clock() * 1_000_000)
            self._reader.watch_table(keyspace, table, since_us)
        if self._steering.catch_up() is TargetState.STOPPED:
            self._apply_state(TargetState.STOPPED)  # started STOPPED: stays out of the slot group
        else:
            self._join()

    def _join(self) -> None:
        self._membership = SlotMembership(
            self._watched_kafka, self.config.slots_topic_name, f"{self.config.name}-workers",
            self.config.worker_instance_id,
            on_assigned=self._assigned, on_revoked=self._revoked, on_lost=self._lost,
            slots=self.config.slots_count, name=self.config.name,
        )

    def run(self, stop: threading.Event) -> int:
        """Until `stop` is set (SIGTERM) or a fatal error; returns the exit code."""
        assert self._reader is not None
        while not stop.is_set() and self._fatal is None and self._keeper.fatal is None:
            self._steering.poll()
            if self._membership is not None:
                self._membership.poll()
                if self._membership.fatal is not None:  # the slots topic changed: this map is wrong now
                    self._cycle.abort()  # nothing read under the wrong map commits
                    self._fatal = self._membership.fatal
                    break
            self._status.send_if_due(self._membership)
            if self._offsets.poll():
                self._changed = True
            self._signals.poll(self._reader)
            self._stale_batch = False
            events = self._reader.poll(timeout_s=0.02)
            self._pace.follow(len(events))
            for event in events:
                self._handle(event)
            if (self._changed or self._retry_due()) and self._steering.reading and self._settle():
                self._start_ready()
            if self._cycle.due(idle=not events and not self._pace.catching_up):
                self._commit()
            self._telemetry.turn(self._reading_positions, len(self._book.owned), self._cycle.queue_length)
        return self.shutdown()

    def _reading_positions(self) -> dict[GroupId, Position]:
        """Where the groups this worker owns stand, failed ones included (their lag keeps growing)."""
        view = {**self._committed_view(), **self._cycle.pending}
        held = (g for g in self._held if self._book.slots.get(g) in self._book.owned)
        return {group: view[group] for group in (*self._book.active, *self._book.failed, *held) if group in view}

    def _retry_due(self) -> bool:
        retry_at = self._book.next_retry()
        return retry_at is not None and retry_at <= time.monotonic()

    def shutdown(self) -> int:
        log.info("worker stopping", pending_groups=len(self._cycle.pending))
        self._commit_quietly()
        if self._membership is not None:
            self._membership.close()  # revokes our slots (stop + commit) and leaves the group
        if self._reader is not None:
            self._reader.close()
        self._cycle.close()
        self._offsets.close()
        self._status.close()
        self._signals.close()
        self._steering.close()
        fatal = self._fatal or self._keeper.fatal
        if fatal is not None:
            log.error("worker failed", error=fatal)
            return 1
        log.info("worker stopped", records=self.stats.records_produced, transactions=self.stats.transactions)
        return 0

    # ------------------------------------------------------------------ slots

    def _assigned(self, slots: set[int]) -> None:
        self._telemetry.group_joined(True)
        if not slots:
            return
        self._book.owned |= slots
        self._status.due = True  # under the member id this assignment came with
        self._unsettled |= slots  # their groups start once the offsets topic is read to its end
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
        self._unsettled -= slots
        self._book.forget_failures(slots)
        self._status.failures_changed()
        log.info("slots revoked", slots=sorted(slots), groups=len(groups))

    def _lost(self, slots: set[int]) -> None:
        if not slots:
            return
        groups = self._book.active_in(slots)
        self._stop_groups(groups)
        self._book.active.difference_update(groups)
        self._forget(slots)
        self._book.owned -= slots
        self._unsettled -= slots
        self._book.forget_failures(slots)
        self._status.failures_changed()
        log.warning("slots lost", slots=sorted(slots), groups=len(groups))
        self._telemetry.group_joined(False, "slots lost: rejoining the group")
        self._restart_from_commit()  # the open transaction may hold their records: abort it

    def _settle(self) -> bool:
        """Whether groups may start: the offsets topic read to its end since slots were assigned
        or a commit's outcome was lost (that waits out a previous owner's open transaction).
        Kafka out of reach here is retried on later turns, the slot group kept alive meanwhile;
        on ffd4452 it raised from the assignment callback and ended the worker."""
        if not self._unsettled and not self._reload_due:
            return True
        if time.monotonic() < self._settle_after:
            return False
        try:
            self._offsets.catch_up(timeout_s=10)
        except KafkaUnavailableError as error:
            log.warning("offsets topic not read to its end; groups wait", error=str(error))
            # Not ready meanwhile: a fault test saw a worker answer 200 while its groups waited minutes.
            self._telemetry.group_joined(False, f"kafka: groups wait for the offsets topic ({error})")
            self._settle_after = time.monotonic() + 1.0
            return False
        self._telemetry.group_joined(True)
        self._forget(self._unsettled)  # the offsets topic, just read to its end, knows these slots best
        self._unsettled.clear()
        self._reload_due = False
        return True

    def _forget(self, slots: set[int]) -> None:
        """Drop what this worker remembers of the slots' positions: once a slot leaves us, only
        the offsets topic is authoritative for it (another owner may have moved it on)."""
        known = {*self._cycle.committed, *self._cycle.pending}
        self._cycle.forget([g for g in known if self._book.slots.get(g) in slots])

    # ------------------------------------------------------------------ groups

    def _start_ready(self) -> None:
        assert self._reader is not None
        self._changed = False
        committed = self._committed_view()
        retrying = set(self._book.failed)
        for group in self._book.to_start(committed, time.monotonic()):
            corrupt = self._offsets.corrupt.get(group)
            if corrupt is not None and group not in self._cycle.committed:
                self._fail_group(group, corrupt.describe())  # its position is unknown: no start is right
                continue
            self._book.active.add(group)
            position = committed.get(group)
            saved = position is not None or not self._book.groups[group].predecessors
            if not saved:
                # A successor carries on where its predecessors ended: from its own start, never
                # from the lookback/TTL default meant for a first read (that would skip the
                # changes between the switch and `now - lookback`). A predecessor first read from
                # that default after its own end finished there: the successor starts there too
                # (from its start it would "gap" over time no reader was ever asked to read).
                ended = [committed[p].window_start_us for p in self._book.groups[group].predecessors
                         if p in committed]
                position = Position.at(max([self._book.groups[group].start_us, *ended]))
            position = self._signals.starting(group, position, saved, committed)
            self._reader.start_group(group, position, saved=saved)
            self._signals.act(group, self._reader)
            log.info("group started", keyspace=group.keyspace, table=group.table, group=str(group),
                     position=None if position is None else position.to_offsets_value(),
                     retry=group in retrying)
        if retrying:
            self._status.failures_changed()

    def _committed_view(self) -> dict[GroupId, Position]:
        return {**self._offsets.positions, **self._cycle.committed}

    def _stop_groups(self, groups: list[GroupId]) -> None:
        assert self._reader is not None
        self._snapshots.ended(groups)
        for group in groups:
            self._reader.stop_group(group)

    # ------------------------------------------------------------------ events

    def _handle(self, event: SourceEvent) -> None:
        if self._stale_batch and isinstance(event, RecordRead | SnapshotRead | GroupProgress | GroupFinished):
            return  # polled before a restart from the last commit: the restarted readings bring it again
        self._signals.check_begun(event)
        if isinstance(event, RecordRead):
            if event.group in self._book.active:
                self._staging.change(event)
        elif isinstance(event, SnapshotRead):
            if event.group in self._book.active:
                self._staging.snapshot_chunk(event)
        elif isinstance(event, GroupProgress):
            if event.group in self._book.active:
                self._snapshots.ended([event.group])
                self._cycle.advance(event.group, event.position)
        elif isinstance(event, GroupFinished):
            self._snapshots.ended([event.group])
            if event.group in self._book.active:
                # Urgent: successors, maybe on other workers, wait for this commit.
                self._cycle.advance(event.group, event.position, urgent=True)
                log.info("group finished", keyspace=event.group.keyspace, table=event.group.table,
                         group=str(event.group))
        elif isinstance(event, GroupDiscovered):
            self._book.discovered(event.group)
            self._changed = True
        elif isinstance(event, GroupEndKnown):
            self._book.end_known(event.group, event.end_us)
            self._changed = True
        else:
            self._fatal = report(event, self._telemetry, self.config.offsets_expired_mode, self._book.active,
                                 self._fail_group) or self._fatal

    def _fail_group(self, group: GroupId, message: str) -> None:
        """A group that cannot go on stops loudly; its position stays before the bad record, and
        it starts again from there when its retry is due (`errors.retry.*`)."""
        assert self._reader is not None
        self._telemetry.group_failed(group.keyspace, group.table)
        self._reader.stop_group(group)
        failed = self._book.fail(group, message, time.monotonic(), self._retry)
        retry_in = None if failed.retry_at is None else round(failed.retry_at - time.monotonic(), 1)
        log.error("group failed", keyspace=group.keyspace, table=group.table, group=str(group), error=message,
                  attempts=failed.attempts, retry_in_s=retry_in)
        self._status.failures_changed()

    # ------------------------------------------------------------------ target state

    def _apply_state(self, state: TargetState) -> None:
        """PAUSED/STOPPED: commit what was read and stop every group (they start again from
        there); STOPPED also leaves the slot group. STARTED: join again if need be; the groups
        start at the next turn."""
        if state is not TargetState.STARTED:
            groups = sorted(self._book.active, key=str)
            self._held |= set(groups)
            self._stop_groups(groups)
            self._commit_quietly()
            self._book.active.difference_update(groups)
        if state is TargetState.STOPPED and self._membership is not None:
            self._membership.close()  # revokes every slot (the callback commits) and leaves
            self._membership = None
        if state is TargetState.STOPPED:
            self._book.owned.clear()
            self._unsettled.clear()
            self._held.clear()
            self._telemetry.group_joined(True, "stopped (target state STOPPED): out of the slot group")
        elif self._membership is None:
            self._join()
        if state is TargetState.STARTED:
            self._held.clear()
        self._changed = self._status.due = True

    # ------------------------------------------------------------------ transactions

    def _commit(self) -> None:
        assert self._membership is not None
        try:
            done = self._cycle.commit(self._membership.fencing_offsets(), self._membership.group_metadata())
        except TransactionAbortedError as error:
            self._transaction_failed(error)
            return
        committed = self._cycle.committed
        self._book.progressed(done)
        if any(self._book.finished(g, committed) for g in done):
            self._changed = True
        for group in [g for g in self._book.active if self._book.finished(g, committed)]:
            self._book.active.discard(group)

    def _commit_quietly(self) -> None:
        if self._cycle.started and self._cycle.open():
            self._commit()

    def _transaction_failed(self, error: TransactionAbortedError) -> None:
        fenced = isinstance(error, ProducerFencedError)
        self._telemetry.aborted(fenced=fenced)
        if fenced:
            self._cycle.replace_producer(str(error))
        else:
            log.warning("transaction aborted; re-reading from the last commit", error=str(error))
        self._restart_from_commit(reload=fenced)

    def _restart_from_commit(self, reload: bool = False) -> None:
        """Abort what is open and read every active group again from its last commit. With
        `reload` (a commit whose outcome is unknown), the committed positions are read again from
        the offsets topic, which shows that commit's outcome once caught up."""
        if self._cycle.abort():
            reload = True
        if reload:
            self._cycle.committed.clear()
            self._reload_due = True  # `_settle` reads the offsets topic to its end first
        self._stale_batch = True
        groups = sorted(self._book.active, key=str)
        self._stop_groups(groups)
        self._book.active.clear()
        self._changed = True  # `_start_ready` starts them again from the committed positions
