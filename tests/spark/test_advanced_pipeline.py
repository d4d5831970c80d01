"""The jobs behind a real `cdc-bridge run` in the advanced format (issue 25): a CDC table with
post-images written through the emulator (inserts, updates that set columns to null, set and map
element changes and overwrites, row deletes), a worker with `cdc.output.format=advanced` and
`cdc.include.after=full` carrying it to Kafka as JSON with schemas or as Avro through the
registry, then `cdc-bridge spark mirror` and `flatten` started with the worker's `--config`
alone (the format comes from it): the mirror equals the table row for row, and the flattened topic
holds one post-image per insert and update (deletes without pre-image drop as truncates) and the
tombstones `rewrite-with-tombstone` keeps."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import read_topic, start_worker, worker_properties, write_properties
from tests.spark import workload
from tests.spark.jobs import read_committed, start_job

CHANGES = 120


def _write(emu: Emulator, table: str, seed: int) -> tuple[int, int]:
    """A random history on 12 rows; returns (inserts + updates, deletes) issued."""
    rng = random.Random(seed)
    writes = deletes = 0
    for _ in range(CHANGES):
        pk, ck = rng.randrange(4), rng.randrange(3)
        kind = rng.random()
        where = f"WHERE pk = {pk} AND ck = {ck}"
        if kind < 0.3:
            emu.execute(f"INSERT INTO {table} (pk, ck, v, t, s) VALUES ({pk}, {ck}, {rng.randrange(100)}, "
                        f"'t{rng.randrange(9)}', {{{rng.randrange(5)}}})")
        elif kind < 0.45:
            emu.execute(f"UPDATE {table} SET v = null, m = m + {{{rng.randrange(3)}: 'm{rng.randrange(9)}'}} {where}")
        elif kind < 0.6:
            emu.execute(f"UPDATE {table} SET s = s + {{{rng.randrange(5)}}}, t = 'u{rng.randrange(9)}' {where}")
        elif kind < 0.7:
            emu.execute(f"UPDATE {table} SET m = {{7: 'whole'}}, s = s - {{{rng.randrange(5)}}} {where}")
        elif kind < 0.85:
            emu.execute(f"UPDATE {table} SET v = {rng.randrange(100)} {where}")
        else:
            emu.execute(f"DELETE FROM {table} {where}")
            deletes += 1
            continue
        writes += 1
    return writes, deletes


def _payload(value: bytes | None) -> Any:
    """A flattened value: JSON with its schema (JSON-with-schemas input) or plain (Avro input)."""
    if value is None:
        return None
    parsed = orjson.loads(value)
    return parsed["payload"] if isinstance(parsed, dict) and set(parsed) == {"schema", "payload"} else parsed


# Avro only: JSON with and without schemas go through the same jobs in test_advanced_topics (records
# as the JsonSerializer writes them) and through a real worker in test_advanced_run; a second
# real-worker run here would cost CI a minute for no path of its own.
@pytest.mark.parametrize("converter", ["avro"])
def test_advanced_topics_of_a_real_worker_mirror_and_flatten(spark: Any, stack: Endpoints, cassandra_session: Any,
                                                             tmp_path: Path, converter: str) -> None:
    keyspace = f"ks_adv_{uuid.uuid4().hex[:8]}"
    name = f"adv-{uuid.uuid4().hex[:8]}"
    cassandra_session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                              "'replication_factor': 1}")
    worker = None
    jobs = []
    avro = {"key.converter": "avro", "value.converter": "avro",
            "key.converter.schema.registry.url": stack.schema_registry_url,
            "value.converter.schema.registry.url": stack.schema_registry_url} if converter == "avro" else {
        "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
    try:
        with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
            emu.execute(f"CREATE TABLE {keyspace}.items (pk int, ck int, v int, t text, s set<int>, m map<int, text>,"
                        " PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true, 'postimage': true}")
            writes, deletes = _write(emu, f"{keyspace}.items", seed=7)
        props = worker_properties(stack, name, [f"{keyspace}.items"], **{
            "cdc.output.format": "advanced", "cdc.include.after": "full", **avro})
        config = write_properties(tmp_path / "worker.properties", props)
        worker = start_worker(config, tmp_path, "worker")
        topic = f"{name}.{keyspace}.items"
        records = read_topic(stack.kafka_bootstrap, topic, expected=writes + 2 * deletes, timeout_s=180)
        assert len(records) == writes + 2 * deletes, worker
        mirror = start_job(["mirror", "--config", str(config), "--delta", str(tmp_path / "delta"), "--available-now",
                            "--name", f"{name}-mirror"], tmp_path, tmp_path / "mirror-checkpoint")
        jobs.append(mirror)
        assert mirror.wait(900) == 0, mirror.tail()
        base = workload.base_rows(cassandra_session, keyspace, "items")
        mirrored = workload.mirror_rows(spark, str(tmp_path / "delta" / keyspace / "items"), "items")
        assert base and workload.differences(base, mirrored) == []
        flatten = start_job(["flatten", "--config", str(config), "--available-now", "--name", f"{name}-flatten",
                             "-o", "delete.tombstone.handling.mode=rewrite-with-tombstone",
                             "--output-topic", "{topic}.flat"], tmp_path, tmp_path / "flatten-checkpoint")
        jobs.append(flatten)
        assert flatten.wait(900) == 0, flatten.tail()
        flat = read_committed(stack.kafka_bootstrap, f"{topic}.flat")
        values = [_payload(v) for _k, v in flat]
        rows = [v for v in values if v is not None]
        assert len(rows) == writes and values.count(None) == deletes
        assert all(r["__deleted"] == "false" and {"pk", "ck", "v", "t", "s", "m"} <= set(r) for r in rows)
    finally:
        for job in jobs:
            job.kill()
        if worker is not None:
            worker.kill()
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
