"""Start-up waits out a Kafka or Cassandra that answers late (issue 42): the worker does not
exit; it logs one line per attempt, answers /healthz 200 and /readyz 503 (`starting: waiting for
<dependency>`) meanwhile, and starts once the dependency answers. Past `startup.timeout.ms` it
exits with one line naming the setting. The dependency is the shared stack's, reached through a
forwarder that opens late (forwarder.py), on this file's private ports."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge.sim import Emulator
from bridge.stack.layout import Endpoints, port_offset
from tests.integration.worker.forwarder import LateForwarder
from tests.integration.worker.harness import (
    CLI,
    WorkerProcess,
    free_port,
    http_get,
    ids_of,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)
from tests.integration.worker.test_run import insert, make_table

pytestmark = pytest.mark.slow
PORT = port_offset(28000)  # 28000-28001: this file's forwarders, beside the stack's ports


@pytest.fixture
def forwarders() -> Iterator[Callable[[int, tuple[str, int]], LateForwarder]]:
    made: list[LateForwarder] = []

    def make(port: int, target: tuple[str, int]) -> LateForwarder:
        made.append(LateForwarder(port, target))
        return made[-1]

    yield make
    for forwarder in made:
        forwarder.close()


def _waiting_lines(worker: WorkerProcess, dependency: str) -> list[dict[str, object]]:
    return [e for e in worker.events()
            if e.get("event") == "start-up waiting for a dependency" and e.get("dependency") == dependency]


@pytest.mark.parametrize("dependency", ["kafka", "cassandra"])
def test_a_dependency_that_answers_late_is_waited_for(
    dependency: str, stack: Endpoints, emulator: Emulator, keyspace: str, bridge_name: str, tmp_path: Path,
    workers: Callable[..., WorkerProcess], forwarders: Callable[[int, tuple[str, int]], LateForwarder],
) -> None:
    table = make_table(emulator, keyspace)
    insert(emulator, table, range(20))
    metrics = free_port()
    if dependency == "kafka":
        late = forwarders(PORT, (stack.host, stack.kafka_port))
        overrides = {"kafka__bootstrap__servers": f"127.0.0.1:{PORT}"}
    else:
        late = forwarders(PORT + 1, (stack.cassandra_host, stack.cassandra_port))
        overrides = {"scylla__cluster__ip__addresses": f"127.0.0.1:{PORT + 1}"}
    config = write_properties(tmp_path / "w.properties",
                              worker_properties(stack, bridge_name, [table], metrics__port=metrics, **overrides))
    worker = workers(config, "late")
    # A Kafka attempt is a 15 s access check; Cassandra's connection is refused at once.
    lines = 1 if dependency == "kafka" else 2
    wait_for(lambda: len(_waiting_lines(worker, dependency)) >= lines, 120, f"waiting lines for {dependency}")
    assert worker.process.poll() is None
    assert http_get(metrics, "/healthz")[0] == 200
    status, reason = http_get(metrics, "/readyz")
    assert status == 503 and f"starting: waiting for {dependency}" in reason, reason
    attempts = [line["attempt"] for line in _waiting_lines(worker, dependency)]
    assert attempts == list(range(1, len(attempts) + 1))  # one line per attempt
    late.open()
    wait_for(lambda: http_get(metrics, "/readyz")[0] == 200, 240, "the worker to be ready")
    messages = read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=20)
    assert sorted(ids_of(messages)) == list(range(20))
    assert worker.stop() == 0


def test_a_kafka_that_never_answers_ends_start_up_at_the_bound(
    stack: Endpoints, emulator: Emulator, keyspace: str, bridge_name: str, tmp_path: Path,
) -> None:
    """`startup.timeout.ms` (here 5 s, this test is about it) bounds the wait: exit 2, one line."""
    table = make_table(emulator, keyspace)
    config = write_properties(tmp_path / "w.properties", worker_properties(
        stack, bridge_name, [table], kafka__bootstrap__servers=f"127.0.0.1:{PORT}", startup__timeout__ms=5000))
    started = time.monotonic()
    result = subprocess.run([*CLI, "run", "--config", str(config)], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: kafka.bootstrap.servers:") and "startup.timeout.ms" in last, last
    assert time.monotonic() - started < 90
