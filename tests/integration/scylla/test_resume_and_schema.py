"""Exact resume (from every window end and from the middle of a multi-row record), the
confidence window bound, and ALTER TABLE ADD/DROP while reading: against the emulator."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.scylla.cdc_time import micros_of
from bridge.scylla.events import GroupDiscovered, GroupProgress, RecordRead
from bridge.scylla.groups import GroupId
from bridge.scylla.model import ChangeRecord
from bridge.scylla.positions import ChangeId, Position
from bridge.scylla.reader import SourceReader
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from tests.integration.scylla.harness import Collected, run_reader, settings_for

Row = tuple[bytes, int, int]


@pytest.fixture
def emu(cassandra_session: Any, keyspace: str) -> Iterator[Emulator]:
    yield Emulator(cassandra_session, SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace))


def rows_of(records: list[ChangeRecord]) -> list[Row]:
    return [(r.stream_id.raw, r.time.int, r.batch_seq_no) for rec in records for r in rec.rows]


def read_group(reader: SourceReader, group: GroupId, position: Position | None, until_us: int) -> list[RecordRead]:
    """Start one group at `position`, read until it has passed `until_us`, stop it."""
    reader.start_group(group, position)
    got: list[RecordRead] = []
    deadline = time.time() + 30
    while time.time() < deadline:
        for event in reader.poll(0.2):
            if isinstance(event, RecordRead) and event.group == group:
                got.append(event)
            elif (isinstance(event, GroupProgress) and event.group == group
                  and event.position.window_start_us >= until_us):
                reader.stop_group(group)
                return got
    raise AssertionError(f"group {group} did not reach {until_us}")


def test_resume_from_every_window_end_and_mid_record_equals_one_read(
    cassandra_session: Any, keyspace: str, emu: Emulator
) -> None:
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
                "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}")
    written: list[ChangeRecord] = []
    for i in range(60):
        # a batch over 3 rows of one partition: one record of pre-image, delta and post-image rows
        written += emu.execute(
            f"BEGIN UNLOGGED BATCH UPDATE {keyspace}.t SET v = {i} WHERE pk = {i % 3} AND ck = 0; "
            f"UPDATE {keyspace}.t SET v = {i} WHERE pk = {i % 3} AND ck = 1; "
            f"UPDATE {keyspace}.t SET v = {i} WHERE pk = {i % 3} AND ck = 2; APPLY BATCH")
        time.sleep(0.02)
    until = max(r.micros for r in written) + 1
    settings = settings_for(keyspace, query_time_window_size_ms=300, min_window_size_ms=100,
                            target_rows_per_window=20, initial_lookback_ms=20_000)
    reader = SourceReader(cassandra_session, settings)
    try:
        reader.watch_table(keyspace, "t")
        collected = run_reader(reader, lambda c: bool(c.of_discovered()), start=lambda _: False,
                               collected=_Discovering())
        groups = [e.group for e in collected.of_discovered()]
        busiest = max(groups, key=lambda g: sum(1 for r in written if r.stream_id in g.streams))
        full = read_group(reader, busiest.id, None, until)
        everything = rows_of([e.record for e in full])
        assert sorted(everything) == sorted(rows_of([r for r in written if r.stream_id in busiest.streams]))
        windows = sorted({(e.position.window_start_us, e.position.window_end_us) for e in full})
        assert len(windows) >= 4, windows
        cuts: list[tuple[Position, list[Row]]] = [
            (Position.at(end), [r for r in everything if _micros(r) < end]) for _, end in windows
        ]
        for index, event in enumerate(full):
            rows = event.record.rows
            if index % 5 == 0:
                cuts.append((event.position, rows_of([e.record for e in full[: index + 1]])))
            if len(rows) > 2 and index % 7 == 0:
                middle = Position(event.position.window_start_us, event.position.window_end_us,
                                  ChangeId(event.record.stream_id, event.record.time, rows[1].batch_seq_no))
                before = rows_of([e.record for e in full[:index]]) + rows_of([event.record])[:2]
                cuts.append((middle, before))
        for position, before in cuts:
            after = rows_of([e.record for e in read_group(reader, busiest.id, position, until)])
            union = before + after
            assert sorted(union) == sorted(everything) and len(set(union)) == len(union), position
    finally:
        reader.close()


def _micros(row: Row) -> int:
    return micros_of(uuid.UUID(int=row[1]))


class _Discovering(Collected):
    def of_discovered(self) -> list[GroupDiscovered]:
        return self.of(GroupDiscovered)


@pytest.mark.slow
def test_rows_newer_than_the_confidence_window_are_never_returned(
    cassandra_session: Any, keyspace: str, emu: Emulator
) -> None:
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    written: list[ChangeRecord] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            written.extend(emu.execute(f"UPDATE {keyspace}.t SET v = {i} WHERE pk = {i % 50}"))
            i += 1
            time.sleep(0.002)

    writer = threading.Thread(target=write, daemon=True)
    reader = SourceReader(cassandra_session, settings_for(keyspace, confidence_window_size_ms=2000))
    delivered: list[tuple[int, RecordRead]] = []
    try:
        reader.watch_table(keyspace, "t")
        writer.start()
        deadline = time.time() + 8
        while time.time() < deadline:
            for event in reader.poll(0.1):
                now_us = int(time.time() * 1_000_000)
                if isinstance(event, RecordRead):
                    delivered.append((now_us, event))
                elif isinstance(event, GroupDiscovered):
                    reader.start_group(event.group.id)
    finally:
        stop.set()
        writer.join()
        reader.close()
    assert len(delivered) > 200
    for delivered_us, event in delivered:
        assert event.record.micros < delivered_us - 2_000_000
        assert event.record.micros < event.position.window_end_us


@pytest.mark.slow
def test_alter_table_add_and_drop_while_reading(cassandra_session: Any, keyspace: str, emu: Emulator) -> None:
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    reader = SourceReader(cassandra_session, settings_for(keyspace, confidence_window_size_ms=1000))
    written: list[ChangeRecord] = []
    try:
        reader.watch_table(keyspace, "t")
        collected = Collected()
        phases = [
            f"UPDATE {keyspace}.t SET v = {{i}} WHERE pk = {{k}}",
            f"ALTER TABLE {keyspace}.t ADD w text",
            f"UPDATE {keyspace}.t SET v = {{i}}, w = 'x{{i}}' WHERE pk = {{k}}",
            f"ALTER TABLE {keyspace}.t DROP v",
            f"UPDATE {keyspace}.t SET w = 'y{{i}}' WHERE pk = {{k}}",
        ]
        for phase in phases:
            if phase.startswith("ALTER"):
                emu.execute(phase)
                continue
            for i in range(30):
                written += emu.execute(phase.format(i=i, k=i % 7))
                time.sleep(0.02)
            # Each phase is read before the next ALTER, or the "before" rows would be read
            # through the newer schema (a busy machine reads slower than 5 s of polling).
            phase_end = len(written)
            run_reader(reader, lambda c: len(c.records()) >= phase_end, timeout_s=30,  # noqa: B023 (called now)
                       collected=collected)
        until = max(r.micros for r in written) + 1
        run_reader(reader, lambda c: len(c.records()) >= len(written) and all(
            c.progress_of(g) >= until for g in c.started), timeout_s=30, collected=collected)
    finally:
        reader.close()
    by_time = {e.record.time: e.record for e in collected.records()}
    assert len(by_time) == len(written) == len(collected.records())
    # Each record carries the columns the log table had when it was read: later records the new
    # schema, a column added later reads as null, a dropped column is gone.
    for phase, records in (("before", written[:30]), ("added", written[30:60]), ("dropped", written[60:])):
        for record in records:
            values = by_time[record.time].rows[0].values
            if phase == "before":
                assert values.get("w") is None and values["v"] == record.rows[0].values["v"]
            else:
                assert values["w"] == record.rows[0].values["w"], (phase, values)
            if phase == "dropped":
                assert "v" not in values and "cdc$deleted_v" not in values
