"""A read change's or snapshot chunk's way into the open transaction: encoded into Kafka records
and staged with its group's position after it, or, when it cannot be carried, passed (a log
line, a count and maybe a dead letter) or its group failed, by
`event.processing.failure.handling.mode`.

Separate from the loop because this is the work done for each record, the same whoever runs the
group, while the loop decides which groups run and when to commit. What is the loop's own it is
handed back: a group to fail (`fail_group`) and a transaction that aborted while staging
(`transaction_failed`: the loop re-reads from the last commit).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from bridge.kafka.errors import TransactionAbortedError
from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.events import RecordRead, SnapshotRead
from bridge.scylla.groups import GroupId
from bridge.settings import BridgeConfig
from bridge.worker.dead_letters import dead_letter
from bridge.worker.encoding import GroupFailure, RecordEncoder, SerializedRecord
from bridge.worker.missing_images import MissingImages
from bridge.worker.snapshots import SnapshotReporter
from bridge.worker.transaction_cycle import TransactionCycle

log = structlog.get_logger(__name__)


class RecordStager:
    def __init__(self, config: BridgeConfig, encoder: RecordEncoder, cycle: TransactionCycle,
                 telemetry: WorkerTelemetry, snapshots: SnapshotReporter,
                 fail_group: Callable[[GroupId, str], None],
                 transaction_failed: Callable[[TransactionAbortedError], None]) -> None:
        self._config = config
        self._encoder = encoder
        self._cycle = cycle
        self._telemetry = telemetry
        self._snapshots = snapshots
        self._missing_images = MissingImages(telemetry.metrics)
        self._fail_group = fail_group
        self._transaction_failed = transaction_failed

    def change(self, event: RecordRead) -> None:
        record = event.record
        try:
            translation, records = self._encoder.encode(record)
        except GroupFailure as failure:
            if failure.record_error and self._config.failure_handling_mode != "fail":
                self._pass_failed(event, str(failure))
            else:
                self._telemetry.change_failed(record.keyspace, record.table, "failed")
                self._fail_group(event.group, str(failure))
            return
        try:
            self._cycle.stage(records, event.group, event.position)
        except TransactionAbortedError as error:
            self._transaction_failed(error)
            return
        self._telemetry.rows_read(record.keyspace, record.table, len(record.rows))
        self._telemetry.translated(record.keyspace, record.table, translation)
        if translation.missing_images:  # only the advanced format has any
            self._missing_images.note(record.keyspace, record.table, str(event.group), translation.missing_images)

    def snapshot_chunk(self, event: SnapshotRead) -> None:
        """A snapshot chunk's `r` records, its notifications and its progress, in the open
        transaction together."""
        group = event.group
        records: list[SerializedRecord] = []
        if event.rows:
            try:
                translation, records = self._encoder.encode_snapshot(group.keyspace, group.table, event.rows,
                                                                     event.kind)
            except GroupFailure as failure:
                self._telemetry.change_failed(group.keyspace, group.table, "failed")
                self._fail_group(group, str(failure))
                return
            self._telemetry.translated(group.keyspace, group.table, translation)
        records += self._snapshots.chunk(event)
        if not records:
            self._cycle.advance(group, event.position)
            return
        try:
            self._cycle.stage(records, group, event.position)
        except TransactionAbortedError as error:
            self._transaction_failed(error)

    def _pass_failed(self, event: RecordRead, reason: str) -> None:
        """warn / skip: go on past a change that cannot be carried, leaving a trace of it."""
        record = event.record
        say = log.warning if self._config.failure_handling_mode == "warn" else log.info
        say("change passed: it cannot be carried", keyspace=record.keyspace, table=record.table,
            group=str(event.group), position=event.position.to_offsets_value(), error=reason,
            dead_letter_topic=self._config.dead_letter_topic)
        self._telemetry.change_failed(record.keyspace, record.table, "passed")
        letters = ([] if self._config.dead_letter_topic is None
                   else [dead_letter(self._config.dead_letter_topic, record, event.position, reason)])
        try:
            self._cycle.stage(letters, event.group, event.position)
        except TransactionAbortedError as error:
            self._transaction_failed(error)
