"""The pipeline the streaming-job acceptance tests run (local mode in test_streaming_jobs.py, a
standalone cluster in test_cluster.py): two CDC tables with a seeded random workload written
through the emulator, a real `cdc-bridge run` worker carrying them to Kafka, a job killed
mid-stream and resumed from its checkpoint, and the checks of what the jobs wrote."""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.harness import (
    WorkerProcess,
    read_topic,
    start_worker,
    worker_properties,
    write_properties,
)
from tests.spark import workload
from tests.spark.jobs import SparkJob, read_committed, start_job, wait_settled, wait_until

OPS = int(os.environ.get("CDC_BRIDGE_SPARK_OPS", "1000"))
BATCH = "250"  # records per micro-batch: several micro-batches, so the kill lands mid-stream
FLATTEN_ARGS = ["flatten", "-o", "delete.tombstone.handling.mode=rewrite", "-o", "add.fields=op,source.ts_us",
                "--output-topic", "{topic}.flat"]
# (job arguments, log folder, checkpoint) -> a started job: `cdc-bridge spark ...` or spark-submit
Launcher = Callable[[list[str], Path, Path], SparkJob]

Change = tuple[str, bytes, int, str]  # (topic, key payload, source.ts_us, op)


@dataclass
class Pipeline:
    keyspace: str
    name: str
    config: Path
    topics: list[str]  # data topics, then the dropped-changes topic
    folder: Path
    emulator: Emulator
    stack: Endpoints
    seed: int = 11
    jobs: list[SparkJob] = field(default_factory=list)  # killed at the end, whatever happened

    def second_half(self) -> threading.Thread:
        """The rest of the workload, to write while a job runs (not started)."""
        return threading.Thread(target=workload.run, args=(self.emulator, self.keyspace, OPS - OPS // 2,
                                                           self.seed + 1, OPS // 2))


@contextlib.contextmanager
def open_pipeline(stack: Endpoints, cassandra_session: Any, folder: Path) -> Iterator[Pipeline]:
    """Two CDC tables, one worker writing JSON-with-schemas envelopes and the dropped-changes topic,
    and the first half of the workload; the worker, the jobs and the keyspace go at the end."""
    keyspace = f"ks_spark_{uuid.uuid4().hex[:8]}"
    name = f"sp-{uuid.uuid4().hex[:8]}"
    cassandra_session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', "
                              "'replication_factor': 1}")
    worker: WorkerProcess | None = None
    jobs: list[SparkJob] = []
    with Emulator.connect([stack.cassandra_host], stack.cassandra_port) as emu:
        try:
            tables = workload.create_tables(emu, keyspace)
            props = worker_properties(stack, name, tables, **{
                "value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true",
                "dropped.changes.topic": f"{name}.dropped"})
            config = write_properties(folder / "worker.properties", props)
            worker = start_worker(config, folder, "worker")
            topics = [f"{name}.{t}" for t in tables] + [f"{name}.dropped"]
            pipeline = Pipeline(keyspace, name, config, topics, folder, emu, stack, jobs=jobs)
            workload.run(emu, keyspace, OPS // 2, pipeline.seed)
            yield pipeline
        finally:
            for job in jobs:
                job.kill()
            if worker is not None:
                worker.kill()
            cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


def killed_then_resumed(pipeline: Pipeline, args: list[str], label: str, during: threading.Thread | None = None,
                        launch: Launcher = start_job) -> SparkJob:
    """Run a job in small micro-batches until it committed one and started the next, SIGKILL it,
    let `during` finish and the topics settle, then run it again on the same checkpoint with
    --available-now to the end."""
    checkpoint = pipeline.folder / f"{label}-checkpoint"
    common = ["--config", str(pipeline.config), "--name", f"{pipeline.name}-{label}"]
    job = launch([*args, *common, "--max-offsets-per-trigger", BATCH, "--trigger-interval", "1 second"],
                 pipeline.folder, checkpoint)
    pipeline.jobs.append(job)
    if during is not None:
        during.start()
    wait_until(lambda: job.committed_batches() >= 1 and job.planned_batches() >= 2, 900,
               f"{label}: one micro-batch done and the next one under way", job)
    job.kill()
    if during is not None:
        during.join()
    wait_settled(pipeline.stack.kafka_bootstrap, pipeline.topics)
    again = launch([*args, *common, "--available-now"], pipeline.folder, checkpoint)
    pipeline.jobs.append(again)
    assert again.wait(900) == 0, again.tail()
    return again


def assert_mirror_equals_base_tables(pipeline: Pipeline, spark: Any, cassandra_session: Any, delta: Path) -> None:
    """After an --available-now run: its end-of-run compaction left nothing pending, and both the
    Delta table and the current-state view equal the base table."""
    from bridge.spark.mirror.view import current_state

    for table in workload.TABLES:
        base = workload.base_rows(cassandra_session, pipeline.keyspace, table)
        path = str(delta / pipeline.keyspace / table)
        assert spark.read.format("delta").load(str(delta / "_cdc_changes" / pipeline.keyspace / table)).count() == 0
        mirror = workload.mirror_rows(spark, path, table)
        assert len(base) > 0
        assert workload.differences(base, mirror) == [], f"{table}: mirror differs from the base table"
        view = workload.mirror_rows(spark, path, table, current_state(spark, str(delta), pipeline.keyspace, table))
        assert workload.differences(base, view) == [], f"{table}: the current-state view differs from the base table"


def source_changes(pipeline: Pipeline) -> collections.Counter[Change]:
    """(topic, key payload, source.ts_us, op) of every envelope in the worker's data topics."""
    found: collections.Counter[Change] = collections.Counter()
    for topic in pipeline.topics[:-1]:
        for key, value in read_committed(pipeline.stack.kafka_bootstrap, topic):
            if value is None:
                continue
            payload = orjson.loads(value)["payload"]
            key_payload = orjson.dumps(orjson.loads(key or b"null")["payload"])
            found[(topic, key_payload, payload["source"]["ts_us"], payload["op"])] += 1
    return found


def assert_flattened_exactly_once(pipeline: Pipeline, expected: collections.Counter[Change]) -> None:
    """The `{topic}.flat` topics of FLATTEN_ARGS hold each change of `expected` once (`rewrite`:
    deletes as `__deleted`="true"), and the dropped-changes topic passed through unchanged."""
    got: collections.Counter[Change] = collections.Counter()
    for topic in pipeline.topics[:-1]:
        for key, value in read_topic(pipeline.stack.kafka_bootstrap, f"{topic}.flat",
                                     expected=sum(n for (t, *_), n in expected.items() if t == topic), settle_s=2.0):
            assert value is not None, "rewrite mode drops the tombstones"
            payload = orjson.loads(value)["payload"]
            assert payload["__deleted"] == ("true" if payload["__op"] == "d" else "false")
            key_payload = orjson.dumps(orjson.loads(key or b"null")["payload"])
            got[(topic, key_payload, payload["__source_ts_us"], payload["__op"])] += 1
    duplicates = {k: n for k, n in got.items() if n > 1}
    assert duplicates == {}, f"{len(duplicates)} duplicated changes, e.g. {next(iter(duplicates))}"
    missing = expected - got
    assert not missing, f"{sum(missing.values())} changes missing, e.g. {next(iter(missing))}"
    assert got == expected
    side = pipeline.topics[-1]
    dropped = read_committed(pipeline.stack.kafka_bootstrap, side)
    passed = read_topic(pipeline.stack.kafka_bootstrap, f"{side}.flat", expected=len(dropped), settle_s=2.0)
    assert len(dropped) > 0
    assert sorted(v or b"" for _, v in passed) == sorted(v or b"" for _, v in dropped)  # passed through unchanged
