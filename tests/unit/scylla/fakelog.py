"""An in-memory CDC log that answers `PageRequest`s like Cassandra would (time-bounded,
paged), to drive `GroupReader` in unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bridge.scylla.cdc_time import timeuuid_for, timeuuid_sort_key
from bridge.scylla.events import RecordRead
from bridge.scylla.group_reader import GroupReader, Output, PageRequest
from bridge.scylla.groups import GroupId, StreamGroup, TokenRange, sorted_streams
from bridge.scylla.model import LogRow, Operation
from bridge.scylla.stream_id import StreamId


def make_group(streams: Sequence[StreamId], start_us: int = 0, table: str = "t") -> StreamGroup:
    return StreamGroup(
        id=GroupId.vnode("ks", table, start_us // 1000, streams[0].index),
        streams=sorted_streams(streams),
        start_us=start_us,
        token_ranges=(TokenRange(-10, 10),),
    )


def record_rows(stream: StreamId, micros: int, count: int, ops: Sequence[Operation] | None = None) -> list[LogRow]:
    time_uuid = timeuuid_for(micros)
    ops = ops or [Operation.UPDATE] * count
    return [
        LogRow(stream, time_uuid, seq, ops[seq], None, seq == count - 1, {"pk": micros, "ck": seq, "v": seq})
        for seq in range(count)
    ]


@dataclass
class FakeLog:
    page_size: int = 3
    rows: dict[StreamId, list[LogRow]] = field(default_factory=dict)

    def add(self, rows: Sequence[LogRow]) -> None:
        for row in rows:
            self.rows.setdefault(row.stream_id, []).append(row)
            self.rows[row.stream_id].sort(key=lambda r: (timeuuid_sort_key(r.time), r.batch_seq_no))

    def answer(self, request: PageRequest) -> tuple[list[LogRow], bytes | None]:
        low, high = timeuuid_sort_key(request.lower), timeuuid_sort_key(request.upper)
        matching = [r for r in self.rows.get(request.stream, []) if low <= timeuuid_sort_key(r.time) < high]
        offset = int.from_bytes(request.paging_state or b"\0", "big")
        page = matching[offset : offset + self.page_size]
        more = offset + self.page_size < len(matching)
        return page, (offset + self.page_size).to_bytes(4, "big") if more else None


def drive(reader: GroupReader, log: FakeLog, now_us: int, max_steps: int = 10_000) -> list[Output]:
    """Run the reader against the fake log at a fixed `now` until it waits or finishes; answers
    arrive in reverse request order to show that out-of-order answers change nothing."""
    outputs: list[Output] = []
    for _ in range(max_steps):
        wake = reader.wake_at()
        if reader.done or (wake is not None and wake > now_us):
            return outputs
        requests, events = reader.requests(now_us, 100)
        outputs.extend(events)
        if not requests and not events:
            return outputs
        for request in reversed(requests):
            page, state = log.answer(request)
            outputs.extend(reader.on_page(request, page, state, now_us))
    raise AssertionError("reader did not settle")


def rows_of(outputs: Sequence[Output]) -> list[tuple[bytes, int, int]]:
    return [
        (row.stream_id.raw, row.time.int, row.batch_seq_no)
        for o in outputs if isinstance(o, RecordRead) for row in o.record.rows
    ]
