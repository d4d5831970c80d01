"""Start-up waits out a Scylla (here Cassandra) that answers late, with the probes answering
meanwhile (issue 42): before this, the metrics port was bound only once the cluster was
connected, so a kubelet's /healthz got a refused connection for the whole wait and would have
restarted the pod. The cluster is the shared stack's, reached through a forwarder that opens late
(forwarder.py) on this file's private port. (A Kafka that starts late:
test_startup_topics.test_a_worker_started_before_kafka_waits_for_it_then_runs.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints, port_offset
from tests.integration.worker.forwarder import LateForwarder
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
PORT = port_offset(28000)  # this file's forwarder, beside the stack's ports


@pytest.fixture
def late_scylla(stack: Endpoints) -> Iterator[LateForwarder]:
    forwarder = LateForwarder(PORT, (stack.cassandra_host, stack.cassandra_port))
    yield forwarder
    forwarder.close()


def _waits(worker: WorkerProcess) -> list[dict[str, object]]:
    return [e for e in worker.events() if e.get("event") == "start-up waiting" and e.get("dependency") == "Scylla"]


def test_a_worker_started_before_scylla_answers_waits_with_its_probes_up_then_runs(
    stack: Endpoints, emulator: Emulator, keyspace: str, bridge_name: str, tmp_path: Path,
    workers: Callable[..., WorkerProcess], late_scylla: LateForwarder,
) -> None:
    table = make_table(emulator, keyspace)
    insert(emulator, table, range(20))
    port = free_port()
    config = write_properties(tmp_path / "w.properties", worker_properties(
        stack, bridge_name, [table], metrics__port=port, scylla__cluster__ip__addresses=f"127.0.0.1:{PORT}"))
    worker = workers(config, "early")
    wait_for(lambda: len(_waits(worker)) >= 2, 90, "two start-up attempts while Scylla does not answer")
    assert worker.process.poll() is None
    assert http_get(port, "/healthz")[0] == 200
    status, reason = http_get(port, "/readyz")
    assert status == 503 and "waiting for Scylla" in reason, reason
    assert [e["attempt"] for e in _waits(worker)] == list(range(1, len(_waits(worker)) + 1))  # a line per attempt
    late_scylla.open()
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 180, "the worker to be ready")
    assert_each_once(read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=20), range(20))
    assert worker.stop() == 0
