"""What the worker does with a change it cannot carry, by `event.processing.failure.handling.mode`
(Debezium's names): `fail` stops its group (retried, visible in /readyz), `warn` and `skip` go on
past it after a log line (warning or info) and a count, and with
`errors.deadletterqueue.topic.name` (Kafka Connect's name) the change goes to that topic, in
the same transaction as the position that passes it: nothing is lost without a trace.

A dead letter's key is the change's identity, its value the change as read (every log row's
operation, sequence number and cells, values as text where JSON has no type for them), the
reason, and the group's position after it in the offsets format.
"""

from __future__ import annotations

from typing import Any

import orjson

from bridge.scylla.model import ChangeRecord
from bridge.scylla.positions import Position

MODES = ("fail", "warn", "skip")


def dead_letter(topic: str, record: ChangeRecord, position: Position, reason: str) -> tuple[str, bytes, bytes]:
    key = {"keyspace": record.keyspace, "table": record.table, "stream": str(record.stream_id),
           "cdc_time": str(record.rows[0].time)}
    rows = [{"operation": row.operation.name, "batch_seq_no": row.batch_seq_no, "ttl": row.ttl,
             "cells": {name: value for name, value in row.values.items() if value is not None}}
            for row in record.rows]
    value = {**key, "reason": reason, "position": position.to_offsets_value(), "rows": rows}
    return topic, orjson.dumps(key), orjson.dumps(value, default=_text, option=orjson.OPT_NON_STR_KEYS)


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)
