"""`SnapshotScheduler`: the snapshots of the source's groups, run on the source's scheduler thread.

It decides which groups are snapshotted (`snapshot_scan.snapshot_start`, or a signal for an
incremental snapshot), keeps one `SnapshotScan` per such group, sends their pages (one in flight
per group, `snapshot.max.threads` groups at once, under the process-wide in-flight bound) and
hands their outputs on. An initial snapshot runs before its group streams; an incremental one
runs while its group streams: a page is read only between two of the group's windows, the
group's next window waits for the page, and the page's rows go out at that stream position, so
the ordering argument of docs/worker.md holds page by page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import structlog

from bridge.scylla.events import GroupFinished, GroupProgress, ReaderFailed, RecordRead, SourceEvent
from bridge.scylla.group_reader import GroupReader, Output
from bridge.scylla.groups import GroupId, StreamGroup
from bridge.scylla.limiter import InflightLimiter
from bridge.scylla.positions import Position, SnapshotProgress
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.snapshot_pages import ScanAnswer, SnapshotPages
from bridge.scylla.snapshot_scan import ScanEnd, ScanOutput, SnapshotScan, snapshot_start

log = structlog.get_logger(__name__)
INCREMENTAL = "incremental"


class SnapshotScheduler:
    def __init__(self, session: Any, settings: ReaderSettings, profile: str, post: Callable[[ScanAnswer], None],
                 limiter: InflightLimiter, put: Callable[[list[SourceEvent]], None],
                 stream: Callable[[StreamGroup, Position], None]) -> None:
        self._settings = settings
        self._pages = SnapshotPages(session, settings, profile, post)
        self._limiter = limiter
        self._put = put
        self._stream = stream  # start streaming a group from a position (the reader's `_stream`)
        self._scans: dict[GroupId, SnapshotScan] = {}
        self._turn = 0

    def __bool__(self) -> bool:
        return bool(self._scans)

    def start(self, group: StreamGroup, position: Position | None, gap: bool, now: int,
              end_us: int | None) -> bool:
        """Start or resume the group's snapshot when it has one to do (True: the group's reading
        is the snapshot's now); with `initial_only`, a group without one is finished at once."""
        mode = self._settings.snapshot_mode
        start = snapshot_start(mode, group, position, gap, now, self._settings.confidence_window_size_ms, end_us)
        if start is None:
            if mode == "initial_only":
                self._put([GroupFinished(group.id, position or Position.at(group.start_us))])
            return mode == "initial_only"
        assert start.snapshot is not None
        if start.snapshot.completed:
            self._put([GroupFinished(group.id, start)])
            return True
        if start.snapshot.kind == INCREMENTAL:
            self._stream(group, replace(start, snapshot=None))
            self._begin(group, start, "interleave", gap)
            return True
        self._begin(group, start, "stop" if mode == "initial_only" else "stream", gap)
        return True

    def incremental(self, group: StreamGroup, reader: GroupReader | None) -> None:
        """A signal asks for an incremental snapshot of a streaming group (ignored when the group
        is not read here or already snapshotted)."""
        if reader is None or reader.done or group.id in self._scans:
            return
        self._begin(group, Position(0, 0, None, SnapshotProgress(INCREMENTAL)), "interleave", False)

    def stop(self, group: GroupId) -> None:
        """The group is no longer read here (stopped, finished, failed)."""
        self._scans.pop(group, None)

    def stop_incremental(self, group: GroupId) -> None:
        """A stop-snapshot signal: the group's incremental snapshot ends, its stream goes on."""
        scan = self._scans.get(group)
        if scan is not None and scan.then == "interleave":
            del self._scans[group]
            log.info("snapshot stopped", keyspace=group.keyspace, table=group.table, group=str(group),
                     rows=scan.rows_handed_on, reason="stop-snapshot signal")

    def holds(self, group: GroupId) -> bool:
        """The group's stream waits: its snapshot's page is being read, or a partition it began."""
        scan = self._scans.get(group)
        return scan is not None and scan.holding

    def with_progress(self, group: GroupId, outputs: list[Output]) -> list[Output]:
        """A streaming group's positions carry its incremental snapshot's progress, so a commit of
        stream progress never forgets how far the snapshot has gone."""
        scan = self._scans.get(group)
        if scan is None or scan.then != "interleave":
            return outputs
        progress = scan.progress
        carried: list[Output] = []
        for output in outputs:
            if isinstance(output, RecordRead):
                output = RecordRead(output.group, output.record, replace(output.position, snapshot=progress))
            elif isinstance(output, GroupProgress | GroupFinished):
                output = type(output)(output.group, replace(output.position, snapshot=progress))
            carried.append(output)
        return carried

    def issue(self, now: int, readers: dict[GroupId, GroupReader], blocked: Callable[[GroupReader], bool]) -> None:
        running = sum(1 for scan in self._scans.values() if scan.in_flight)
        if not self._scans or running >= self._settings.snapshot_max_threads:
            return
        # Each call starts one scan further on, so the groups take turns: a small table's
        # snapshot (and then its stream) does not wait for a big one's to end.
        scans = list(self._scans.values())
        self._turn = (self._turn + 1) % len(scans)
        for scan in scans[self._turn:] + scans[:self._turn]:
            if running >= self._settings.snapshot_max_threads:
                return
            if scan.in_flight or scan.done:
                continue
            if scan.then == "interleave":
                reader = readers.get(scan.group.id)
                between = None if reader is None or blocked(reader) else reader.between_windows()
                if between is None:
                    continue
                scan.stream_position = between
            if not self._limiter.take_up_to(1):
                return
            request = scan.request(now)
            if request is None:
                self._limiter.release()
                continue
            running += 1
            try:
                future = self._pages.send(request)
            except Exception as error:
                self._limiter.release()
                self._emit(scan, scan.on_error(request, error, now))
                continue
            self._pages.watch(request, future)

    def on_answer(self, answer: ScanAnswer, now: int) -> None:
        self._limiter.release()
        scan = self._scans.get(answer.request.group.id)
        if scan is None:
            return
        if answer.error is not None:
            self._emit(scan, scan.on_error(answer.request, answer.error, now))
            return
        try:
            rows, paging_state = self._pages.rows(answer)
        except Exception as error:
            self._emit(scan, scan.on_error(answer.request, error, now))
            return
        self._emit(scan, scan.on_page(answer.request, rows, paging_state))

    def _begin(self, group: StreamGroup, position: Position, then: ScanEnd, gap: bool) -> None:
        assert position.snapshot is not None
        log.info("snapshot resumed" if position.snapshot.after_token is not None else "snapshot started",
                 keyspace=group.keyspace, table=group.table, group=str(group.id), kind=position.snapshot.kind,
                 after_token=position.snapshot.after_token, stream_from_us=position.window_start_us, gap=gap)
        scan = self._scans[group.id] = SnapshotScan(group, position, self._settings, then)
        if scan.all_read:  # resumed after its last page was committed, before what follows it was
            self._emit(scan, scan.finish())

    def _emit(self, scan: SnapshotScan, outputs: list[ScanOutput]) -> None:
        """Hand the scan's outputs on; a finished initial snapshot streams the group from where it began."""
        if outputs:
            self._put(list(outputs))
        if not scan.done or self._scans.get(scan.group.id) is not scan:
            return
        del self._scans[scan.group.id]
        group = scan.group
        failed = bool(outputs) and isinstance(outputs[-1], ReaderFailed)
        say = log.warning if failed or scan.dropped else log.info
        say("snapshot ended: the table was dropped" if scan.dropped else "snapshot finished", keyspace=group.keyspace,
            table=group.table, group=str(group.id), rows=scan.rows_handed_on, kind=scan.progress.kind, failed=failed)
        if outputs and isinstance(outputs[-1], GroupProgress):
            self._stream(group, outputs[-1].position)
