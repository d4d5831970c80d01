"""Snapshot signals in a worker: the signals topic followed, the active groups told to start or
stop their incremental snapshots, and each group's signal mark handed to the transaction cycle,
which commits it with the group's position.

Separate from the loop because it is one feature with its own state (the signals seen, the
executes sent to the reader and not begun yet) that the loop only has to call at four moments:
signals arrive, a group starts, a group reads on (its snapshot may have begun), the worker stops.
`signal_book.py` is the pure bookkeeping underneath, `bridge/kafka/signals.py` reads the topic;
docs/worker.md (Snapshots) has the design.
"""

from __future__ import annotations

from dataclasses import replace

import structlog

from bridge.kafka.signals import EXECUTE, Signal, SignalError, SignalFollower
from bridge.observability.telemetry import WorkerTelemetry
from bridge.scylla.events import GroupProgress, RecordRead, SnapshotRead, SourceEvent
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position
from bridge.scylla.reader import SourceReader
from bridge.settings import BridgeConfig
from bridge.worker.ownership import GroupBook
from bridge.worker.signal_book import SignalBook
from bridge.worker.transaction_cycle import TransactionCycle

log = structlog.get_logger(__name__)


class SnapshotSignals:
    def __init__(self, config: BridgeConfig, kafka_config: dict[str, str], telemetry: WorkerTelemetry,
                 book: GroupBook, cycle: TransactionCycle) -> None:
        self._config = config
        self._telemetry = telemetry
        self._book = book  # the worker's: which groups are active
        self._cycle = cycle  # commits each group's mark with its position
        self._signal_book = SignalBook()
        self._awaiting: dict[GroupId, int] = {}  # snapshot signals sent to the reader, not begun yet
        self._follower = (None if config.signals_topic is None
                          else SignalFollower(kafka_config, config.signals_topic, config.topic_prefix))

    def catch_up(self) -> None:
        """Every signal the topic has now, taken in before the reader exists: no group is active
        yet, so none has one to act on."""
        if self._follower is not None:
            self._take(self._follower.catch_up(timeout_s=30), None)

    def poll(self, reader: SourceReader) -> None:
        if self._follower is not None:
            self._take(self._follower.poll(), reader)

    def close(self) -> None:
        if self._follower is not None:
            self._follower.close()

    def _take(self, signals: list[Signal | SignalError], reader: SourceReader | None) -> None:
        served = set(self._config.tables())
        for signal in signals:
            if isinstance(signal, SignalError):
                self._telemetry.metrics.signals_total.labels("refused").inc()
                log.error("signal refused", error=str(signal))
                continue
            unknown = [f"{ks}.{t}" for ks, t in signal.tables if (ks, t) not in served]
            if unknown:
                self._telemetry.metrics.signals_total.labels("refused").inc()
                log.error("signal refused: tables not served", signal=signal.id, type=signal.type, tables=unknown)
                continue
            self._telemetry.metrics.signals_total.labels("applied").inc()
            log.info("signal", signal=signal.id, type=signal.type, offset=signal.offset,
                     tables=[f"{ks}.{t}" for ks, t in signal.tables] or "all")
            self._signal_book.seen(signal)
            for group in sorted(self._book.active, key=str):
                self.act(group, reader)

    def starting(self, group: GroupId, position: Position | None, saved: bool,
                 committed: dict[GroupId, Position]) -> Position | None:
        """The group's signal mark, and its position without an incremental snapshot that a
        later stop-snapshot signal ended."""
        self._awaiting.pop(group, None)
        mark = self._signal_book.starting(self._book.groups[group], position, saved, committed)
        if mark is None:
            self._cycle.signal_marks.pop(group, None)
        else:
            self._cycle.signal_marks[group] = mark
        snapshot = None if position is None else position.snapshot
        if (position is not None and snapshot is not None and snapshot.kind == "incremental"
                and self._signal_book.stopped((group.keyspace, group.table))):
            return replace(position, snapshot=None)
        return position

    def act(self, group: GroupId, reader: SourceReader | None) -> None:
        """An active group acts on the newest signal for its table it has not taken in yet. A
        stop is committed with the group's next position; an execute once the snapshot has begun
        (a position that carries its progress), so a crash between the two loses neither."""
        assert reader is not None
        signal = self._signal_book.take(group)
        if signal is None:
            return
        if signal.type == EXECUTE:
            reader.snapshot_group(group)
            self._awaiting[group] = signal.offset
        else:
            reader.stop_snapshot(group)
            self._awaiting.pop(group, None)
            self._cycle.signal_marks[group] = signal.offset

    def check_begun(self, event: SourceEvent) -> None:
        """A read of a group whose execute is awaited: once its position carries an incremental
        snapshot's progress, the snapshot has begun and the execute's mark goes with it."""
        if self._awaiting and isinstance(event, RecordRead | SnapshotRead | GroupProgress):
            group, position = event.group, event.position
            if group in self._awaiting and position.snapshot is not None and position.snapshot.kind == "incremental":
                self._cycle.signal_marks[group] = self._awaiting.pop(group)
