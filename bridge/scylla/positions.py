"""Exact read positions of a group and their offsets-value form (design.md 2.3).

A `Position` says: every record of the group before `window_start_us` has been consumed, and
inside the window `[window_start_us, window_end_us)` every record up to and including `last`
in read order. Read order inside a window is stream by stream (`groups.read_order`), then
(`cdc$time`, `cdc$batch_seq_no`) inside a stream. `last.batch_seq_no` None means the whole
record at (`stream`, `time`) was consumed (what a Java-connector offset says); a number means
rows up to that sequence number were, so a resume hands on the rest of that record only.

A position with `last` None consumed nothing of its window, so a resume may plan windows
afresh from `window_start_us`; one with `last` set must re-read exactly its saved window.

A group being snapshotted (docs/worker.md, Snapshots) keeps its stream position where the
snapshot began and carries the snapshot's progress beside it (`SnapshotProgress`), as extra
fields of the offsets value that the Java connector ignores; so is `signal_offset`, the offset
in the signals topic of the last snapshot signal the group has taken in (it is never acted on
twice).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bridge.scylla.cdc_time import max_timeuuid, micros_of, min_timeuuid, timeuuid_sort_key
from bridge.scylla.groups import GroupId, GroupKind, read_order
from bridge.scylla.stream_id import StreamId


@dataclass(frozen=True, slots=True)
class ChangeId:
    """The last consumed record (or row, with `batch_seq_no`) of a window."""

    stream: StreamId
    time: uuid.UUID
    batch_seq_no: int | None = None


@dataclass(frozen=True, slots=True)
class SnapshotProgress:
    """How far a group's snapshot has gone: every partition of the group's token ranges whose
    token is at most `after_token` has been handed on (None: none yet). `kind` is Debezium's
    `source.snapshot` value (`true` for an initial snapshot, `incremental` for a signalled one);
    `completed` marks an `initial_only` snapshot that is over (the group is not streamed)."""

    kind: str = "true"
    after_token: int | None = None
    completed: bool = False


@dataclass(frozen=True, slots=True)
class Position:
    window_start_us: int
    window_end_us: int
    last: ChangeId | None = None
    snapshot: SnapshotProgress | None = None
    signal_offset: int | None = None

    def __post_init__(self) -> None:
        if self.window_end_us < self.window_start_us:
            raise ValueError(f"window end {self.window_end_us} before start {self.window_start_us}")

    @classmethod
    def at(cls, micros: int) -> Position:
        """Nothing at or after `micros` consumed."""
        return cls(micros, micros)

    def consumed(self, stream: StreamId, time: uuid.UUID, batch_seq_no: int) -> bool:
        """Whether the row at (stream, time, seq) of this window was already consumed."""
        if micros_of(time) < self.window_start_us:
            return True
        if self.last is None or micros_of(time) >= self.window_end_us:
            return False
        mine, theirs = read_order(stream), read_order(self.last.stream)
        if mine != theirs:
            return mine < theirs
        here, there = timeuuid_sort_key(time), timeuuid_sort_key(self.last.time)
        if here != there:
            return here < there
        return self.last.batch_seq_no is None or batch_seq_no <= self.last.batch_seq_no

    def stream_done(self, stream: StreamId) -> bool:
        """Whether every row of `stream` in this window was consumed (it precedes `last`)."""
        return self.last is not None and read_order(stream) < read_order(self.last.stream)

    def to_offsets_value(self) -> dict[str, str]:
        """Strings in the Java connector's form: window bounds as `startOf(start)` and
        `endOf(end - 1)` timeuuids, the change id as `0x` hex and a timeuuid; plus our own
        `batch_seq_no` when only part of a record was consumed."""
        value = {
            "window_start": str(min_timeuuid(self.window_start_us)),
            "window_end": str(max_timeuuid(self.window_end_us - 1)),
        }
        if self.last is not None:
            value["change_id_stream_id"] = str(self.last.stream)
            value["change_id_time"] = str(self.last.time)
            if self.last.batch_seq_no is not None:
                value["batch_seq_no"] = str(self.last.batch_seq_no)
        if self.snapshot is not None:
            value["snapshot"] = self.snapshot.kind
            if self.snapshot.after_token is not None:
                value["snapshot_after_token"] = str(self.snapshot.after_token)
            if self.snapshot.completed:
                value["snapshot_completed"] = "true"
        if self.signal_offset is not None:
            value["signal_offset"] = str(self.signal_offset)
        return value

    @classmethod
    def from_offsets_value(cls, value: Mapping[str, object]) -> Position:
        """Reads ours and the Java connector's offsets (whose bounds are whole milliseconds)."""
        try:
            start = micros_of(uuid.UUID(str(value["window_start"])))
            end = micros_of(uuid.UUID(str(value["window_end"]))) + 1
            last = None
            if value.get("change_id_stream_id") and value.get("change_id_time"):
                seq = value.get("batch_seq_no")
                last = ChangeId(
                    StreamId.from_hex(str(value["change_id_stream_id"])),
                    uuid.UUID(str(value["change_id_time"])),
                    None if seq is None else int(str(seq)),
                )
            snapshot = _snapshot_of(value)
            signal = value.get("signal_offset")
            signal_offset = None if signal is None else int(str(signal))
        except (KeyError, ValueError) as error:
            raise ValueError(f"not a CDC offsets value: {dict(value)!r} ({error})") from error
        return cls(start, max(start, end), last, snapshot, signal_offset)


def _snapshot_of(value: Mapping[str, object]) -> SnapshotProgress | None:
    kind = value.get("snapshot")
    if kind is None:
        return None
    if kind not in ("true", "incremental"):
        raise ValueError(f"snapshot {kind!r} is neither true nor incremental")
    token = value.get("snapshot_after_token")
    return SnapshotProgress(str(kind), None if token is None else int(str(token)),
                            value.get("snapshot_completed") == "true")


def default_start_us(now_us: int, ttl_s: int, lookback_ms: int) -> int:
    """Where a group without a saved position starts (design.md 3): `now - lookback` when the
    lookback is set, else the oldest data still within the log TTL (0 = no TTL: from the
    beginning; the group's own start bounds it)."""
    if lookback_ms > 0:
        return now_us - lookback_ms * 1000
    if ttl_s > 0:
        return now_us - ttl_s * 1_000_000
    return 0


def discovery_start_us(saved: Iterable[tuple[GroupId, Position]]) -> int | None:
    """Where a table's discovery starts on a restart (None: nothing saved): at the generation of
    the oldest saved vnode group; a tablets table, 1 µs before its oldest saved position.

    From saved positions, not the default start: with `scylla.initial.lookback.ms` shorter than
    a stop, the groups of a generation that ended meanwhile would never be found. Not at the
    oldest position itself: a group whose worker was killed before its first commit has none,
    and when the other groups of its generation (stream set) finished, their positions are their
    end, the next one's start, where discovery no longer finds it. Every group of a saved vnode
    group's generation was in the bridge's scope; a tablet stream may have opened at a stream set
    older than the bridge's first read, so only the set in effect just before its position is."""
    starts = [group.generation_start_ms * 1000 if group.kind is GroupKind.VNODE else position.window_start_us - 1
              for group, position in saved]
    return min(starts, default=None)


def possible_gap_us(position: Position, now_us: int, ttl_s: int) -> int | None:
    """The oldest `cdc$time` still within the TTL when `position` is older (rows between may
    have expired unread), else None."""
    if ttl_s <= 0:
        return None
    oldest = now_us - ttl_s * 1_000_000
    return oldest if position.window_start_us < oldest else None
