"""`SourceReader`: the CDC source the worker drives. No Kafka, no format logic.

    reader = SourceReader(session, ReaderSettings(...))
    reader.watch_table("ks", "t")                 # discovery reports GroupDiscovered events
    reader.start_group(group_id, saved_position)  # None: the default start (lookback / TTL)
    for event in reader.poll(timeout_s=1.0): ...  # RecordRead (with its position), progress,
                                                  # GroupFinished, GroupEndKnown, ...
    reader.stop_group(group_id); reader.close()

One thread schedules the reads of every started group: it asks each group's state machine
(`GroupReader`) for pages, runs them with the driver's asynchronous requests under one
process-wide in-flight bound, and feeds the answers back (`pages.py` holds the query, its
sending and the decoding of the answers; `inbox.py` the messages other threads post to this
thread, discovery's reports among them); a second thread runs discovery. A group whose
predecessors (the old groups holding its keys before a switch) are still being read by this
reader waits for them, so per-key order holds across switches; the worker starts predecessors it
owns before their successors, and must itself wait for predecessors read by other processes
(their final positions are in the offsets topic).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from cassandra import ConsistencyLevel
from cassandra.cluster import ExecutionProfile
from cassandra.query import tuple_factory

from bridge.scylla.discovery import Discovery
from bridge.scylla.due import DueReaders
from bridge.scylla.errors import describe
from bridge.scylla.events import (
    GroupDiscovered,
    GroupEndKnown,
    GroupFinished,
    PossibleGap,
    ReaderFailed,
    SourceEvent,
)
from bridge.scylla.group_reader import GroupReader, Output, PageRequest
from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.inbox import Call, Found, InboxSink, Message, Start, Stop
from bridge.scylla.limiter import InflightLimiter
from bridge.scylla.metadata import MetadataQueries
from bridge.scylla.output import OutputBuffer
from bridge.scylla.pages import LogPages, PageAnswer
from bridge.scylla.positions import Position, default_start_us, possible_gap_us
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.snapshot_pages import ScanAnswer
from bridge.scylla.snapshots import SnapshotScheduler

log = structlog.get_logger(__name__)
_MAX_IDLE_S = 0.2
_PROFILE_NUMBERS = itertools.count(1)
TableKey = tuple[str, str]
# Told of every CDC log query when its answer arrives: keyspace, table, seconds, error or None.
# Runs on the reader's thread: it must be quick and must not raise.
QueryObserver = Callable[[str, str, float, BaseException | None], None]


class SourceReader:
    def __init__(
        self, session: Any, settings: ReaderSettings | None = None, clock: Callable[[], float] = time.time,
        on_query: QueryObserver | None = None,
    ) -> None:
        self.settings = settings or ReaderSettings()
        self._clock = clock
        self._on_query = on_query
        self._limiter = InflightLimiter(self.settings.max_inflight_queries)
        # Unique in the process: `id(self)` came back for a reader made after another was freed,
        # and the cluster refused a second profile of that name.
        self._profile = f"cdc-bridge-source-{next(_PROFILE_NUMBERS)}"
        session.cluster.add_execution_profile(
            self._profile,
            ExecutionProfile(
                # The session's routing (token aware, local DC first) for the log queries too.
                load_balancing_policy=session.cluster.profile_manager.default.load_balancing_policy,
                row_factory=tuple_factory,
                consistency_level=ConsistencyLevel.name_to_value[self.settings.consistency_level.upper()],
                request_timeout=self.settings.request_timeout_ms / 1000,
            ),
        )
        self._inbox: queue.Queue[Message] = queue.Queue()
        self._pages = LogPages(session, self.settings, self._profile, self._inbox.put)
        self._output = OutputBuffer()
        self._groups: dict[GroupId, StreamGroup] = {}
        self._tables: dict[TableKey, tuple[int, list[str]]] = {}
        self._ends: dict[GroupId, int] = {}
        self._horizons: dict[TableKey, int] = {}
        self._readers: dict[GroupId, GroupReader] = {}
        self._pending: dict[GroupId, tuple[Position | None, bool]] = {}
        self._due = DueReaders(_MAX_IDLE_S)
        self._snapshots = SnapshotScheduler(session, self.settings, self._profile, self._inbox.put, self._limiter,
                                            self._output.put, self._stream)
        self._closing = False
        self.queries = MetadataQueries(session, self.settings, self._profile, self._limiter)
        sink = InboxSink(self._inbox, self._output, self._on_ends, self._on_horizon)
        self._discovery = Discovery(self.queries, self.settings, sink, clock)
        self._thread = threading.Thread(target=self._run, name="cdc-source", daemon=True)
        self._thread.start()
        self._discovery.start()

    # ------------------------------------------------------------------ the worker's API

    def watch_table(self, keyspace: str, table: str, since_us: int | None = None) -> None:
        """Discover the groups of `table` from the generation or stream set operating at
        `since_us` (None: the default start) on; each is reported as `GroupDiscovered`."""
        self._discovery.watch(keyspace, table, None if since_us is None else since_us // 1000)

    def start_group(self, group: GroupId, position: Position | None = None, saved: bool = True) -> None:
        """Read `group` from `position` (None: the default start; `saved` False: a successor's
        start where its predecessors ended, which has nothing to report as a gap: they reported
        theirs, or were first reads). A group not discovered yet
        starts once it is. After `stop_group`, nothing of the stopped reading is handed on,
        even while the scheduler has not yet taken the stop: the output lets the group's events
        through again only when the scheduler takes this start, after the stop."""
        self._inbox.put(Start(group, position, self._output.stops(group), saved))

    def snapshot_group(self, group: GroupId) -> None:
        """Snapshot a streaming group incrementally (a signal): its rows as `SnapshotRead`s while
        it streams on; ignored when the group is not read here or is snapshotted already."""
        self._inbox.put(Call(lambda: self._snapshots.incremental(self._groups[group], self._readers.get(group))
                             if group in self._groups else None))

    def stop_snapshot(self, group: GroupId) -> None:
        """Stop the group's incremental snapshot (a signal); its stream goes on."""
        self._inbox.put(Call(lambda: self._snapshots.stop_incremental(group)))

    def stop_group(self, group: GroupId) -> None:
        """Stop reading `group`; nothing of it is handed on after this call returns."""
        self._output.stop_group(group)
        self._inbox.put(Stop(group))

    def poll(self, timeout_s: float = 1.0, max_items: int = 10_000) -> list[SourceEvent]:
        events = self._output.take(timeout_s, max_items)
        if events:
            self._inbox.put(None)  # wake the scheduler: the buffer has room again
        return events

    @property
    def in_flight(self) -> int:
        return self._limiter.in_flight

    def close(self) -> None:
        self._closing = True
        self._discovery.stop()
        self._inbox.put(None)
        self._thread.join(timeout=30)

    def __enter__(self) -> SourceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ scheduler thread

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)

    def _run(self) -> None:
        while not self._closing:
            try:
                self._receive(self._idle_seconds())
                self._issue()
            except Exception as error:  # a bug must not silently kill every group's reading
                log.exception("cdc source scheduler error", error=describe(error))
                self._output.put([ReaderFailed(None, "*", f"scheduler error: {describe(error)}")])
                time.sleep(_MAX_IDLE_S)

    def _idle_seconds(self) -> float:
        # With no reader there is nothing to issue (and no sweep runs to move its timer on): wait
        # for the inbox, whose every message (a start, an answer, discovery) wakes the thread.
        # Without this the thread spun while the worker joined its group, at 100% of a core.
        # Snapshot scans alone are woken by their answers (a retry waits at most this much more);
        # the sweep timer only moves while there are readers, and read as due it spun the thread.
        if self._output.rows >= self.settings.max_buffered_rows or not self._readers:
            return _MAX_IDLE_S
        if self._due.any_due() and self._limiter.in_flight < self._limiter.limit:
            return 0.0
        return min(_MAX_IDLE_S, self._due.seconds_to_next(self._now_us()))

    def _receive(self, timeout_s: float) -> None:
        try:
            message = self._inbox.get(timeout=timeout_s) if timeout_s > 0 else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            self._handle(message)
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _handle(self, message: Message) -> None:
        if isinstance(message, PageAnswer):
            self._on_answer(message)
            self._due.mark(message.request.group.id)
        elif isinstance(message, Start):
            self._output.resume_group(message.group, message.stops_seen)
            self._start(message.group, message.position, message.saved)
        elif isinstance(message, ScanAnswer):
            self._report_query(message.request.group, message.seconds, message.error)
            self._snapshots.on_answer(message, self._now_us())
            self._due.mark(message.request.group.id)  # an incremental snapshot's group streams on
        elif isinstance(message, Stop):
            self._readers.pop(message.group, None)
            self._snapshots.stop(message.group)
            self._pending.pop(message.group, None)
        elif isinstance(message, Found):
            self._on_found(message)
        elif isinstance(message, Call):
            message.apply()
            self._due.sweep_soon()  # new ends or horizons: any reader may have something to do

    def _blocked(self, reader: GroupReader) -> bool:
        return self._waits_for_predecessors(reader) or self._snapshots.holds(reader.group.id)

    def _waits_for_predecessors(self, reader: GroupReader) -> bool:
        for predecessor in reader.group.predecessors:
            running = self._readers.get(predecessor)
            if (running is not None and not running.done) or predecessor in self._pending:
                return True
        return False

    def _issue(self) -> None:
        if self._output.rows >= self.settings.max_buffered_rows:
            return
        now = self._now_us()
        self._snapshots.issue(now, self._readers, self._waits_for_predecessors)
        if not self._readers:
            return
        for group_id in self._due.take(now, self._readers):
            reader = self._readers.get(group_id)
            wake = None if reader is None or reader.done or self._blocked(reader) else reader.wake_at()
            if reader is None or wake is None or wake > now:
                self._due.seen(group_id)
                if wake is not None:
                    self._due.wake(group_id, wake)
                continue
            slots = self._limiter.take_up_to(len(reader.group.streams))
            if slots == 0:
                return  # the rest stay due until an answer frees a slot
            requests, outputs = reader.requests(now, slots)
            if slots > len(requests):
                self._limiter.release(slots - len(requests))
            self._due.seen(group_id)
            self._emit(reader, outputs)
            for request in requests:
                self._execute(reader, request)
            self._look_again(reader, now, issued=bool(requests))

    def _look_again(self, reader: GroupReader, now: int, issued: bool) -> None:
        """After a reader issued: due again when it may ask more now (after the others), at its
        wake-up time when later; a reader ready by its own account but with nothing to ask is
        left to the sweep."""
        wake = None if reader.done else reader.wake_at()
        if wake is None:
            return
        if wake > now:
            self._due.wake(reader.group.id, wake)
        elif issued:
            self._due.mark(reader.group.id)

    def _execute(self, reader: GroupReader, request: PageRequest) -> None:
        try:
            future = self._pages.send(request)
        except Exception as error:
            self._limiter.release()
            self._emit(reader, reader.on_error(request, error, self._now_us()))
            return
        self._pages.watch(request, future)

    def _report_query(self, group: StreamGroup, seconds: float, error: BaseException | None) -> None:
        if self._on_query is not None:
            self._on_query(group.keyspace, group.table, seconds, error)

    def _on_answer(self, answer: PageAnswer) -> None:
        self._limiter.release()
        request = answer.request
        self._report_query(request.group, answer.seconds, answer.error)
        reader = self._readers.get(request.group.id)
        if reader is None:
            return
        self._emit(reader, self._pages.outputs(reader, answer, self._now_us()))

    def _emit(self, reader: GroupReader, outputs: list[Output]) -> None:
        if not outputs:
            return
        if self._snapshots:
            outputs = self._snapshots.with_progress(reader.group.id, outputs)
        events: list[SourceEvent] = []
        for output in outputs:
            if isinstance(output, GroupFinished | ReaderFailed):
                self._readers.pop(reader.group.id, None)
                self._snapshots.stop(reader.group.id)
                self._due.sweep_soon()  # its successors may start now
                self._log_end(reader, output)
            events.append(output)
        self._output.put(events)

    def _log_end(self, reader: GroupReader, output: GroupFinished | ReaderFailed) -> None:
        group = reader.group
        if isinstance(output, ReaderFailed):
            log.error("cdc group failed", keyspace=group.keyspace, table=group.table, group=str(group.id),
                      error=output.message)
        else:
            log.info("cdc group finished", keyspace=group.keyspace, table=group.table, group=str(group.id))

    def _start(self, group_id: GroupId, position: Position | None, saved: bool = True) -> None:
        group = self._groups.get(group_id)
        if group is None:
            self._pending[group_id] = (position, saved)
            return
        self._pending.pop(group_id, None)
        now = self._now_us()
        ttl_s = self._tables.get((group.keyspace, group.table), (0, []))[0]
        oldest = None if position is None or not saved else possible_gap_us(position, now, ttl_s)
        gap = oldest is not None and (self._ends.get(group_id) is None or self._ends[group_id] > oldest)
        if self._snapshots.start(group, position, gap, now, self._ends.get(group_id)):
            return
        if position is None:
            position = Position.at(max(group.start_us, default_start_us(now, ttl_s, self.settings.initial_lookback_ms)))
        elif gap:
            assert oldest is not None
            log.warning("cdc position older than the log TTL: possible gap", keyspace=group.keyspace,
                        table=group.table, group=str(group_id), window_start_us=position.window_start_us,
                        oldest_us=oldest)
            self._output.put([PossibleGap(group_id, position, oldest)])
        self._stream(group, position)

    def _stream(self, group: StreamGroup, position: Position) -> None:
        group_id = group.id
        reader = GroupReader(group, position, self.settings, self._ends.get(group_id))
        # Until discovery has completed a round for the table, nothing is known to be safe to
        # read: a switch found later in the same round could end this group.
        reader.horizon_us = self._horizons.get((group.keyspace, group.table), 0)
        self._readers[group_id] = reader
        self._due.mark(group_id)

    def _on_found(self, found: Found) -> None:
        events: list[SourceEvent] = []
        for group in found.groups:
            self._tables[(group.keyspace, group.table)] = (found.ttl_s, found.key_columns)
            if group.id in self._groups:
                continue
            self._groups[group.id] = group
            events.append(GroupDiscovered(group))
        self._output.put(events)
        for group in found.groups:
            if group.id in self._pending:
                self._start(group.id, *self._pending[group.id])

    def _on_ends(self, ends: dict[GroupId, int]) -> None:
        events: list[SourceEvent] = []
        for group_id, end_us in ends.items():
            if self._ends.get(group_id) == end_us:
                continue
            self._ends[group_id] = end_us
            reader = self._readers.get(group_id)
            if reader is not None:
                reader.set_end(end_us)
            events.append(GroupEndKnown(group_id, end_us))
        self._output.put(events)

    def _on_horizon(self, table: TableKey, horizon_us: int) -> None:
        self._horizons[table] = horizon_us
        for reader in self._readers.values():
            if (reader.group.keyspace, reader.group.table) == table:
                reader.horizon_us = horizon_us
