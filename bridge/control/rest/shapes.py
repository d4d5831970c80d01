"""Kafka Connect's REST shapes (pure): the error body, boolean query parameters as Connect reads
them, the connector's info and tasks, and the offsets in the `GET /connectors/{name}/offsets`
form, with each record of a PATCH checked before anything is written."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bridge.kafka.offsets import encode_key, encode_value
from bridge.scylla.groups import GroupId
from bridge.scylla.positions import Position

# The version GET / reports: Kafka Connect's of the REST shapes served here. Tools gate features
# on it (kcctl: offsets >= 3.5, offsets reset >= 3.6); 4.1.1 passes every gate they have.
CONNECT_VERSION = "4.1.1"
CONNECTOR_CLASS = "io.scylladb.bridge.ScyllaCdcBridge"
NOT_STOPPED = ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
               "the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint")


class RequestError(Exception):
    """A request Connect refuses: its status code and one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error_code": status, "message": message}


def query_flag(value: str | None, name: str) -> bool:
    """Connect's boolean query parameters: any case (clients send `False`); absent is false."""
    if value is None or value == "":
        return False
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise RequestError(400, f"{name}: {value!r} is not true or false")


def task_id(text: str, slots_count: int, name: str) -> int:
    """A task (slot) id of the path; 404 as Connect for one the connector does not have."""
    if not text.isdigit() or int(text) >= slots_count:
        raise RequestError(404, f"Task {name}-{text} not found (tasks are the slots 0..{slots_count - 1})")
    return int(text)


def connector_info(name: str, config: dict[str, str], slots_count: int) -> dict[str, Any]:
    """Connect's ConnectorInfo (`GET /connectors/{name}`): one task per slot."""
    return {"name": name, "config": config, "tasks": tasks_ids(name, slots_count), "type": "source"}


def tasks_ids(name: str, slots_count: int) -> list[dict[str, Any]]:
    return [{"connector": name, "task": slot} for slot in range(slots_count)]


def tasks_info(name: str, config: dict[str, str], slots_count: int) -> list[dict[str, Any]]:
    """Connect's TaskInfo list (`GET /connectors/{name}/tasks`): every task runs the one config."""
    return [{"id": ids, "config": {**config, "task.class": CONNECTOR_CLASS}} for ids in tasks_ids(name, slots_count)]


def offsets_body(positions: dict[GroupId, Position]) -> dict[str, Any]:
    """`{"offsets": [{"partition": {...}, "offset": {...}}]}`: the records the offsets topic holds."""
    return {"offsets": [{"partition": json.loads(encode_key("", group))[1],
                         "offset": json.loads(encode_value(position))}
                        for group, position in sorted(positions.items(), key=lambda item: str(item[0]))]}


@dataclass(frozen=True)
class OffsetEdit:
    group: GroupId
    position: Position | None  # None: forget the group's position (a tombstone)


def offset_edits(body: Any) -> list[OffsetEdit]:
    """The edits of a `PATCH /connectors/{name}/offsets` body, every record checked first;
    raises RequestError(400) naming the first record that is not a group and a position."""
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
        raise RequestError(400, 'The body must be {"offsets": [{"partition": {...}, "offset": {...} or null}]}')
    edits = []
    for index, record in enumerate(body["offsets"]):
        if not isinstance(record, dict) or not isinstance(record.get("partition"), dict) or "offset" not in record:
            raise RequestError(400, f"offsets[{index}]: must be an object with a partition object and an offset")
        try:
            group = GroupId.from_offsets_key(record["partition"])
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise RequestError(400, f"offsets[{index}].partition is not a CDC group: {error}") from None
        offset = record["offset"]
        if offset is None:
            edits.append(OffsetEdit(group, None))
            continue
        if not isinstance(offset, dict):
            raise RequestError(400, f"offsets[{index}].offset must be an object or null")
        try:
            edits.append(OffsetEdit(group, Position.from_offsets_value(offset)))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise RequestError(400, f"offsets[{index}].offset is not a CDC position: {error}") from None
    return edits
