"""Snapshots (`snapshot.mode`): rows written before CDC was enabled reach Kafka as `op=r`
records, once each, while changes go on and workers are SIGKILLed, and the topic applied in
order equals the table."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cassandra.concurrent import execute_concurrent_with_args
from confluent_kafka import Consumer

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import (
    WorkerProcess,
    inside_snapshot_or_past_it,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)

pytestmark = pytest.mark.slow

Key = tuple[int, int]
PRE_PARTITIONS, PRE_ROWS = 200, 100  # 20,000 rows before CDC
VALUE_COLUMNS = ("v", "w")


class TopicState:
    """The topic applied in order by a consumer that knows cells: `r` = the whole row, `c`/`u` =
    the cells given, `d` = gone. Counts the `r`s of every key."""

    def __init__(self, bootstrap: str, topic: str, snapshot: str = "true") -> None:
        self.snapshot = snapshot
        self.rows: dict[Key, dict[str, Any]] = {}
        self.reads: Counter[Key] = Counter()
        self.ops: Counter[str] = Counter()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                                   "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                   "enable.auto.commit": False})
        self._consumer.subscribe([topic])

    def catch_up(self, seconds: float = 1.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for message in self._consumer.consume(2000, timeout=0.2):
                value = message.value() if message.error() is None else None
                if value is not None:
                    self._apply(json.loads(value))

    def _apply(self, envelope: dict[str, Any]) -> None:
        op = envelope["op"]
        self.ops[op] += 1
        row = envelope["after"] if op != "d" else envelope["before"]
        key = (row["pk"], row["ck"])
        if op == "d":
            self.rows.pop(key, None)
            return
        if op == "r":
            self.reads[key] += 1
            assert envelope["source"]["snapshot"] == self.snapshot and envelope["before"] is None
            assert all(row[c] is not None for c in VALUE_COLUMNS), f"an r carries every column as a cell: {row}"
            self.rows[key] = {}
        stored = self.rows.setdefault(key, {})
        for column in VALUE_COLUMNS:
            if row[column] is not None:
                stored[column] = row[column]["value"]

    def close(self) -> None:
        self._consumer.close()


def table_rows(session: Any, keyspace: str) -> dict[Key, dict[str, Any]]:
    return {(r.pk, r.ck): {"v": r.v, "w": r.w} for r in session.execute(f"SELECT pk, ck, v, w FROM {keyspace}.snap")}


def folded(state: TopicState) -> dict[Key, dict[str, Any]]:
    return {key: {c: cells.get(c) for c in VALUE_COLUMNS} for key, cells in state.rows.items()}


def random_changes(emulator: Emulator, keyspace: str, stop: threading.Event, touched: set[Key]) -> None:
    rng = random.Random(23)
    while not stop.is_set():
        pk, ck = rng.randrange(PRE_PARTITIONS + 10), rng.randrange(PRE_ROWS + 20)
        kind = rng.random()
        if kind < 0.4:
            emulator.execute(f"UPDATE {keyspace}.snap SET v = {rng.randrange(10**6)} WHERE pk = {pk} AND ck = {ck}")
        elif kind < 0.8:
            emulator.execute(f"INSERT INTO {keyspace}.snap (pk, ck, v, w) VALUES ({pk}, {ck}, "
                             f"{rng.randrange(10**6)}, 'new-{rng.randrange(100)}')")
        else:
            emulator.execute(f"DELETE FROM {keyspace}.snap WHERE pk = {pk} AND ck = {ck}")
        touched.add((pk, ck))
        time.sleep(0.005)


def check_topic_equals_table(stack: Endpoints, topic: str, session: Any, keyspace: str, untouched: set[Key],
                             snapshot: str) -> None:
    """The topic applied in order equals the table (waiting for it), stays so, and every row
    untouched by the changes has exactly one `r`, no row two."""
    state = TopicState(stack.kafka_bootstrap, topic, snapshot)
    try:
        expected: dict[Key, dict[str, Any]] = {}

        def converged() -> bool:
            nonlocal expected
            state.catch_up()
            expected = table_rows(session, keyspace)
            return folded(state) == expected

        try:
            wait_for(converged, 180, "the topic applied in order to equal the table")
        except AssertionError:
            got = folded(state)
            diff = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
            raise AssertionError(f"{len(diff)} keys differ, e.g. {[(k, expected.get(k), got.get(k)) for k in diff[:5]]}"
                                 ) from None
        state.catch_up(5)  # anything more (a second `r`) would show now
        assert folded(state) == expected
        assert untouched and all(state.reads[key] == 1 for key in untouched), "every untouched row has one r"
        assert max(state.reads.values()) == 1, [k for k, n in state.reads.items() if n > 1][:5]
    finally:
        state.close()


def fill_before_cdc(emulator: Emulator, session: Any, keyspace: str) -> list[tuple[int, int, int, str]]:
    emulator.execute(f"CREATE TABLE {keyspace}.snap (pk int, ck int, v int, w text, PRIMARY KEY (pk, ck))")
    insert = session.prepare(f"INSERT INTO {keyspace}.snap (pk, ck, v, w) VALUES (?, ?, ?, ?)")
    rows = [(pk, ck, pk * 1000 + ck, f"old-{pk}-{ck}") for pk in range(PRE_PARTITIONS) for ck in range(PRE_ROWS)]
    execute_concurrent_with_args(session, insert, rows, concurrency=64, raise_on_first_error=True)
    emulator.execute(f"ALTER TABLE {keyspace}.snap WITH cdc = {{'enabled': true}}")
    return rows


def snapshot_events(worker: WorkerProcess, name: str) -> int:
    return sum(1 for e in worker.events() if e.get("event") == name)


def test_initial_snapshot_with_changes_and_sigkills_gives_each_row_once_and_converges(
    emulator: Emulator, keyspace: str, cassandra_session: Any, tmp_path: Path, stack: Endpoints,
    workers: Callable[..., WorkerProcess], bridge_name: str,
) -> None:
    before_cdc = fill_before_cdc(emulator, cassandra_session, keyspace)

    props = worker_properties(stack, bridge_name, [f"{keyspace}.snap"], snapshot__mode="initial",
                              snapshot__fetch__size=10, snapshot__max__threads=1)
    configs = [write_properties(tmp_path / f"w{i}.properties", {**props, "worker.instance.id": f"w{i}"})
               for i in range(2)]
    running = [workers(config, f"w{i}") for i, config in enumerate(configs)]
    everyone = list(running)
    stop, touched = threading.Event(), set[Key]()
    writer = threading.Thread(target=random_changes, args=(emulator, keyspace, stop, touched), name="writer")
    writer.start()
    try:
        for kill in range(4):  # inside its snapshot while there is one to do
            victim = running[kill % 2]
            wait_for(lambda v=victim: inside_snapshot_or_past_it(v), 120, "snapshot chunks")
            victim.kill()
            running[kill % 2] = workers(configs[kill % 2], f"w{kill % 2}")
            everyone.append(running[kill % 2])
        time.sleep(5)
    finally:
        stop.set()
        writer.join()

    untouched = {(pk, ck) for pk, ck, _, _ in before_cdc} - touched
    check_topic_equals_table(stack, f"{bridge_name}.{keyspace}.snap", cassandra_session, keyspace, untouched, "true")
    assert sum(snapshot_events(w, "snapshot resumed") for w in everyone) > 0, "a killed snapshot resumed"
    for worker in running:
        assert worker.stop() == 0


def test_when_needed_closes_a_gap_past_the_log_ttl_with_a_snapshot(
    emulator: Emulator, keyspace: str, tmp_path: Path, stack: Endpoints,
    workers: Callable[..., WorkerProcess], bridge_name: str,
) -> None:
    """Positions saved, then the changes made while no worker ran expire from the log (TTL 6 s):
    `when_needed` snapshots the groups instead of failing them, and the rows reach Kafka."""
    emulator.execute(f"CREATE TABLE {keyspace}.orders (id int PRIMARY KEY, item text) WITH cdc = "
                     "{'enabled': true, 'ttl': 6}")
    props = worker_properties(stack, bridge_name, [f"{keyspace}.orders"], heartbeat__interval__ms=200)
    streaming = workers(write_properties(tmp_path / "stream.properties", props), "no-data")
    # The streamed row must be read before it expires: written only once the groups run (a
    # worker that took 3 s to start under load let it expire unread).
    wait_for(lambda: snapshot_events(streaming, "group started") > 0, 60, "the worker to stream")
    emulator.execute(f"INSERT INTO {keyspace}.orders (id, item) VALUES (1, 'streamed')")
    topic = f"{bridge_name}.{keyspace}.orders"
    assert len(read_topic(stack.kafka_bootstrap, topic, expected=1, settle_s=2)) == 1
    time.sleep(2)  # every group's position committed by the heartbeat
    assert streaming.stop() == 0
    for number in range(2, 12):  # written while no worker runs; gone from the log before one does
        emulator.execute(f"INSERT INTO {keyspace}.orders (id, item) VALUES ({number}, 'missed')")
    time.sleep(6 + 3)

    closing = workers(write_properties(tmp_path / "needed.properties", {**props, "snapshot.mode": "when_needed"}),
                      "when-needed")
    messages = read_topic(stack.kafka_bootstrap, topic, expected=1 + 11, timeout_s=90, settle_s=3)
    snapshot = {json.loads(value)["after"]["id"]: json.loads(value)["after"]["item"]["value"]
                for _, value in messages if value is not None and json.loads(value)["op"] == "r"}
    assert snapshot == {1: "streamed", **{n: "missed" for n in range(2, 12)}}
    assert len(messages) == 12, "one c, then one r per row"
    events = [e.get("event") for e in closing.events()]
    assert "snapshot started" in events and "group failed" not in events
    assert closing.stop() == 0


def test_a_signalled_incremental_snapshot_gives_each_row_once_while_the_table_streams(
    emulator: Emulator, keyspace: str, cassandra_session: Any, tmp_path: Path, stack: Endpoints,
    workers: Callable[..., WorkerProcess], bridge_name: str,
) -> None:
    """`cdc-bridge snapshot start` on a table streamed with `no_data`: its rows from before CDC
    arrive as `r` (incremental) while its changes keep streaming, a worker SIGKILLed meanwhile."""
    before_cdc = fill_before_cdc(emulator, cassandra_session, keyspace)
    props = worker_properties(stack, bridge_name, [f"{keyspace}.snap"], signal__enabled__channels="kafka",
                              notification__enabled__channels="kafka", snapshot__fetch__size=10,
                              snapshot__max__threads=1)
    configs = [write_properties(tmp_path / f"w{i}.properties", {**props, "worker.instance.id": f"w{i}"})
               for i in range(2)]
    running = [workers(config, f"w{i}") for i, config in enumerate(configs)]
    everyone = list(running)
    wait_for(lambda: all(snapshot_events(w, "group started") > 0 for w in running), 90, "both workers to stream")
    stop, touched = threading.Event(), set[Key]()
    writer = threading.Thread(target=random_changes, args=(emulator, keyspace, stop, touched), name="writer")
    writer.start()
    try:
        time.sleep(2)
        command = [sys.executable, "-m", "bridge.cli", "snapshot", "start", "--config", str(configs[0]),
                   "--table", f"{keyspace}.snap"]
        started = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert started.returncode == 0 and "execute-snapshot signal" in started.stdout, started.stderr
        wait_for(lambda: snapshot_events(running[0], "snapshot chunk") >= 3, 90, "snapshot chunks")
        running[0].kill()
        running[0] = workers(configs[0], "w0")
        everyone.append(running[0])
        status = subprocess.run([*command[:4], "status", *command[5:]], capture_output=True, text=True,
                                timeout=60, check=False)
        assert status.returncode == 0 and f"snapshot of {keyspace}.snap:" in status.stdout, status.stderr
        time.sleep(5)
    finally:
        stop.set()
        writer.join()
    untouched = {(pk, ck) for pk, ck, _, _ in before_cdc} - touched
    check_topic_equals_table(stack, f"{bridge_name}.{keyspace}.snap", cassandra_session, keyspace, untouched,
                             "incremental")
    events = [e for w in everyone for e in w.events()]  # the killed worker's too
    assert any(e.get("event") == "signal" for e in events)
    snapshotted = {e["group"] for e in events if e.get("event") == "snapshot finished"}
    notes = [json.loads(value) for _, value in read_topic(stack.kafka_bootstrap, f"{bridge_name}-notifications",
                                                          expected=10**9, timeout_s=10, settle_s=0)
             if value is not None]
    completed = Counter(n["additionalData"]["group"] for n in notes if n["type"] == "COMPLETED")
    assert all(n["aggregateType"] == "Incremental Snapshot" for n in notes)
    assert set(completed) == snapshotted and set(completed.values()) == {1}, "one COMPLETED per group, committed"
    for worker in running:
        assert worker.stop() == 0
