"""GroupReader against an in-memory log: complete reads, exact resume from every position,
confidence window, group ends, errors."""

from __future__ import annotations

import random

import pytest
from cassandra import InvalidRequest, ReadTimeout, Unauthorized

from bridge.scylla.events import GroupFinished, GroupProgress, GroupRetrying, ReaderFailed, RecordRead
from bridge.scylla.group_reader import GroupReader
from bridge.scylla.groups import read_order
from bridge.scylla.positions import ChangeId, Position
from bridge.scylla.settings import ReaderSettings
from bridge.scylla.stream_id import StreamId
from tests.unit.scylla.fakelog import FakeLog, drive, make_group, record_rows, rows_of

S = 1_000_000
SETTINGS = ReaderSettings(
    confidence_window_size_ms=2000, query_time_window_size_ms=3000, poll_interval_ms=200,
    min_window_size_ms=1000, target_rows_per_window=10,
)
# One stream id with a high first byte: Java's signed-byte order puts it before the others.
STREAMS = [StreamId.build(5, 1, 3), StreamId.build(-7, 2, 3), StreamId.build(2**62, 3, 3)]


def build_log(seed: int = 1) -> FakeLog:
    rng = random.Random(seed)
    log = FakeLog(page_size=3)
    for i in range(60):
        stream = rng.choice(STREAMS)
        log.add(record_rows(stream, 100 * S + i * 250_000 + rng.randrange(1000), rng.randint(1, 4)))
    return log


def full_read(log: FakeLog, now_us: int = 200 * S, end_us: int | None = None) -> list[object]:
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS, end_us)
    return drive(reader, log, now_us)


def test_full_read_hands_on_every_row_once_in_stream_then_time_order() -> None:
    log = build_log()
    outputs = full_read(log)
    got = rows_of(outputs)
    assert sorted(got) == sorted((r.stream_id.raw, r.time.int, r.batch_seq_no) for rows in log.rows.values()
                                 for r in rows)
    assert len(got) == len(set(got))
    records = [o for o in outputs if isinstance(o, RecordRead)]
    for record in records:
        assert record.record.rows[-1].end_of_batch
        assert len({r.time for r in record.record.rows}) == 1
    # inside a window: stream by stream in Java's order
    by_window: dict[int, list[bytes]] = {}
    for record in records:
        by_window.setdefault(record.position.window_start_us, []).append(read_order(record.record.stream_id))
    for keys in by_window.values():
        assert keys == sorted(keys)


def assert_exact_continuation(
    before: list[tuple[bytes, int, int]], after: list[tuple[bytes, int, int]],
    everything: list[tuple[bytes, int, int]], what: str,
) -> None:
    """No row lost, none twice, and every stream's rows in their log order across the cut.
    (Windows after a resume may be cut differently, so streams interleave differently.)"""
    union = before + after
    assert sorted(union) == sorted(everything), what
    assert len(set(union)) == len(union), what
    for stream in {row[0] for row in everything}:
        assert [r for r in union if r[0] == stream] == [r for r in everything if r[0] == stream], what


def test_resume_from_every_position_yields_exactly_the_rest() -> None:
    log = build_log(seed=2)
    outputs = full_read(log)
    everything = rows_of(outputs)
    positions = [(i, o.position) for i, o in enumerate(outputs) if isinstance(o, RecordRead | GroupProgress)]
    assert len(positions) > 40
    for index, position in positions:
        before = rows_of(outputs[: index + 1])
        resumed = GroupReader(make_group(STREAMS, 100 * S), position, SETTINGS)
        after = rows_of(drive(resumed, log, 200 * S))
        assert_exact_continuation(before, after, everything, f"resume from output {index} ({position})")


def test_resume_in_the_middle_of_a_multi_row_record_hands_on_its_remaining_rows() -> None:
    log = FakeLog(page_size=2)
    rows = record_rows(STREAMS[0], 101 * S, 5)
    log.add(rows)
    log.add(record_rows(STREAMS[0], 102 * S, 2))
    position = Position(100 * S, 103 * S, ChangeId(STREAMS[0], rows[0].time, 2))
    resumed = drive(GroupReader(make_group(STREAMS, 100 * S), position, SETTINGS), log, 200 * S)
    records = [o.record for o in resumed if isinstance(o, RecordRead)]
    assert [r.batch_seq_no for r in records[0].rows] == [3, 4]
    assert [r.batch_seq_no for r in records[1].rows] == [0, 1]


def test_java_change_id_without_sequence_skips_the_whole_record() -> None:
    log = FakeLog()
    rows = record_rows(STREAMS[1], 101 * S, 3)
    log.add(rows)
    position = Position(100 * S, 103 * S, ChangeId(STREAMS[1], rows[0].time, None))
    assert rows_of(drive(GroupReader(make_group(STREAMS, 100 * S), position, SETTINGS), log, 200 * S)) == []


def test_never_reads_past_the_confidence_window() -> None:
    log = FakeLog()
    now = 150 * S
    log.add(record_rows(STREAMS[0], now - 2 * S - 1, 1))  # just old enough
    log.add(record_rows(STREAMS[0], now - 2 * S, 1))  # exactly at the bound: too new
    log.add(record_rows(STREAMS[0], now - S, 1))
    outputs = drive(GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS), log, now)
    times = [o.record.micros for o in outputs if isinstance(o, RecordRead)]
    assert times == [now - 2 * S - 1]
    progress = [o.position.window_start_us for o in outputs if isinstance(o, GroupProgress)]
    assert max(progress) <= now - 2 * S


def test_caught_up_group_waits_one_poll_interval() -> None:
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(148 * S - 300_000), SETTINGS)
    drive(reader, FakeLog(), 150 * S)
    # window ended at now - confidence; the next one opens once 200 ms more have passed it
    assert reader.wake_at() == 148 * S + 200_000 + 2 * S


def test_group_with_an_end_stops_exactly_there_and_finishes() -> None:
    log = FakeLog()
    log.add(record_rows(STREAMS[0], 104 * S, 1))
    log.add(record_rows(STREAMS[0], 105 * S, 1))  # at the end: belongs to the successor
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS, end_us=105 * S)
    outputs = drive(reader, log, 200 * S)
    assert [o.record.micros for o in outputs if isinstance(o, RecordRead)] == [104 * S]
    finished = [o for o in outputs if isinstance(o, GroupFinished)]
    assert len(finished) == 1 and finished[0].position.window_start_us == 105 * S
    assert reader.finished


def test_end_learned_mid_window_drops_rows_past_it_and_counts_them() -> None:
    log = FakeLog()
    log.add(record_rows(STREAMS[0], 101 * S, 1))
    log.add(record_rows(STREAMS[0], 102 * S, 1))
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS)
    requests, _ = reader.requests(200 * S, 10)
    reader.set_end(101_500_000)
    outputs = []
    for request in requests:
        page, state = log.answer(request)
        outputs.extend(reader.on_page(request, page, state, 200 * S))
    assert [o.record.micros for o in outputs if isinstance(o, RecordRead)] == [101 * S]
    assert reader.rows_past_end == 1


def test_transient_error_retries_the_same_page_without_redelivery() -> None:
    log = build_log(seed=3)
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS, end_us=190 * S)
    outputs = []
    now = 200 * S
    failures = 0
    for _ in range(10_000):
        if reader.done:
            break
        requests, events = reader.requests(now, 100)
        outputs.extend(events)
        if not requests and not events:
            wake = reader.wake_at()
            if wake is None or wake > now + 60 * S:
                break
            now = max(now, wake)
            continue
        for request in requests:
            if failures < 5 and random.Random(len(outputs) + failures).random() < 0.3:
                failures += 1
                outputs.extend(reader.on_error(request, ReadTimeout("timed out"), now))
                continue
            page, state = log.answer(request)
            outputs.extend(reader.on_page(request, page, state, now))
    assert failures > 0
    assert any(isinstance(o, GroupRetrying) for o in outputs)
    assert reader.finished
    assert_exact_continuation(rows_of(outputs), [], rows_of(full_read(log, now, 190 * S)), "with retries")


def test_fatal_error_fails_the_group_with_the_table_named() -> None:
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS)
    requests, _ = reader.requests(200 * S, 10)
    outputs = reader.on_error(requests[0], Unauthorized("no SELECT permission"), 200 * S)
    assert isinstance(outputs[0], ReaderFailed)
    assert "ks.t_scylla_cdc_log" in outputs[0].message and "no SELECT permission" in outputs[0].message
    assert reader.failed


def test_missing_table_is_waited_for_then_fails() -> None:
    settings = ReaderSettings(confidence_window_size_ms=2000, missing_table_timeout_ms=5000)
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), settings)
    missing = InvalidRequest("unconfigured table t_scylla_cdc_log")
    now = 200 * S
    requests, _ = reader.requests(now, 10)
    assert isinstance(reader.on_error(requests[0], missing, now)[0], GroupRetrying)
    now += 6 * S
    retry, _ = reader.requests(now, 10)
    outputs = reader.on_error(retry[0], missing, now)
    assert isinstance(outputs[0], ReaderFailed) and "missing" in outputs[0].message


def test_malformed_record_without_end_of_batch_fails_with_its_position() -> None:
    log = FakeLog()
    rows = record_rows(STREAMS[0], 101 * S, 2)
    broken = [rows[0].__class__(**{**{s: getattr(rows[1], s) for s in rows[1].__slots__}, "end_of_batch": False})]
    log.add([rows[0], *broken])
    outputs = drive(GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS), log, 200 * S)
    failed = [o for o in outputs if isinstance(o, ReaderFailed)]
    assert failed and "end_of_batch" in failed[0].message and str(STREAMS[0]) in failed[0].message


@pytest.mark.parametrize("rows_per_window, expect", [(0, "grows"), (50, "shrinks")])
def test_window_size_adapts_to_rows(rows_per_window: int, expect: str) -> None:
    log = FakeLog(page_size=100)
    for i in range(rows_per_window):
        log.add(record_rows(STREAMS[0], 100 * S + i * 10_000, 1))
    reader = GroupReader(make_group(STREAMS, 100 * S), Position.at(100 * S), SETTINGS)
    requests, _ = reader.requests(10_000 * S, 10)
    for request in requests:
        page, state = log.answer(request)
        reader.on_page(request, page, state, 10_000 * S)
    size = reader._planner.size_us
    assert size > 3 * S if expect == "grows" else size < 3 * S
