"""Stopping a group and starting it again at once (what the worker does after an aborted
transaction) hands on nothing of the stopped reading: every record exactly once."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from bridge.scylla.events import GroupDiscovered, RecordRead
from bridge.scylla.positions import Position
from bridge.scylla.reader import SourceReader
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from tests.integration.scylla.harness import settings_for


def test_a_group_restarted_right_away_reads_every_record_once(cassandra_session: Any, keyspace: str) -> None:
    emu = Emulator(cassandra_session, SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace))
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int, ck int, v int, PRIMARY KEY (pk, ck))"
                " WITH cdc = {'enabled': true}")
    written = [r for ck in range(400) for r in emu.execute(f"INSERT INTO {keyspace}.t (pk, ck, v) VALUES (7, {ck}, 1)")]
    stream = written[0].stream_id
    settings = settings_for(keyspace, page_size=20, query_time_window_size_ms=200, min_window_size_ms=100,
                            target_rows_per_window=10, initial_lookback_ms=60_000)
    handed: list[int] = []
    with SourceReader(cassandra_session, settings) as reader:
        reader.watch_table(keyspace, "t")
        group = None
        position: Position | None = None
        deadline = time.time() + 90
        while len(handed) < len(written) and time.time() < deadline:
            for event in reader.poll(0.1):
                if isinstance(event, GroupDiscovered) and stream in event.group.streams and group is None:
                    group = event.group.id
                    reader.start_group(group)
                elif isinstance(event, RecordRead) and event.group == group:
                    handed.append(event.record.rows[0].values["ck"])
                    position = event.position
                    if len(handed) % 7 == 0:  # restart from what was handed on
                        reader.stop_group(group)
                        reader.start_group(group, position)
                        break  # the rest of this poll came from the stopped reading
    counts = Counter(handed)
    assert [ck for ck, n in counts.items() if n > 1] == []
    assert sorted(counts) == list(range(400))
