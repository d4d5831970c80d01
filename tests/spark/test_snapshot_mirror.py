"""Snapshot and stream into the mirror: a table with rows written before CDC (lists, sets, maps,
static rows) is snapshotted by a real `cdc-bridge run` worker (`snapshot.mode=initial`, so its
rows reach Kafka as `op=r`) while list appends, element changes, updates, inserts, row and range
deletes and static changes go on; the topics mirrored micro-batch by micro-batch
(`MirrorWriter`) equal the table, cell for cell, each list with every append once."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cassandra.concurrent import execute_concurrent_with_args
from confluent_kafka import Consumer, TopicPartition

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import (
    WorkerProcess,
    inside_snapshot_or_past_it,
    read_topic,
    start_worker,
    wait_for,
    worker_properties,
    write_properties,
)
from tests.spark.jobs import wait_delivered
from tests.spark.workload import _canonical

COLUMNS = "pk int, ck int, st int static, v int, l list<int>, s set<int>, m map<int, text>, PRIMARY KEY (pk, ck)"
PARTITIONS, ROWS = 8, 6  # before CDC; partitions 8 and 9 hold a static row alone
VALUES = ("st", "v", "l", "s", "m")
WINDOW_S = 12  # the worker's confidence window


@pytest.fixture
def table(stack: Endpoints, cassandra_session: Any) -> Iterator[tuple[str, Emulator]]:
    """`<keyspace>.snap` with rows written before CDC was enabled, then CDC on."""
    keyspace = f"ks_snapmirror_{uuid.uuid4().hex[:8]}"
    cassandra_session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                              "'replication_factor': 1}")
    try:
        with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
            emu.execute(f"CREATE TABLE {keyspace}.snap ({COLUMNS})")
            insert = cassandra_session.prepare(
                f"INSERT INTO {keyspace}.snap (pk, ck, v, l, s, m) VALUES (?, ?, ?, ?, ?, ?)")
            rows = [(pk, ck, pk * 10 + ck, [pk, ck, ck], {ck, 7}, {ck: f"m{pk}"})
                    for pk in range(PARTITIONS) for ck in range(ROWS)]
            execute_concurrent_with_args(cassandra_session, insert, rows, concurrency=16, raise_on_first_error=True)
            static = cassandra_session.prepare(f"UPDATE {keyspace}.snap SET st = ? WHERE pk = ?")
            statics = [(pk * 100, pk) for pk in range(0, PARTITIONS + 2, 2)] + [(900, 9)]
            execute_concurrent_with_args(cassandra_session, static, statics, raise_on_first_error=True)
            emu.execute(f"ALTER TABLE {keyspace}.snap WITH cdc = {{'enabled': true}}")
            yield f"{keyspace}.snap", emu
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


# A write in flight: its key (ck None: the whole partition), its write time and when it had landed (µs).
InFlight = tuple[int, int | None, int, int]


def changes(emu: Emulator, table: str, stop: threading.Event, done: Counter[str], landed: list[InFlight]) -> None:
    """Random changes until stopped. Rows are never emptied by updates: a row created by UPDATE
    (no row marker) that a snapshot row then marks would outlive it in the mirror (docs/spark.md)."""
    rng = random.Random(5)
    i = 0
    while not stop.is_set() or i < 150:
        i += 1
        pk, ck = rng.randrange(PARTITIONS + 2), rng.randrange(ROWS + 1)
        where = f"WHERE pk = {pk} AND ck = {ck}"
        kind = rng.choices(["append", "set", "map", "update", "insert", "delete", "range", "static", "unstatic"],
                           [30, 8, 8, 10, 10, 5, 2, 5, 2])[0]
        cql = {
            "append": f"UPDATE {table} SET l = l + [{i}] {where}",
            "set": f"UPDATE {table} SET s = s + {{{i % 9}}} {where}",
            "map": f"UPDATE {table} SET m[{i % 4}] = 'x{i}' {where}",
            "update": f"UPDATE {table} SET v = {i} {where}",
            "insert": f"INSERT INTO {table} (pk, ck, v, l) VALUES ({pk}, {ck}, {i}, [{i}])",
            "delete": f"DELETE FROM {table} {where}",
            "range": f"DELETE FROM {table} WHERE pk = {pk} AND ck > {rng.randrange(ROWS)}",
            "static": f"UPDATE {table} SET st = {i} WHERE pk = {pk}",
            "unstatic": f"DELETE st FROM {table} WHERE pk = {pk}",
        }[kind]
        records = emu.execute(cql)
        after_us = time.time_ns() // 1000
        whole_partition = kind in ("range", "static", "unstatic")
        landed.extend((pk, None if whole_partition else ck, r.micros, after_us) for r in records)
        done[kind] += 1
        time.sleep(0.01)


def contained_appends(envelopes: list[dict[str, Any]]) -> int:
    """List appends behind the `r` of their row in the topic that the `r` already holds (at or
    before its `ts_us`): the ones the mirror must not apply again."""
    read: dict[tuple[Any, Any], int] = {}
    found = 0
    for envelope in envelopes:
        row = envelope["after"] or envelope["before"]
        key = (row["pk"], row["ck"])
        if envelope["op"] == "r":
            read[key] = envelope["source"]["ts_us"]
        elif envelope["op"] == "u" and row.get("l__elements") and envelope["source"]["ts_us"] <= read.get(key, -1):
            found += 1
    return found


def read_while_in_flight(envelopes: list[dict[str, Any]], landed: list[InFlight]) -> set[tuple[Any, Any]]:
    """Keys whose `r` was read while a write to them was in flight: written (timestamped) before
    the read's time and landed after it. Such a write is neither surely in the row nor surely
    not (docs/worker.md, Snapshots): the one case the bridge cannot order."""
    found = set()
    for envelope in envelopes:
        if envelope["op"] != "r":
            continue
        row, read_us = envelope["after"], envelope["source"]["ts_us"]
        for pk, ck, written_us, after_us in landed:
            if pk == row["pk"] and ck in (None, row["ck"]) and written_us <= read_us < after_us:
                found.add((row["pk"], row["ck"]))
    return found


def end_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed"})
    try:
        found = {}
        for topic in topics:
            for partition in consumer.list_topics(topic, timeout=30).topics[topic].partitions:
                found[(topic, partition)] = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                           timeout=30)[1]
        return found
    finally:
        consumer.close()


def as_cql(mirror: dict[tuple[Any, ...], dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The mirror's rows as `SELECT *` shows them: the static row's columns on every clustered row
    of its partition, the static row alone only in a partition without clustered rows."""
    static = {pk: row["st"] for (pk, ck), row in mirror.items() if ck is None}
    clustered = {pk for pk, ck in mirror if ck is not None}
    out = {}
    for (pk, ck), row in mirror.items():
        if ck is None and pk in clustered:
            continue
        out[(pk, ck)] = {**row, "st": static.get(pk)}
    return out


def snapshots_over_in_all(workers: list[WorkerProcess]) -> bool:
    """Every group any worker started has a finished snapshot in some worker's log (a killed
    worker's group is taken over and its snapshot resumed there)."""
    events = [e for w in workers for e in w.events()]
    failed = [e for e in events if e.get("event") == "group failed"]
    assert not failed, failed[:1]
    started = {e["group"] for e in events if e.get("event") == "group started"}
    return bool(started) and started <= {e["group"] for e in events if e.get("event") == "snapshot finished"}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("worker_count", "kills"), [(2, 2)], ids=["two workers, two SIGKILLs"])
def test_a_snapshotted_table_with_changes_meanwhile_mirrors_equal(
        stack: Endpoints, spark: Any, cassandra_session: Any, table: tuple[str, Emulator], tmp_path: Path,
        worker_count: int, kills: int) -> None:
    """With two workers, each SIGKILLed inside its snapshot and restarted (issue 23's acceptance:
    the mirror equals the table after kills too): the aborted transactions' records are not
    read (read_committed), the resumed chunks give their rows again, and the mirror converges."""
    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.mirror.view import current_state
    from bridge.spark.mirror.writer import MirrorWriter

    name, emu = table
    bridge = f"sm-{uuid.uuid4().hex[:8]}"
    # A wide confidence window puts the snapshot's stream position S well before its reads: the
    # changes written from S until a row is read are in its `r` and follow it in the topic.
    props = worker_properties(stack, bridge, [name], snapshot__mode="initial", snapshot__fetch__size=5,
                              snapshot__max__threads=1, **{"value.converter.schemas.enable": "true",
                                                           "key.converter.schemas.enable": "true",
                                                           "scylla.confidence.window.size": str(WINDOW_S * 1000),
                                                           "dropped.changes.topic": f"{bridge}.dropped"})
    stop, done, landed = threading.Event(), Counter[str](), list[InFlight]()
    writer = threading.Thread(target=changes, args=(emu, name, stop, done, landed), name="changes")
    writer.start()  # from before the worker's start until its snapshot is over
    configs = [write_properties(tmp_path / f"w{i}.properties", {**props, "worker.instance.id": f"w{i}"})
               for i in range(worker_count)]
    running = [start_worker(config, tmp_path, f"w{i}") for i, config in enumerate(configs)]
    everyone = list(running)
    topics = [f"{bridge}.{name}", f"{bridge}.dropped"]
    try:
        for kill in range(kills):  # inside its snapshot while there is one to do
            victim = kill % worker_count
            wait_for(lambda v=running[victim]: inside_snapshot_or_past_it(v), 120, "snapshot chunks")
            running[victim].kill()
            running[victim] = start_worker(configs[victim], tmp_path, f"w{victim}")
            everyone.append(running[victim])
        wait_for(lambda: snapshots_over_in_all(everyone), 300, "every group's snapshot over")
        started = {e["group"] for w in everyone for e in w.events() if e.get("event") == "group started"}
        # Committed, not only logged by a worker killed since: a snapshot redone after the writer
        # stopped would hold every change, and none would follow it in the topic.
        wait_delivered(stack.kafka_bootstrap, bridge, started, 0)
        stop.set()
        writer.join()
        wait_delivered(stack.kafka_bootstrap, bridge, started, time.time_ns() // 1000)
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        for worker in running:
            worker.kill()
    envelopes = [orjson.loads(v)["payload"] for _, v in read_topic(stack.kafka_bootstrap, topics[0], expected=1,
                                                                     settle_s=1.0) if v is not None]
    ops = Counter(e["op"] for e in envelopes)
    assert ops["r"] >= PARTITIONS * ROWS // 2 and ops["u"] > 0, ops
    assert done["append"] > 0 and done["range"] > 0, done
    assert contained_appends(envelopes) > 0, "appends behind an r that holds them"

    # the mirror, micro-batch by micro-batch: every topic-partition cut in three
    ends = end_offsets(stack.kafka_bootstrap, topics)
    root = tmp_path / "mirror"
    # compacted after the second micro-batch: the third's changes are pending when the view is read
    mirror = MirrorWriter(str(root), "snap", ValueFormat.JSON_SCHEMAS, compact_every_batches=2)
    cuts = [{tp: end * i // 3 for tp, end in ends.items()} for i in range(4)]
    for batch_id in range(3):
        start, end = cuts[batch_id], cuts[batch_id + 1]

        def offsets(bound: dict[tuple[str, int], int]) -> str:
            by_topic: dict[str, dict[str, int]] = {}
            for (topic, partition), offset in bound.items():
                by_topic.setdefault(topic, {})[str(partition)] = offset
            return orjson.dumps(by_topic).decode()

        batch = (spark.read.format("kafka").option("kafka.bootstrap.servers", stack.kafka_bootstrap)
                 .option("subscribe", ",".join(topics)).option("includeHeaders", "true")
                 .option("kafka.isolation.level", "read_committed")
                 .option("startingOffsets", offsets(start)).option("endingOffsets", offsets(end)).load())
        mirror(batch, batch_id)

    keyspace, table_name = name.split(".")
    want = {(r.pk, r.ck): {c: _canonical(getattr(r, c)) for c in VALUES}
            for r in cassandra_session.execute(f"SELECT * FROM {name}")}
    ambiguous = read_while_in_flight(envelopes, landed)

    def assert_equal(frame: Any, what: str) -> None:
        got = as_cql({(r["pk"], r["ck"]): {c: _canonical(r[c]) for c in VALUES} for r in frame.collect()})
        differing = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
        unexplained = {k: v for k, v in differing.items() if k not in ambiguous}
        assert not unexplained, (f"{what}: {len(unexplained)} rows differ (mirror, table), e.g. "
                                 f"{sorted(unexplained.items(), key=str)[:5]}")
        assert len(differing) <= 2, f"{what}: rows read while a write was in flight differ too often: {differing}"

    pending = spark.read.format("delta").load(str(root / "_cdc_changes" / keyspace / table_name)).count()
    assert pending > 0, "the third micro-batch's changes wait for the next compaction"
    assert_equal(current_state(spark, str(root), keyspace, table_name), "the view between two compactions")
    mirror.compact(spark)
    assert_equal(spark.read.format("delta").load(str(root / keyspace / table_name)), "the table after the last")
    assert_equal(current_state(spark, str(root), keyspace, table_name), "the view after the last compaction")
    assert any(row["l"] and len(row["l"]) > 3 for row in want.values()), "lists with appends"
