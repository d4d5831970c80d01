"""End-to-end read of hand-written log rows: discovery, windows, records, positions."""

from __future__ import annotations

import time
from typing import Any

from bridge.scylla.events import GroupDiscovered, GroupProgress, RecordRead
from bridge.scylla.model import Operation
from bridge.scylla.reader import SourceReader
from bridge.scylla.stream_id import StreamId
from tests.integration.scylla.harness import settings_for
from tests.integration.scylla.logkit import LogKit, now_ms


def test_reads_records_of_every_stream_in_order(cassandra_session: Any, keyspace: str) -> None:
    kit = LogKit(cassandra_session, keyspace)
    kit.create_metadata()
    kit.create_table("t")
    streams = [StreamId.build(-100 + i, 7 + i, 1 if i < 2 else 2) for i in range(4)]
    start = now_ms() - 60_000
    kit.publish_generation(start, [(0, streams[:2]), (2**62, streams[2:])])
    written = []
    base_us = (now_ms() - 30_000) * 1000
    for i in range(20):
        stream = streams[i % 4]
        t = kit.write_record("t", stream, base_us + i * 1000, [(Operation.INSERT, {"pk": i, "ck": 0, "v": i})])
        written.append((stream, t))
    reader = SourceReader(cassandra_session, settings_for(keyspace))
    try:
        reader.watch_table(keyspace, "t")
        got = []
        deadline = time.time() + 30
        caught_up = False
        while time.time() < deadline and not caught_up:
            for event in reader.poll(0.5):
                if isinstance(event, GroupDiscovered):
                    reader.start_group(event.group.id)
                elif isinstance(event, RecordRead):
                    got.append((event.record.stream_id, event.record.time))
                elif isinstance(event, GroupProgress) and event.position.window_start_us > base_us + 30_000_000:
                    caught_up = len(got) == len(written)
        assert sorted(got, key=lambda x: (x[0].raw, x[1].time)) == sorted(
            written, key=lambda x: (x[0].raw, x[1].time)
        )
    finally:
        reader.close()


def test_scheduler_waits_without_spinning_while_no_group_is_started(cassandra_session: Any, keyspace: str) -> None:
    """A worker joins its slot group for seconds before it starts a group: the scheduler thread
    must sleep meanwhile (it once spun at 100% of a core, a third of a catch-up's CPU)."""
    reader = SourceReader(cassandra_session, settings_for(keyspace))
    try:
        clock = time.pthread_getcpuclockid(reader._thread.ident or 0)
        time.sleep(0.3)
        cpu_before, wall_before = time.clock_gettime(clock), time.monotonic()
        time.sleep(1.0)
        busy = (time.clock_gettime(clock) - cpu_before) / (time.monotonic() - wall_before)
        assert busy < 0.05, f"the scheduler thread used {busy:.0%} of a core with nothing to read"
    finally:
        reader.close()
