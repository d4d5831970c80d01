"""Workers that start together on a broker slow to publish new topics (issue 32, "found on the
way"): a burst of 2,000 partitions is being created on a private broker while four workers of
different names start; each waits for the topics it just created (within the start-up bound of
bridge/kafka/topics.py, here about 31-36 s) and every one starts. Before that wait (78b8881) all
four exited with `cannot read the configuration of topic <name>-offsets: Broker: Unknown topic or
partition`, the error of the issue; with a 1,200-partition burst they still started (a 13 s
lag, inside the old 15 s retry). A private broker (ports beside the stack's), never the shared
one: it is loaded on purpose."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bridge.sim import Emulator
from bridge.stack.layout import Endpoints, StackLayout, port_offset
from bridge.stack.manager import StackManager
from tests.integration.worker.harness import (
    WorkerProcess,
    free_port,
    http_get,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)
from tests.integration.worker.test_run import assert_each_once, insert, make_table

pytestmark = pytest.mark.slow
PRIVATE_OFFSET = port_offset(22000)
WORKERS = 4
BURST_TOPICS, BURST_PARTITIONS = 500, 4


@pytest.fixture
def private_kafka(tmp_path: Path, stack: Endpoints) -> Iterator[Endpoints]:
    layout = StackLayout(deploy_dir=StackLayout.default().deploy_dir, state_dir=tmp_path / "stack")
    manager = StackManager(layout, Endpoints().shifted(PRIVATE_OFFSET), say=lambda _: None)
    try:
        manager.up(quiet=True, only=["kafka"])
        # The shared Cassandra, a private broker.
        yield dataclasses.replace(stack, kafka_port=manager.endpoints.kafka_port)
    finally:
        manager.down(only=["kafka"])


def _outcome(worker: WorkerProcess) -> str | None:
    if any(e.get("event") == "worker running" for e in worker.events()):
        return "running"
    if worker.process.poll() is not None:
        return worker.log_path.read_text(errors="replace").strip().splitlines()[-1]
    return None


def test_workers_started_during_a_topic_burst_all_start(
    private_kafka: Endpoints, emulator: Emulator, keyspace: str, tmp_path: Path,
    workers: Callable[..., WorkerProcess],
) -> None:
    table = make_table(emulator, keyspace)
    configs = [write_properties(tmp_path / f"b{i}.properties",
                                worker_properties(private_kafka, f"burst{i}", [table]))
               for i in range(WORKERS)]
    admin = AdminClient({"bootstrap.servers": private_kafka.kafka_bootstrap})
    started = time.monotonic()
    burst = admin.create_topics([NewTopic(f"burst-{i}", num_partitions=BURST_PARTITIONS, replication_factor=1)
                                 for i in range(BURST_TOPICS)], request_timeout=120)
    running = [workers(config, f"b{i}") for i, config in enumerate(configs)]
    wait_for(lambda: all(_outcome(w) is not None for w in running), 120, "every worker to start or exit")
    outcomes = [_outcome(w) for w in running]
    assert outcomes == ["running"] * WORKERS, outcomes
    # How long the broker lags depends on the machine: on a quiet one the burst may be published
    # before the workers look (then they had nothing to wait for); the waits are reported, not required.
    waited = [e for w in running for e in w.events() if e.get("event") == "waiting for the broker to publish topics"]
    for future in burst.values():
        future.result(timeout=120)
    print(f"{WORKERS} workers started in {time.monotonic() - started:.0f} s beside a burst of "
          f"{BURST_TOPICS * BURST_PARTITIONS} partitions; waits logged: {len(waited)}")


def test_a_worker_started_before_kafka_waits_for_it_then_runs(
    stack: Endpoints, emulator: Emulator, keyspace: str, tmp_path: Path, bridge_name: str,
    workers: Callable[..., WorkerProcess],
) -> None:
    """Issue 42: a worker whose Kafka does not answer yet retries with back-off (one line per
    attempt, /healthz 200, /readyz 503 naming Kafka) instead of exiting, and runs once a private
    broker comes up late on its port, on the default startup.timeout.ms; nothing is lost or repeated."""
    layout = StackLayout(deploy_dir=StackLayout.default().deploy_dir, state_dir=tmp_path / "stack")
    manager = StackManager(layout, Endpoints().shifted(PRIVATE_OFFSET), say=lambda _: None)
    late = dataclasses.replace(stack, kafka_port=manager.endpoints.kafka_port)
    table = make_table(emulator, keyspace)
    insert(emulator, table, range(10))
    port = free_port()
    worker = workers(write_properties(tmp_path / "early.properties",
                                      worker_properties(late, bridge_name, [table], metrics__port=port)), "early")
    try:
        wait_for(lambda: len(_waits(worker)) >= 2, 90, "two start-up attempts while Kafka is down")
        assert worker.process.poll() is None
        assert http_get(port, "/healthz")[0] == 200
        status, reason = http_get(port, "/readyz")
        assert status == 503 and "waiting for Kafka" in reason, reason
        assert _waits(worker)[0]["setting"] == "startup.timeout.ms"
        manager.up(quiet=True, only=["kafka"])
        wait_for(lambda: _outcome(worker) is not None, 180, "the worker to run or exit once Kafka is up")
        assert _outcome(worker) == "running"
        assert_each_once(read_topic(late.kafka_bootstrap, f"{bridge_name}.{table}", expected=10), range(10))
        wait_for(lambda: http_get(port, "/readyz")[0] == 200, 60, "the worker to be ready")
    finally:
        worker.kill()
        manager.down(only=["kafka"])


def _waits(worker: WorkerProcess) -> list[dict[str, object]]:
    return [e for e in worker.events() if e.get("event") == "start-up waiting" and e.get("dependency") == "Kafka"]
