"""Section 6 against real Cassandra: tokens, stream choice, the metadata tables (vnode generations,
tablet stream sets), bootstrap/split/merge/partial change, and the timestamp rules."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim import Emulator, InvalidRequestError, SimSettings
from bridge_devstack.sim import streams as st
from bridge_devstack.sim.metadata import datetime_to_ms, ms_to_datetime


@pytest.fixture(scope="module")
def private(cassandra_session: Any, sim_keyspace: str) -> Iterator[Emulator]:
    """An emulator with its own metadata keyspaces, so generations made here touch nobody else."""
    suffix = uuid.uuid4().hex[:8]
    settings = SimSettings(
        vnodes_keyspace=f"simsd_{suffix}",
        tablets_keyspace=f"sims_{suffix}",
        nodes=2,
        vnodes_per_node=4,
        shards_per_node=3,
    )
    emulator = Emulator(cassandra_session, settings, keyspace=sim_keyspace, seed=11)
    try:
        yield emulator
    finally:
        for keyspace in (settings.vnodes_keyspace, settings.tablets_keyspace):
            cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)


@pytest.fixture(scope="module", autouse=True)
def tables(private: Emulator) -> None:
    private.execute(
        "CREATE TABLE kv (a int, b text, c uuid, v int, PRIMARY KEY ((a, b, c))) WITH cdc = {'enabled': true}"
    )
    private.execute(
        "CREATE TABLE other (a int, b text, c uuid, v int, PRIMARY KEY ((a, b, c))) WITH cdc = {'enabled': true}"
    )


def now_us() -> int:
    return time.time_ns() // 1000


def cassandra_token(emu: Emulator, key: tuple[int, str, uuid.UUID]) -> int:
    row = emu.session.execute(
        f"SELECT token(a, b, c) FROM {emu.keyspace}.kv WHERE a = %s AND b = %s AND c = %s", key
    ).one()
    return int(row[0])


def generation_rows(emu: Emulator, timestamp: datetime) -> list[tuple[int, list[StreamId]]]:
    """A generation as stored: (range_end, streams) sorted by range_end."""
    rows = emu.session.execute(
        f"SELECT range_end, streams FROM {emu.settings.vnodes_keyspace}.cdc_streams_descriptions_v2 WHERE time = %s",
        (timestamp,),
    )
    return sorted((r.range_end, [StreamId(bytes(s)) for s in r.streams]) for r in rows)


def vnode_index(ranges: list[tuple[int, list[StreamId]]], token: int) -> int:
    for index, (end, _) in enumerate(ranges):
        if token <= end:
            return index
    return 0


def test_metadata_tables_have_scylla_schemas(private: Emulator) -> None:
    """Column types and clustering order of the four stream tables are ScyllaDB's."""
    found = {}
    for keyspace in (private.settings.vnodes_keyspace, private.settings.tablets_keyspace):
        for row in private.session.execute(
            "SELECT table_name, column_name, kind, type, clustering_order FROM system_schema.columns"
            " WHERE keyspace_name = %s",
            (keyspace,),
        ):
            found[(row.table_name, row.column_name)] = (row.kind, row.type, row.clustering_order)
    assert found[("cdc_generation_timestamps", "key")] == ("partition_key", "text", "none")
    assert found[("cdc_generation_timestamps", "time")] == ("clustering", "timestamp", "desc")
    assert found[("cdc_generation_timestamps", "expired")] == ("regular", "timestamp", "none")
    assert found[("cdc_streams_descriptions_v2", "time")] == ("partition_key", "timestamp", "none")
    assert found[("cdc_streams_descriptions_v2", "range_end")] == ("clustering", "bigint", "asc")
    assert found[("cdc_streams_descriptions_v2", "streams")] == ("regular", "frozen<set<blob>>", "none")
    assert found[("cdc_timestamps", "timestamp")] == ("clustering", "timestamp", "desc")
    assert found[("cdc_streams", "stream_state")] == ("clustering", "tinyint", "asc")
    assert found[("cdc_streams", "stream_id")] == ("clustering", "blob", "asc")
    assert found[("cdc_streams", "keyspace_name")][0] == "partition_key"


def test_tokens_and_vnode_streams_of_random_keys(private: Emulator) -> None:
    """For random composite keys: our Murmur3 token equals Cassandra's token(), the record's stream
    lies in the key's vnode range (as stored in cdc_streams_descriptions_v2) on the key's shard,
    and the same key at the same time gets the same stream in every table."""
    rng = random.Random(3)
    timestamp = (
        private.session.execute(
            f"SELECT time FROM {private.settings.vnodes_keyspace}.cdc_generation_timestamps WHERE key = 'timestamps'"
        )
        .one()
        .time
    )
    ranges = generation_rows(private, timestamp)
    assert len(ranges) == 2 * 4 and all(len(streams) == 3 for _, streams in ranges)
    table = private.table(private.keyspace or "", "kv")
    t = now_us()
    for _ in range(40):
        key = (rng.randint(-(2**31), 2**31 - 1), f"k{rng.random()}", uuid.UUID(int=rng.getrandbits(128)))
        (record,) = private.execute("INSERT INTO kv (a, b, c, v) VALUES (?, ?, ?, 1) USING TIMESTAMP ?", [*key, t])
        token = cassandra_token(private, key)
        assert st.token_of(table.schema, key) == token
        stream = record.stream_id
        index = vnode_index(ranges, token)
        assert stream.index == index and vnode_index(ranges, stream.token) == index
        assert stream in ranges[index][1]
        assert st.shard_of(stream.token, 3, 12) == st.shard_of(token, 3, 12)
        (again,) = private.execute("INSERT INTO other (a, b, c, v) VALUES (?, ?, ?, 2) USING TIMESTAMP ?", [*key, t])
        assert again.stream_id == stream


def test_bootstrap_publishes_a_generation_used_after_its_start(private: Emulator) -> None:
    """bootstrap_node writes a new generation (streams, then timestamp) starting ~1.5 s ahead; writes
    before it use the old streams, writes after it the new ones."""
    key = (1, "x", uuid.UUID(int=5))
    old = private.generation_at(now_us())
    generation = private.bootstrap_node(delay_s=1.5)
    start_us = generation.timestamp_ms * 1000
    assert start_us > now_us()
    stored = list(
        private.session.execute(
            f"SELECT time FROM {private.settings.vnodes_keyspace}.cdc_generation_timestamps WHERE key = 'timestamps'"
        )
    )
    times = [datetime_to_ms(r.time) for r in stored]
    assert times[0] == generation.timestamp_ms and times == sorted(times, reverse=True)
    new_ranges = generation_rows(private, stored[0].time)
    assert len(new_ranges) == 3 * 4
    all_new = {s for _, streams in new_ranges for s in streams}
    (before,) = private.execute("UPDATE kv SET v = 1 WHERE a = ? AND b = ? AND c = ?", list(key))
    assert before.stream_id in {s for r in old.ranges for s in r.streams}
    time.sleep(max(0.0, (start_us - now_us()) / 1e6) + 0.2)
    (after,) = private.execute("UPDATE kv SET v = 2 WHERE a = ? AND b = ? AND c = ?", list(key))
    assert after.stream_id in all_new
    token = cassandra_token(private, key)
    assert vnode_index(new_ranges, after.stream_id.token) == vnode_index(new_ranges, token)


def test_timestamp_rules(private: Emulator) -> None:
    """ScyllaDB's limits: USING TIMESTAMP 123 is "from the past", now+10 s "from the future", now+3 s fine."""
    with pytest.raises(InvalidRequestError, match='cdc: attempted to get a stream "from the past"'):
        private.execute("UPDATE kv USING TIMESTAMP 123 SET v = 1 WHERE a = 1 AND b = 'x' AND c = ?", [uuid.UUID(int=1)])
    with pytest.raises(InvalidRequestError, match='cdc: attempted to get a stream "from the future"'):
        private.execute(
            f"UPDATE kv USING TIMESTAMP {now_us() + 10_000_000} SET v = 1 WHERE a = 1 AND b = 'x' AND c = ?",
            [uuid.UUID(int=1)],
        )
    assert private.execute(
        f"UPDATE kv USING TIMESTAMP {now_us() + 3_000_000} SET v = 1 WHERE a = 1 AND b = 'x' AND c = ?",
        [uuid.UUID(int=1)],
    )
    rows = private.session.execute(
        f"SELECT v FROM {private.keyspace}.kv WHERE a = 1 AND b = 'x' AND c = %s", (uuid.UUID(int=1),)
    )
    assert [r.v for r in rows] == [1]  # the refused writes did not reach the base table either


@pytest.fixture(scope="module")
def tablets(private: Emulator) -> Iterator[str]:
    name = f"simtab_{uuid.uuid4().hex[:8]}"
    private.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        " AND tablets = {'enabled': true, 'initial': 4}"
    )
    private.execute(f"CREATE TABLE {name}.t (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}")
    try:
        yield name
    finally:
        private.execute(f"DROP KEYSPACE {name}")


def stream_rows(emu: Emulator, keyspace: str, timestamp_ms: int) -> dict[int, list[StreamId]]:
    rows = emu.session.execute(
        f"SELECT stream_state, stream_id FROM {emu.settings.tablets_keyspace}.cdc_streams"
        " WHERE keyspace_name = %s AND table_name = 't' AND timestamp = %s",
        (keyspace, ms_to_datetime(timestamp_ms)),
    )
    result: dict[int, list[StreamId]] = {0: [], 1: [], 2: []}
    for row in rows:
        result[row.stream_state].append(StreamId(bytes(row.stream_id)))
    return result


def tablet_write(emu: Emulator, keyspace: str, pk: int) -> tuple[StreamId, int]:
    (record,) = emu.execute(f"UPDATE {keyspace}.t SET v = 1 WHERE pk = ?", [pk])
    token = int(emu.session.execute(f"SELECT token(pk) FROM {keyspace}.t WHERE pk = %s", (pk,)).one()[0])
    return record.stream_id, token


def test_tablets_keyspace_mode_and_first_stream_set(private: Emulator, tablets: str) -> None:
    """A tablets keyspace is recorded in scylla_keyspaces; its table's first stream set starts 5 s
    before creation, one stream per tablet ending at the tablet's last token; writes go to the
    first stream whose token is >= the key's token. Tablet tables stay out of the vnode tables."""
    row = private.session.execute(
        f"SELECT initial_tablets FROM {private.settings.tablets_keyspace}.scylla_keyspaces WHERE keyspace_name = %s",
        (tablets,),
    ).one()
    assert row.initial_tablets == 4
    (first,) = private.stream_sets(tablets, "t")
    assert now_us() - 20_000_000 < first.timestamp_ms * 1000 < now_us() - 4_000_000
    stored = stream_rows(private, tablets, first.timestamp_ms)
    assert sorted(stored[0]) == sorted(stored[2]) == sorted(first.streams) and stored[1] == []
    assert [s.token for s in first.streams] == st.uniform_last_tokens(4)
    assert all(s.index == 0 and s.version == 1 for s in first.streams)
    for pk in range(30):
        stream, token = tablet_write(private, tablets, pk)
        position = first.streams.index(stream)
        assert stream.token >= token and (position == 0 or first.streams[position - 1].token < token)


def test_tablets_split_merge_and_partial_change(private: Emulator, tablets: str) -> None:
    """Split, merge and a partial change publish new stream sets with current/closed/opened rows;
    writes after each start use the new set."""
    first = private.stream_sets(tablets, "t")[0]
    split = private.tablets_split(tablets, "t", delay_s=0.5)
    stored = stream_rows(private, tablets, split.timestamp_ms)
    assert (
        len(stored[0]) == 8
        and sorted(stored[1]) == sorted(first.streams)
        and sorted(stored[2]) == sorted(split.streams)
    )
    merged = private.tablets_merge(tablets, "t", delay_s=0.6)
    stored = stream_rows(private, tablets, merged.timestamp_ms)
    assert len(stored[0]) == 4 and sorted(stored[1]) == sorted(split.streams) and len(stored[2]) == 4
    changed = private.tablets_change(tablets, "t", [1], delay_s=0.7)
    stored = stream_rows(private, tablets, changed.timestamp_ms)
    assert stored[1] == [merged.streams[1]] and stored[2] == [changed.streams[1]]
    assert set(changed.streams) - {changed.streams[1]} == set(merged.streams) - {merged.streams[1]}
    times = [
        datetime_to_ms(r.timestamp)
        for r in private.session.execute(
            f"SELECT timestamp FROM {private.settings.tablets_keyspace}.cdc_timestamps"
            " WHERE keyspace_name = %s AND table_name = 't'",
            (tablets,),
        )
    ]
    assert times == [changed.timestamp_ms, merged.timestamp_ms, split.timestamp_ms, first.timestamp_ms]
    time.sleep(max(0.0, changed.timestamp_ms / 1000 - time.time()) + 0.2)
    for pk in range(30):
        stream, token = tablet_write(private, tablets, pk)
        assert stream in changed.streams
        assert changed.stream_for(token) == stream
