"""Which snapshot signals each group has still to act on: the pure bookkeeping behind them.

Signals (`bridge/kafka/signals.py`) are read by every worker from the start of the signals
topic; a group's mark is the offset of the last signal it has taken in, committed in its offsets
value (`signal_offset`). A group acts on the newest signal for its table beyond its mark: an
`execute-snapshot` starts its incremental snapshot, a `stop-snapshot` stops it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bridge.kafka.signals import EXECUTE, Signal
from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.positions import Position

Table = tuple[str, str]


@dataclass
class SignalBook:
    marks: dict[GroupId, int] = field(default_factory=dict)  # taken in by this worker
    _newest: dict[Table, Signal] = field(default_factory=dict)
    _newest_stop_all: Signal | None = None

    def seen(self, signal: Signal) -> None:
        if signal.type != EXECUTE and not signal.tables:
            self._newest_stop_all = signal
        for table in signal.tables:
            self._newest[table] = signal

    def newest(self, table: Table) -> Signal | None:
        candidates = [s for s in (self._newest.get(table), self._newest_stop_all) if s is not None]
        return max(candidates, key=lambda s: s.offset, default=None)

    def take(self, group: GroupId) -> Signal | None:
        """The signal `group` has to act on now (None: none), marked as taken."""
        signal = self.newest((group.keyspace, group.table))
        if signal is None or signal.offset <= self.marks.get(group, -1):
            return None
        self.marks[group] = signal.offset
        return signal

    def stopped(self, table: Table) -> bool:
        """The newest signal for the table stops its snapshots."""
        newest = self.newest(table)
        return newest is not None and newest.type != EXECUTE

    def starting(self, group: StreamGroup, position: Position | None, saved: bool,
                 committed: Mapping[GroupId, Position]) -> int | None:
        """Set and return the mark of a group about to start: its own committed one; a first read
        takes in every signal so far (its start is its snapshot, if any); a successor its
        predecessors' (their snapshots covered its keys), unless one was still snapshotting."""
        self._set(group.id, self._start_mark(group, position, saved, committed))
        return self.marks.get(group.id)

    def _start_mark(self, group: StreamGroup, position: Position | None, saved: bool,
                    committed: Mapping[GroupId, Position]) -> int | None:
        if position is not None and saved:
            return position.signal_offset
        if group.predecessors and not saved:
            before = [committed[p] for p in group.predecessors if p in committed]
            if any(p.snapshot is not None and not p.snapshot.completed for p in before):
                return None  # an unfinished incremental snapshot: the successor redoes it
            return max((p.signal_offset for p in before if p.signal_offset is not None), default=None)
        newest = self.newest((group.keyspace, group.table))
        return None if newest is None else newest.offset

    def forget(self, groups: Iterable[GroupId]) -> None:
        for group in groups:
            self.marks.pop(group, None)

    def _set(self, group: GroupId, mark: int | None) -> None:
        if mark is None:
            self.marks.pop(group, None)
        else:
            self.marks[group] = mark
