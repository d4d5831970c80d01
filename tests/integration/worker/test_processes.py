"""`worker.processes=2`: one `cdc-bridge run` supervising two worker processes. Both hold slots,
every change arrives once, a SIGKILLed child is restarted (its static instance id gets its slots
back) without breaking exactly-once, the supervisor's port merges the children's metrics and
probes, SIGTERM stops everything with exit 0, and a SIGKILLed supervisor takes its children
with it."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge.sim import Emulator
from bridge.stack.layout import Endpoints
from tests.integration.worker.harness import (
    CLI,
    DEFAULT_SLOTS,
    WorkerProcess,
    free_port,
    http_get,
    metric_samples,
    read_topic,
    wait_for,
)
from tests.integration.worker.test_run import assert_each_once, insert, make_table

SLOTS = DEFAULT_SLOTS


def child_pids(supervisor: WorkerProcess) -> dict[int, int]:
    """The newest pid of each child, from the supervisor's `worker process started` lines."""
    pids: dict[int, int] = {}
    for event in supervisor.events():
        if event.get("event") == "worker process started":
            pids[int(event["worker_process"])] = int(event["child_pid"])
    return pids


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def owned_by_process(port: int) -> dict[str, float]:
    samples = metric_samples(port)
    return {dict(labels)["worker_process"]: value for (name, labels), value in samples.items()
            if name == "cdc_bridge_owned_slots"}


@pytest.fixture
def every_child(workers: Callable[..., WorkerProcess]) -> Iterator[list[int]]:
    """Pids of children seen during the test: killed at teardown if anything left one behind."""
    seen: list[int] = []
    yield seen
    for pid in seen:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_two_worker_processes_share_slots_restart_and_stop_together(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str, every_child: list[int],
) -> None:
    table = make_table(emulator, keyspace)
    port = free_port()
    instance = f"sup-{uuid.uuid4().hex[:6]}"
    config = config_for([table], worker__processes=2, metrics__port=port,
                        worker__instance__id=instance)
    supervisor = workers(config, "sup")
    wait_for(lambda: len(child_pids(supervisor)) == 2, 30, "two worker processes to start")
    every_child.extend(child_pids(supervisor).values())
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "the supervisor's /readyz")

    def both_own_slots() -> bool:
        owned = owned_by_process(port)
        return set(owned) == {"0", "1"} and all(v > 0 for v in owned.values()) and sum(owned.values()) == SLOTS

    wait_for(both_own_slots, 60, "both worker processes to own slots, every slot once")
    status, body = http_get(port, "/readyz")
    assert status == 200 and body.splitlines()[1:] == ["0: ok: ready", "1: ok: ready"], body
    assert http_get(port, "/healthz")[0] == 200
    insert(emulator, table, range(0, 60))

    # SIGKILL child 1: the supervisor restarts it; with its static instance id it fences its
    # previous incarnation and gets its slots back.
    killed = child_pids(supervisor)[1]
    os.kill(killed, signal.SIGKILL)
    insert(emulator, table, range(60, 120))
    wait_for(lambda: child_pids(supervisor)[1] != killed, 30, "child 1 to be restarted")
    every_child.append(child_pids(supervisor)[1])
    restarted = [e for e in supervisor.events() if e.get("event") == "worker process exited; restarting"]
    assert [(e["worker_process"], e["child_pid"], e["exit_code"]) for e in restarted] == [(1, killed, -9)]
    wait_for(lambda: http_get(port, "/readyz")[0] == 200 and both_own_slots(), 90, "the restarted child to serve")
    insert(emulator, table, range(120, 180))

    messages = read_topic(stack.kafka_bootstrap, f"{bridge_name}.{table}", expected=180)
    assert_each_once(messages, range(180))

    # One exposition: every child's series labelled, the supervisor's own gauge and counter.
    samples = metric_samples(port)
    rows = sum(v for (name, _), v in samples.items() if name == "cdc_bridge_rows_read_total")
    assert rows >= 180, "the children's counters, summed over worker_process"
    assert {dict(labels).get("worker_process") for (name, labels), _ in samples.items()
            if name == "cdc_bridge_ready"} == {"0", "1"}
    assert samples[("cdc_bridge_worker_processes", ())] == 2
    assert samples[("cdc_bridge_worker_process_restarts_total", (("worker_process", "1"),))] == 1
    assert samples[("cdc_bridge_worker_process_restarts_total", (("worker_process", "0"),))] == 0
    children = [e for e in supervisor.events() if e.get("event") == "worker running"]
    assert {e["worker_process"] for e in children} == {0, 1}, "children's lines carry worker_process"
    assigned = {e["worker_process"] for e in supervisor.events() if e.get("event") == "slots assigned"}
    assert assigned == {0, 1}

    pids = list(child_pids(supervisor).values())
    assert supervisor.stop() == 0
    wait_for(lambda: not any(alive(pid) for pid in pids), 10, "no child left after SIGTERM")

    # A SIGKILLed supervisor leaves nothing behind (the children die with it: PR_SET_PDEATHSIG).
    again = workers(config, "sup-again")
    wait_for(lambda: len(child_pids(again)) == 2, 30, "two worker processes to start again")
    pids = list(child_pids(again).values())
    every_child.extend(pids)
    again.kill()
    wait_for(lambda: not any(alive(pid) for pid in pids), 10, "no child left after the supervisor's SIGKILL")


def test_a_start_up_error_of_the_worker_processes_is_one_line_and_exit_2(
    config_for: Callable[..., Path], keyspace: str, tmp_path: Path,
) -> None:
    """Found only by the worker processes (the table is missing): one line, not one per process,
    and no restart loop."""
    config = config_for([f"{keyspace}.missing"], worker__processes=2)
    done = subprocess.run([*CLI, "run", "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: scylla.table.names: table {keyspace}.missing does not exist"]
    assert "restarting" not in done.stdout
    bad = subprocess.run([*CLI, "run", "--config", str(config), "--set", "worker.processes=0"],
                         capture_output=True, text=True, timeout=60)
    assert (bad.returncode, bad.stderr) == (2, "error: worker.processes: '0': must be a positive integer or auto\n")
