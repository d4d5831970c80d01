"""Broker failures under two running workers: the partition leader's broker SIGKILLed and
restarted; the slot group's coordinator paused (SIGSTOP) past every session timeout."""

from __future__ import annotations

import time
from collections.abc import Callable

from bridge_devstack.sim import Emulator
from tests.faults.lab import FaultLab
from tests.faults.scenario import begin, check_exactly_once, wait_until_ready
from tests.integration.worker.harness import WorkerProcess


def test_the_partition_leaders_broker_killed_and_restarted(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
) -> None:
    workload, running = begin(lab_workers, emulator, keyspace)
    workload.write_round(emulator, 0)
    victim = healthy_lab.leader_of(f"{keyspace}.{keyspace}.t")
    healthy_lab.cluster.kill(victim)
    workload.write_round(emulator, 1)
    time.sleep(5)
    healthy_lab.cluster.start_node(victim)
    workload.write_round(emulator, 2)
    workload.write_round(emulator, 3)
    check_exactly_once(healthy_lab, workload, keyspace, running)


def test_the_slot_groups_coordinator_paused_past_the_session_timeout(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
) -> None:
    workload, running = begin(lab_workers, emulator, keyspace)
    workload.write_round(emulator, 0)
    victim = healthy_lab.coordinator_of(f"{keyspace}-workers")
    healthy_lab.cluster.pause(victim)
    workload.write_round(emulator, 1)
    time.sleep(15)  # past the slot group's 10 s session timeout and the brokers' 6 s one
    healthy_lab.cluster.resume(victim)
    workload.write_round(emulator, 2)
    wait_until_ready(running, 90)  # both back in the slot group, not stalled outside it
    workload.write_round(emulator, 3)
    check_exactly_once(healthy_lab, workload, keyspace, running)
