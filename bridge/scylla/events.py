"""What `SourceReader.poll` hands to the worker: records with their positions, and group
lifecycle events. Frozen value objects; the worker commits `position`s it has produced."""

from __future__ import annotations

from dataclasses import dataclass

from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.model import ChangeRecord, SnapshotRow
from bridge.scylla.positions import Position


@dataclass(frozen=True, slots=True)
class RecordRead:
    """One whole record; `position` points just after it (commit it with the record). Its
    image rows are paired with their delta rows where they are used (`pairing.pair_images`)."""

    group: GroupId
    record: ChangeRecord
    position: Position


@dataclass(frozen=True, slots=True)
class SnapshotRead:
    """Rows of whole partitions read by the group's snapshot (none when only progress is told);
    `position` carries the snapshot's progress past them (commit it with their records).
    `kind` is `source.snapshot`'s value, `fraction` the share of the group's tokens done."""

    group: GroupId
    rows: tuple[SnapshotRow, ...]
    position: Position
    kind: str
    fraction: float


@dataclass(frozen=True, slots=True)
class GroupProgress:
    """The group has read everything before `position.window_start_us` (a window ended)."""

    group: GroupId
    position: Position


@dataclass(frozen=True, slots=True)
class GroupDiscovered:
    """A group exists (a new generation or stream set, or the ones live at the start time);
    `group.predecessors` must finish before it is read."""

    group: StreamGroup


@dataclass(frozen=True, slots=True)
class GroupEndKnown:
    """The group ends (exclusively) at `end_us`: the next generation's start, or the stream set
    timestamp that closed the stream."""

    group: GroupId
    end_us: int


@dataclass(frozen=True, slots=True)
class GroupFinished:
    """Everything of the group has been handed on; `position` is its final position."""

    group: GroupId
    position: Position


@dataclass(frozen=True, slots=True)
class PossibleGap:
    """A saved position older than the log TTL: rows between it and `oldest_us` may have expired."""

    group: GroupId
    position: Position
    oldest_us: int


@dataclass(frozen=True, slots=True)
class GroupRetrying:
    """A transient error; the group retries after `delay_ms` from where it stopped."""

    group: GroupId
    error: str
    delay_ms: float


@dataclass(frozen=True, slots=True)
class ReaderFailed:
    """A group (or, with `group` None, discovery for `table`) cannot go on."""

    group: GroupId | None
    table: str
    message: str


SourceEvent = (
    RecordRead | SnapshotRead | GroupProgress | GroupDiscovered | GroupEndKnown | GroupFinished | PossibleGap
    | GroupRetrying | ReaderFailed
)
