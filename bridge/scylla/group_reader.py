"""One group's reading as a state machine, free of I/O: it says which pages to fetch and turns
the pages it is given into records with exact positions.

Per window, every stream of the group is read with its own query, `"cdc$stream_id" = ?` and
`"cdc$time" >= lower AND "cdc$time" < upper`. The first page of every stream is fetched at once
(one round trip per window, whatever the number of streams); records are handed on stream by
stream in read order, so a position (stream, `cdc$time`, seq) splits a window exactly in two,
and later pages of a stream are fetched only when that stream is being handed on, which bounds
memory to one page per stream.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field

from bridge.scylla.backoff import Backoff
from bridge.scylla.cdc_time import micros_of, min_timeuuid
from bridge.scylla.errors import ErrorKind, MalformedLogError, classify, describe
from bridge.scylla.events import GroupFinished, GroupProgress, GroupRetrying, ReaderFailed, RecordRead
from bridge.scylla.groups import StreamGroup
from bridge.scylla.model import LogRow
from bridge.scylla.positions import ChangeId, Position
from bridge.scylla.records import RecordAssembler
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.stream_id import StreamId
from bridge.scylla.windows import GroupEnded, WaitUntil, Window, WindowPlanner

Output = RecordRead | GroupProgress | GroupFinished | GroupRetrying | ReaderFailed

# Window numbers are unique in the process, so an answer to a stopped reader's request can never
# be taken for one of a reader started later for the same group.
_WINDOW_NUMBERS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class PageRequest:
    """One page of one stream's query. `window` tells stale answers from current ones."""

    group: StreamGroup
    stream: StreamId
    lower: uuid.UUID
    upper: uuid.UUID
    paging_state: bytes | None
    window: int


@dataclass(slots=True)
class _Cursor:
    stream: StreamId
    lower: uuid.UUID
    assembler: RecordAssembler
    paging_state: bytes | None = None
    pages: int = 0
    in_flight: bool = False
    page: list[LogRow] | None = None
    exhausted: bool = False
    retry_at_us: int = 0


@dataclass(slots=True)
class _WindowState:
    window: Window
    number: int
    cursors: list[_Cursor]
    by_stream: dict[StreamId, _Cursor] = field(default_factory=dict)
    current: int = 0
    rows: int = 0


class GroupReader:
    """Reads one group from a start position; see the module docstring."""

    def __init__(
        self, group: StreamGroup, position: Position, settings: ReaderSettings, end_us: int | None = None
    ) -> None:
        self.group = group
        self.end_us = end_us
        self.horizon_us: int | None = None
        self.finished = False
        self.failed = False
        self.rows_past_end = 0
        self._settings = settings
        self._planner = WindowPlanner(settings)
        self._backoff = Backoff(settings.backoff_base_ms, settings.backoff_max_ms)
        self._missing_since: int | None = None
        self._resume = position if position.last is not None else None
        self._next_start = position.window_start_us if self._resume else max(position.window_start_us, group.start_us)
        self._state: _WindowState | None = None
        self._last_window_at: int | None = None
        self._wait_until = 0

    @property
    def done(self) -> bool:
        return self.finished or self.failed

    def set_end(self, end_us: int) -> None:
        self.end_us = end_us

    def between_windows(self) -> Position | None:
        """The group's position when no window is open (everything before it handed on, nothing
        after), else None."""
        if self.done or self._state is not None or self._resume is not None:
            return None
        return Position.at(self._next_start)

    def wake_at(self) -> int | None:
        """When `requests` may next return something (None: only after an answer arrives)."""
        if self.done:
            return None
        if self._state is None:
            return self._wait_until
        waiting = [
            c.retry_at_us for c in self._state.cursors[self._state.current :]
            if not c.in_flight and c.page is None and not c.exhausted
        ]
        return min(waiting) if waiting else None

    def requests(self, now_us: int, limit: int) -> tuple[list[PageRequest], list[Output]]:
        """Pages to fetch now (at most `limit`), and events of windows opened or ended."""
        outputs: list[Output] = []
        if self.done or limit <= 0:
            return [], outputs
        if self._state is None and not self._open_window(now_us, outputs):
            return [], outputs
        state = self._state
        assert state is not None
        wanted: list[PageRequest] = []
        for index in range(state.current, len(state.cursors)):
            cursor = state.cursors[index]
            if len(wanted) >= limit:
                break
            if cursor.in_flight or cursor.page is not None or cursor.exhausted or cursor.retry_at_us > now_us:
                continue
            if index > state.current and cursor.pages > 0:
                continue  # only the first page of streams not yet being handed on
            cursor.in_flight = True
            upper = min_timeuuid(state.window.end_us)
            wanted.append(
                PageRequest(self.group, cursor.stream, cursor.lower, upper, cursor.paging_state, state.number)
            )
        return wanted, outputs

    def on_page(
        self, request: PageRequest, rows: list[LogRow], paging_state: bytes | None, now_us: int
    ) -> list[Output]:
        cursor = self._cursor_for(request)
        if cursor is None:
            return []
        cursor.in_flight = False
        cursor.pages += 1
        cursor.page = rows
        cursor.paging_state = paging_state
        cursor.exhausted = paging_state is None
        self._backoff.reset()
        self._missing_since = None
        try:
            return self._deliver(now_us)
        except MalformedLogError as error:
            return [self._fail(str(error))]

    def on_error(self, request: PageRequest, error: BaseException, now_us: int) -> list[Output]:
        cursor = self._cursor_for(request)
        if cursor is None:
            return []
        cursor.in_flight = False
        kind = classify(error)
        log_table = f"{self.group.keyspace}.{self.group.table}_scylla_cdc_log"
        if kind is ErrorKind.FATAL:
            return [self._fail(f"reading {log_table} failed: {describe(error)}")]
        if kind is ErrorKind.TABLE_MISSING:
            self._missing_since = self._missing_since or now_us
            waited_ms = (now_us - self._missing_since) // 1000
            if waited_ms >= self._settings.missing_table_timeout_ms:
                return [self._fail(f"{log_table} is missing (waited {waited_ms} ms): {describe(error)}")]
        delay_ms = self._backoff.next_delay_ms()
        cursor.retry_at_us = now_us + int(delay_ms * 1000)
        return [GroupRetrying(self.group.id, describe(error), delay_ms)]

    # ------------------------------------------------------------------ internals

    def _cursor_for(self, request: PageRequest) -> _Cursor | None:
        state = self._state
        if self.done or state is None or request.window != state.number:
            return None
        return state.by_stream.get(request.stream)

    def fail(self, message: str) -> ReaderFailed:
        """Stop the group for good (malformed rows, fatal errors)."""
        return self._fail(message)

    def _fail(self, message: str) -> ReaderFailed:
        self.failed = True
        return ReaderFailed(self.group.id, f"{self.group.keyspace}.{self.group.table}", message)

    def _open_window(self, now_us: int, outputs: list[Output]) -> bool:
        window = self._resumed_window(now_us) if self._resume is not None else self._planned_window(now_us)
        if window is None:
            if self._resume is None and self.end_us is not None and self._next_start >= self.end_us:
                self.finished = True
                outputs.append(GroupFinished(self.group.id, Position.at(self._next_start)))
            return False
        self._last_window_at = now_us
        cursors = []
        for stream in self.group.streams:
            resume = self._resume
            if resume is not None and resume.stream_done(stream):
                continue
            lower = min_timeuuid(window.start_us)
            if resume is not None and resume.last is not None and resume.last.stream == stream:
                lower = resume.last.time
            cursors.append(_Cursor(stream, lower, RecordAssembler(self.group.keyspace, self.group.table)))
        self._state = _WindowState(window, next(_WINDOW_NUMBERS), cursors, {c.stream: c for c in cursors})
        outputs.extend(self._deliver(now_us))
        return self._state is not None

    def _resumed_window(self, now_us: int) -> Window | None:
        resume = self._resume
        assert resume is not None
        end = resume.window_end_us if self.end_us is None else min(resume.window_end_us, self.end_us)
        safe = self._planner.safe_end(now_us)
        if self.horizon_us is not None:
            safe = min(safe, self.horizon_us)
        if end > safe:
            # The saved window was read up to its end once: re-read exactly it, so the streams
            # it had finished are not read again in the next window.
            self._wait_until = now_us + self._settings.poll_interval_ms * 1000
            return None
        return Window(resume.window_start_us, max(end, resume.window_start_us))

    def _planned_window(self, now_us: int) -> Window | None:
        plan = self._planner.plan(self._next_start, self.end_us, now_us, self._last_window_at, self.horizon_us)
        if isinstance(plan, WaitUntil):
            self._wait_until = plan.micros
            return None
        if isinstance(plan, GroupEnded):
            return None
        return plan

    def _keep(self, row: LogRow) -> bool:
        if self._resume is not None and self._resume.consumed(row.stream_id, row.time, row.batch_seq_no):
            return False
        if self.end_us is not None and micros_of(row.time) >= self.end_us:
            # Only possible when the end became known after the window was planned: the row
            # belongs to the successor stream's interval (tablet switch duplicates).
            self.rows_past_end += 1
            return False
        return True

    def _deliver(self, now_us: int) -> list[Output]:
        state = self._state
        assert state is not None
        outputs: list[Output] = []
        window = state.window
        while state.current < len(state.cursors):
            cursor = state.cursors[state.current]
            if cursor.page is None:
                break
            # Filtering is only needed when resuming inside a window or near a known end.
            filtering = self._resume is not None or self.end_us is not None
            rows = [r for r in cursor.page if self._keep(r)] if filtering else cursor.page
            state.rows += len(cursor.page)
            cursor.page = None
            group_id, start_us, end_us = self.group.id, window.start_us, window.end_us
            for record in cursor.assembler.add(rows):
                last = record.rows[-1]  # its stream and time are the record's (no properties per record)
                position = Position(start_us, end_us, ChangeId(last.stream_id, last.time, last.batch_seq_no))
                outputs.append(RecordRead(group_id, record, position))
            if not cursor.exhausted:
                break
            cursor.assembler.finish()
            state.current += 1
        if state.current == len(state.cursors):
            outputs.extend(self._close_window(state))
        return outputs

    def _close_window(self, state: _WindowState) -> list[Output]:
        self._planner.record_result(state.window, state.rows)
        self._next_start = state.window.end_us
        self._resume = None
        self._state = None
        self._wait_until = 0
        position = Position.at(self._next_start)
        outputs: list[Output] = [GroupProgress(self.group.id, position)]
        if self.end_us is not None and self._next_start >= self.end_us:
            self.finished = True
            outputs.append(GroupFinished(self.group.id, position))
        return outputs
