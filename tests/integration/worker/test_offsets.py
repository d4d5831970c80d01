"""Offsets the Java connector wrote resume exactly where they point; status and reset."""

from __future__ import annotations

import collections
import subprocess
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from bridge.kafka.offsets import encode_key, encode_value
from bridge.kafka.topics import ensure_topics, offsets_topic
from bridge.scylla.cdc_time import timeuuid_sort_key
from bridge.scylla.events import RecordRead
from bridge.scylla.groups import read_order
from bridge.scylla.positions import ChangeId, Position
from bridge.scylla.reader import SourceReader
from bridge.sim import Emulator
from bridge.stack.layout import Endpoints
from tests.integration.scylla.harness import run_reader, settings_for
from tests.integration.worker.harness import CLI, DEFAULT_SLOTS, WorkerProcess, ids_of, read_topic
from tests.integration.worker.test_run import insert, make_table


def read_all(session: object, keyspace: str, table: str, count: int) -> list[RecordRead]:
    settings = settings_for(keyspace, vnodes_metadata_keyspace="sim_system_distributed",
                            tablets_metadata_keyspace="sim_system", initial_lookback_ms=300_000)
    with SourceReader(session, settings) as reader:
        reader.watch_table(keyspace, table)
        return run_reader(reader, lambda c: len(c.records()) >= count).records()


def test_java_connector_offsets_resume_exactly(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str,
) -> None:
    table = make_table(emulator, keyspace)
    insert(emulator, table, range(60))
    records = read_all(emulator.session, keyspace, "orders", 60)
    by_group = collections.defaultdict(list)
    for read in records:
        by_group[read.group].append(read)
    group, reads = max(by_group.items(), key=lambda item: len(item[1]))
    assert len(reads) >= 3
    # Inside a window the connector reads stream by stream, then by time: resume in the middle.
    ordered = sorted(reads, key=lambda r: (read_order(r.record.stream_id), timeuuid_sort_key(r.record.time)))
    resume_after = ordered[len(ordered) // 2].record
    start_ms = min(r.record.micros for r in reads) // 1000  # the Java connector keeps whole milliseconds
    java_position = Position(start_ms * 1000, (start_ms + 30_000) * 1000,
                             ChangeId(resume_after.stream_id, resume_after.time, None))
    consumed = {read.record.rows[0].values["id"] for read in reads
                if java_position.consumed(read.record.stream_id, read.record.time, read.record.last_seq)}
    assert resume_after.rows[0].values["id"] in consumed and len(consumed) < len(reads)

    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    ensure_topics(admin, [offsets_topic(f"{bridge_name}-offsets", 3, 1)])
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})
    producer.produce(f"{bridge_name}-offsets", encode_value(java_position), encode_key(bridge_name, group))
    assert producer.flush(30) == 0

    worker = workers(config_for([table]), "resume")
    expected = set(range(60)) - consumed
    messages = read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=len(expected))
    counts = collections.Counter(ids_of(messages))
    assert set(counts) == expected and max(counts.values()) == 1
    assert worker.stop() == 0


def test_status_and_reset(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path], workers: Callable[..., WorkerProcess],
    stack: Endpoints, bridge_name: str,
) -> None:
    table = make_table(emulator, keyspace)
    insert(emulator, table, range(10))
    config = config_for([table])
    worker = workers(config, "status")
    read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=10, settle_s=1)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args, "--config", str(config)], capture_output=True, text=True, timeout=60,
                              check=False)

    status = cli("status", "--sample-s", "2")
    assert status.returncode == 0, status.stderr
    assert f"workers of {bridge_name}: 1, slots owned {DEFAULT_SLOTS}/{DEFAULT_SLOTS}" in status.stdout
    assert f"table {table}: lag" in status.stdout and "keeping up" in status.stdout, status.stdout
    refused = cli("offsets", "reset")
    assert refused.returncode == 2 and "workers of" in refused.stderr
    assert worker.stop() == 0
    shown = cli("offsets", "show").stdout.splitlines()
    assert shown and all(line.startswith(f'["{bridge_name}",{{"keyspace_name":"{keyspace}"') for line in shown)
    reset = cli("offsets", "reset")
    assert reset.returncode == 0 and f"reset {len(shown)} group positions" in reset.stdout
    assert cli("offsets", "show").stdout == ""
