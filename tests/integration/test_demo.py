"""`cdc-bridge demo`: emulator writes reach Kafka as Debezium envelopes through the CDC source."""

from __future__ import annotations

import json

from bridge import demo
from bridge.stack.layout import Endpoints


def test_demo_carries_every_change_to_kafka(stack: Endpoints) -> None:
    lines: list[str] = []
    messages = demo.run(stack, say=lines.append)

    values = [json.loads(v) if v is not None else None for _, v in messages]
    keys = [json.loads(k or b"null") for k, _ in messages]
    # Per key, Kafka holds the changes in write order; a delete is followed by a tombstone.
    by_key: dict[int, list[object]] = {}
    for key, value in zip(keys, values, strict=True):
        by_key.setdefault(key["id"], []).append(None if value is None else value["op"])
    assert by_key == {1: ["c", "u"], 2: ["c", "u", "d", None]}

    update_1 = next(v for k, v in zip(keys, values, strict=True) if k["id"] == 1 and v and v["op"] == "u")
    assert update_1["after"]["total"] == {"value": 15.0}
    assert update_1["after"]["customer"] is None  # not touched by the update
    assert update_1["before"]["total"] == {"value": 12.5}  # from the pre-image
    set_null = next(v for k, v in zip(keys, values, strict=True) if k["id"] == 2 and v and v["op"] == "u")
    assert set_null["after"]["customer"] == {"value": None}
    assert lines[-1].startswith("  key=")
