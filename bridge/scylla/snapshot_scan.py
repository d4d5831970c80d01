"""One group's snapshot as a state machine, free of I/O: which token range to page through next,
and the base-table rows it is given turned into `SnapshotRead`s with exact progress.

A group is a set of token ranges (a vnode's, a tablet's); its snapshot reads the base table's
partitions in those ranges in token order, `snapshot.fetch.size` rows per page, one page in
flight. Progress is a token: every partition with a token at or below it has been handed on.
A page may end inside a partition, so the rows of the page's last token are held back until the
next page (or the range's end) shows that partition whole; a resume after a crash then starts
exactly after the last partition handed on, and no row is handed on twice.

While a group is snapshotted its stream position stays at `S`, where the snapshot began (at
least the confidence window behind the clock), and its log is streamed from `S` once the
snapshot is over: every write older than `S` is in the rows read (they were read later than `S`
plus the window), every write from `S` on comes after them. docs/worker.md, Snapshots, has the
argument and the time each row's `r` carries (`row_time_us`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from bridge.scylla.backoff import Backoff
from bridge.scylla.errors import ErrorKind, classify, describe
from bridge.scylla.events import GroupFinished, GroupProgress, GroupRetrying, ReaderFailed, SnapshotRead
from bridge.scylla.groups import TOKEN_MIN, StreamGroup, TokenRange
from bridge.scylla.model import SnapshotRow
from bridge.scylla.positions import Position, SnapshotProgress
from bridge.scylla.settings import ReaderSettings

ScanOutput = SnapshotRead | GroupProgress | GroupFinished | GroupRetrying | ReaderFailed
# After the snapshot: stream the group from where it began (`initial`, `when_needed`), end the
# group (`initial_only`), or nothing (an incremental snapshot, read while the group streams).
ScanEnd = Literal["stream", "stop", "interleave"]
_QUERY_NUMBERS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ScannedRow:
    """A result row of the snapshot query, decoded (`snapshot_pages.py`): its partition's token
    and key, its clustered row and its partition's static row (either may be None), and what
    decides its time: the newest write time of its cells that show one, whether a non-frozen list
    (whose writes show no time) holds anything."""

    token: int
    partition: tuple[Any, ...]
    row: Mapping[str, Any] | None
    static: Mapping[str, Any] | None
    row_write_us: int | None
    static_write_us: int | None
    row_has_list: bool
    static_has_list: bool


@dataclass(frozen=True, slots=True)
class ScanRequest:
    """One page of the snapshot query `token(pk) > lower AND token(pk) <= upper` (`lower` None:
    from the first token). `number` tells a stale answer from the current one."""

    group: StreamGroup
    lower: int | None
    upper: int
    paging_state: bytes | None
    number: int
    read_us: int  # when it was asked for: the page holds every write older than this


def row_time_us(write_us: int | None, has_list: bool, stream_us: int, read_us: int) -> int:
    """The `source.ts_us` of a snapshot row, so that ordering by it agrees with the topic's order.

    The row's newest write time, but never before `stream_us` (every change before it is in the
    row; changes from it on follow the row in the topic and re-apply). A row whose cells show no
    write time, or with a non-frozen list (an append is not idempotent and its write time cannot
    be read), carries the read time: every write it holds is older, so a consumer that skips
    changes at or before a row's time (the mirror) never appends twice."""
    if write_us is None or has_list:
        return read_us
    return max(write_us, stream_us)


def snapshot_rows(scanned: list[tuple[ScannedRow, int]], stream_us: int) -> list[SnapshotRow]:
    """The rows to hand on for whole partitions, each given with the time its page was asked for:
    each partition's static row once (first), then its clustered rows."""
    rows: list[SnapshotRow] = []
    previous: tuple[Any, ...] | None = None
    for item, read_us in scanned:
        if item.static is not None and item.partition != previous:
            rows.append(SnapshotRow(item.static, True,
                                    row_time_us(item.static_write_us, item.static_has_list, stream_us, read_us)))
        previous = item.partition
        if item.row is not None:
            rows.append(SnapshotRow(item.row, False,
                                    row_time_us(item.row_write_us, item.row_has_list, stream_us, read_us)))
    return rows


def _span(ranges: list[TokenRange]) -> int:
    return sum(r.end - r.start for r in ranges)


class SnapshotScan:
    """Pages through a group's token ranges; see the module docstring. `position` is the
    group's committed position: its window start is `S`, its `snapshot` the progress so far."""

    def __init__(self, group: StreamGroup, position: Position, settings: ReaderSettings,
                 then: ScanEnd = "stream") -> None:
        assert position.snapshot is not None
        self.group = group
        # Where the group's stream stands while the rows are read; for an incremental snapshot the
        # reader moves it on between pages (the group streams meanwhile).
        self.stream_position = replace(position, snapshot=None)
        self.progress: SnapshotProgress = position.snapshot
        self.then = then
        self.rows_handed_on = 0
        self.done = False
        self.dropped = False  # the table was dropped while it was read
        self.in_flight = False
        self.retry_at_us = 0
        self._backoff = Backoff(settings.backoff_base_ms, settings.backoff_max_ms)
        self._all = sorted(group.token_ranges)
        after = self.progress.after_token
        self._ranges = [r for r in self._all if after is None or r.end > after]
        self._lower: int | None = None
        self._paging_state: bytes | None = None
        self._number = 0
        self._held: list[tuple[ScannedRow, int]] = []
        self._open_range()

    @property
    def fraction_done(self) -> float:
        """Share of the group's tokens done (partitions are spread evenly over tokens)."""
        total = _span(self._all)
        after = self.progress.after_token
        if after is None or total == 0:
            return 1.0 if self.done else 0.0
        done = sum(min(r.end, after) - r.start for r in self._all if r.start < after)
        return min(1.0, done / total)

    @property
    def holding(self) -> bool:
        """A page in flight, or rows of a partition that the next page completes: they were read
        at the current stream position, and must be handed on at it."""
        return self.in_flight or bool(self._held)

    def request(self, now_us: int) -> ScanRequest | None:
        if self.done or self.in_flight or now_us < self.retry_at_us:
            return None
        self.in_flight = True
        return ScanRequest(self.group, self._lower, self._ranges[0].end, self._paging_state, self._number, now_us)

    def on_page(self, request: ScanRequest, rows: list[ScannedRow], paging_state: bytes | None) -> list[ScanOutput]:
        """The rows of a page; those of whole partitions are handed on with the stream position
        the page was read at (`stream_position` when `request` was made). A row's read time is
        when its page was asked for, not when the answer came: a write landing while the answer
        travels is not in the row, and its time must not be taken for included."""
        if request.number != self._number or self.done:
            return []
        self.in_flight = False
        self._backoff.reset()
        self._held.extend((row, request.read_us) for row in rows)
        if paging_state is not None:
            self._paging_state = paging_state
            last = self._held[-1][0].token if self._held else None
            ready = [held for held in self._held if held[0].token != last]
            self._held = self._held[len(ready):]
            return self._hand_on(ready, ready[-1][0].token if ready else None)
        ready, self._held = self._held, []
        end = self._ranges.pop(0).end
        outputs = self._hand_on(ready, end, force=True)
        if self._ranges:
            self._open_range()
        else:
            outputs.extend(self.finish())
        return outputs

    def on_error(self, request: ScanRequest, error: BaseException, now_us: int) -> list[ScanOutput]:
        if request.number != self._number or self.done:
            return []
        self.in_flight = False
        kind = classify(error)
        if kind is ErrorKind.FATAL:
            self.done = True
            return [ReaderFailed(self.group.id, f"{self.group.keyspace}.{self.group.table}",
                                 f"snapshot read failed: {describe(error)}")]
        if kind is ErrorKind.TABLE_MISSING:  # dropped meanwhile: the snapshot ends, the stream says the rest
            self.dropped = True
            return self.finish()
        delay_ms = self._backoff.next_delay_ms()
        self.retry_at_us = now_us + int(delay_ms * 1000)
        return [GroupRetrying(self.group.id, f"snapshot read: {describe(error)}", delay_ms)]

    def _open_range(self) -> None:
        """A new query (no paging state) from the range's start or, resuming, from the progress."""
        self._paging_state = None
        self._number = next(_QUERY_NUMBERS)
        if not self._ranges:
            return
        start, after = self._ranges[0].start, self.progress.after_token
        lower = start if after is None else max(start, after)
        self._lower = None if lower < TOKEN_MIN else lower

    def _hand_on(self, ready: list[tuple[ScannedRow, int]], after: int | None, force: bool = False) -> list[ScanOutput]:
        if after is None or (not ready and not force):
            return []
        self.progress = replace(self.progress, after_token=after)
        rows = snapshot_rows(ready, self.stream_position.window_start_us)
        self.rows_handed_on += len(rows)
        position = replace(self.stream_position, snapshot=self.progress)
        return [SnapshotRead(self.group.id, tuple(rows), position, self.progress.kind, self.fraction_done)]

    @property
    def all_read(self) -> bool:
        return not self._ranges

    def finish(self) -> list[ScanOutput]:
        """Every range read: what follows the snapshot (`then`)."""
        self.done = True
        if self.then == "stream":
            return [GroupProgress(self.group.id, self.stream_position)]
        if self.then == "stop":
            completed = SnapshotProgress(self.progress.kind, None, completed=True)
            return [GroupFinished(self.group.id, replace(self.stream_position, snapshot=completed))]
        return []


def snapshot_start(mode: str, group: StreamGroup, position: Position | None, gap: bool, now_us: int,
                   window_ms: int, end_us: int | None) -> Position | None:
    """Where a group's snapshot starts or resumes (None: the group streams, or, `initial_only`,
    has nothing to read). A first read (no position, no predecessors) is snapshotted in every
    mode but `no_data`; a position older than the log's TTL (`gap`) under `when_needed`. `S` is
    the confidence window behind now (never before the group's start) and, for a group whose end
    is known, at most that end: its successors start there, and must find nothing skipped."""
    if position is not None and position.snapshot is not None:
        return position
    if mode == "no_data" or not (position is None or (gap and mode == "when_needed")):
        return None
    stream_us = max(group.start_us, now_us - window_ms * 1000)
    if end_us is not None:
        stream_us = min(stream_us, end_us)
    return Position(stream_us, stream_us, None, SnapshotProgress("true"))
