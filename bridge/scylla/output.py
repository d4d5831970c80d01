"""The buffer between the reading thread and `SourceReader.poll`.

It counts the log rows it holds (backpressure), drops what belongs to a stopped group, and keeps
at most one pending `GroupProgress` per group at its tail: a newer progress replaces an older one
that nothing of the same group has followed, so idle groups do not flood the worker.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from bridge.scylla.events import (
    GroupDiscovered,
    GroupEndKnown,
    GroupProgress,
    RecordRead,
    SnapshotRead,
    SourceEvent,
)
from bridge.scylla.groups import GroupId


@dataclass(slots=True)
class _Slot:
    event: SourceEvent
    taken: bool = False


def group_of(event: SourceEvent) -> GroupId | None:
    if isinstance(event, GroupDiscovered):
        return event.group.id
    return event.group


def _about_the_table(event: SourceEvent) -> bool:
    """Discovery's facts (a group exists, a group ends) hold whoever reads the group: they pass
    for stopped groups too (a worker decides from them when a successor may start)."""
    return isinstance(event, GroupDiscovered | GroupEndKnown)


def _rows_of(event: SourceEvent) -> int:
    if event.__class__ is RecordRead:
        return len(event.record.rows)
    return len(event.rows) if isinstance(event, SnapshotRead) else 0


class OutputBuffer:
    def __init__(self) -> None:
        self._slots: deque[_Slot] = deque()
        self._cond = threading.Condition()
        self._rows = 0
        self._stopped: set[GroupId] = set()
        self._stops: dict[GroupId, int] = {}
        self._last: dict[GroupId, _Slot] = {}

    @property
    def rows(self) -> int:
        return self._rows

    def put(self, events: list[SourceEvent]) -> None:
        if not events:
            return
        with self._cond:
            for event in events:
                self._put(event)
            self._cond.notify_all()

    def _put(self, event: SourceEvent) -> None:
        if event.__class__ is RecordRead:  # nearly every event: the general rules below, inlined
            if event.group in self._stopped:
                return
            slot = _Slot(event)
            self._slots.append(slot)
            self._rows += len(event.record.rows)
            self._last[event.group] = slot
            return
        group = group_of(event)
        if group is not None and group in self._stopped and not _about_the_table(event):
            return
        last = self._last.get(group) if group is not None else None
        replaceable = last is not None and not last.taken and isinstance(last.event, GroupProgress)
        if isinstance(event, GroupProgress) and last is not None and replaceable:
            last.event = event
            return
        slot = _Slot(event)
        self._slots.append(slot)
        self._rows += _rows_of(event)
        if group is not None:
            self._last[group] = slot

    def take(self, timeout_s: float, max_items: int) -> list[SourceEvent]:
        deadline = time.monotonic() + max(timeout_s, 0.0)
        with self._cond:
            while not self._slots:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            slots = self._slots
            taken: list[SourceEvent] = []
            rows = 0
            for _ in range(min(len(slots), max_items)):
                slot = slots.popleft()
                slot.taken = True
                rows += _rows_of(slot.event)
                taken.append(slot.event)
            self._rows -= rows
            return taken

    def stop_group(self, group: GroupId) -> None:
        """Drop what is buffered for `group` and whatever arrives for it until `resume_group`."""
        with self._cond:
            self._stopped.add(group)
            self._stops[group] = self._stops.get(group, 0) + 1
            kept: deque[_Slot] = deque()
            for slot in self._slots:
                if group_of(slot.event) == group and not _about_the_table(slot.event):
                    slot.taken = True
                    self._rows -= _rows_of(slot.event)
                else:
                    kept.append(slot)
            self._slots = kept

    def stops(self, group: GroupId) -> int:
        """How many times `group` was stopped; `resume_group` takes the count its start saw."""
        with self._cond:
            return self._stops.get(group, 0)

    def resume_group(self, group: GroupId, stops_seen: int) -> None:
        """Let `group`'s events through again, unless it was stopped again after the start that
        saw `stops_seen` stops (that later stop wins)."""
        with self._cond:
            if self._stops.get(group, 0) == stops_seen:
                self._stopped.discard(group)
