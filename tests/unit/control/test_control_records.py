"""The control topic's records in Kafka Connect's config-topic format, and what a worker's status
record says (pure)."""

from __future__ import annotations

import json

import pytest

from bridge.control.connector_state import connector_status, live_statuses
from bridge.control.control_records import (
    ControlRecordError,
    RestartRequest,
    TargetState,
    TargetStateRecord,
    decode,
    encode_restart,
    encode_target_state,
)
from bridge.kafka.status_topic import GroupFailure, WorkerStatus, parse_status


def test_target_state_is_written_as_connect_writes_it() -> None:
    key, value = encode_target_state("orders", TargetStateRecord(TargetState.STOPPED, "cli:ann@host", 5))
    assert key == b"target-state-orders"
    fields = json.loads(value)
    assert (fields["state"], fields["state.v2"], fields["requested-by"]) == ("PAUSED", "STOPPED", "cli:ann@host")
    assert decode("orders", key, value) == TargetStateRecord(TargetState.STOPPED, "cli:ann@host", 5)


def test_a_record_connect_wrote_reads_and_v1_alone_reads_too() -> None:
    assert decode("orders", b"target-state-orders", b'{"state": "PAUSED"}') == \
        TargetStateRecord(TargetState.PAUSED, "unknown", 0)
    restart = decode("orders", b"restart-connector-orders", b'{"include-tasks": true, "only-failed": true}')
    assert restart == RestartRequest(None, True, True, "unknown", 0)


def test_restarts_round_trip_and_name_the_slots_they_cover() -> None:
    task = RestartRequest(3, False, False, "rest:admin", 7)
    key, value = encode_restart("orders", task)
    assert key == b"restart-task-orders-3" and decode("orders", key, value) == task
    assert task.covers(3) and not task.covers(2)
    connector = RestartRequest(None, True, True, "cli", 1)
    assert decode("orders", *encode_restart("orders", connector)) == connector and connector.covers(9)
    assert not RestartRequest(None, False, False, "cli", 1).covers(0)


@pytest.mark.parametrize(("key", "value"), [
    (b"connector-orders", b"{}"), (b"target-state-other", b'{"state": "PAUSED"}'),
    (b"restart-task-orders-x", b"{}"), (b"target-state-orders", None), (None, b"{}")])
def test_records_not_ours_are_skipped(key: bytes | None, value: bytes | None) -> None:
    assert decode("orders", key, value) is None


@pytest.mark.parametrize(("key", "value", "message"), [
    (b"target-state-orders", b"{", "not JSON"), (b"target-state-orders", b"[]", "not a JSON object"),
    (b"target-state-orders", b'{"state": "HALTED"}', "'HALTED' is not STARTED, PAUSED or STOPPED"),
    (b"restart-connector-orders", b'{"include-tasks": "yes"}', "include-tasks is 'yes'")])
def test_an_unreadable_record_of_ours_says_why(key: bytes, value: bytes, message: str) -> None:
    with pytest.raises(ControlRecordError, match=message):
        decode("orders", key, value)


def test_an_old_status_record_still_reads() -> None:
    old = parse_status({"worker": "w1", "member_id": "m1", "failed": {"g": "boom"}, "at_ms": 3})
    assert old == WorkerStatus("w1", "m1", {"g": "boom"}, "RUNNING", None, (), {}, 3)


def _worker(name: str, state: str, slots: tuple[int, ...], failures: dict[str, GroupFailure] | None = None,
            at_ms: int = 1000) -> WorkerStatus:
    return WorkerStatus(name, f"member-{name}", {g: f.error for g, f in (failures or {}).items()}, state,
                        f"pod-{name}", slots, failures or {}, at_ms)


def test_status_in_connects_shape_with_failed_and_unassigned_tasks() -> None:
    failure = GroupFailure(1, "registry out of reach", 3, 1_764_000_000_000)
    workers = [_worker("b", "RUNNING", (1,), {"ks.t/g7": failure}), _worker("a", "RUNNING", (0,))]
    status = connector_status("orders", TargetState.STARTED, workers, 3)
    assert status["connector"] == {"state": "RUNNING", "worker_id": "pod-a"} and status["type"] == "source"
    assert status["tasks"][0] == {"id": 0, "state": "RUNNING", "worker_id": "pod-a"}
    assert status["tasks"][1]["state"] == "FAILED" and status["tasks"][1]["worker_id"] == "pod-b"
    assert status["tasks"][1]["trace"] == ("group ks.t/g7 failed: registry out of reach (attempts: 3; "
                                           "next retry at 2025-11-24T16:00:00+00:00)")
    assert status["tasks"][2] == {"id": 2, "state": "UNASSIGNED", "worker_id": ""}


def test_paused_or_stopped_only_once_every_worker_applied_it() -> None:
    half = [_worker("a", "PAUSED", (0,)), _worker("b", "RUNNING", (1,))]
    assert connector_status("o", TargetState.PAUSED, half, 2)["connector"]["state"] == "RUNNING"
    paused = [_worker("a", "PAUSED", (0,)), _worker("b", "PAUSED", (1,))]
    status = connector_status("o", TargetState.PAUSED, paused, 2)
    assert status["connector"]["state"] == "PAUSED" and {t["state"] for t in status["tasks"]} == {"PAUSED"}
    stopped = connector_status("o", TargetState.STOPPED, [_worker("a", "STOPPED", ())], 2)
    assert stopped["connector"]["state"] == "STOPPED" and stopped["tasks"] == []
    assert connector_status("o", TargetState.STARTED, [], 2)["connector"]["state"] == "UNASSIGNED"


def test_live_workers_are_members_or_recent() -> None:
    member, stopped, gone = _worker("a", "RUNNING", (0,), at_ms=0), _worker("b", "STOPPED", (), at_ms=95_000), \
        _worker("c", "STOPPED", (), at_ms=10_000)
    assert live_statuses([member, stopped, gone], {"member-a"}, now_ms=100_000) == [member, stopped]
