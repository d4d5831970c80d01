"""The control topic's records, in Kafka Connect's config-topic format where it has one (pure).

    key target-state-<name>         value {"state": "PAUSED", "state.v2": "STOPPED"}
    key restart-connector-<name>    value {"include-tasks": true, "only-failed": false}
    key restart-task-<name>-<id>    value {}      (ours: Connect forwards a task restart instead)

Connect 3.5+ writes `state.v2` beside `state` (older readers know no STOPPED and read PAUSED);
we read `state.v2` first. Every value we write also carries `requested-by` and `at-ms` (who asked
and when: logged by every worker that applies it); Connect's readers ignore extra fields.
Records with other keys (a Connect config topic's `connector-*`, `task-*`, `commit-*`) or for
another connector's name are not ours and are skipped by `decode`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

TARGET_STATE, RESTART_CONNECTOR, RESTART_TASK = "target-state-", "restart-connector-", "restart-task-"


class TargetState(StrEnum):
    """What the operator asked the connector to be (Connect's TargetState)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass(frozen=True)
class TargetStateRecord:
    state: TargetState
    requested_by: str
    at_ms: int


@dataclass(frozen=True)
class RestartRequest:
    """Connect's restart: `task` None restarts the connector (with `include_tasks`, its tasks too;
    with `only_failed`, only those that failed), an int the one task (slot) of that id."""

    task: int | None  # None = the connector
    include_tasks: bool
    only_failed: bool
    requested_by: str
    at_ms: int

    def covers(self, slot: int) -> bool:
        """Whether the failed groups of `slot` are retried by this request. The connector alone
        (no `include_tasks`) is the worker's own reading, which never stops: no group is retried
        then, as Connect restarts no task for it."""
        return slot == self.task if self.task is not None else self.include_tasks


ControlRecord = TargetStateRecord | RestartRequest


class ControlRecordError(ValueError):
    """A record under one of our keys whose value cannot be read; the message says why."""


def target_state_key(name: str) -> bytes:
    return f"{TARGET_STATE}{name}".encode()


def restart_key(name: str, task: int | None) -> bytes:
    return (f"{RESTART_CONNECTOR}{name}" if task is None else f"{RESTART_TASK}{name}-{task}").encode()


def encode_target_state(name: str, record: TargetStateRecord) -> tuple[bytes, bytes]:
    """(key, value) as Connect writes them: `state` is PAUSED for STOPPED (for pre-3.5 readers)."""
    v1 = TargetState.PAUSED if record.state is TargetState.STOPPED else record.state
    value = {"state": str(v1), "state.v2": str(record.state), "requested-by": record.requested_by,
             "at-ms": record.at_ms}
    return target_state_key(name), json.dumps(value).encode()


def encode_restart(name: str, request: RestartRequest) -> tuple[bytes, bytes]:
    value: dict[str, object] = {"requested-by": request.requested_by, "at-ms": request.at_ms}
    if request.task is None:
        value = {"include-tasks": request.include_tasks, "only-failed": request.only_failed, **value}
    return restart_key(name, request.task), json.dumps(value).encode()


def decode(name: str, key: bytes | None, value: bytes | None) -> ControlRecord | None:
    """The record if it is ours for connector `name`; None for anything else (other keys, other
    names, a tombstone). Raises ControlRecordError for our key with an unreadable value."""
    text = (key or b"").decode("utf-8", "replace")
    if value is None:
        return None
    if text == f"{TARGET_STATE}{name}":
        fields = _object(text, value)
        state = fields.get("state.v2", fields.get("state"))
        try:
            return TargetStateRecord(TargetState(str(state).upper()), _by(fields), _at(fields))
        except ValueError:
            raise ControlRecordError(f"{text}: state {state!r} is not STARTED, PAUSED or STOPPED") from None
    if text == f"{RESTART_CONNECTOR}{name}":
        fields = _object(text, value)
        return RestartRequest(None, _flag(text, fields, "include-tasks"), _flag(text, fields, "only-failed"),
                              _by(fields), _at(fields))
    prefix = f"{RESTART_TASK}{name}-"
    if text.startswith(prefix) and text[len(prefix):].isdigit():
        fields = _object(text, value)
        return RestartRequest(int(text[len(prefix):]), False, False, _by(fields), _at(fields))
    return None


def _object(key: str, value: bytes) -> dict[str, object]:
    try:
        fields = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ControlRecordError(f"{key}: value is not JSON: {error}") from None
    if not isinstance(fields, dict):
        raise ControlRecordError(f"{key}: value is not a JSON object")
    return fields


def _flag(key: str, fields: dict[str, object], name: str) -> bool:
    flag = fields.get(name, False)
    if not isinstance(flag, bool):
        raise ControlRecordError(f"{key}: {name} is {flag!r}, not true or false")
    return flag


def _by(fields: dict[str, object]) -> str:
    return str(fields.get("requested-by", "unknown"))


def _at(fields: dict[str, object]) -> int:
    at = fields.get("at-ms", 0)
    return at if isinstance(at, int) and not isinstance(at, bool) else 0
