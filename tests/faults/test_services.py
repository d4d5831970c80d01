"""Faults between the workers and their other servers, through toxiproxy: Cassandra out of reach
and then slow mid-run; the schema registry out of reach across an `ALTER TABLE ... ADD` (the
group fails visibly, is retried, and recovers with nothing lost or doubled)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bridge_devstack.sim import Emulator
from tests.faults.lab import WORKERS, FaultLab
from tests.faults.scenario import begin, check_exactly_once, start_both, wait_until_ready
from tests.integration.worker.harness import CLI, WorkerProcess, metric_samples, wait_for


def test_cassandra_out_of_reach_then_slow(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
) -> None:
    workload, running = begin(lab_workers, emulator, keyspace)
    workload.write_round(emulator, 0)
    for worker in WORKERS:
        healthy_lab.cassandra[worker].disable()
    workload.write_round(emulator, 1)  # written while no worker can read
    time.sleep(20)
    for worker in WORKERS:
        healthy_lab.cassandra[worker].enable()
        healthy_lab.cassandra[worker].toxic("latency", latency=300, jitter=100)
    workload.write_round(emulator, 2)
    time.sleep(10)  # pages read through a 300 ms link
    for worker in WORKERS:
        healthy_lab.cassandra[worker].clear()
    workload.write_round(emulator, 3)
    check_exactly_once(healthy_lab, workload, keyspace, running)


def _status(config: Path) -> list[str]:
    done = subprocess.run([*CLI, "status", "--config", str(config), "--sample-s", "0"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_registry_out_of_reach_across_an_alter_fails_the_group_visibly_then_it_recovers(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
    tmp_path: Path,
) -> None:
    table = f"{keyspace}.orders"
    emulator.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, item text) WITH cdc = {{'enabled': true}}")

    def registry(worker: str) -> dict[str, object]:
        url = healthy_lab.registry_url(worker)
        return {"key.converter.schema.registry.url": url, "value.converter.schema.registry.url": url}

    running = start_both(lab_workers, keyspace, [table], key__converter="avro", value__converter="avro",
                         errors__retry__delay__max__ms=4000, each=registry)
    for i in range(20):
        emulator.execute(f"INSERT INTO {table} (id, item) VALUES ({i}, 'before')")
    topic = f"{keyspace}.{table}"
    assert len(healthy_lab.read(topic, expected=20, timeout_s=60)) == 20

    for worker in WORKERS:
        healthy_lab.registry[worker].disable()
    emulator.execute(f"ALTER TABLE {table} ADD extra text")
    for i in range(20, 220):
        emulator.execute(f"INSERT INTO {table} (id, item, extra) VALUES ({i}, 'after', 'x{i}')")

    def failed_group_reported() -> bool:
        answers = [process.readiness() for process in running.values()]
        return any(status == 503 and "failed group" in body and table in body for status, body in answers)

    wait_for(failed_group_reported, 60, "/readyz to name the failed group")

    def lags() -> dict[str, float]:
        found = {}
        for process in running.values():
            for (name, labels), value in metric_samples(process.port).items():
                if name == "cdc_bridge_group_lag_seconds" and dict(labels)["table"] == "orders":
                    found[dict(labels)["group"]] = value
        return found

    before = lags()
    time.sleep(4)
    after = lags()
    assert any(after.get(group, 0) - lag >= 3 for group, lag in before.items()), (
        f"no failed group's lag series kept growing: {before} -> {after}")
    listed = _status(tmp_path / "WA.properties")
    assert any(line.startswith("failed: ") and table in line for line in listed), listed
    for worker in WORKERS:
        healthy_lab.registry[worker].enable()
    wait_until_ready(running, 90)
    wait_for(lambda: not any(line.startswith("failed: ") for line in _status(tmp_path / "WA.properties")), 30,
             "cdc-bridge status to stop listing the recovered group")
    messages = healthy_lab.read(topic, expected=220, timeout_s=90)
    assert len(messages) == 220, f"{len(messages)} records, wanted 220"
    assert len({key for key, _ in messages}) == 220  # every change once: 220 distinct keys, nothing doubled
    assert all(process.alive() for process in running.values())


def test_a_worker_whose_clock_runs_ahead_still_waits_out_the_confidence_window(
    healthy_lab: FaultLab, lab_workers: Callable[..., WorkerProcess], emulator: Emulator, keyspace: str,
) -> None:
    """WA's wall clock is 20 s ahead (ten confidence windows): by its own clock it would read
    rows up to 18 s in the future, pass positions the writers have not reached yet, and never
    read the rows written there."""
    workload, running = begin(lab_workers, emulator, keyspace, each=lambda w: {"clock_skew_s": 20.0 * (w == "WA")})
    for number in range(workload.rounds):
        workload.write_round(emulator, number)
        time.sleep(3)
    check_exactly_once(healthy_lab, workload, keyspace, running)
    warned = [e for e in running["WA"].process.events() if e.get("event", "").startswith("this host's clock differs")]
    assert warned and 19 < warned[0]["offset_s"] * -1 < 21, "the skew was not reported in the log"
