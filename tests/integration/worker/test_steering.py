"""The control plane on real workers, driven by the CLI verbs (the records REST writes too):
pause stops every record within seconds and resume delivers the rest once; a worker started while
paused stays paused; stop leaves the slot group and resume starts from the committed positions;
a restart request retries a failed group at once instead of after its backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bridge.control.connector_state import connector_status, live_statuses
from bridge.control.control_records import TargetState
from bridge.kafka.status_topic import read_statuses
from bridge.sim import Emulator
from bridge.stack.layout import Endpoints
from tests.integration.worker.harness import DEFAULT_SLOTS, WorkerProcess, owned_slots, read_topic, wait_for
from tests.integration.worker.test_failure_modes import _poisoned_table
from tests.integration.worker.test_run import assert_each_once, insert, make_table, run_cli, settled

SLOTS = DEFAULT_SLOTS


def _verb(config: Path, *args: str) -> str:
    done = run_cli(*args, "--config", str(config))
    assert done.returncode == 0, done.stderr
    return done.stdout


def _connector(stack: Endpoints, name: str, target: TargetState) -> dict[str, object]:
    """Connect's /status as REST computes it: the live workers are the slot group's members and
    the STOPPED ones whose record is recent."""
    client = {"bootstrap.servers": stack.kafka_bootstrap}
    group = f"{name}-workers"
    admin = AdminClient(client)  # held while the answer comes: a collected client never answers
    described = admin.describe_consumer_groups([group], request_timeout=15)[group].result(20)
    members = {member.member_id for member in described.members}
    statuses = read_statuses(client, f"{name}-status", 15)
    return connector_status(name, target, live_statuses(statuses, members, int(time.time() * 1000)), SLOTS)


def _events(worker: WorkerProcess, name: str) -> list[dict[str, object]]:
    return [e for e in worker.events() if e.get("event") == name]


def test_pause_resume_stop_on_two_workers_deliver_each_change_once(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    table = make_table(emulator, keyspace)
    config = config_for([table])
    topic = f"{bridge_name}.{table}"
    pair = [workers(config, f"w{i}") for i in range(2)]
    insert(emulator, table, range(0, 30))
    wait_for(lambda: settled(pair), 60, "two workers to own every slot")
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=30, settle_s=0), range(30))

    asked = time.monotonic()
    assert "target state PAUSED" in _verb(config, "pause")
    wait_for(lambda: _connector(stack, bridge_name, TargetState.PAUSED)["connector"]["state"]  # type: ignore[index]
             == "PAUSED", 15, "every worker to report PAUSED")
    paused_in = time.monotonic() - asked
    insert(emulator, table, range(30, 60))
    late = workers(config, "late")  # started while paused: joins, owns slots, reads nothing
    wait_for(lambda: bool(owned_slots(late)), 60, "the late worker to get slots")
    time.sleep(3)
    assert len(read_topic(stack.kafka_bootstrap, topic, expected=31, timeout_s=3, settle_s=0)) == 30, \
        "records produced while paused"
    assert _events(late, "group started") == [] and _events(late, "worker starts without reading")
    tasks = _connector(stack, bridge_name, TargetState.PAUSED)["tasks"]
    assert {task["state"] for task in tasks} == {"PAUSED"}, tasks  # type: ignore[attr-defined]
    status = _verb(config, "status", "--sample-s", "0")
    assert f"connector {bridge_name}: PAUSED (target state PAUSED; applied: " in status, status

    _verb(config, "resume")
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=60), range(60))
    assert _events(late, "group started"), "the late worker never started its groups"

    everyone = [*pair, late]
    _verb(config, "stop")
    wait_for(lambda: not any(owned_slots(w) for w in everyone), 30, "every worker to leave the slot group")
    wait_for(lambda: _connector(stack, bridge_name, TargetState.STOPPED)["connector"]["state"]  # type: ignore[index]
             == "STOPPED", 15, "every worker to report STOPPED")
    insert(emulator, table, range(60, 90))
    time.sleep(2)
    assert len(read_topic(stack.kafka_bootstrap, topic, expected=61, timeout_s=3, settle_s=0)) == 60
    _verb(config, "resume")
    assert_each_once(read_topic(stack.kafka_bootstrap, topic, expected=90), range(90))
    for worker in everyone:
        changes = [e["requested_by"] for e in _events(worker, "target state changed")]
        assert changes and all(str(who).startswith("cli:") for who in changes)
        assert worker.stop() == 0
    print(f"paused on every worker {paused_in:.1f} s after the command")


def test_restart_retries_a_failed_group_at_once(
    emulator: Emulator, keyspace: str, config_for: Callable[..., Path],
    workers: Callable[..., WorkerProcess], stack: Endpoints, bridge_name: str,
) -> None:
    """With errors.retry.timeout=0 a failed group is never retried on its own; `restart --task N`
    (N: the slot the status topic names) starts it again within a second or two."""
    table = _poisoned_table(emulator, keyspace)
    worker = workers(config_for([table], errors__retry__timeout=0), "w")
    emulator.execute(f"INSERT INTO {table} (id, item) VALUES (1, 'x')")
    wait_for(lambda: bool(_events(worker, "group failed")), 90, "the group to fail")
    status = _connector(stack, bridge_name, TargetState.STARTED)
    failed = [t for t in status["tasks"] if t["state"] == "FAILED"]  # type: ignore[attr-defined]
    assert len(failed) == 1 and "junk" in failed[0]["trace"] and "retries exhausted" in failed[0]["trace"], failed
    started = len(_events(worker, "group started"))
    time.sleep(2)
    assert len(_events(worker, "group started")) == started, "retried without a restart"
    asked = time.monotonic()
    _verb(config_for([table], errors__retry__timeout=0), "restart", "--task",
          str(failed[0]["id"]))
    wait_for(lambda: len(_events(worker, "group started")) > started, 10, "the restarted group to start")
    print(f"failed group restarted {time.monotonic() - asked:.1f} s after the command")
    retried = _events(worker, "group started")[-1]
    assert retried["retry"] is True
    wait_for(lambda: len(_events(worker, "group failed")) == 2, 30, "the group to fail again (same change)")
