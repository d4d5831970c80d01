"""Acceptance of the CDC source against the emulator on the real Cassandra: every operation
kind with images, a vnode generation switch, tablet split/merge/partial change, the confidence
window, and ALTER TABLE while reading."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.scylla.events import GroupFinished
from bridge.scylla.model import ChangeRecord, Operation
from bridge.scylla.pairing import pair_images
from bridge.scylla.reader import SourceReader
from bridge_devstack.sim import Emulator
from bridge_devstack.sim.settings import SimSettings
from bridge_devstack.sim.values import canonical
from tests.integration.scylla.harness import Collected, finished_groups, run_reader, settings_for


@pytest.fixture
def emu(cassandra_session: Any, keyspace: str) -> Iterator[Emulator]:
    """An emulator whose stream metadata lives in the test's own keyspace (dropped afterwards)."""
    settings = SimSettings(vnodes_keyspace=keyspace, tablets_keyspace=keyspace, bootstrap_delay_s=3,
                           new_stream_set_delay_s=3)
    yield Emulator(cassandra_session, settings)


@pytest.fixture
def tablets_keyspace(cassandra_session: Any, emu: Emulator) -> Iterator[str]:
    name = f"tk_{uuid.uuid4().hex[:10]}"
    emu.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', "
                "'replication_factor': 1} AND tablets = {'enabled': true, 'initial': 4}")
    try:
        yield name
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


def identity(record: ChangeRecord) -> tuple[bytes, int, tuple[tuple[int, int], ...]]:
    return record.stream_id.raw, record.time.int, tuple((r.batch_seq_no, int(r.operation)) for r in record.rows)


def read_all(reader: SourceReader, tables: list[tuple[str, str]], written: list[ChangeRecord],
             timeout_s: float = 60) -> Collected:
    """Read until every written record is in and every group got past the newest of them."""
    for keyspace, table in tables:
        reader.watch_table(keyspace, table)
    newest = max(r.micros for r in written) + 1
    wanted = {identity(r) for r in written}

    def done(c: Collected) -> bool:
        got = {identity(e.record) for e in c.records()}
        return wanted <= got and all(g in finished_groups(c) or c.progress_of(g) >= newest for g in c.started)

    return run_reader(reader, done, timeout_s)


def assert_same_records_in_stream_order(collected: Collected, written: list[ChangeRecord]) -> None:
    read = [e.record for e in collected.records()]
    assert sorted(identity(r) for r in read) == sorted(identity(r) for r in written)
    per_stream: dict[bytes, list[int]] = defaultdict(list)
    for record in read:
        per_stream[record.stream_id.raw].append(record.micros)
    for times in per_stream.values():
        assert times == sorted(times)


def test_every_operation_kind_is_read_back_with_images(cassandra_session: Any, keyspace: str, emu: Emulator) -> None:
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int, ck int, s int static, v text, m map<int, text>, "
                "PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}")
    statements = [
        f"INSERT INTO {keyspace}.t (pk, ck, v, m) VALUES (1, 1, 'a', {{1: 'x'}})",
        f"UPDATE {keyspace}.t SET v = 'b' WHERE pk = 1 AND ck = 1",
        f"UPDATE {keyspace}.t SET s = 7 WHERE pk = 1",
        f"UPDATE {keyspace}.t SET m = m + {{2: 'y'}} WHERE pk = 1 AND ck = 1",
        f"UPDATE {keyspace}.t SET m = m - {{1}} WHERE pk = 1 AND ck = 1",
        f"INSERT INTO {keyspace}.t (pk, ck, v) VALUES (1, 2, 'c') USING TTL 600",
        f"DELETE v FROM {keyspace}.t WHERE pk = 1 AND ck = 2",
        f"DELETE FROM {keyspace}.t WHERE pk = 1 AND ck = 2",
        f"DELETE FROM {keyspace}.t WHERE pk = 1 AND ck > 5 AND ck <= 9",
        f"INSERT INTO {keyspace}.t (pk, ck, v) VALUES (2, 1, 'd')",
        f"DELETE FROM {keyspace}.t WHERE pk = 2",
        f"BEGIN UNLOGGED BATCH INSERT INTO {keyspace}.t (pk, ck, v) VALUES (3, 1, 'e'); "
        f"INSERT INTO {keyspace}.t (pk, ck, v) VALUES (3, 2, 'f'); APPLY BATCH",
    ]
    written = [record for cql in statements for record in emu.execute(cql)]
    ops = {row.operation for record in written for row in record.rows}
    assert {Operation.PRE_IMAGE, Operation.UPDATE, Operation.INSERT, Operation.ROW_DELETE, Operation.PARTITION_DELETE,
            Operation.POST_IMAGE} <= ops and any(op.is_range_bound for op in ops)
    reader = SourceReader(cassandra_session, settings_for(keyspace))
    try:
        collected = read_all(reader, [(keyspace, "t")], written)
    finally:
        reader.close()
    assert_same_records_in_stream_order(collected, written)
    by_id = {identity(r): r for r in written}
    for event in collected.records():
        expected = by_id[identity(event.record)]
        for got_row, want_row in zip(event.record.rows, expected.rows, strict=True):
            assert {k: canonical(v) for k, v in got_row.values.items() if v is not None} == {
                k: v for k, v in want_row.values.items() if v is not None
            }
        # images are paired with their delta row by primary key
        for change in pair_images(event.record, ["pk", "ck"]):
            for image in (change.pre_image, change.post_image):
                if image is not None and change.deltas:
                    assert (image.values["pk"], image.values["ck"]) == (
                        change.deltas[0].values["pk"], change.deltas[0].values["ck"])
    paired = [c for e in collected.records() for c in pair_images(e.record, ["pk", "ck"])
              if c.pre_image and c.post_image]
    assert paired, "no record carried both images"


class EmuWriter(threading.Thread):
    """Updates keys round-robin through the emulator; keeps the records it wrote."""

    def __init__(self, emu: Emulator, table: str, duration_s: float, keys: int = 30) -> None:
        super().__init__(daemon=True)
        self.emu, self.table, self.duration_s, self.keys = emu, table, duration_s, keys
        self.written: list[ChangeRecord] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            end, i = time.time() + self.duration_s, 0
            while time.time() < end:
                self.written += self.emu.execute(f"UPDATE {self.table} SET v = {i} WHERE pk = {i % self.keys}")
                i += 1
                time.sleep(0.005)
        except BaseException as error:
            self.error = error


def assert_key_order(collected: Collected, written: list[ChangeRecord]) -> None:
    per_key: dict[Any, list[int]] = defaultdict(list)
    for event in collected.records():
        per_key[event.record.rows[0].values["pk"]].append(event.record.micros)
    wrote: dict[Any, list[int]] = defaultdict(list)
    for record in written:
        wrote[record.rows[0].values["pk"]].append(record.micros)
    assert {k: v for k, v in per_key.items()} == {k: sorted(v) for k, v in wrote.items()}


@pytest.mark.slow
def test_generation_switch_through_the_emulator(cassandra_session: Any, keyspace: str, emu: Emulator,
                                                tablets_keyspace: str) -> None:
    emu.execute(f"CREATE TABLE {keyspace}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    emu.execute(f"CREATE TABLE {tablets_keyspace}.u (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    writers = [EmuWriter(emu, f"{keyspace}.t", 8), EmuWriter(emu, f"{tablets_keyspace}.u", 8)]
    for writer in writers:
        writer.start()
    time.sleep(1)
    generation = emu.bootstrap_node(delay_s=3)
    for writer in writers:
        writer.join()
        assert writer.error is None
    switch_us = generation.timestamp_ms * 1000
    reader = SourceReader(cassandra_session, settings_for(keyspace))
    try:
        tables = [(keyspace, "t"), (tablets_keyspace, "u")]
        collected = read_all(reader, tables, writers[0].written + writers[1].written)
    finally:
        reader.close()
    assert_same_records_in_stream_order(collected, writers[0].written + writers[1].written)
    for writer in writers:
        assert_key_order(Collected([(0, e) for e in collected.records()
                                    if e.record.table == writer.written[0].table]), writer.written)
    old = {g for g in collected.started if g.table == "t" and g.generation_start_ms * 1000 < switch_us}
    new = {g for g in collected.started if g.table == "t" and g.generation_start_ms * 1000 == switch_us}
    assert old and new
    finished = {e.group: e.position.window_start_us for e in collected.of(GroupFinished)}
    assert {g: finished.get(g) for g in old} == {g: switch_us for g in old}
    assert {r.micros >= switch_us for r in writers[0].written} == {False, True}
    for event in collected.records():
        if event.record.table == "t":
            assert (event.group in new) == (event.record.micros >= switch_us)
    # the tablet table was untouched: none of its groups ended
    assert not {g for g in finished_groups(collected) if g.table == "u"}


@pytest.mark.slow
def test_tablet_split_merge_and_partial_change_through_the_emulator(
    cassandra_session: Any, keyspace: str, emu: Emulator, tablets_keyspace: str
) -> None:
    emu.execute(f"CREATE TABLE {tablets_keyspace}.u (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    writer = EmuWriter(emu, f"{tablets_keyspace}.u", 12)
    writer.start()
    time.sleep(0.5)
    split = emu.tablets_split(tablets_keyspace, "u", delay_s=1)
    time.sleep(3)
    change = emu.tablets_change(tablets_keyspace, "u", [0], delay_s=1)
    time.sleep(3)
    merge = emu.tablets_merge(tablets_keyspace, "u", delay_s=1)
    writer.join()
    assert writer.error is None
    reader = SourceReader(cassandra_session, settings_for(keyspace))
    try:
        collected = read_all(reader, [(tablets_keyspace, "u")], writer.written)
    finally:
        reader.close()
    assert_same_records_in_stream_order(collected, writer.written)
    assert_key_order(collected, writer.written)
    sets = emu.stream_sets(tablets_keyspace, "u")
    assert len(sets) == 4 and all(s is not None for s in (split, change, merge))
    finished = {e.group: e.position.window_start_us for e in collected.of(GroupFinished)}
    starts = {g.vnode_id: g.generation_start_ms for g in collected.started}
    # each closed stream ended exactly at the stream-set timestamp that closed it, and the
    # group of a stream that stayed open through a change was never restarted
    set_times = [s.timestamp_ms for s in sets]
    assert set(finished.values()) <= {t * 1000 for t in set_times[1:]}
    for previous, current in itertools.pairwise(sets):
        closed = set(previous.streams) - set(current.streams)
        kept = set(previous.streams) & set(current.streams)
        closed_groups = {g for g in collected.started if g.vnode_id in {str(x) for x in closed}}
        assert {finished.get(g) for g in closed_groups} == {current.timestamp_ms * 1000}
        assert not {g for g in finished if g.vnode_id in {str(x) for x in kept}} - closed_groups or all(
            finished[g] > current.timestamp_ms * 1000 for g in finished if g.vnode_id in {str(x) for x in kept})
    # after the partial change, streams it kept still have the group that opened with them
    kept_through_change = set(sets[1].streams) & set(sets[2].streams)
    assert kept_through_change and all(starts[str(x)] <= set_times[1] for x in kept_through_change)
    assert len(starts) == len(collected.started), "a stream was read by two groups"
