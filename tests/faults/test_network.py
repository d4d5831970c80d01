"""Network faults between the workers and Kafka, through toxiproxy: Kafka out of reach for longer
than the transaction timeout; a slow, narrow link (backpressure: memory stays bounded); one
worker cut off from Kafka alone (it is fenced and its slots taken over)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from bridge.sim import Emulator
from tests.faults.lab import WORKERS, FaultLab
from tests.faults.scenario import begin, check_exactly_once, wait_until_ready
from tests.integration.worker.harness import DEFAULT_SLOTS, WorkerProcess, owned_slots, wait_for

SLOTS = DEFAULT_SLOTS  # the harness's slots.count: the shipped default


def test_kafka_out_of_reach_for_longer_than_the_transaction_timeout(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
) -> None:
    workload, running = begin(lab_workers, emulator, keyspace)
    workload.write_round(emulator, 0)
    for worker in WORKERS:
        healthy_lab.kafka_link(worker, up=False)
    workload.write_round(emulator, 1)
    time.sleep(25)  # the transactions open when the link went (10 s timeout) are aborted by the brokers
    assert all(process.readiness()[0] == 503 for process in running.values()), "ready without Kafka"
    for worker in WORKERS:
        healthy_lab.kafka_link(worker, up=True)
    workload.write_round(emulator, 2)
    wait_until_ready(running, 120)
    workload.write_round(emulator, 3)
    check_exactly_once(healthy_lab, workload, keyspace, running)


class PeakMemory:
    """The highest resident set of some processes, sampled twice a second in the background."""

    def __init__(self, pids: list[int]) -> None:
        self.peak_mb = {pid: 0.0 for pid in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            for pid in self.peak_mb:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_mb[pid] = max(self.peak_mb[pid], int(line.split()[1]) / 1024)

    def stop(self) -> dict[int, float]:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


def test_a_slow_narrow_kafka_link_slows_reading_and_memory_stays_bounded(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
) -> None:
    workload, running = begin(lab_workers, emulator, keyspace, rounds=5, per_round=4000)
    memory = PeakMemory([process.process.pid for process in running.values()])
    for worker in WORKERS:
        for proxy in healthy_lab.kafka[worker]:
            proxy.toxic("latency", stream="downstream", latency=150, jitter=50)
            proxy.toxic("bandwidth", stream="upstream", rate=4)  # KB/s to each broker
    for number in range(workload.rounds):
        workload.write_round(emulator, number)
    time.sleep(10)
    topic = f"{keyspace}.{keyspace}.t"
    arrived = len(healthy_lab.read(topic, workload.expected_events(), timeout_s=10))
    assert arrived < workload.expected_events() // 2, f"the link did not hold the backlog back ({arrived} arrived)"
    for worker in WORKERS:
        for proxy in healthy_lab.kafka[worker]:
            proxy.clear()
    check_exactly_once(healthy_lab, workload, keyspace, running)
    peaks = memory.stop()
    print(f"arrived behind the slow link: {arrived}; peak RSS: {peaks} MB")
    assert max(peaks.values()) < 300, f"worker RSS grew with the backlog behind a slow link: {peaks} MB"


def test_one_worker_cut_off_from_kafka_is_fenced_and_its_slots_taken_over(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
) -> None:
    workload, running = begin(lab_workers, emulator, keyspace)
    cut, other = running["WA"], running["WB"]
    workload.write_round(emulator, 0)
    healthy_lab.kafka_link("WA", up=False)
    workload.write_round(emulator, 1)
    wait_for(lambda: owned_slots(other.process) == set(range(SLOTS)), 60, "WB to take over every slot")
    workload.write_round(emulator, 2)
    assert cut.readiness()[0] == 503, "a worker cut off from Kafka says it is ready"
    healthy_lab.kafka_link("WA", up=True)
    wait_until_ready(running, 120)
    workload.write_round(emulator, 3)
    check_exactly_once(healthy_lab, workload, keyspace, running)
