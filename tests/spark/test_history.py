"""History tables (SCD type 2) on the real stack: a table with rows written before CDC (a real
`cdc-bridge run` worker snapshots them, `op=r`), then writes with explicit `USING TIMESTAMP`
issued out of timestamp order (so writes older than ones already applied), partial updates, set
and map element changes, an untracked column, row, range and partition deletes, and a column
added by ALTER; the worker is SIGKILLed mid-way and a new one resumes. The topics are fed to
`HistoryWriter` in two micro-batches, the later offsets first (every key's late changes arrive
after newer ones), one of them replayed; then `cdc-bridge spark history` runs over the same
topics, SIGKILLed after a micro-batch and resumed.

At a dozen instants T the history's state at T (`as_of`) equals the reference fold
(`bridge.spark.fold.reference`) of the writes with a timestamp at or before T, and at the end equals
Cassandra; the killed-and-resumed job's history equals the in-process one row for row, and its
micro-batches continued some known keys from their open versions (in order) rather than
recomputing every one."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from bridge.spark.fold.reference import FoldSpec, ValueColumn, fold
from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import read_topic, start_worker, wait_for, worker_properties, write_properties
from tests.spark.jobs import start_job, wait_delivered, wait_until

COLUMNS = "pk int, ck int, v int, t text, s set<int>, m map<int, text>, n int, PRIMARY KEY (pk, ck)"
SPEC = FoldSpec(("pk", "ck"), (ValueColumn("v", None, False), ValueColumn("t", None, False),
                               ValueColumn("s", "set", True), ValueColumn("m", "map", True),
                               ValueColumn("n", None, False), ValueColumn("x", None, False)))
TRACKED = ("v", "t", "s", "m", "x")  # `n` is untracked: --track-history-except n
SNAPSHOTTED = 100  # the partition written before CDC
Event = dict[str, Any]


def cells(**values: Any) -> dict[str, Any]:
    return {name: {"value": value} for name, value in values.items()}


def statement(rng: random.Random, table: str, ts: int, i: int) -> tuple[str, Event]:
    """One random write at `ts` and its event for the reference fold."""
    pk, ck = rng.choice([0, 1, 2, SNAPSHOTTED]), rng.randrange(4)
    key = {"pk": pk, "ck": ck}
    cql, event = _statement(rng, table, ts, i, pk, ck, key)
    return cql, {**event, "key": (pk, ck)} if "kind" not in event else event


def _statement(rng: random.Random, table: str, ts: int, i: int, pk: int, ck: int,
               key: dict[str, int]) -> tuple[str, Event]:
    where = f"WHERE pk = {pk} AND ck = {ck}"
    kind = rng.choices(["insert", "v", "t", "null", "set", "unset", "put", "remove", "n", "delete", "range",
                        "partition"], [12, 10, 6, 4, 8, 4, 8, 4, 8, 5, 4, 2])[0]
    update = f"UPDATE {table} USING TIMESTAMP {ts} SET"
    if kind == "insert":
        return (f"INSERT INTO {table} (pk, ck, v, t) VALUES ({pk}, {ck}, {i}, 'i{i}') USING TIMESTAMP {ts}",
                {"op": "c", "after": {**key, **cells(v=i, t=f"i{i}")}})
    if kind in ("v", "t", "null", "n"):
        name, value = {"v": ("v", i), "t": ("t", f"t{i}"), "null": ("v", None), "n": ("n", i)}[kind]
        literal = "null" if value is None else repr(value)
        return f"{update} {name} = {literal} {where}", {"op": "u", "after": {**key, **cells(**{name: value})}}
    if kind in ("set", "unset"):
        sign, change = ("+", {"added": [i % 5], "removed": None}) if kind == "set" else \
            ("-", {"added": None, "removed": [i % 5]})
        return f"{update} s = s {sign} {{{i % 5}}} {where}", {"op": "u", "after": {**key, "s__elements": change}}
    if kind == "put":
        return (f"{update} m[{i % 3}] = 'm{i}' {where}",
                {"op": "u", "after": {**key, "m__elements": {"added": [{"key": i % 3, "value": f"m{i}"}],
                                                             "removed": None}}})
    if kind == "remove":
        return (f"{update} m = m - {{{i % 3}}} {where}",
                {"op": "u", "after": {**key, "m__elements": {"added": None, "removed": [i % 3]}}})
    if kind == "delete":
        return f"DELETE FROM {table} USING TIMESTAMP {ts} {where}", {"op": "d", "after": None}
    partition = {"pk": pk, "ck": None}
    if kind == "range":
        return (f"DELETE FROM {table} USING TIMESTAMP {ts} WHERE pk = {pk} AND ck >= 1 AND ck < 3",
                {"kind": "range_delete", "key": partition, "start": {"ck": 1}, "start_inclusive": True,
                 "end": {"ck": 3}, "end_inclusive": False})
    return f"DELETE FROM {table} USING TIMESTAMP {ts} WHERE pk = {pk}", {"kind": "partition_delete", "key": partition}


def write_all(emu: Emulator, table: str, seed: int, count: int, first_i: int, extra: bool) -> list[Event]:
    """`count` writes at timestamps 10 ms apart from 3 s ahead, issued in shuffled order (a write
    older than ones already applied), inside the worker's confidence window; `extra`: some
    set the column added by ALTER."""
    rng = random.Random(seed)
    base = time.time_ns() // 1000 + 3_000_000
    slots = list(range(count))
    rng.shuffle(slots)
    events = []
    for i, slot in enumerate(slots, start=first_i):
        ts = base + slot * 10_000
        cql, event = statement(rng, table, ts, i)
        if extra and i % 4 == 0 and event.get("op") == "u":
            cql = cql.replace(" SET ", f" SET x = {i}, ", 1)
            event["after"]["x"] = {"value": i}
        emu.execute(cql)
        events.append({**event, "ts": ts, "offset": i})
    time.sleep(max(0.0, (base + count * 10_000) / 1e6 - time.time()))
    return events


def expected_at(events: list[Event], keys: set[tuple[int, int]], at: int) -> dict[tuple[int, int], dict[str, Any]]:
    """Every key's row after the writes at or before `at`, by the reference fold."""
    state = {}
    for pk, ck in keys:
        mine = [e for e in events if e["ts"] <= at and (e["key"]["pk"] == pk if "kind" in e else e["key"] == (pk, ck))]
        result = fold(SPEC, None, mine)
        if result.row is not None:
            state[(pk, ck)] = _canonical({c.name: result.row[c.name] for c in SPEC.value_columns})
    return state


def _canonical(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if out.get("s") is not None:
        out["s"] = sorted(out["s"])
    if isinstance(out.get("m"), list):
        out["m"] = {e["key"]: e["value"] for e in out["m"]} or None
    return out


def history_at(spark: Any, path: str, at: int) -> dict[tuple[int, int], dict[str, Any]]:
    from bridge.spark.history.writer import as_of

    rows = as_of(spark, path, at).collect()
    return {(r["pk"], r["ck"]): _canonical({c.name: r[c.name] for c in SPEC.value_columns}) for r in rows}


def without_untracked(state: dict[tuple[int, int], dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    return {k: {c: v for c, v in row.items() if c != "n"} for k, row in state.items()}


def snapshot_over(events: list[dict[str, Any]]) -> bool:
    started = {e["group"] for e in events if e.get("event") == "group started"}
    return bool(started) and started <= {e["group"] for e in events if e.get("event") == "snapshot finished"}


def end_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed"})
    try:
        return {(topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for topic in topics for p in consumer.list_topics(topic, timeout=30).topics[topic].partitions}
    finally:
        consumer.close()


def kafka_batch(spark: Any, bootstrap: str, topics: list[str], start: dict[tuple[str, int], int],
                end: dict[tuple[str, int], int]) -> Any:
    def offsets(bound: dict[tuple[str, int], int]) -> str:
        by_topic: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in bound.items():
            by_topic.setdefault(topic, {})[str(partition)] = offset
        return orjson.dumps(by_topic).decode()

    return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ",".join(topics)).option("includeHeaders", "true")
            .option("kafka.isolation.level", "read_committed")
            .option("startingOffsets", offsets(start)).option("endingOffsets", offsets(end)).load())


@pytest.fixture
def history_table(stack: Endpoints, cassandra_session: Any) -> Iterator[tuple[str, Emulator]]:
    keyspace = f"ks_history_{uuid.uuid4().hex[:8]}"
    cassandra_session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                              "'replication_factor': 1}")
    try:
        with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
            emu.execute(f"CREATE TABLE {keyspace}.h ({COLUMNS})")
            for ck in range(2):  # before CDC: reaches Kafka as snapshot rows
                cassandra_session.execute(f"INSERT INTO {keyspace}.h (pk, ck, v, t, s) VALUES "
                                          f"({SNAPSHOTTED}, {ck}, {ck}, 'snap', {{1, 2}})")
            emu.execute(f"ALTER TABLE {keyspace}.h WITH cdc = {{'enabled': true}}")
            yield f"{keyspace}.h", emu
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


@pytest.mark.timeout(900)
def test_history_is_exact_at_every_instant(stack: Endpoints, spark: Any, cassandra_session: Any,
                                           history_table: tuple[str, Emulator], tmp_path: Path) -> None:
    from delta.tables import DeltaTable

    from bridge.spark.core.decode import ValueFormat
    from bridge.spark.history.writer import HistoryWriter

    name, emu = history_table
    bridge = f"hi-{uuid.uuid4().hex[:8]}"
    props = worker_properties(stack, bridge, [name], snapshot__mode="initial",
                              **{"value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true",
                                 "dropped.changes.topic": f"{bridge}.dropped"})
    config = write_properties(tmp_path / "worker.properties", props)
    worker = start_worker(config, tmp_path, "w0")
    topics = [f"{bridge}.{name}", f"{bridge}.dropped"]
    try:
        wait_for(lambda: snapshot_over(worker.events()), 120, "every group's snapshot")
        groups = {e["group"] for e in worker.events() if e.get("event") == "group started"}
        # Committed, not only logged: a group whose snapshot the kill below aborts is snapshotted
        # again, with the rows the writes below add (right, and not what this test models).
        wait_delivered(stack.kafka_bootstrap, bridge, groups, 0)
        events = write_all(emu, name, seed=7, count=70, first_i=1, extra=False)
        worker.kill()  # SIGKILL mid-way: its open transaction is aborted, the next worker resumes
        worker = start_worker(config, tmp_path, "w1")
        emu.execute(f"ALTER TABLE {name} ADD x int")
        events += write_all(emu, name, seed=8, count=40, first_i=1000, extra=True)  # returns once they are past
        wait_delivered(stack.kafka_bootstrap, bridge, groups, time.time_ns() // 1000)
    finally:
        worker.kill()
    envelopes = [orjson.loads(v)["payload"] for _, v in read_topic(stack.kafka_bootstrap, topics[0], expected=1,
                                                                     settle_s=1.0) if v is not None]
    for envelope in envelopes:
        if envelope["op"] == "r":  # the snapshot rows, at the time they were read
            row = envelope["after"]
            events.append({"op": "r", "ts": envelope["source"]["ts_us"], "offset": 0, "key": (row["pk"], row["ck"]),
                           "after": {"pk": row["pk"], "ck": row["ck"],
                                     **cells(v=row["v"]["value"], t="snap", s=[1, 2], m=None, n=None)}})
    assert sum(1 for e in events if e.get("op") == "r") == 2
    keys = {(pk, ck) for pk in (0, 1, 2, SNAPSHOTTED) for ck in range(4)}

    # in process, two micro-batches: the later offsets first, then the earlier ones, replayed once
    root = tmp_path / "history"
    writer = HistoryWriter(str(root), "hist", ValueFormat.JSON_SCHEMAS, track_except=("n",))
    ends = end_offsets(stack.kafka_bootstrap, topics)
    mid, zero = {tp: end // 2 for tp, end in ends.items()}, dict.fromkeys(ends, 0)
    writer(kafka_batch(spark, stack.kafka_bootstrap, topics, mid, ends), 0)
    writer(kafka_batch(spark, stack.kafka_bootstrap, topics, zero, mid), 1)
    path = str(root / name.replace(".", "/"))
    table = DeltaTable.forPath(spark, path)
    version, rows = table.history(1).first()["version"], table_rows(table.toDF())
    writer(kafka_batch(spark, stack.kafka_bootstrap, topics, zero, mid), 1)
    assert table.history(1).first()["version"] == version, "a replayed micro-batch commits nothing"
    assert table_rows(table.toDF()) == rows

    times = sorted({e["ts"] for e in events})
    instants = [times[0] - 1, *[times[i] - (i % 2) for i in range(1, len(times), len(times) // 10)], times[-1]]
    assert len(instants) >= 12
    for at in instants:
        want, got = expected_at(events, keys, at), history_at(spark, path, at)
        assert without_untracked(got) == without_untracked(want), f"state at {at}"
    final = {(r.pk, r.ck): _canonical({"v": r.v, "t": r.t, "s": r.s, "m": r.m, "n": r.n, "x": r.x})
             for r in cassandra_session.execute(f"SELECT * FROM {name}")}
    assert history_at(spark, path, times[-1]) == expected_at(events, keys, times[-1]) == final

    # the job: SIGKILLed after a micro-batch while the next is under way, resumed to the end
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "job"
    args = ["history", "--config", str(config), "--output", str(output), "--name", f"{bridge}-history",
            "--track-history-except", "n"]
    job = start_job([*args, "--max-offsets-per-trigger", "80", "--trigger-interval", "1 second"], tmp_path,
                    checkpoint)
    try:
        wait_until(lambda: job.committed_batches() >= 1 and job.planned_batches() >= 2, 600,
                   "one micro-batch done and the next one under way", job)
    finally:
        job.kill()
    again = start_job([*args, "--available-now"], tmp_path, checkpoint)
    assert again.wait(600) == 0, again.tail()
    resumed = spark.read.format("delta").load(str(output / name.replace(".", "/")))
    assert table_rows(resumed) == rows, "the killed and resumed job's history"
    stages = [e for j in (job, again) for e in job_events(j.log_path) if e.get("event") == "micro-batch history stages"]
    assert all(e["recomputed_keys"] <= e["known_keys"] for e in stages), stages
    assert any(e["recomputed_keys"] < e["known_keys"] for e in stages), "in-order known keys continued, not recomputed"

    frame = table.toDF()
    from pyspark.sql import functions as F

    # every version's start, read once (a Spark job per event took a second or more each)
    starts = {(r.pk, r.ck, r.at) for r in frame.select("pk", "ck", F.unix_micros("__START_AT").alias("at")).collect()}
    assert any((*e["key"], e["ts"]) in starts for e in events if e.get("op") == "c"), "inserts start versions"
    untracked_only = 0
    for event in events:  # a change of `n` alone on an existing row whose state changes: no version
        after = event.get("after") or {}
        if set(after) == {"pk", "ck", "n"}:
            before, now = expected_at(events, keys, event["ts"] - 1), expected_at(events, keys, event["ts"])
            if event["key"] in before and before[event["key"]] != now.get(event["key"]):
                untracked_only += 1
                assert (*event["key"], event["ts"]) not in starts, event
    assert untracked_only > 0
    added = min(e["ts"] for e in events if (e.get("after") or {}).get("x"))
    assert frame.where(frame.x.isNotNull()).count() > 0
    assert frame.where(frame.x.isNotNull() & (frame["__START_AT"] < _timestamp(added))).count() == 0


def job_events(log: Path) -> list[dict[str, Any]]:
    """The job's structlog events (JSON lines; Spark's own lines skipped)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                found.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return found


def table_rows(frame: Any) -> list[str]:
    """A history table's rows, comparable whatever the order of its columns (an added column)."""
    return sorted(repr(sorted(row.asDict().items())) for row in frame.collect())


def _timestamp(us: int) -> Any:
    from pyspark.sql import functions as F

    return F.timestamp_micros(F.lit(us))
