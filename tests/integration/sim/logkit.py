"""Reads log rows back from Cassandra and builds the exact rows a record must hold."""

from __future__ import annotations

import uuid
from typing import Any

from bridge.scylla import log_schema
from bridge.scylla.model import ChangeRecord
from bridge.scylla.schema import TableSchema
from bridge.scylla.stream_id import StreamId
from bridge_devstack.sim import Emulator, canonical
from bridge_devstack.sim.render import q, qualified

Rows = list[tuple[int, int | None, dict[str, Any]]]


def log_column_names(table: TableSchema) -> list[str]:
    return [name for name, _ in log_schema.log_columns(table).all]


def stored_record(session: Any, table: TableSchema, stream: StreamId, time: uuid.UUID) -> list[dict[str, Any]]:
    """Every column of every row stored under (stream, cdc$time), canonical values, by seq."""
    names = log_column_names(table)
    cql = (
        f"SELECT {', '.join(q(n) for n in names)} FROM {qualified(table.keyspace, table.log_table_name)}"
        f' WHERE "cdc$stream_id" = %s AND "cdc$time" = %s'
    )
    return [
        dict(zip(names, (canonical(v) for v in row), strict=True)) for row in session.execute(cql, (stream.raw, time))
    ]


def expected_record(table: TableSchema, stream: StreamId, time: uuid.UUID, rows: Rows) -> list[dict[str, Any]]:
    """Full rows (every column, nulls included) for (op, ttl, non-null values) specs."""
    names = log_column_names(table)
    result = []
    for seq, (op, ttl, values) in enumerate(rows):
        row: dict[str, Any] = dict.fromkeys(names)
        row.update(
            {
                log_schema.STREAM_ID: stream.raw,
                log_schema.TIME: time,
                log_schema.BATCH_SEQ_NO: seq,
                log_schema.OPERATION: op,
                log_schema.TTL: ttl,
                log_schema.END_OF_BATCH: True if seq == len(rows) - 1 else None,
            }
        )
        row.update({k: canonical(v) for k, v in values.items()})
        result.append(row)
    return result


def check_records(emu: Emulator, records: list[ChangeRecord], expected: list[Rows]) -> None:
    """The records written hold exactly the expected rows in Cassandra (every column compared)."""
    assert len(records) == len(expected), [r.rows for r in records]
    for record, rows in zip(records, expected, strict=True):
        table = emu.table(record.keyspace, record.table).schema
        stored = stored_record(emu.session, table, record.stream_id, record.time)
        assert stored == expected_record(table, record.stream_id, record.time, rows)
