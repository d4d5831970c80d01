"""The connector's status in Kafka Connect's `/connectors/{name}/status` shape (pure), from the
target state and the records the live workers keep in the status topic.

The mapping (docs/worker.md): the connector is the config's `name`; its tasks are the slots,
ids `0..slots.count-1`; a task's `worker_id` is the owning worker's instance id. A task is FAILED
while any of its groups has failed (its `trace` names each one, with the error, attempts and next
retry), PAUSED when its owner has paused, UNASSIGNED when no live worker owns it. The connector
is PAUSED or STOPPED only once every live worker has applied that state, UNASSIGNED without any
live worker, RUNNING otherwise. A STOPPED connector has no tasks, as in Connect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from bridge.control.control_records import TargetState
from bridge.kafka.status_topic import HEARTBEAT_S, WorkerStatus

# A STOPPED worker's record is sent every HEARTBEAT_S: three missed, the worker is gone.
STALE_AFTER_MS = int(3 * HEARTBEAT_S * 1000)


def live_statuses(statuses: Iterable[WorkerStatus], members: set[str], now_ms: int) -> list[WorkerStatus]:
    """The records of workers alive now: members of the slot group, or (a STOPPED worker is not
    a member) a record younger than three heartbeats."""
    return [status for status in statuses
            if status.member_id in members or (status.at_ms and now_ms - status.at_ms <= STALE_AFTER_MS)]


def worker_id(status: WorkerStatus) -> str:
    return status.instance or status.worker


def connector_status(name: str, target: TargetState, statuses: Sequence[WorkerStatus],
                     slots_count: int) -> dict[str, Any]:
    """Connect's ConnectorStateInfo as JSON (`statuses`: the live workers' records)."""
    workers = sorted(statuses, key=lambda status: status.worker)
    state = _connector_state(target, workers)
    connector = {"state": state, "worker_id": worker_id(workers[0]) if workers else ""}
    tasks = [] if state == "STOPPED" else [task_status(slot, workers) for slot in range(slots_count)]
    return {"name": name, "connector": connector, "tasks": tasks, "type": "source"}


def task_status(slot: int, statuses: Sequence[WorkerStatus]) -> dict[str, Any]:
    """Connect's TaskState of one slot (`/connectors/{name}/tasks/{id}/status`)."""
    owners = [status for status in statuses if slot in status.slots and status.state != "STOPPED"]
    if not owners:
        return {"id": slot, "state": "UNASSIGNED", "worker_id": ""}
    owner = max(owners, key=lambda status: status.at_ms)  # during a hand-over, the newer word
    failures = sorted((group, failure) for group, failure in owner.failures.items() if failure.slot == slot)
    task: dict[str, Any] = {"id": slot, "state": owner.state, "worker_id": worker_id(owner)}
    if failures:
        task["state"] = "FAILED"
        task["trace"] = "\n".join(_trace_line(group, failure.error, failure.attempts, failure.next_retry_ms)
                                  for group, failure in failures)
    return task


def _connector_state(target: TargetState, workers: Sequence[WorkerStatus]) -> str:
    if not workers:
        return "UNASSIGNED"
    if target is not TargetState.STARTED and all(status.state == target.value for status in workers):
        return target.value
    return "RUNNING"


def _trace_line(group: str, error: str, attempts: int, next_retry_ms: int | None) -> str:
    retry = ("retries exhausted (errors.retry.timeout)" if next_retry_ms is None else
             f"next retry at {datetime.fromtimestamp(next_retry_ms / 1000, UTC).isoformat(timespec='seconds')}")
    return f"group {group} failed: {error} (attempts: {attempts}; {retry})"
