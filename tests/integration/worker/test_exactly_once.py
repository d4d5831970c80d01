"""Exactly once under failures: workers SIGKILLed and restarted, a zombie, across a vnode
generation switch and a tablet split. Scale with CDC_BRIDGE_CHAOS_CHANGES (default 20000).

The switch test keeps the CDC metadata in its own keyspace, as tests/integration/worker/
test_switches.py does: a vnode generation is cluster-wide, and one published 2 s ahead in the
shared `sim_system_distributed` reached the Spark tests running beside this one. Their writes,
timestamped 3 s ahead as ScyllaDB's 5 s leeway allows, went to streams of the generation they saw,
past its end, where no reader looks (ScyllaDB itself starts a generation 2 x ring_delay + the
leeway ahead, so it never has such writes)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge_devstack.sim import Emulator
from bridge_devstack.stack.layout import Endpoints
from tests.integration.worker.chaos import Workload
from tests.integration.worker.harness import (
    DEFAULT_SLOTS,
    WorkerProcess,
    owned_slots,
    read_topic,
    wait_for,
    worker_properties,
    write_properties,
)

CHANGES = int(os.environ.get("CDC_BRIDGE_CHAOS_CHANGES", "20000"))
ROUNDS = 4

pytestmark = pytest.mark.slow


@pytest.fixture
def tablets_keyspace(keyspace: str, private_emulator: Emulator) -> Iterator[str]:
    name = f"{keyspace}_t"
    private_emulator.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', "
                             "'replication_factor': 1} AND tablets = {'enabled': true}")
    yield name
    private_emulator.execute(f"DROP KEYSPACE IF EXISTS {name}")


def run_writer(emulator: Emulator, workload: Workload, tablets: tuple[str, str]) -> threading.Thread:
    def write() -> None:
        for number in range(workload.rounds):
            workload.write_round(emulator, number)
            if number == 1:
                emulator.bootstrap_node(delay_s=2)  # a vnode generation switch
                emulator.tablets_split(*tablets, delay_s=2)  # a tablet stream-set switch
                time.sleep(2.5)
        workload.delete_some(emulator, 20)

    thread = threading.Thread(target=write, name="chaos-writer")
    thread.start()
    return thread


def check_output(stack: Endpoints, name: str, workload: Workload, timeout_s: float = 240) -> None:
    for table in workload.tables:
        expected = workload.expected_events() // len(workload.tables)
        topic = f"{name}.{table[0]}.{table[1]}"
        tombstones = len(workload.deleted.get(table, ()))
        workload.check(table, read_topic(stack.kafka_bootstrap, topic, expected=expected + tombstones,
                                         timeout_s=timeout_s, settle_s=5))


def test_sigkilled_workers_deliver_each_change_once_in_order(
    private_emulator: Emulator, keyspace: str, tablets_keyspace: str, tmp_path: Path, stack: Endpoints,
    workers: Callable[..., WorkerProcess], bridge_name: str,
) -> None:
    """Two static workers; ten times one of them is SIGKILLed at a random moment and restarted."""
    workload = Workload([(keyspace, "a"), (tablets_keyspace, "b")], ROUNDS, CHANGES // (2 * ROUNDS))
    workload.create(private_emulator)
    tables = [f"{ks}.{t}" for ks, t in workload.tables]
    metadata = {"scylla.cdc.metadata.vnodes.keyspace": keyspace, "scylla.cdc.metadata.tablets.keyspace": keyspace}
    configs = [write_properties(tmp_path / f"w{i}.properties",
                                worker_properties(stack, bridge_name, tables, worker__instance__id=f"w{i}",
                                                  **metadata))
               for i in range(2)]
    running = [workers(config, f"w{i}") for i, config in enumerate(configs)]
    writer = run_writer(private_emulator, workload, (tablets_keyspace, "b"))
    rng = random.Random(7)
    for _ in range(10):
        time.sleep(rng.uniform(1.0, 4.0))
        victim = rng.randrange(2)
        running[victim].kill()
        running[victim] = workers(configs[victim], f"w{victim}")
    writer.join()
    check_output(stack, bridge_name, workload)
    for worker in running:
        assert worker.stop() == 0


def test_zombie_late_commit_fails_and_rejoins(
    emulator: Emulator, keyspace: str, tmp_path: Path, stack: Endpoints,
    workers: Callable[..., WorkerProcess], bridge_name: str,
) -> None:
    """A worker SIGSTOPped until its slots move cannot commit when it wakes; it rejoins."""
    workload = Workload([(keyspace, "a")], 3, max(1000, CHANGES // 10))
    workload.create(emulator)
    config = write_properties(tmp_path / "w.properties", worker_properties(stack, bridge_name, [f"{keyspace}.a"]))
    zombie, other = workers(config, "zombie"), workers(config, "other")
    wait_for(lambda: _owned(zombie) and len(_owned(zombie) | _owned(other)) == DEFAULT_SLOTS, 60,
             "both workers to own slots")
    workload.write_round(emulator, 0)
    time.sleep(2.5)  # the zombie is reading or committing round 0 when it stops
    os.kill(zombie.pid, 19)  # SIGSTOP
    workload.write_round(emulator, 1)
    wait_for(lambda: len(_owned(other)) == DEFAULT_SLOTS, 60, "the stopped worker's slots to move")
    os.kill(zombie.pid, 18)  # SIGCONT
    workload.write_round(emulator, 2)
    check_output(stack, bridge_name, workload)
    events = [e.get("event") for e in zombie.events()]
    assert "slots lost" in events or "transaction aborted; re-reading from the last commit" in events \
        or "producer fenced; starting a new one" in events, events[-20:]
    assert zombie.stop() == 0 and other.stop() == 0


def _owned(worker: WorkerProcess) -> set[int]:
    return owned_slots(worker)
