"""The Kafka broker, then Cassandra, stopped and started again while a worker runs: it recovers by
itself, and every change arrives once, in order. Runs a private stack (own state folder, ports
shifted from the stack's offset) so the shared servers are never touched."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints, StackLayout, port_offset
from bridge_devstack.stack.manager import StackManager
from bridge_devstack.stack.process import log_tail
from tests.integration.worker.chaos import Workload
from tests.integration.worker.harness import (
    WorkerProcess,
    free_port,
    http_get,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)

pytestmark = pytest.mark.slow
PRIVATE_OFFSET = port_offset(23000)


@pytest.fixture
def private_stack(tmp_path: Path) -> Iterator[StackManager]:
    layout = StackLayout(deploy_dir=StackLayout.default().deploy_dir, state_dir=tmp_path / "stack")
    manager = StackManager(layout, Endpoints().shifted(PRIVATE_OFFSET), say=lambda _: None)
    try:
        manager.up(quiet=True, only=["kafka", "cassandra"])
        yield manager
    finally:
        manager.down(only=["kafka", "cassandra"])


def test_worker_recovers_from_kafka_and_cassandra_restarts(
    private_stack: StackManager, tmp_path: Path, workers: Callable[..., WorkerProcess],
) -> None:
    endpoints = private_stack.endpoints
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emulator:
        emulator.execute("CREATE KEYSPACE restarts WITH replication = {'class': 'SimpleStrategy', "
                         "'replication_factor': 1}")
        workload = Workload([("restarts", "a")], 4, 2000)
        workload.create(emulator)
        port = free_port()
        config = write_properties(tmp_path / "w.properties",
                                  worker_properties(endpoints, "restarts", ["restarts.a"], metrics__port=port))
        worker = workers(config, "w")
        workload.write_round(emulator, 0)
        wait_for(lambda: http_get(port, "/readyz")[0] == 200, 60, "the worker to be ready")
        private_stack.down(only=["kafka"])  # the broker goes away while the worker works
        workload.write_round(emulator, 1)
        wait_for(lambda: http_get(port, "/readyz")[0] == 503, 30, "/readyz to say not ready")
        # The first failing gate speaks: the Kafka clients, the slot group, or (when a commit was in
        # flight and blocked) the producer being replaced; each names Kafka or the group.
        reason = http_get(port, "/readyz")[1].lower()
        assert "kafka" in reason or "group" in reason, reason
        assert http_get(port, "/healthz")[0] == 200, "a worker waiting for Kafka is alive"
        private_stack.up(quiet=True, only=["kafka"])
        workload.write_round(emulator, 2)
        try:
            wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "the worker to be ready again")
        except AssertionError as error:  # say why: the probe's reason and the worker's last lines
            tail = worker.log_path.read_text(errors="replace").splitlines()[-15:]
            kafka = next(s for s in private_stack.status() if s.name == "kafka")
            raise AssertionError(f"{error}; /readyz: {http_get(port, '/readyz')[1]!r}; "
                                 f"/healthz: {http_get(port, '/healthz')[1]!r}; kafka: {kafka}; log tail:\n"
                                 + "\n".join(tail) + "\nkafka's log ends:\n"
                                 + log_tail(private_stack.layout.home("kafka") / "kafka.log")) from None
    time.sleep(3)
    private_stack.down(only=["cassandra"])
    time.sleep(5)
    private_stack.up(quiet=True, only=["cassandra"])
    with Emulator.connect([endpoints.cassandra_host], endpoints.cassandra_port) as emulator:
        workload.write_round(emulator, 3)
    table = ("restarts", "a")
    workload.check(table, read_topic(endpoints.kafka_bootstrap, "restarts.restarts.a",
                                     expected=workload.expected_events(), timeout_s=180, settle_s=5))
    assert worker.process.poll() is None, "the worker exited instead of recovering"
    assert worker.stop() == 0
